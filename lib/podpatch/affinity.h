#pragma once
// Pod affinity that keeps a multi-host slice's Pods together (docs/spec.md M4).
//
//   std::string key = podpatch::default_topology_key(view);
//   podpatch::merge_affinity(pod_copy, {"replicaIndex", "tpu-group-0", "my-cluster", key});

#include <optional>
#include <span>
#include <string>
#include <string_view>

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

// Adds to pod.spec.affinity the required pod-affinity term [key In [value], ray.io/cluster In
// [cluster]] and the anti-affinity terms [key NotIn [value], ray.io/cluster In [cluster]] and
// [ray.io/cluster NotIn [cluster], key Exists] (the latter across namespaces except
// kube-system), keeping existing terms and never adding a term twice.
void merge_affinity(json& pod, const AffinityMatch& match);

}  // namespace podpatch
