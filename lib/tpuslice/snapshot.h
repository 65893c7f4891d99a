#pragma once
// What kubectl-tpu_slice reads from a live cluster, read-only, through kube::ApiClient: the
// RayClusters, their worker Pods, the Nodes, the Services, and the EndpointSlices of the
// webhook's own Service. Lists are paged (limit/continue, restarted once after a 410 Gone).
//
//   tpuslice::Scope scope{.ns = "default", .cluster = "my-cluster"};
//   webhook::Result<tpuslice::Snapshot> s = tpuslice::read_snapshot(client, scope);
//   // s->unreadable["nodes"]: why Nodes could not be listed (RBAC), the rest was read
//
// A 403 on one kind is recorded in `unreadable` and the others are read; a 403 on Pods, any other
// HTTP error and any transport failure are an Error saying which list failed and why.

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status/result.h"
#include "kube/api_client.h"

namespace tpuslice {

using json = nlohmann::json;

inline constexpr const char* kWebhookService = "kuberay-tpu-webhook";

// Which objects to read.
struct Scope {
  std::string ns = "default";  // ignored when all_namespaces
  bool all_namespaces = false;
  std::string cluster;  // one RayCluster by name ("" = every one in scope)
  std::string webhook_namespace = "ray-system";
  std::chrono::milliseconds timeout{std::chrono::seconds(20)};  // per request
  int page_size = 250;                                          // limit= of each list page
};

struct Snapshot {
  std::vector<json> rayclusters;
  std::vector<json> pods;  // KubeRay worker Pods (ray.io/node-type=worker)
  std::vector<json> nodes;
  std::vector<json> services;
  std::vector<json> endpointslices;  // of the webhook's Service
  // resource ("nodes", "services", "endpointslices", "rayclusters") -> the API's reason.
  std::map<std::string, std::string> unreadable;
  std::string webhook_namespace = "ray-system";
};

webhook::Result<Snapshot> read_snapshot(kube::ApiClient& client, const Scope& scope);

// The message of a kube Status body, else the body's first line (at most 200 bytes).
std::string status_message(const std::string& body);

}  // namespace tpuslice
