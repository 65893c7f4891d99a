#pragma once
// The Pod mutation: docs/spec.md M3's label, M4's Pod spec and M5's env, applied to a copy of the
// raw Pod. The caller diffs the copy against the original to get the JSON Patch (M6).
//
//   json before = podpatch::mutable_parts(view.pod());
//   json after = before;
//   std::vector<std::string> warnings = podpatch::mutate(after, view, plan);
//   json patch = json::diff(before, after);   // == json::diff(pod, whole mutated pod)

#include <string>
#include <vector>

#include "base/json/access.h"
#include "podpatch/pod_view.h"
#include "podpatch/sources.h"
#include "topology/addresses.h"
#include "topology/slice.h"

namespace podpatch {

struct MutationPlan {
  const topology::Slice* slice = nullptr;
  Slot slot;
  std::string svc;           // headless Service name (docs/spec.md Terms)
  std::string topology_key;  // for the affinity terms (M4), used when the slice is multi-host
  topology::Ports ports;
  bool add_replica_label = false;  // M3: add replicaIndex=<group>-<replica>
};

// The parts of a Pod that mutate() may change, at their own paths: metadata.labels,
// spec.hostname, spec.subdomain, spec.affinity and each container's env (other container fields
// left out), each only where the Pod has it. mutate() works on these parts as on the whole Pod,
// and json::diff(mutable_parts(pod), mutated parts) is the same patch as the diff of the whole
// Pods — without copying or walking the rest of the Pod.
json mutable_parts(const json& pod);

// True when the Pod gets spec.hostname and spec.subdomain (M4): a multi-host slice, or a
// single-host Pod with MEGASCALE_NUM_SLICES in a TPU container (so the coordinator resolves).
bool needs_pod_dns(const PodView& pod, const topology::Slice& slice);

// Mutates `pod`, a copy of view.pod() or mutable_parts(view.pod()) (the view reads the
// original). Cannot fail: everything it relies on was checked by PodView::create and
// Slice::create. Returns the M7 warnings about user values kept or replaced, each naming the
// container and variable.
std::vector<std::string> mutate(json& pod, const PodView& view, const MutationPlan& plan);

}  // namespace podpatch
