#pragma once
// The SlotAllocators of legacy placement (docs/spec.md M3.3) over a SliceRegistry, and the rule
// they share: the lowest free slot over the Pods the Pod feed has shown and the slots handed out
// for Pods it has not shown yet. kube::ClaimStore (kube/claims.h) keeps those reservations as
// claims in the API server, shared by every replica; LocalSlotAllocator keeps them in this process
// (webhook-dryrun, tests).
//
//   kube::ListedCluster cluster;                  // or: a SliceRegistry fed by a PodFeed
//   kube::LocalSlotAllocator pods(cluster.registry());
//   webhook::Result<podpatch::Slot> slot = pods.place(key, /*hosts=*/4, /*dry_run=*/false);
//   // the next place() sees that slot taken; a dry run reserves nothing
//
//   kube::DisabledSlotAllocator off;                  // --legacy-indexing=off: denies, saying why

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/status/result.h"
#include "kube/slice_registry.h"
#include "podpatch/placement.h"
#include "podpatch/sources.h"

namespace kube {

// A slot handed out for a Pod the Pod feed may not have shown yet.
struct Reservation {
  podpatch::Slot slot;
  std::string holder;  // how placement names it, as Holder::pod
};

// What every SlotAllocator over `pods` refuses before choosing: a slice of no hosts
// (InvalidArgument) and a registry that has not listed the cluster's Pods yet (Unavailable,
// retryable).
webhook::Status check_placeable(const SliceRegistry& pods, const podpatch::PlaceRequest& request);

// docs/spec.md M3.3 for a new Pod of `key` in slices of `hosts` hosts: podpatch::choose_slot over
// `pods` (the group's Pods the feed has shown, SliceRegistry::holders) and `reserved`. A
// reservation on a slot one of `pods` holds is that Pod, shown by now: it takes nothing more, and
// `shown` (when set) hears its index in `reserved`. Two reservations on one slot take it once.
// AlreadyExists when two of `pods` hold one slot.
webhook::Result<podpatch::Slot> choose_free_slot(
    std::vector<podpatch::Holder> pods, std::span<const Reservation> reserved, int hosts,
    const podpatch::GroupKey& key, const std::function<void(std::size_t)>& shown = {});

// Places over a SliceRegistry and keeps the slots of non-dry-run placements in this process, so
// the next placement sees them taken until the registry shows a Pod on them. Thread-safe;
// `pods` must outlive it.
class LocalSlotAllocator : public podpatch::SlotAllocator {
 public:
  explicit LocalSlotAllocator(const SliceRegistry& pods) : pods_(pods) {}

  using podpatch::SlotAllocator::place;
  // check_placeable, then choose_free_slot over the registry and this source's reservations.
  webhook::Result<podpatch::Slot> place(const podpatch::PlaceRequest& request) override;

 private:
  const SliceRegistry& pods_;
  std::mutex mu_;
  std::map<podpatch::GroupKey, std::vector<Reservation>> reserved_;
  int admitted_ = 0;
};

// The SlotAllocator of a webhook running without legacy placement (--legacy-indexing=off): every
// Pod without KubeRay's index labels is denied with a message saying how to fix it.
class DisabledSlotAllocator : public podpatch::SlotAllocator {
 public:
  using podpatch::SlotAllocator::place;
  webhook::Result<podpatch::Slot> place(const podpatch::PlaceRequest& request) override;
};

}  // namespace kube
