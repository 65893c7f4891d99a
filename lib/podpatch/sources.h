#pragma once
// What the webhook needs from the live cluster, behind small interfaces (docs/architecture.md
// "Seams"): fed by API watches in the server, by files in webhook-dryrun (--existing) and in
// tests.
//
//   podpatch::GroupKey key{"default", "my-cluster", "tpu-group"};
//   webhook::Result<podpatch::Slot> slot = pods.place(key, /*hosts=*/4, /*dry_run=*/false);

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status/result.h"
#include "podpatch/labels.h"

namespace podpatch {

// A worker group of a RayCluster.
struct GroupKey {
  std::string ns;
  std::string cluster;
  std::string group;

  friend auto operator<=>(const GroupKey&, const GroupKey&) = default;
};

// One host of one replica of a group.
struct Slot {
  int replica = 0;
  int host = 0;

  friend auto operator<=>(const Slot&, const Slot&) = default;
};

// What a placement is asked for: a new Pod of `key` in slices of `hosts` hosts.
struct PlaceRequest {
  GroupKey key;
  int hosts = 1;
  bool dry_run = false;  // choose, but reserve or write nothing
  std::string pod;       // the Pod's name, else its generateName (claims and messages)
  std::string uid;       // the AdmissionRequest's uid ("" outside admission)
};

// Hands out the (replica, host) slots of legacy placement (docs/spec.md M3.3), over the group's
// existing Pods and the slots already handed out.
class SlotAllocator {
 public:
  virtual ~SlotAllocator() = default;
  // Chooses the slot for a new Pod by docs/spec.md M3.3 (the lowest replica in use with a free
  // host, else the lowest replica not in use; then its lowest free host) and, unless `dry_run`,
  // reserves it so the next call sees it taken.
  // Atomic: concurrent calls never get the same slot. AlreadyExists when two existing Pods hold
  // one slot of the group (the message names them); Unavailable when the allocator does not know
  // the cluster's Pods (yet) or cannot record the reservation — retrying may succeed.
  virtual webhook::Result<Slot> place(const PlaceRequest& request) = 0;

  webhook::Result<Slot> place(const GroupKey& key, int hosts, bool dry_run) {
    return place(PlaceRequest{key, hosts, dry_run, {}, {}});
  }
};

// TPU Nodes, as far as subslice placement (docs/spec.md M4, V3) needs them.
class NodeSource {
 public:
  virtual ~NodeSource() = default;
  // The labels of every Node whose labels contain all of `selector`; nullopt when Nodes cannot
  // be listed (no API access).
  virtual std::optional<std::vector<Labels>> nodes_matching(const Labels& selector) = 0;
};

// Headless Services, for the name peers resolve (docs/spec.md Terms).
class ServiceSource {
 public:
  virtual ~ServiceSource() = default;
  // The name of the Service labelled ray.io/headless-worker-svc=<cluster> in `ns`, if known.
  virtual std::optional<std::string> headless_service(std::string_view ns,
                                                      std::string_view cluster) = 0;
};

}  // namespace podpatch
