#pragma once
// The webhook's view of the KubeRay worker Pods that hold a slot: which (replica, host) slots of
// each worker group are taken (docs/legacy-placement.md), fed by the Pod watch.
//
//   kube::SliceRegistry registry;
//   registry.replace(listed_pods);                        // the Pod watch's first list: synced
//   registry.set_watch_connected(true);
//   registry.upsert(uid, kube::pod_record(pod_json));     // ADDED / MODIFIED
//   registry.remove(uid);                                 // DELETED frees the slot
//   std::vector<podpatch::Holder> taken = registry.holders(key);
//
// The registry holds only what the watch reported; slots chosen for Pods the watch has not shown
// yet are claims, written to the API server by kube::ClaimStore so every replica sees them.
// Thread-safe.

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kube/clock.h"
#include "podpatch/placement.h"
#include "podpatch/sources.h"

namespace kube {

// What the registry keeps of one Pod: no more than placement needs.
struct PodRecord {
  std::string uid;
  std::string name;
  podpatch::GroupKey key;
  podpatch::Slot slot;
  std::string resource_version;
};

// The record of a watched Pod object, through podpatch::group_key and podpatch::recorded_slot:
// nullopt when the Pod holds no slot (no ray.io/cluster and ray.io/group labels, no
// replicaIndex label or literal TPU_WORKER_ID, not a TPU Pod, malformed) or is being deleted
// (only Pods not being deleted hold a slot). A Pod without metadata.uid is keyed by
// namespace/name.
std::optional<PodRecord> pod_record(const nlohmann::json& pod);

// The key the registry files a Pod under when the object lacks a uid: "<ns>/<name>".
std::string pod_uid(const nlohmann::json& pod);

class SliceRegistry {
 public:
  // `clock` must outlive the registry; it times how long the watch has been disconnected.
  explicit SliceRegistry(Clock& clock);

  // A complete (re)list: replaces every known Pod and marks the registry synced.
  void replace(std::vector<PodRecord> pods);
  // A watch ADDED or MODIFIED event for the Pod `uid`: its record, or nullopt when it holds no
  // slot any more (e.g. it is being deleted).
  void upsert(const std::string& uid, std::optional<PodRecord> record);
  // A watch DELETED event.
  void remove(const std::string& uid);
  // Whether the Pod watch is connected (events arrive as they happen).
  void set_watch_connected(bool connected);

  // True once replace() ran (and forever after).
  bool synced() const { return synced_.load(std::memory_order_acquire); }
  // How long the Pod watch has been disconnected; zero while it is connected.
  Duration disconnected_for() const;

  // The Pods of `key` holding a slot (name and slot each), in no particular order.
  std::vector<podpatch::Holder> holders(const podpatch::GroupKey& key) const;

  struct Stats {
    std::size_t pods = 0;  // Pods holding a slot
    std::size_t groups = 0;
  };
  Stats stats() const;

 private:
  struct Group {
    std::vector<podpatch::Holder> holders;
    std::vector<std::string> uids;  // uids[i] is the Pod of holders[i]
  };
  using Groups = std::map<podpatch::GroupKey, Group>;

  void add_locked(PodRecord record);
  void remove_locked(const std::string& uid);

  Clock& clock_;
  std::atomic<bool> synced_{false};
  mutable std::mutex mu_;
  Groups groups_;
  std::unordered_map<std::string, Groups::iterator> by_uid_;
  bool connected_ = false;
  TimePoint disconnected_since_{};
};

}  // namespace kube
