// The checks of inspect(): each reads the model and appends its findings (docs/kubectl-plugin.md
// lists them with an example of each).
#include <algorithm>
#include <cctype>
#include <set>

#include "base/json/access.h"
#include "base/text/text.h"
#include "podpatch/keys.h"
#include "tpuslice/model.h"

namespace tpuslice::detail {
namespace {

namespace keys = podpatch::keys;
using webhook::member;
using webhook::string_member;

std::string slice_name(const Slice& s) {
  return "slice " + s.ns + "/" + s.cluster + " group " + s.group + " replica " +
         (s.replica < 0 ? std::string("?") : std::to_string(s.replica));
}

Finding finding(const char* check, const Slice& s, int replica) {
  Finding f;
  f.check = check;
  f.ns = s.ns;
  f.cluster = s.cluster;
  f.group = s.group;
  f.replica = replica;
  return f;
}

std::string group_selector(const Slice& s) {
  return "kubectl get pods -n " + s.ns + " -l ray.io/cluster=" + s.cluster +
         ",ray.io/group=" + s.group;
}

std::string group_pods(const Slice& s) {
  return group_selector(s) + " -L " + std::string(keys::kReplicaIndexLabel) + "," +
         std::string(keys::kHostIndexLabel) + " -o wide";
}

std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string out;
  for (const std::string& i : items) {
    out += (out.empty() ? "" : sep) + i;
  }
  return out;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(sep, start);
    std::string item = text.substr(start, end == std::string::npos ? end : end - start);
    if (!item.empty()) {
      out.push_back(item);
    }
    if (end == std::string::npos) {
      break;
    }
    start = end + 1;
  }
  return out;
}

bool unreadable(const Model& m, const std::string& resource) {
  return m.snapshot->unreadable.contains(resource);
}

}  // namespace

void check_worker_ids(const Model& m, std::vector<Finding>& out) {
  for (const auto& [key, s] : m.slices) {
    std::map<std::string, std::vector<std::string>> by_id;  // TPU_WORKER_ID -> Pods
    for (const Worker* w : s.workers) {
      if (w->row.has_env) {
        by_id[first_env(*w, std::string(keys::kWorkerId))].push_back(w->name);
      }
    }
    for (const auto& [id, pods] : by_id) {
      if (pods.size() > 1) {
        Finding f = finding(kDuplicateWorkerId, s, s.replica);
        f.message = slice_name(s) + ": TPU_WORKER_ID " + id + " is on " +
                    std::to_string(pods.size()) + " Pods (" + join(pods) +
                    "); each host of a slice needs its own id";
        for (const std::string& p : pods) {
          f.evidence.push_back("Pod " + p + ": TPU_WORKER_ID=" + id);
        }
        f.command = group_pods(s);
        out.push_back(std::move(f));
      }
    }
    int with_env = 0;
    for (const auto& [id, pods] : by_id) {
      with_env += static_cast<int>(pods.size());
    }
    if (s.hosts <= 1 || with_env < s.hosts) {
      continue;  // Pods still to come are pending, not missing
    }
    std::vector<std::string> missing;
    for (int i = 0; i < s.hosts; ++i) {
      if (!by_id.contains(std::to_string(i))) {
        missing.push_back(std::to_string(i));
      }
    }
    if (!missing.empty()) {
      Finding f = finding(kMissingWorkerId, s, s.replica);
      f.message = slice_name(s) + " has " + std::to_string(with_env) + " Pods for " +
                  std::to_string(s.hosts) + " hosts, but no Pod has TPU_WORKER_ID " + join(missing);
      for (const Worker* w : s.workers) {
        f.evidence.push_back("Pod " + w->name + ": TPU_WORKER_ID=" + w->row.worker_id);
      }
      f.command = group_pods(s);
      out.push_back(std::move(f));
    }
  }
}

