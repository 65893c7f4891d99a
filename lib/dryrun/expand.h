#pragma once
// The worker Pods KubeRay would create for a RayCluster, shaped as KubeRay builds them
// (DefaultWorkerPodTemplate, BuildPod): generateName, labels, owner reference, the Ray
// container's env and metrics port, its command, the wait-gcs-ready init container and the
// /dev/shm volume. The `ray start` command is KubeRay's own: the group's rayStartParams, its
// top-level resources and labels, KubeRay's worker defaults and flags from the Ray container's
// cpu, memory, GPU and TPU resources (KUBERAY_GEN_RAY_START_CMD, and the container's args unless
// it starts Ray itself or ray.io/overwrite-container-cmd is "true"). The webhook reads only
// metadata, nodeSelector, affinity and the containers' resources and env; the rest makes the
// Pods look real (probes are left out).
//
//   dryrun::ExpandOptions opts;                 // KubeRay's index labels on, as in KubeRay >= 1.6
//   auto pods = dryrun::expand_workers(raycluster, opts);

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status/result.h"
#include "podpatch/sources.h"

namespace dryrun {

using json = nlohmann::json;

struct ExpandOptions {
  // KubeRay's RayMultiHostIndexing labels (ray.io/worker-group-replica-index, -replica-name,
  // ray.io/replica-host-index). Off: KubeRay <= 1.4, or the feature gate off.
  bool indexing = true;
  std::string default_namespace = "default";
  // Without indexing KubeRay creates only the Pods a group is missing: Pods already in the
  // cluster per group (from --existing) are subtracted from the desired count.
  std::map<podpatch::GroupKey, int> existing;
};

struct WorkerPod {
  json pod;
  std::string group;
  int replica = 0;  // KubeRay's replica index (meaningful with indexing)
  int host = 0;     // KubeRay's host index (meaningful with indexing)
};

// Every worker Pod in creation order: groups in order, replicas 0.., hosts 0.. within a replica.
// InvalidArgument when the RayCluster has no name or a group's shape is malformed.
webhook::Result<std::vector<WorkerPod>> expand_workers(const json& raycluster,
                                                       const ExpandOptions& options);

// expand_workers one Pod at a time: `fn` gets each Pod as it is made (so only one is held), and
// the first error it returns stops the expansion and is returned.
webhook::Status for_each_worker(const json& raycluster, const ExpandOptions& options,
                                const std::function<webhook::Status(WorkerPod&&)>& fn);

// KubeRay's desired Pod count of a group: clamp(replicas, minReplicas, maxReplicas) x numOfHosts,
// or 0 when the group is suspended.
int desired_pods(const json& group);

}  // namespace dryrun
