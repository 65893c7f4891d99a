#pragma once
// The worker Pods and slices inspect() judges, shared by its stages (inspect.cpp builds the
// model, checks.cpp finds what is wrong). Internal to lib/tpuslice.

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "tpuslice/inspect.h"

namespace tpuslice::detail {

using Env = std::map<std::string, std::string>;  // name -> literal value ("" for valueFrom)

struct Worker {
  const json* pod = nullptr;
  std::string ns;
  std::string cluster;
  std::string group;
  std::string name;
  int replica = -1;
  int host = -1;
  int hosts = 0;
  std::vector<Env> envs;    // each TPU container's env, as the Pod has it
  std::vector<Env> wanted;  // as the webhook would set it now (empty when it would deny)
  std::string denial;       // why the webhook would deny the Pod now
  std::string subdomain;
  PodRow row;
};

using SliceKey = std::tuple<std::string, std::string, std::string, int>;  // ns, cluster, group, r

struct Slice {
  std::string ns;
  std::string cluster;
  std::string group;
  int replica = -1;
  int hosts = 0;
  std::vector<const Worker*> workers;
};

struct Model {
  const Snapshot* snapshot = nullptr;
  std::vector<Worker> workers;
  std::map<SliceKey, Slice> slices;
};

// The value of `name` in the first TPU container's env ("" when unset).
std::string first_env(const Worker& w, const std::string& name);

// Each check appends its findings.
void check_worker_ids(const Model& m, std::vector<Finding>& out);
void check_hostnames(const Model& m, std::vector<Finding>& out);
void check_headless_services(const Model& m, std::vector<Finding>& out);
void check_env(const Model& m, std::vector<Finding>& out);
void check_node_pools(const Model& m, std::vector<Finding>& out);
void check_affinity_pending(const Model& m, std::vector<Finding>& out);
void check_megascale(const Model& m, std::vector<Finding>& out);
void check_webhook_endpoints(const Snapshot& s, std::vector<Finding>& out);
void check_exec_failures(const Model& m, std::vector<Finding>& out);

}  // namespace tpuslice::detail