namespace {

const Worker* pod_with_hostname(const Model& m, const std::string& ns, const std::string& host,
                                const std::string& subdomain) {
  for (const Worker& w : m.workers) {
    if (w.ns == ns && w.row.hostname == host && (subdomain.empty() || w.subdomain == subdomain)) {
      return &w;
    }
  }
  return nullptr;
}

const json* service_named(const Model& m, const std::string& ns, const std::string& name) {
  for (const json& svc : m.snapshot->services) {
    const json* md = member(svc, "metadata");
    if (string_member(md, "namespace") == ns && string_member(md, "name") == name) {
      return &svc;
    }
  }
  return nullptr;
}

bool publishes_not_ready(const json* svc) {
  const json* p = member(member(svc, "spec"), "publishNotReadyAddresses");
  return p != nullptr && p->is_boolean() && p->get<bool>();
}

// Why `entry` of a TPU_WORKER_HOSTNAMES does not resolve, or "" when it does.
std::string unresolved(const Model& m, const std::string& ns, const std::string& entry) {
  std::size_t dot = entry.find('.');
  std::string host = entry.substr(0, dot);
  std::string subdomain = dot == std::string::npos ? "" : entry.substr(dot + 1);
  subdomain = subdomain.substr(0, subdomain.find('.'));
  const Worker* w = pod_with_hostname(m, ns, host, subdomain);
  if (w == nullptr) {
    return entry + ": no Pod has hostname " + host +
           (subdomain.empty() ? "" : " and subdomain " + subdomain);
  }
  const json* svc = service_named(m, ns, w->subdomain);
  if (!w->row.ready && svc != nullptr && !publishes_not_ready(svc)) {
    return entry + ": Pod " + w->name + " is not Ready and Service " + w->subdomain +
           " does not publish not-ready addresses";
  }
  return "";
}

}  // namespace

void check_hostnames(const Model& m, std::vector<Finding>& out) {
  for (const auto& [key, s] : m.slices) {
    std::set<std::string> seen;
    std::vector<std::string> bad;
    for (const Worker* w : s.workers) {
      for (const std::string& entry :
           split(first_env(*w, std::string(keys::kWorkerHostnames)), ',')) {
        if (seen.insert(entry).second) {
          if (std::string why = unresolved(m, s.ns, entry); !why.empty()) {
            bad.push_back(why);
          }
        }
      }
    }
    if (bad.empty()) {
      continue;
    }
    Finding f = finding(kUnresolvedHostname, s, s.replica);
    f.message = slice_name(s) + ": " + std::to_string(bad.size()) +
                " of the hosts in TPU_WORKER_HOSTNAMES will not resolve, so the slice cannot "
                "initialize";
    f.evidence = bad;
    f.command = group_selector(s) +
                " -o custom-columns=NAME:.metadata.name,HOSTNAME:.spec.hostname,"
                "SUBDOMAIN:.spec.subdomain,READY:.status.conditions[?(@.type==\"Ready\")].status";
    out.push_back(std::move(f));
  }
}

}  // namespace tpuslice::detail

