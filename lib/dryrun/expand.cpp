#include "dryrun/expand.h"

#include <algorithm>
#include <cctype>

#include "base/json/access.h"
#include "podpatch/keys.h"
#include "topology/names.h"

namespace dryrun {

using webhook::member;
using webhook::string_member;
namespace {

namespace keys = podpatch::keys;

int int_member(const json& obj, std::string_view key, int fallback) {
  const json* v = member(obj, key);
  if (v == nullptr || !v->is_number_integer()) {
    return fallback;
  }
  return static_cast<int>(std::clamp<long long>(v->get<long long>(), 0, 1'000'000));
}

// KubeRay's replica names end in 5 characters of this alphabet (utilrand.String). The suffix is
// derived from the names so output is stable between runs.
std::string replica_name(std::string_view cluster, std::string_view group, int replica) {
  constexpr std::string_view kAlphabet = "bcdfghjklmnpqrstvwxz2456789";
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (char c : std::string(cluster) + "/" + std::string(group) + "/" + std::to_string(replica)) {
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  }
  std::string out = std::string(group) + "-";
  for (int i = 0; i < 5; ++i) {
    out.push_back(kAlphabet[h % kAlphabet.size()]);
    h /= kAlphabet.size();
  }
  return out;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// KubeRay's CheckLabel: the last 63 characters, a leading punctuation character replaced.
std::string check_label(std::string s) {
  if (s.size() > 63) {
    s = s.substr(s.size() - 63);
  }
  if (!s.empty() && (s[0] == '-' || s[0] == '.' || s[0] == '_')) {
    s[0] = 'r';
  }
  return s;
}

json env_field(std::string_view name, std::string_view path) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
}

bool has_env(const json& env, std::string_view name) {
  return std::any_of(env.begin(), env.end(),
                     [&](const json& e) { return string_member(&e, "name") == name; });
}

// The Ray container's additions (KubeRay setContainerEnvVars, command, metrics port). Returns the
// template's env, which the wait-gcs-ready init container copies.
json shape_ray_container(json& c, const std::string& fqdn, const std::string& head_svc) {
  json template_env = member(c, "env") != nullptr && c["env"].is_array() ? c["env"] : json::array();
  json env = template_env;
  std::string address = fqdn + ":6379";
  std::string tpus;
  if (const json* q = member(c, "resources", "limits", keys::kTpuResource)) {
    tpus = q->is_string() ? q->get<std::string>() : webhook::dump_json(*q);
  }
  std::string start = "ray start  --address=" + address + "  --block  --metrics-export-port=8080" +
                      (tpus.empty() ? "" : "  --resources='{\"TPU\":" + tpus + "}'") + " ";
  env.push_back({{"name", "FQ_RAY_IP"}, {"value", fqdn}});
  env.push_back({{"name", "RAY_IP"}, {"value", head_svc}});
  env.push_back(env_field("RAY_CLUSTER_NAME", "metadata.labels['ray.io/cluster']"));
  env.push_back(env_field("RAY_CLUSTER_NAMESPACE", "metadata.namespace"));
  env.push_back(env_field("RAY_CLOUD_INSTANCE_ID", "metadata.name"));
  env.push_back(env_field("RAY_NODE_TYPE_NAME", "metadata.labels['ray.io/group']"));
  env.push_back({{"name", "KUBERAY_GEN_RAY_START_CMD"}, {"value", start}});
  for (auto [name, value] : {std::pair<std::string_view, std::string>{"RAY_PORT", "6379"},
                             {"RAY_ADDRESS", address},
                             {"RAY_USAGE_STATS_KUBERAY_IN_USE", "1"},
                             {"RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE", "1"}}) {
    if (!has_env(env, name)) {
      env.push_back({{"name", name}, {"value", value}});
    }
  }
  c["env"] = std::move(env);
  if (member(c, "command") == nullptr) {
    c["command"] = json::array({"/bin/bash", "-c", "--"});
    c["args"] = json::array({"ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; " + start});
  }
  json& ports = c["ports"];
  if (!ports.is_array()) {
    ports = json::array();
  }
  bool has_metrics = std::any_of(ports.begin(), ports.end(), [](const json& p) {
    return string_member(&p, "name") == std::string_view("metrics");
  });
  if (!has_metrics) {
    ports.push_back({{"name", "metrics"}, {"containerPort", 8080}});
  }
  return template_env;
}

void add_shared_memory(json& spec, json& ray) {
  json& mounts = ray["volumeMounts"];
  if (!mounts.is_array()) {
    mounts = json::array();
  }
  bool mounted = std::any_of(mounts.begin(), mounts.end(), [](const json& m) {
    return string_member(&m, "mountPath") == std::string_view("/dev/shm");
  });
  if (mounted) {
    return;
  }
  json size = nullptr;
  if (const json* l = member(ray, "resources", "limits", "memory")) {
    size = *l;
  } else if (const json* r = member(ray, "resources", "requests", "memory")) {
    size = *r;
  }
  json empty_dir = {{"medium", "Memory"}};
  if (!size.is_null()) {
    empty_dir["sizeLimit"] = size;
  }
  json& volumes = spec["volumes"];
  if (!volumes.is_array()) {
    volumes = json::array();
  }
  volumes.push_back({{"name", "shared-mem"}, {"emptyDir", std::move(empty_dir)}});
  mounts.push_back({{"name", "shared-mem"}, {"mountPath", "/dev/shm"}});
}

json wait_gcs_ready(const json& ray, json template_env, const std::string& fqdn,
                    const std::string& head_svc) {
  template_env.push_back({{"name", "FQ_RAY_IP"}, {"value", fqdn}});
  template_env.push_back({{"name", "RAY_IP"}, {"value", head_svc}});
  json init = {
      {"name", "wait-gcs-ready"},
      {"command", json::array({"/bin/bash", "-c", "--"})},
      {"args", json::array({"until ray health-check --address " + fqdn +
                            ":6379 > /dev/null 2>&1; do echo waiting for GCS; sleep 5; done"})},
      {"env", std::move(template_env)},
      {"resources",
       {{"limits", {{"cpu", "200m"}, {"memory", "256Mi"}}},
        {"requests", {{"cpu", "200m"}, {"memory", "256Mi"}}}}}};
  for (std::string_view key : {"image", "imagePullPolicy", "securityContext"}) {
    if (const json* v = member(ray, key)) {
      init[std::string(key)] = *v;
    }
  }
  return init;
}

}  // namespace

int desired_pods(const json& group) {
  const json* suspend = member(group, "suspend");
  if (suspend != nullptr && suspend->is_boolean() && suspend->get<bool>()) {
    return 0;
  }
  int min = int_member(group, "minReplicas", 0);
  int max = int_member(group, "maxReplicas", 1'000'000);
  int replicas = int_member(group, "replicas", min);
  return std::clamp(replicas, min, std::max(min, max)) *
         std::max(int_member(group, "numOfHosts", 1), 1);
}

webhook::Result<std::vector<WorkerPod>> expand_workers(const json& raycluster,
                                                       const ExpandOptions& options) {
  const json* metadata = member(raycluster, "metadata");
  std::string cluster(string_member(metadata, "name").value_or(""));
  if (cluster.empty()) {
    return webhook::invalid_argument("RayCluster has no metadata.name");
  }
  std::string ns(string_member(metadata, "namespace").value_or(options.default_namespace));
  std::string uid(string_member(metadata, "uid").value_or("00000000-0000-4000-8000-000000000000"));
  std::string head_svc = cluster + "-head-svc";
  std::string fqdn = head_svc + "." + ns + ".svc.cluster.local";
  const json* groups = member(raycluster, "spec", "workerGroupSpecs");
  std::vector<WorkerPod> out;
  if (groups == nullptr || !groups->is_array()) {
    return out;
  }
  for (const json& g : *groups) {
    std::string group(string_member(&g, "groupName").value_or(""));
    const json* tmpl = member(g, "template");
    if (group.empty() || tmpl == nullptr || !tmpl->is_object()) {
      return webhook::invalid_argument("a worker group has no groupName or template");
    }
    int hosts = std::max(int_member(g, "numOfHosts", 1), 1);
    int count = desired_pods(g);
    if (!options.indexing) {
      auto it = options.existing.find({ns, cluster, group});
      count = std::max(0, count - (it == options.existing.end() ? 0 : it->second));
    }
    for (int i = 0; i < count; ++i) {
      int replica = i / hosts;
      int host = i % hosts;
      json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"status", json::object()}};
      json md = json::object();
      md["generateName"] = lower((cluster + "-" + group).substr(0, 50)) + "-worker-";
      md["namespace"] = ns;
      md["creationTimestamp"] = nullptr;
      json labels = json::object();
      for (const json* src : {member(tmpl, "metadata", "labels"), member(g, "labels")}) {
        if (src != nullptr && src->is_object()) {
          labels.update(*src);
        }
      }
      for (auto [k, v] : {std::pair<std::string_view, std::string>{keys::kAppNameLabel, "kuberay"},
                          {keys::kCreatedByLabel, "kuberay-operator"},
                          {"ray.io/identifier", check_label(cluster + "-worker")}}) {
        if (!labels.contains(k)) {
          labels[std::string(k)] = v;
        }
      }
      labels[std::string(keys::kClusterLabel)] = cluster;
      labels[std::string(keys::kNodeTypeLabel)] = "worker";
      labels[std::string(keys::kGroupLabel)] = group;
      labels["ray.io/is-ray-node"] = "yes";
      if (options.indexing) {
        labels[std::string(keys::kReplicaIndexLabel)] = std::to_string(replica);
        if (hosts > 1) {
          labels[std::string(keys::kReplicaNameLabel)] = replica_name(cluster, group, replica);
          labels[std::string(keys::kHostIndexLabel)] = std::to_string(host);
        }
      }
      md["labels"] = std::move(labels);
      if (const json* ann = member(tmpl, "metadata", "annotations");
          ann != nullptr && ann->is_object() && !ann->empty()) {
        md["annotations"] = *ann;
      }
      md["ownerReferences"] = json::array({{{"apiVersion", "ray.io/v1"},
                                            {"kind", "RayCluster"},
                                            {"name", cluster},
                                            {"uid", uid},
                                            {"controller", true},
                                            {"blockOwnerDeletion", true}}});
      pod["metadata"] = std::move(md);
      json spec = member(tmpl, "spec") != nullptr ? (*tmpl)["spec"] : json::object();
      if (spec.contains("containers") && spec["containers"].is_array() &&
          !spec["containers"].empty() && spec["containers"][0].is_object()) {
        json& ray = spec["containers"][0];
        json template_env = shape_ray_container(ray, fqdn, head_svc);
        add_shared_memory(spec, ray);
        json& inits = spec["initContainers"];
        if (!inits.is_array()) {
          inits = json::array();
        }
        inits.push_back(wait_gcs_ready(ray, std::move(template_env), fqdn, head_svc));
      }
      pod["spec"] = std::move(spec);
      out.push_back({std::move(pod), group, replica, host});
    }
  }
  return out;
}

}  // namespace dryrun
