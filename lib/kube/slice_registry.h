#pragma once
// The one piece of mutable state of the webhook (DESIGN "State"): which (replica, host) slots of
// each worker group are taken, for Pods without KubeRay's index labels (SPEC M3.3).
//
//   kube::SliceRegistry registry(clock, std::chrono::seconds(10));
//   registry.replace(listed_pods);                        // the Pod watch's first list: synced
//   webhook::Result<podpatch::Slot> s = registry.place(key, 16, /*dry_run=*/false);  // reserved
//   registry.upsert(uid, kube::pod_record(pod_json));     // the watch confirms the reservation
//   registry.remove(uid);                                 // a deletion frees the slot
//
// Fed by the Pod watch and by its own admissions: place() chooses with podpatch::choose_slot over
// the group's Pods plus its live reservations and reserves the slot at once, under one lock, so
// concurrent admissions never share a slot and nothing waits for the watch. The watch confirms a
// reservation when a Pod of the same group appears on the same slot. A reservation the watch
// never confirms (the Pod was refused after this webhook, or never created) expires after the
// TTL — counted only while the Pod watch is connected, so an outage cannot free a slot whose Pod
// the watch has simply not reported yet. Dry-run requests reserve nothing. Thread-safe.

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

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
// (SPEC M3.3 counts only Pods not being deleted). A Pod without metadata.uid is keyed by
// namespace/name.
std::optional<PodRecord> pod_record(const nlohmann::json& pod);

// The key the registry files a Pod under when the object lacks a uid: "<ns>/<name>".
std::string pod_uid(const nlohmann::json& pod);

class SliceRegistry : public podpatch::PodSource {
 public:
  // `clock` must outlive the registry.
  SliceRegistry(Clock& clock, Duration reservation_ttl);

  // SPEC M3.3 over the group's Pods and live reservations; reserves the slot unless `dry_run`.
  // Unavailable before the first complete Pod list (the webhook is starting: the Pod's creation
  // fails and KubeRay retries it); AlreadyExists naming both Pods when two hold one slot;
  // InvalidArgument for hosts < 1.
  webhook::Result<podpatch::Slot> place(const podpatch::GroupKey& key, int hosts,
                                        bool dry_run) override;

  // A complete (re)list: replaces every known Pod (reservations stay, and listed Pods confirm
  // them) and marks the registry synced.
  void replace(std::vector<PodRecord> pods);
  // A watch ADDED or MODIFIED event for the Pod `uid`: its record, or nullopt when it holds no
  // slot any more (e.g. it is being deleted).
  void upsert(const std::string& uid, std::optional<PodRecord> record);
  // A watch DELETED event.
  void remove(const std::string& uid);
  // Whether the Pod watch is connected; reservations age only while it is.
  void set_watch_connected(bool connected);

  // True once replace() ran: place() answers from then on (also while the watch reconnects).
  bool synced() const { return synced_.load(std::memory_order_acquire); }

  struct Stats {
    std::size_t pods = 0;          // Pods holding a slot
    std::size_t groups = 0;
    std::size_t reservations = 0;  // live, unconfirmed
    std::uint64_t reserved_total = 0;
    std::uint64_t confirmed_total = 0;
    std::uint64_t expired_total = 0;
  };
  // Drops expired reservations first.
  Stats stats();

 private:
  struct Entry {
    std::string uid;  // "" for a reservation
    std::string resource_version;
    TimePoint reserved_at{};
  };
  // holders[i] and entries[i] describe one Pod or reservation; holders stay contiguous so
  // choose_slot reads them without a copy.
  struct Group {
    std::vector<podpatch::Holder> holders;
    std::vector<Entry> entries;
  };
  using Groups = std::map<podpatch::GroupKey, Group>;

  void add_locked(PodRecord record);
  void erase_locked(Groups::iterator group, std::size_t index);
  void remove_locked(const std::string& uid);
  void expire_locked(Groups::iterator group, TimePoint now);
  bool expired_locked(const Entry& e, TimePoint now) const;

  Clock& clock_;
  Duration ttl_;
  std::atomic<bool> synced_{false};
  std::mutex mu_;
  Groups groups_;
  std::unordered_map<std::string, Groups::iterator> by_uid_;
  bool connected_ = false;
  TimePoint connected_since_{};
  std::size_t reservations_ = 0;
  std::uint64_t reserved_total_ = 0;
  std::uint64_t confirmed_total_ = 0;
  std::uint64_t expired_total_ = 0;
};

}  // namespace kube
