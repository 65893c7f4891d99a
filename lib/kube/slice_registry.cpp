#include "kube/slice_registry.h"

#include <algorithm>

#include "podpatch/json_access.h"
#include "podpatch/pod_view.h"

namespace kube {

using podpatch::GroupKey;
using podpatch::Holder;
using podpatch::Slot;

std::string pod_uid(const nlohmann::json& pod) {
  const podpatch::json* md = podpatch::member(pod, "metadata");
  if (std::optional<std::string_view> uid = podpatch::string_member(md, "uid");
      uid && !uid->empty()) {
    return std::string(*uid);
  }
  return std::string(podpatch::string_member(md, "namespace").value_or("default")) + "/" +
         std::string(podpatch::string_member(md, "name").value_or(""));
}

std::optional<PodRecord> pod_record(const nlohmann::json& pod) {
  webhook::Result<podpatch::PodView> view = podpatch::PodView::create(pod);
  if (!view || view->deleting()) {
    return std::nullopt;
  }
  std::optional<GroupKey> key = podpatch::group_key(*view, "default");
  std::optional<Slot> slot = podpatch::recorded_slot(*view);
  if (!key || !slot) {
    return std::nullopt;
  }
  const podpatch::json* md = podpatch::member(pod, "metadata");
  PodRecord r;
  r.uid = pod_uid(pod);
  r.name = view->display_name();
  r.key = std::move(*key);
  r.slot = *slot;
  r.resource_version = std::string(podpatch::string_member(md, "resourceVersion").value_or(""));
  return r;
}

SliceRegistry::SliceRegistry(Clock& clock, Duration reservation_ttl)
    : clock_(clock), ttl_(reservation_ttl) {}

bool SliceRegistry::expired_locked(const Entry& e, TimePoint now) const {
  if (!e.uid.empty() || !connected_) {
    return false;
  }
  return now - std::max(e.reserved_at, connected_since_) >= ttl_;
}

void SliceRegistry::erase_locked(Groups::iterator group, std::size_t index) {
  Group& g = group->second;
  if (g.entries[index].uid.empty()) {
    --reservations_;
  }
  if (index + 1 != g.holders.size()) {
    g.holders[index] = std::move(g.holders.back());
    g.entries[index] = std::move(g.entries.back());
  }
  g.holders.pop_back();
  g.entries.pop_back();
  if (g.holders.empty()) {
    groups_.erase(group);
  }
}

void SliceRegistry::expire_locked(Groups::iterator group, TimePoint now) {
  for (std::size_t i = group->second.entries.size(); i-- > 0;) {
    if (expired_locked(group->second.entries[i], now)) {
      ++expired_total_;
      bool last = group->second.holders.size() == 1;
      erase_locked(group, i);
      if (last) {
        return;  // the group is gone
      }
    }
  }
}

webhook::Result<Slot> SliceRegistry::place(const GroupKey& key, int hosts, bool dry_run) {
  if (hosts < 1) {
    return webhook::invalid_argument("a slice has at least one host");
  }
  if (!synced()) {
    return webhook::Error{
        webhook::ErrorCode::kUnavailable,
        "the webhook is starting and has not yet listed the cluster's Pods, so it cannot place a "
        "Pod without KubeRay's index labels (legacy placement) yet; the Pod's creation fails and "
        "KubeRay retries it shortly (Pods with KubeRay's index labels are not affected)"};
  }
  TimePoint now = clock_.now();
  std::lock_guard lock(mu_);
  auto group = groups_.find(key);
  if (group != groups_.end()) {
    expire_locked(group, now);
    group = groups_.find(key);
  }
  static const std::vector<Holder> kNone;
  const std::vector<Holder>& holders = group == groups_.end() ? kNone : group->second.holders;
  webhook::Result<Slot> slot = podpatch::choose_slot(holders, hosts, key);
  if (!slot || dry_run) {
    return slot;
  }
  if (group == groups_.end()) {
    group = groups_.emplace(key, Group{}).first;
  }
  ++reservations_;
  ++reserved_total_;
  group->second.holders.push_back(
      {"(a Pod admitted for replica " + std::to_string(slot->replica) + " host " +
           std::to_string(slot->host) + ", not yet seen by the Pod watch)",
       *slot});
  group->second.entries.push_back({"", "", now});
  return slot;
}

void SliceRegistry::add_locked(PodRecord record) {
  auto group = groups_.try_emplace(std::move(record.key)).first;
  Group& g = group->second;
  by_uid_[record.uid] = group;
  for (std::size_t i = 0; i < g.entries.size(); ++i) {
    if (g.entries[i].uid.empty() && g.holders[i].slot == record.slot) {
      // The watch confirms a reservation: the Pod takes its place.
      --reservations_;
      ++confirmed_total_;
      g.holders[i].pod = std::move(record.name);
      g.entries[i] = {std::move(record.uid), std::move(record.resource_version), {}};
      return;
    }
  }
  g.holders.push_back({std::move(record.name), record.slot});
  g.entries.push_back({std::move(record.uid), std::move(record.resource_version), {}});
}

void SliceRegistry::remove_locked(const std::string& uid) {
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) {
    return;
  }
  Groups::iterator group = it->second;
  by_uid_.erase(it);
  std::vector<Entry>& entries = group->second.entries;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].uid == uid) {
      erase_locked(group, i);
      return;
    }
  }
}

