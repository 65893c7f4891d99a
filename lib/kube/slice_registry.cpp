#include "kube/slice_registry.h"

#include <algorithm>

#include "base/json/access.h"
#include "podpatch/pod_view.h"

namespace kube {

using podpatch::GroupKey;
using podpatch::Holder;
using podpatch::Slot;

std::string pod_uid(const nlohmann::json& pod) {
  const podpatch::json* md = webhook::member(pod, "metadata");
  if (std::optional<std::string_view> uid = webhook::string_member(md, "uid");
      uid && !uid->empty()) {
    return std::string(*uid);
  }
  return std::string(webhook::string_member(md, "namespace").value_or("default")) + "/" +
         std::string(webhook::string_member(md, "name").value_or(""));
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
  const podpatch::json* md = webhook::member(pod, "metadata");
  PodRecord r;
  r.uid = pod_uid(pod);
  r.name = view->display_name();
  r.key = std::move(*key);
  r.slot = *slot;
  r.resource_version = std::string(webhook::string_member(md, "resourceVersion").value_or(""));
  return r;
}

SliceRegistry::SliceRegistry(Clock& clock) : clock_(clock), disconnected_since_(clock.now()) {}

void SliceRegistry::add_locked(PodRecord record) {
  auto group = groups_.try_emplace(std::move(record.key)).first;
  by_uid_[record.uid] = group;
  group->second.holders.push_back({std::move(record.name), record.slot});
  group->second.uids.push_back(std::move(record.uid));
}

void SliceRegistry::remove_locked(const std::string& uid) {
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) {
    return;
  }
  auto group = it->second;
  by_uid_.erase(it);
  Group& g = group->second;
  for (std::size_t i = 0; i < g.uids.size(); ++i) {
    if (g.uids[i] == uid) {
      if (i + 1 != g.uids.size()) {
        g.holders[i] = std::move(g.holders.back());
        g.uids[i] = std::move(g.uids.back());
      }
      g.holders.pop_back();
      g.uids.pop_back();
      break;
    }
  }
  if (g.uids.empty()) {
    groups_.erase(group);
  }
}

void SliceRegistry::replace(std::vector<PodRecord> pods) {
  {
    std::lock_guard lock(mu_);
    groups_.clear();
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
  if (!connected && connected_) {
    disconnected_since_ = now;
  }
  connected_ = connected;
}

Duration SliceRegistry::disconnected_for() const {
  TimePoint now = clock_.now();
  std::lock_guard lock(mu_);
  return connected_ ? Duration::zero() : now - disconnected_since_;
}

std::vector<Holder> SliceRegistry::holders(const GroupKey& key) const {
  std::lock_guard lock(mu_);
  auto group = groups_.find(key);
  return group == groups_.end() ? std::vector<Holder>{} : group->second.holders;
}

SliceRegistry::Stats SliceRegistry::stats() const {
  std::lock_guard lock(mu_);
  return {by_uid_.size(), groups_.size()};
}

}  // namespace kube
