#pragma once
// kubectl-tpu_slice's judgement of a Snapshot: each TPU worker group's slices with their Pods and
// a verdict, and the findings that explain why a slice will not start. Pure: no I/O.
//
//   tpuslice::Report r = tpuslice::inspect(snapshot, {});
//   for (const tpuslice::Finding& f : r.findings) ...   // f.check, f.message, f.command
//
// What the webhook would give a Pod now is asked of the webhook's own admission::Handler: each
// worker Pod goes through Handler::mutate as a dry-run CREATE, with the cluster's other Pods,
// Nodes and Services as the existing state (kube::ListedCluster), and the env of the Pod it would
// produce is compared with the Pod's.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "admission/handler.h"
#include "tpuslice/snapshot.h"

namespace tpuslice {

// Finding codes (Finding::check), as -o json and the docs name them.
inline constexpr const char* kDuplicateWorkerId = "duplicate-worker-id";
inline constexpr const char* kMissingWorkerId = "missing-worker-id";
inline constexpr const char* kUnresolvedHostname = "unresolved-hostname";
inline constexpr const char* kHeadlessService = "headless-service";
inline constexpr const char* kEnvDiffers = "env-differs";
inline constexpr const char* kNoWebhookEnv = "no-webhook-env";
inline constexpr const char* kSplitNodePools = "split-node-pools";
inline constexpr const char* kAffinityPending = "affinity-pending";
inline constexpr const char* kMegascaleMismatch = "megascale-mismatch";
inline constexpr const char* kWebhookEndpoints = "webhook-no-endpoints";
inline constexpr const char* kArgListTooLong = "argument-list-too-long";

struct PodRow {
  std::string name;
  std::string phase;
  std::string node;       // spec.nodeName ("" while unscheduled)
  std::string node_pool;  // cloud.google.com/gke-nodepool
  std::string pool_from;  // "node" (its Node's label), "nodeSelector", or ""
  std::string worker_id;  // TPU_WORKER_ID of each TPU container, comma-joined ("" unset)
  std::string hostname;   // spec.hostname
  std::string tpu_name;   // TPU_NAME
  std::string topology;
  bool ready = false;    // condition Ready=True
  bool has_env = false;  // carries the webhook's TPU_WORKER_ID
};

struct SliceStatus {
  std::string ns;
  std::string cluster;
  std::string group;
  int replica = -1;  // -1: the webhook could not place the Pods
  int hosts = 0;     // the slice's hosts; 0 when the topology does not say
  std::vector<PodRow> pods;
  std::string verdict;  // "ready", "pending" or "broken"
};

struct Finding {
  std::string check;
  std::string ns;
  std::string cluster;  // "" for the webhook's own Service
  std::string group;    // "" for the whole cluster
  int replica = -1;     // -1 for the whole group
  std::string message;
  std::vector<std::string> evidence;
  std::string command;  // a kubectl command that fixes it or shows more
};

struct Report {
  std::vector<SliceStatus> slices;
  std::vector<Finding> findings;
  std::vector<std::string> unchecked;  // what could not be checked, and why
};

struct InspectOptions {
  admission::Config config;  // as the deployed webhook runs (--kuberay-version, ports)
  std::string webhook_namespace = "ray-system";
};

Report inspect(const Snapshot& snapshot, const InspectOptions& options);

}  // namespace tpuslice