void SliceRegistry::replace(std::vector<PodRecord> pods) {
  {
    std::lock_guard lock(mu_);
    // Keep the reservations, drop every Pod, then file the listed Pods.
    for (auto group = groups_.begin(); group != groups_.end();) {
      Group& g = group->second;
      std::size_t kept = 0;
      for (std::size_t i = 0; i < g.entries.size(); ++i) {
        if (g.entries[i].uid.empty()) {
          g.holders[kept] = std::move(g.holders[i]);
          g.entries[kept] = std::move(g.entries[i]);
          ++kept;
        }
      }
      g.holders.resize(kept);
      g.entries.resize(kept);
      group = kept == 0 ? groups_.erase(group) : std::next(group);
    }
    by_uid_.clear();
    for (PodRecord& r : pods) {
      if (!by_uid_.contains(r.uid)) {
        add_locked(std::move(r));
      }
    }
  }
  synced_.store(true, std::memory_order_release);
}

void SliceRegistry::upsert(const std::string& uid, std::optional<PodRecord> record) {
  std::lock_guard lock(mu_);
  if (record) {
    if (auto it = by_uid_.find(uid); it != by_uid_.end() && it->second->first == record->key) {
      Group& g = it->second->second;
      for (std::size_t i = 0; i < g.entries.size(); ++i) {
        if (g.entries[i].uid == uid && g.holders[i].slot == record->slot) {
          g.entries[i].resource_version = std::move(record->resource_version);
          return;  // same slot: nothing to do
        }
      }
    }
  }
  remove_locked(uid);
  if (record) {
    record->uid = uid;
    add_locked(std::move(*record));
  }
}

void SliceRegistry::remove(const std::string& uid) {
  std::lock_guard lock(mu_);
  remove_locked(uid);
}

void SliceRegistry::set_watch_connected(bool connected) {
  TimePoint now = clock_.now();
  std::lock_guard lock(mu_);
  if (connected && !connected_) {
    connected_since_ = now;
  }
  connected_ = connected;
}

SliceRegistry::Stats SliceRegistry::stats() {
  TimePoint now = clock_.now();
  std::lock_guard lock(mu_);
  for (auto group = groups_.begin(); group != groups_.end();) {
    auto next = std::next(group);
    expire_locked(group, now);
    group = next;
  }
  Stats s;
  s.pods = by_uid_.size();
  s.groups = groups_.size();
  s.reservations = reservations_;
  s.reserved_total = reserved_total_;
  s.confirmed_total = confirmed_total_;
  s.expired_total = expired_total_;
  return s;
}

}  // namespace kube
