#pragma once
// Pod affinity that keeps a multi-host slice's Pods together (docs/spec.md M4).
//
//   std::string key = podpatch::default_topology_key(view);
//   podpatch::merge_affinity(pod_copy, {"replicaIndex", "tpu-group-0", "my-cluster", key});

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/json/access.h"
#include "podpatch/pod_view.h"
#include "podpatch/sources.h"

namespace podpatch {

// The first cloud.google.com/ topologyKey among the Pod's own required pod-affinity terms; else
// annotation kueue.x-k8s.io/podset-required-topology when it starts with cloud.google.com/; else
// cloud.google.com/gke-nodepool.
std::string default_topology_key(const PodView& pod);

// Among `nodes`, the first label of cloud.google.com/gce-topology-host, -subblock, -block and
// cloud.google.com/gke-nodepool that has a group of exactly `hosts` Nodes; nullopt when none has.
std::optional<std::string_view> subslice_topology_key(std::span<const Labels> nodes, int hosts);

// Whether any of `nodes` carries a cloud.google.com/gce-topology-* label.
bool has_gce_topology_labels(std::span<const Labels> nodes);

// What the slice's Pods share and how they are kept together.
struct AffinityMatch {
  std::string key;    // ray.io/worker-group-replica-name, or replicaIndex
  std::string value;  // its value
  std::string cluster;
  std::string topology_key;
};

// The three required terms of M4, all with the match's topology key:
//   kSameReplica   podAffinity      [key In [value], ray.io/cluster In [cluster]]
//   kOtherReplicas podAntiAffinity  [key NotIn [value], ray.io/cluster In [cluster]]
//   kOtherClusters podAntiAffinity  [ray.io/cluster NotIn [cluster], key Exists], across every
//                                   namespace but kube-system
enum class AffinityTerm { kSameReplica, kOtherReplicas, kOtherClusters };
inline constexpr AffinityTerm kAffinityTerms[] = {
    AffinityTerm::kSameReplica, AffinityTerm::kOtherReplicas, AffinityTerm::kOtherClusters};
// "podAffinity" or "podAntiAffinity".
std::string_view affinity_kind(AffinityTerm term);

// The term as JSON text, keys sorted (as webhook::dump_json writes it), and as a json value.
void append_affinity_term(std::string& out, const AffinityMatch& match, AffinityTerm term);
json affinity_term(const AffinityMatch& match, AffinityTerm term);

// The terms of kAffinityTerms that `affinity` (a Pod's spec.affinity; may be null) does not
// already require, in that order.
std::vector<AffinityTerm> missing_affinity_terms(const json* affinity, const AffinityMatch& match);

// Appends `terms` to pod.spec.affinity's required terms, creating what is missing or null.
void add_affinity_terms(json& pod, const AffinityMatch& match, std::span<const AffinityTerm> terms);

// Adds to pod.spec.affinity the three terms above, keeping existing terms and never adding a
// term twice: add_affinity_terms(pod, match, missing_affinity_terms(...)).
void merge_affinity(json& pod, const AffinityMatch& match);

}  // namespace podpatch