namespace tpuslice::detail {
namespace {

bool selects(const json& svc, const json& pod) {
  const json* selector = member(member(svc, "spec"), "selector");
  if (selector == nullptr || !selector->is_object() || selector->empty()) {
    return false;
  }
  const json* labels = member(member(pod, "metadata"), "labels");
  for (const auto& [k, v] : selector->items()) {
    if (!v.is_string() || string_member(labels, k) != v.get<std::string_view>()) {
      return false;
    }
  }
  return true;
}

// The Services labelled as `cluster`'s headless worker Service.
std::vector<std::string> labelled_services(const Model& m, const std::string& ns,
                                           const std::string& cluster) {
  std::vector<std::string> out;
  for (const json& svc : m.snapshot->services) {
    const json* md = member(svc, "metadata");
    if (string_member(md, "namespace") == ns &&
        string_member(member(md, "labels"), keys::kHeadlessServiceLabel) == cluster) {
      out.emplace_back(string_member(md, "name").value_or(""));
    }
  }
  return out;
}

// What is wrong with the Service the Pods of one cluster name as their subdomain, or "".
std::string service_problem(const Model& m, const Slice& s, const std::string& subdomain,
                            std::vector<std::string>& evidence) {
  const json* svc = service_named(m, s.ns, subdomain);
  if (svc == nullptr) {
    std::vector<std::string> labelled = labelled_services(m, s.ns, s.cluster);
    if (!labelled.empty()) {
      return "the Pods' subdomain is " + subdomain +
             " but the cluster's headless Service is "
             "named " +
             join(labelled) + ", so their hostnames do not resolve";
    }
    return "the Pods' subdomain names Service " + subdomain + ", which does not exist";
  }
  if (string_member(member(*svc, "spec"), "clusterIP") != std::string_view("None")) {
    return "Service " + subdomain +
           " is not headless (spec.clusterIP is not None), so it "
           "publishes no per-Pod DNS names";
  }
  for (const Worker& w : m.workers) {
    if (w.ns == s.ns && w.cluster == s.cluster && w.subdomain == subdomain &&
        !selects(*svc, *w.pod)) {
      evidence.push_back("Pod " + w.name + " is not selected by Service " + subdomain);
    }
  }
  return evidence.empty() ? ""
                          : "Service " + subdomain + " does not select " +
                                std::to_string(evidence.size()) + " of the worker Pods";
}

}  // namespace

void check_headless_services(const Model& m, std::vector<Finding>& out) {
  if (unreadable(m, "services")) {
    return;
  }
  std::set<std::tuple<std::string, std::string, std::string>> done;  // ns, cluster, subdomain
  for (const auto& [key, s] : m.slices) {
    for (const Worker* w : s.workers) {
      if (w->subdomain.empty() || !done.insert({s.ns, s.cluster, w->subdomain}).second) {
        continue;
      }
      Finding f = finding(kHeadlessService, s, -1);
      f.group.clear();
      std::string problem = service_problem(m, s, w->subdomain, f.evidence);
      if (problem.empty()) {
        continue;
      }
      f.message = "RayCluster " + s.ns + "/" + s.cluster + ": " + problem;
      f.command = "kubectl get services -n " + s.ns + " -l " +
                  std::string(keys::kHeadlessServiceLabel) + "=" + s.cluster + " -o wide";
      out.push_back(std::move(f));
    }
  }
}

namespace {

// One line per env value the webhook would set otherwise; `names` gets each name once.
std::vector<std::string> env_differences(const Worker& w, std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < w.envs.size() && i < w.wanted.size(); ++i) {
    for (const auto& [name, value] : w.wanted[i]) {
      auto have = w.envs[i].find(name);
      if ((have == w.envs[i].end() || have->second != value) &&
          std::find(names.begin(), names.end(), name) == names.end()) {
        names.push_back(name);
      }
      if (have == w.envs[i].end()) {
        out.push_back(name + " is unset; the webhook would set " + webhook::quote(value));
      } else if (have->second != value) {
        out.push_back(name + " is " + webhook::quote(have->second) + "; the webhook would set " +
                      webhook::quote(value));
      }
    }
  }
  return out;
}

std::string not_sent_reason(const Worker& w) {
  const json* labels = member(member(*w.pod, "metadata"), "labels");
  if (string_member(labels, keys::kAppNameLabel) != keys::kAppNameValue) {
    return "it lacks the label " + std::string(keys::kAppNameLabel) + "=" +
           std::string(keys::kAppNameValue) + " the webhook's objectSelector requires";
  }
  return "it was created while the webhook was not in its path (down, or its "
         "MutatingWebhookConfiguration missing)";
}

}  // namespace

void check_env(const Model& m, std::vector<Finding>& out) {
  for (const auto& [key, s] : m.slices) {
    for (const Worker* w : s.workers) {
      std::string pod = "Pod " + w->ns + "/" + w->name;
      Finding f = finding(kEnvDiffers, s, s.replica);
      f.command = "kubectl delete pod -n " + w->ns + " " + w->name +
                  "   # KubeRay recreates it and the webhook sets its env";
      if (!w->row.has_env) {
        f.check = kNoWebhookEnv;
        f.message =
            pod + " has no TPU_WORKER_ID: the webhook never mutated it; " + not_sent_reason(*w);
        f.evidence.push_back(pod +
                             ": no TPU_WORKER_ID, TPU_WORKER_HOSTNAMES or TPU_NAME in its "
                             "TPU containers");
      } else if (!w->denial.empty()) {
        f.message = pod + ": the webhook would deny this Pod now: " + w->denial;
        f.command = "webhook-dryrun --explain pod.yaml   # after kubectl get pod -n " + w->ns +
                    " " + w->name + " -o yaml > pod.yaml";
      } else {
        std::vector<std::string> names;
        f.evidence = env_differences(*w, names);
        if (f.evidence.empty()) {
          continue;
        }
        f.message =
            pod + ": its env differs from what the webhook would set now (" + join(names) + ")";
      }
      out.push_back(std::move(f));
    }
  }
}

void check_node_pools(const Model& m, std::vector<Finding>& out) {
  for (const auto& [key, s] : m.slices) {
    std::set<std::string> pools;
    std::vector<std::string> evidence;
    for (const Worker* w : s.workers) {
      if (!w->row.node_pool.empty()) {
        pools.insert(w->row.node_pool);
        evidence.push_back("Pod " + w->name + ": node pool " + w->row.node_pool + " (from " +
                           (w->row.pool_from == "node" ? "Node " + w->row.node : "nodeSelector") +
                           ")");
      }
    }
    if (pools.size() < 2) {
      continue;
    }
    Finding f = finding(kSplitNodePools, s, s.replica);
    f.message = slice_name(s) + " is split over " + std::to_string(pools.size()) + " node pools (" +
                join({pools.begin(), pools.end()}) +
                "); the hosts of one slice must be in one TPU node pool";
    f.evidence = std::move(evidence);
    f.command = "kubectl get nodes -L " + std::string(keys::kGkeNodePool) + "," +
                std::string(keys::kTopologySelector);
    out.push_back(std::move(f));
  }
}

}  // namespace tpuslice::detail

