#pragma once
// The sources the Handler reads, fed by the watches of docs/legacy-placement.md "What the webhook
// watches": the Pod feed of the SliceRegistry, TPU Nodes for subslice placement (docs/spec.md M4,
// V3) and headless Services for the name peers resolve (docs/spec.md Terms). Each is a kube::Sink
// for its Reflector and answers the Handler from any thread.
//
//   kube::LiveNodeSource nodes;                          // Reflector(..., nodes, ...) feeds it
//   std::optional<std::vector<podpatch::Labels>> n = nodes.nodes_matching(selector);
//   // nullopt until the first Node list completed: "cannot list" (M4 keeps its default key)

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "kube/sink.h"
#include "kube/slice_registry.h"
#include "podpatch/sources.h"

namespace kube {

// Feeds a SliceRegistry from the Pod reflector, keeping a PodRecord per slot-holding Pod, and
// tells `on_shown` (when set) of each slot-holding Pod an ADDED or MODIFIED event shows, after
// the registry holds it.
class PodFeed : public Sink {
 public:
  using Shown = std::function<void(const PodRecord&)>;
  explicit PodFeed(SliceRegistry& registry, Shown on_shown = {})
      : registry_(registry), on_shown_(std::move(on_shown)) {}
  void list_begin() override { pending_.clear(); }
  void listed(const nlohmann::json& object) override;
  void list_end() override;
  void list_abort() override { std::vector<PodRecord>().swap(pending_); }
  void event(EventType type, const nlohmann::json& object) override;
  void watch_connected(bool connected) override { registry_.set_watch_connected(connected); }

 private:
  SliceRegistry& registry_;
  Shown on_shown_;
  std::vector<PodRecord> pending_;
};

class LiveNodeSource : public podpatch::NodeSource, public Sink {
 public:
  // Nodes whose labels contain `selector`; nullopt before the first complete Node list.
  std::optional<std::vector<podpatch::Labels>> nodes_matching(
      const podpatch::Labels& selector) override;
  std::size_t size() const;

  void list_begin() override { pending_.clear(); }
  void listed(const nlohmann::json& object) override;
  void list_end() override;
  void list_abort() override { pending_.clear(); }
  void event(EventType type, const nlohmann::json& object) override;

 private:
  mutable std::shared_mutex mu_;
  bool synced_ = false;
  std::map<std::string, podpatch::Labels> nodes_;    // name -> labels
  std::map<std::string, podpatch::Labels> pending_;  // the list in progress (watch thread only)
};

class LiveServiceSource : public podpatch::ServiceSource, public Sink {
 public:
  // The Service labelled ray.io/headless-worker-svc=<cluster> in `ns`; when several are, the
  // first by name. nullopt when there is none (or before the first list).
  std::optional<std::string> headless_service(std::string_view ns,
                                              std::string_view cluster) override;
  std::size_t size() const;

  void list_begin() override { pending_.clear(); }
  void listed(const nlohmann::json& object) override;
  void list_end() override;
  void list_abort() override { pending_.clear(); }
  void event(EventType type, const nlohmann::json& object) override;

 private:
  using Key = std::pair<std::string, std::string>;  // namespace, name
  mutable std::shared_mutex mu_;
  std::map<Key, std::string> services_;  // -> the cluster label
  std::map<Key, std::string> pending_;
};

}  // namespace kube
