#include "kube/slot_allocators.h"

#include <algorithm>

namespace kube {

using podpatch::Holder;
using podpatch::Slot;

webhook::Status check_placeable(const SliceRegistry& pods, const podpatch::PlaceRequest& request) {
  if (request.hosts < 1) {
    return webhook::invalid_argument("a slice has at least one host");
  }
  if (!pods.synced()) {
    return webhook::Error{
        webhook::ErrorCode::kUnavailable,
        "the webhook is starting and has not yet listed the cluster's Pods, so it cannot place a "
        "Pod without KubeRay's index labels (legacy placement) yet; the Pod's creation fails and "
        "KubeRay retries it shortly (Pods with KubeRay's index labels are not affected)"};
  }
  return {};
}

webhook::Result<Slot> choose_free_slot(std::vector<Holder> pods,
                                       std::span<const Reservation> reserved, int hosts,
                                       const podpatch::GroupKey& key,
                                       const std::function<void(std::size_t)>& shown) {
  // Sorted, so that each reservation is looked up, not compared with every Pod.
  std::vector<Slot> shown_slots;
  shown_slots.reserve(pods.size());
  for (const Holder& h : pods) {
    shown_slots.push_back(h.slot);
  }
  std::sort(shown_slots.begin(), shown_slots.end());
  std::vector<std::pair<Slot, std::size_t>> open;  // the reservations no shown Pod holds
  for (std::size_t i = 0; i < reserved.size(); ++i) {
    if (!std::binary_search(shown_slots.begin(), shown_slots.end(), reserved[i].slot)) {
      open.emplace_back(reserved[i].slot, i);
    } else if (shown) {
      shown(i);
    }
  }
  // A source that saw a reserved Pod come and go hands its slot out again, so a slot can carry
  // an old reservation and a new one until the old one ends: the first one stands for both.
  std::sort(open.begin(), open.end());
  auto same_slot = [](const auto& a, const auto& b) { return a.first == b.first; };
  open.erase(std::unique(open.begin(), open.end(), same_slot), open.end());
  for (const auto& [slot, i] : open) {
    pods.push_back({reserved[i].holder, slot});
  }
  return podpatch::choose_slot(pods, hosts, key);
}

webhook::Result<Slot> LocalSlotAllocator::place(const podpatch::PlaceRequest& request) {
  if (webhook::Status s = check_placeable(pods_, request); !s) {
    return s.error();
  }
  std::lock_guard lock(mu_);
  std::vector<Reservation>& reserved = reserved_[request.key];
  std::vector<std::size_t> seen;
  webhook::Result<Slot> slot =
      choose_free_slot(pods_.holders(request.key), reserved, request.hosts, request.key,
                       [&](std::size_t i) { seen.push_back(i); });
  std::reverse(seen.begin(), seen.end());
  for (std::size_t i : seen) {
    reserved.erase(reserved.begin() + static_cast<long>(i));  // the registry holds its Pod now
  }
  if (slot && !request.dry_run) {
    reserved.push_back({*slot, "(Pod admitted #" + std::to_string(++admitted_) + ")"});
  }
  return slot;
}

webhook::Result<Slot> DisabledSlotAllocator::place(const podpatch::PlaceRequest& request) {
  return webhook::Error{
      webhook::ErrorCode::kFailedPrecondition,
      "the Pod has no KubeRay index labels (ray.io/worker-group-replica-index" +
          std::string(request.hosts > 1 ? ", ray.io/replica-host-index" : "") +
          ") and this webhook runs without legacy placement, so it cannot tell which host of "
          "worker group \"" +
          request.key.group +
          "\" it is; enable KubeRay's RayMultiHostIndexing feature gate (KubeRay >= 1.5) or run "
          "the webhook with --legacy-indexing=auto or on (Helm value tpuWebhook.legacyIndexing, "
          "default \"auto\")"};
}

}  // namespace kube
