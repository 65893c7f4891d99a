#pragma once
// Which replica and host a worker Pod is (docs/spec.md M3).
//
//   auto p = podpatch::placement_from_labels(view, slice.hosts());
//   if (!p) deny(p.error());
//   else if (!*p) { /* no KubeRay index labels: legacy placement through a SlotAllocator */ }

#include <optional>
#include <span>
#include <string>

#include "base/status/result.h"
#include "podpatch/pod_view.h"
#include "podpatch/sources.h"

namespace podpatch {

enum class PlacementPath {
  kLabels,         // M3.1: ray.io/worker-group-replica-index and ray.io/replica-host-index
  kReplicaLabel,   // M3.2: single-host group, replica index label only
  kAlreadyPlaced,  // the Pod already carries this webhook's placement (re-admission)
  kLegacy,         // M3.3: chosen from the cluster's existing Pods
};

// "labels" or "legacy": how metrics name the path (the first three are stateless).
std::string_view path_name(PlacementPath path);
// Each path by its own name, as the admission log line and audit annotations give it:
// "index-labels", "replica-label", "already-placed" or "legacy".
std::string_view path_detail(PlacementPath path);

struct Placement {
  Slot slot;
  PlacementPath path = PlacementPath::kLabels;
};

// M3.1 and M3.2. nullopt when the labels do not decide the slot (legacy placement applies).
// InvalidArgument naming the label when an index is not a non-negative integer, or the host
// index is not below `hosts`.
webhook::Result<std::optional<Placement>> placement_from_labels(const PodView& pod, int hosts);

// The slot this webhook gave a Pod earlier: label replicaIndex="<group>-<n>" and a literal
// TPU_WORKER_ID in its first TPU container, whose host is that id (divided by the number of TPU
// containers on TPU7x). nullopt when the Pod carries no such placement.
std::optional<Slot> recorded_slot(const PodView& pod);

// The worker group a Pod belongs to (docs/spec.md M2): its namespace (else `default_ns`) and
// labels ray.io/cluster and ray.io/group. InvalidArgument (reason missing_label) naming the
// missing or empty label and how to fix it.
webhook::Result<GroupKey> worker_group(const PodView& pod, std::string_view default_ns);
// The same, nullopt when a label is missing: for Pods read from a watch or a file.
std::optional<GroupKey> group_key(const PodView& pod, std::string_view default_ns);

// An existing Pod holding a slot of a group.
struct Holder {
  std::string pod;  // Pod name, for messages
  Slot slot;
};

// docs/spec.md M3.3 over a group's holders: r = the lowest replica with fewer than `hosts` Pods,
// else the lowest replica number not in use; h = the lowest host not taken in r. AlreadyExists
// naming both Pods when two holders share a slot.
webhook::Result<Slot> choose_slot(std::span<const Holder> holders, int hosts, const GroupKey& key);

}  // namespace podpatch