namespace tpuslice::detail {
namespace {

// The PodScheduled=False condition's message when it speaks of affinity, else "".
std::string affinity_message(const json& pod) {
  if (string_member(member(pod, "status"), "phase") != std::string_view("Pending")) {
    return "";
  }
  const json* conditions = member(member(pod, "status"), "conditions");
  for (const json& c :
       conditions != nullptr && conditions->is_array() ? *conditions : json::array()) {
    if (string_member(&c, "type") != std::string_view("PodScheduled") ||
        string_member(&c, "status") != std::string_view("False")) {
      continue;
    }
    std::string message(string_member(&c, "message").value_or(""));
    std::string lower = message;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (lower.find("affinity") != std::string::npos) {
      return message;
    }
  }
  return "";
}

}  // namespace

void check_affinity_pending(const Model& m, std::vector<Finding>& out) {
  for (const auto& [key, s] : m.slices) {
    for (const Worker* w : s.workers) {
      std::string why = affinity_message(*w->pod);
      if (why.empty()) {
        continue;
      }
      Finding f = finding(kAffinityPending, s, s.replica);
      f.message = "Pod " + w->ns + "/" + w->name +
                  " is Pending: the scheduler finds no node that satisfies the slice's pod "
                  "affinity (its peers' node pool or topology has no free TPU host)";
      f.evidence.push_back("PodScheduled=False: " + why);
      f.command = "kubectl describe pod -n " + w->ns + " " + w->name;
      out.push_back(std::move(f));
    }
  }
}

namespace {

// Per value of `name`, the Pods of one group that carry it.
std::map<std::string, std::vector<std::string>> values_of(const std::vector<const Worker*>& group,
                                                          const std::string& name) {
  std::map<std::string, std::vector<std::string>> out;
  for (const Worker* w : group) {
    out[first_env(*w, name)].push_back(w->name);
  }
  return out;
}

void megascale_group(const std::vector<const Worker*>& group, std::vector<Finding>& out) {
  std::vector<std::string> evidence;
  for (const char* name : {"MEGASCALE_NUM_SLICES", "MEGASCALE_COORDINATOR_ADDRESS"}) {
    auto values = values_of(group, name);
    if (values.size() > 1) {
      for (const auto& [value, pods] : values) {
        evidence.push_back(std::string(name) + "=" + webhook::quote(value) + " on " + join(pods));
      }
    }
  }
  std::map<std::string, std::set<int>> slice_ids;  // MEGASCALE_SLICE_ID -> replicas
  for (const Worker* w : group) {
    slice_ids[first_env(*w, "MEGASCALE_SLICE_ID")].insert(w->replica);
  }
  for (const auto& [id, replicas] : slice_ids) {
    if (replicas.size() > 1) {
      std::vector<std::string> r;
      for (int i : replicas) {
        r.push_back(std::to_string(i));
      }
      evidence.push_back("MEGASCALE_SLICE_ID=" + webhook::quote(id) + " on replicas " + join(r));
    }
  }
  if (evidence.empty()) {
    return;
  }
  const Worker& w = *group.front();
  Finding f{kMegascaleMismatch, w.ns, w.cluster, w.group, -1, "", std::move(evidence), ""};
  f.message = "group " + w.ns + "/" + w.cluster + " " + w.group +
              ": the MEGASCALE_* values of its slices disagree, so the multi-slice job cannot "
              "form";
  f.command = "kubectl get pods -n " + w.ns + " -l ray.io/cluster=" + w.cluster +
              ",ray.io/group=" + w.group +
              " -o custom-columns=NAME:.metadata.name,ENV:.spec.containers[*].env[*].value";
  out.push_back(std::move(f));
}

}  // namespace

void check_megascale(const Model& m, std::vector<Finding>& out) {
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<const Worker*>> groups;
  for (const Worker& w : m.workers) {
    if (w.row.has_env && w.replica >= 0 && !first_env(w, "MEGASCALE_NUM_SLICES").empty()) {
      groups[{w.ns, w.cluster, w.group}].push_back(&w);
    }
  }
  for (const auto& [key, group] : groups) {
    megascale_group(group, out);
  }
}

namespace {

// The message of a container status that says execve failed with E2BIG, or "".
std::string exec_too_long(const json& status) {
  for (const json* state :
       {member(status, "state", "waiting"), member(status, "state", "terminated"),
        member(status, "lastState", "terminated")}) {
    std::string message(string_member(state, "message").value_or(""));
    std::string lowered = message;
    std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lowered.find("argument list too long") != std::string::npos) {
      return message;
    }
  }
  return {};
}

// The container's longest literal env entries, as "NAME=value" bytes with the NUL.
std::vector<std::string> longest_env(const json& pod, std::string_view container) {
  std::vector<std::pair<std::size_t, std::string>> sizes;
  const json* containers = member(pod, "spec", "containers");
  for (std::size_t i = 0; containers != nullptr && containers->is_array() && i < containers->size();
       ++i) {
    const json& c = (*containers)[i];
    const json* env = member(c, "env");
    if (string_member(&c, "name").value_or("") != container || env == nullptr || !env->is_array()) {
      continue;
    }
    for (const json& e : *env) {
      std::string name(string_member(&e, "name").value_or(""));
      std::size_t value = string_member(&e, "value").value_or("").size();
      sizes.emplace_back(name.size() + value + 2, name);
    }
  }
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < sizes.size() && i < 3; ++i) {
    out.push_back(sizes[i].second + ": " + std::to_string(sizes[i].first) + " bytes");
  }
  return out;
}

}  // namespace

