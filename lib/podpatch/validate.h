#pragma once
// RayCluster validation (docs/spec.md V1-V4): each TPU worker group's numOfHosts must match its
// topology, and a subsliced group must be placeable.
//
//   podpatch::ClusterReport r = podpatch::validate_raycluster(cluster_json, nodes);
//   if (!r.status) deny(r.status.error());   // names the first failing group (V4)

#include <optional>
#include <string>
#include <vector>

#include "base/json/access.h"
#include "base/status/result.h"
#include "podpatch/sources.h"

namespace podpatch {

struct ClusterReport {
  // The first failing worker group decides (V4); its Error carries the reason (reasons.h).
  webhook::Status status;
  std::string denied_group;           // its groupName
  std::vector<std::string> warnings;  // from every group checked
};

// Validates a RayCluster object (the admission request's object). Groups without TPU containers
// pass; a group without containers, a TPU group without numOfHosts, with a missing or invalid
// topology, or whose topology needs another number of hosts is denied (V1, V2). Subsliced groups
// are checked against the parent topology and the Nodes `nodes` lists (V3). Messages name the
// RayCluster as <namespace>/<name>; `request_ns` is used when the object names no namespace.
ClusterReport validate_raycluster(const json& cluster, NodeSource& nodes,
                                  std::string_view request_ns = "");

}  // namespace podpatch
