#pragma once
// The Pod mutation: docs/spec.md M3's label, M4's Pod spec and M5's env. It is decided once, from
// the original Pod, as a list of changes (plan_mutation); the changes are then written straight
// as the JSON Patch text (write_patch, what the server answers), or applied to a copy of the Pod
// (apply_mutation: the reference the patch is checked against, M6, and the environment
// webhook-dryrun --explain shows).
//
//   podpatch::Mutation m = podpatch::plan_mutation(view, plan);
//   std::string patch;
//   podpatch::write_patch(view, m, patch);       // [{"op":"add",...},...]
//   json after = view.pod();
//   podpatch::apply_mutation(after, m);          // json::diff(view.pod(), after) == patch

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json/access.h"
#include "podpatch/affinity.h"
#include "podpatch/pod_view.h"
#include "podpatch/sources.h"
#include "topology/addresses.h"
#include "topology/slice.h"

namespace podpatch {

// Borrows what it names: the slice and both strings must outlive plan_mutation and mutate.
struct MutationPlan {
  const topology::Slice* slice = nullptr;
  Slot slot;
  std::string_view svc;           // headless Service name (docs/spec.md Terms)
  std::string_view topology_key;  // for the affinity terms (M4), used when the slice is multi-host
  topology::Ports ports;
  bool add_replica_label = false;  // M3: add replicaIndex=<group>-<replica>
};

// One change to a TPU container's env, decided on the original Pod (docs/spec.md M5).
struct EnvChange {
  enum class Kind {
    kAppend,        // a new entry at the end of the list (created when missing or null)
    kFill,          // the not-present entry at `index` gets the value (docs/spec.md Terms)
    kReplaceValue,  // the literal value of the entry at `index` is replaced
  };
  Kind kind = Kind::kAppend;
  std::size_t index = 0;  // kFill, kReplaceValue
  std::string_view name;  // one of the keys::k* variables: static storage, never copied
  std::string value;      // the literal value, unless host_ip
  bool host_ip = false;   // valueFrom fieldRef status.hostIP instead of a value (M5.6)
};

struct ContainerChanges {
  int index = 0;  // in spec.containers
  std::vector<EnvChange> env;
};

// A list the webhook left out because its environment string would not fit (docs/spec.md M8.2).
struct OmittedEnv {
  int container = 0;      // index in spec.containers
  std::string_view name;  // keys::kTorchSlicebuilder
  std::size_t bytes = 0;  // its env_string_bytes
};

// Everything the mutation changes, and the M7 warnings about user values it kept or replaced.
struct Mutation {
  std::optional<std::string> replica_label;  // metadata.labels.replicaIndex (M3), when it changes
  std::optional<std::string> hostname;       // spec.hostname (M4), when it changes
  std::optional<std::string> subdomain;      // spec.subdomain (M4), when it changes
  AffinityMatch match;                       // M4, for the terms below
  std::vector<AffinityTerm> affinity_terms;  // the terms spec.affinity does not have yet
  std::vector<ContainerChanges> containers;  // in spec.containers order, only those that change
  std::vector<std::string> warnings;
  std::vector<OmittedEnv> omitted;  // M8.2, each with a warning among `warnings`
};

// Decides the mutation from the original Pod. Cannot fail: everything it relies on was checked
// by PodView::create and Slice::create.
Mutation plan_mutation(const PodView& view, const MutationPlan& plan);

// Applies `m` to `pod`: a copy of the Pod m was planned on, or mutable_parts() of it.
void apply_mutation(json& pod, const Mutation& m);

// Appends the RFC 6902 patch of `m` against view.pod() to `out`, as JSON text: "[]" when `m`
// changes nothing, else exactly the operations json::diff(view.pod(), apply_mutation'd copy) gives,
// in its order, and the bytes webhook::dump_json writes for them (test/unit/podpatch and
// test/unit/admission check it on every fixture and on the corpus of odd Pods).
void write_patch(const PodView& view, const Mutation& m, std::string& out);

// The parts of a Pod that mutate() may change, at their own paths: metadata.labels,
// spec.hostname, spec.subdomain, spec.affinity and each container's env (other container fields
// left out), each only where the Pod has it. mutate() works on these parts as on the whole Pod,
// and json::diff(mutable_parts(pod), mutated parts) is the same patch as the diff of the whole
// Pods — without copying or walking the rest of the Pod.
json mutable_parts(const json& pod);

// True when the Pod gets spec.hostname and spec.subdomain (M4): a multi-host slice, or a
// single-host Pod with MEGASCALE_NUM_SLICES in a TPU container (so the coordinator resolves).
bool needs_pod_dns(const PodView& pod, const topology::Slice& slice);

// M8.1: every value `m` writes fits in one environment string; otherwise the env_too_long denial
// of the first that does not (only the host lists JAX needs can be that long: the slicebuilder
// list is left out instead, M8.2). `group`, `svc` and `cluster` name what to shorten.
webhook::Status check_env_strings(const Mutation& m, std::string_view group, std::string_view svc,
                                  std::string_view cluster);

// M8.3: the Pod as sent (`pod_bytes` of JSON) plus the patch text (`patch_bytes`) is within
// kMaxPodBytes; otherwise the pod_too_large denial, listing what takes the space.
webhook::Status check_pod_size(std::size_t pod_bytes, std::size_t patch_bytes, const Mutation& m);

// apply_mutation(pod, plan_mutation(view, plan)) for `pod`, a copy of view.pod() or
// mutable_parts(view.pod()) (the view reads the original). Returns the M7 warnings, each naming
// the container and variable.
std::vector<std::string> mutate(json& pod, const PodView& view, const MutationPlan& plan);

}  // namespace podpatch