// A container that could not exec because its environment or arguments were too long (E2BIG,
// "argument list too long"): Linux's limit of 131,072 bytes for one "NAME=value" string
// (docs/spec.md M8.1).
void check_exec_failures(const Model& m, std::vector<Finding>& out) {
  for (const auto& [key, s] : m.slices) {
    for (const Worker* w : s.workers) {
      const json* statuses = member(member(*w->pod, "status"), "containerStatuses");
      for (std::size_t i = 0; statuses != nullptr && statuses->is_array() && i < statuses->size();
           ++i) {
        const json& st = (*statuses)[i];
        std::string message = exec_too_long(st);
        if (message.empty()) {
          continue;
        }
        std::string container(string_member(&st, "name").value_or(""));
        Finding f = finding(kArgListTooLong, s, s.replica);
        f.message = "Pod " + w->ns + "/" + w->name + " container " + container +
                    " cannot start: \"argument list too long\" (E2BIG): one of its environment "
                    "strings is over Linux's limit of 131,072 bytes for NAME=value; a webhook "
                    "that follows docs/spec.md M8 leaves TORCH_TPU_SLICEBUILDER_ADDRESSES out "
                    "and refuses host lists over the limit: upgrade it, shorten the worker group "
                    "and RayCluster names if it refuses them, then delete the Pods so KubeRay "
                    "recreates them";
        f.evidence.push_back("Pod " + w->name + " container " + container + ": " + message);
        for (const std::string& e : longest_env(*w->pod, container)) {
          f.evidence.push_back("Pod " + w->name + " env " + e);
        }
        f.command = "kubectl delete pods -n " + s.ns + " -l ray.io/cluster=" + s.cluster +
                    ",ray.io/group=" + s.group + "   # once the webhook is upgraded";
        out.push_back(std::move(f));
      }
    }
  }
}

void check_webhook_endpoints(const Snapshot& s, std::vector<Finding>& out) {
  if (s.unreadable.contains("endpointslices")) {
    return;
  }
  int ready = 0;
  int total = 0;
  for (const json& slice : s.endpointslices) {
    const json* endpoints = member(slice, "endpoints");
    for (const json& e :
         endpoints != nullptr && endpoints->is_array() ? *endpoints : json::array()) {
      ++total;
      const json* r = member(member(e, "conditions"), "ready");
      ready += r == nullptr || r->is_null() || (r->is_boolean() && r->get<bool>()) ? 1 : 0;
    }
  }
  if (ready > 0) {
    return;
  }
  std::string svc = s.webhook_namespace + "/" + kWebhookService;
  Finding f;
  f.check = kWebhookEndpoints;
  f.ns = s.webhook_namespace;
  f.message = "the webhook's Service " + svc +
              " has no ready endpoints: TPU worker Pods created "
              "now get no TPU env (or are refused, with failurePolicy Fail)";
  f.evidence.push_back(std::to_string(s.endpointslices.size()) + " EndpointSlices, " +
                       std::to_string(total) + " endpoints, none ready");
  f.command = "kubectl get endpointslices -n " + s.webhook_namespace +
              " -l kubernetes.io/service-name=" + kWebhookService + " -o yaml";
  out.push_back(std::move(f));
}

}  // namespace tpuslice::detail
