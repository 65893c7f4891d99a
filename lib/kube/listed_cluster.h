#pragma once
// The cluster as objects given up front describe it (webhook-dryrun --existing, the tests), held
// by the server's own classes: the Pods in a SliceRegistry fed through a PodFeed, the Nodes in a
// LiveNodeSource and the Services in a LiveServiceSource, each fed through its kube::Sink as one
// complete list — as if its watch had listed the objects and seen nothing since — and legacy
// placement by a LocalSlotAllocator over that registry. So what the CLI answers is what the server
// answers over the same objects.
//
//   kube::ListedCluster cluster;      // empty lists: no Pods, Nodes or Services (all listed)
//   cluster.list(objects);            // Pods, Nodes and Services, each to its sink by kind
//   admission::Handler handler(config, cluster.pods(), cluster.nodes(), cluster.services());

#include <nlohmann/json.hpp>
#include <span>
#include <string_view>

#include "kube/clock.h"
#include "kube/live_sources.h"
#include "kube/sink.h"
#include "kube/slice_registry.h"
#include "kube/slot_allocators.h"
#include "podpatch/sources.h"

namespace kube {

// Whether `object`'s labels satisfy `selector`: `key=value` and `key` (the label exists) terms
// joined by commas, the part of kubectl -l's syntax the server's watches use (kPodSelector...).
// An empty selector selects every object. (The tests' fake kube-apiserver has its own matcher:
// it models the API server and shares no code with lib/.)
bool selected(const nlohmann::json& object, std::string_view selector);

// Feeds `sink` the objects of `kind` ("Pod", "Node", "Service") among `objects` that `selector`
// selects, in order, as one complete list: list_begin, listed for each, list_end.
void list_objects(Sink& sink, std::span<const nlohmann::json> objects, std::string_view kind,
                  std::string_view selector = {});

class ListedCluster {
 public:
  ListedCluster();
  ListedCluster(const ListedCluster&) = delete;
  ListedCluster& operator=(const ListedCluster&) = delete;

  // Replaces the Pods, Nodes and Services with those among `objects` that the server's watches
  // select (kPodSelector, kNodeSelector, kServiceSelector; other objects are skipped), so that
  // an object the server would never see counts for nothing here either. Slots reserved by
  // earlier placements stay until the registry shows a Pod on them.
  void list(std::span<const nlohmann::json> objects);

  podpatch::SlotAllocator& pods() { return pods_; }
  podpatch::NodeSource& nodes() { return nodes_; }
  podpatch::ServiceSource& services() { return services_; }
  const SliceRegistry& registry() const { return registry_; }

 private:
  FakeClock clock_;  // nothing here waits or times out
  SliceRegistry registry_{clock_};
  PodFeed feed_{registry_};
  LocalSlotAllocator pods_{registry_};
  LiveNodeSource nodes_;
  LiveServiceSource services_;
};

}  // namespace kube
