#pragma once
// The Pod mutation: SPEC M3's label, M4's Pod spec and M5's env, applied to a copy of the raw
// Pod. The caller diffs the copy against the original to get the JSON Patch (M6).
//
//   json mutated = view.pod();
//   std::vector<std::string> warnings = podpatch::mutate(mutated, view, plan);
//   json patch = json::diff(view.pod(), mutated);

#include <string>
#include <vector>

#include "podpatch/json_access.h"
#include "podpatch/pod_view.h"
#include "podpatch/sources.h"
#include "topology/addresses.h"
#include "topology/slice.h"

namespace podpatch {

struct MutationPlan {
  const topology::Slice* slice = nullptr;
  Slot slot;
  std::string svc;           // headless Service name (SPEC Terms)
  std::string topology_key;  // for the affinity terms (M4), used when the slice is multi-host
  topology::Ports ports;
  bool add_replica_label = false;  // M3: add replicaIndex=<group>-<replica>
};

// True when the Pod gets spec.hostname and spec.subdomain (M4): a multi-host slice, or a
// single-host Pod with MEGASCALE_NUM_SLICES in a TPU container (so the coordinator resolves).
bool needs_pod_dns(const PodView& pod, const topology::Slice& slice);

// Mutates `pod`, a copy of view.pod() (the view reads the original). Cannot fail: everything it
// relies on was checked by PodView::create and Slice::create. Returns the M7 warnings about user
// values kept or replaced, each naming the container and variable.
std::vector<std::string> mutate(json& pod, const PodView& view, const MutationPlan& plan);

}  // namespace podpatch
