#include "tpuslice/inspect.h"

#include <algorithm>
#include <set>

#include "admission/review.h"
#include "base/json/access.h"
#include "kube/listed_cluster.h"
#include "podpatch/keys.h"
#include "podpatch/pod_view.h"
#include "tpuslice/model.h"

namespace tpuslice {
namespace detail {

std::string first_env(const Worker& w, const std::string& name) {
  if (w.envs.empty()) {
    return "";
  }
  auto it = w.envs.front().find(name);
  return it == w.envs.front().end() ? "" : it->second;
}

}  // namespace detail

namespace {

namespace keys = podpatch::keys;
using detail::Env;
using detail::Model;
using detail::Worker;
using webhook::member;
using webhook::string_member;

std::string text_at(const json& object, std::string_view a, std::string_view b) {
  return std::string(string_member(member(object, a), b).value_or(""));
}

std::vector<Env> tpu_envs(const json& pod, const podpatch::PodView& view) {
  std::vector<Env> out;
  const json* containers = member(member(pod, "spec"), "containers");
  for (const podpatch::TpuContainer& c : view.tpu_containers()) {
    Env env;
    const json* list = containers == nullptr
                           ? nullptr
                           : member(containers->at(static_cast<std::size_t>(c.index)), "env");
    for (const json& e : list != nullptr && list->is_array() ? *list : json::array()) {
      std::optional<std::string_view> name = string_member(&e, "name");
      if (name) {
        env[std::string(*name)] = std::string(string_member(&e, "value").value_or(""));
      }
    }
    out.push_back(std::move(env));
  }
  return out;
}

bool condition_true(const json& pod, std::string_view type) {
  const json* conditions = member(member(pod, "status"), "conditions");
  for (const json& c :
       conditions != nullptr && conditions->is_array() ? *conditions : json::array()) {
    if (string_member(&c, "type") == type) {
      return string_member(&c, "status") == std::string_view("True");
    }
  }
  return false;
}

// The Pod as KubeRay made it, as far as the webhook's answer goes: without the env the webhook
// derives, since it keeps a value it finds (docs/spec.md M5, M7 warns) and would then compute
// nothing. TPU_WORKER_ID stays: with the replicaIndex label it is the Pod's record of its slot
// (M3.3), and a wrong one is replaced (M5.4). MEGASCALE_NUM_SLICES is the user's input.
json as_created(const json& pod) {
  static const std::set<std::string_view> kDerived = {
      keys::kWorkerHostnames,      keys::kProcessAddresses,  keys::kProcessPort,
      keys::kTorchTopology,        keys::kTorchSlicebuilder, keys::kTpuName,
      keys::kDevicePluginHostIp,   keys::kDevicePluginAddr,  keys::kMegascaleSliceId,
      keys::kMegascaleCoordinator, keys::kMegascalePort};
  json out = pod;
  if (!out.is_object() || !out.contains("spec") || !out["spec"].is_object() ||
      !out["spec"].contains("containers") || !out["spec"]["containers"].is_array()) {
    return out;
  }
  for (json& c : out["spec"]["containers"]) {
    if (c.is_object() && c.contains("env") && c["env"].is_array()) {
      json& env = c["env"];
      env.erase(std::remove_if(env.begin(), env.end(),
                               [](const json& e) {
                                 std::optional<std::string_view> n = string_member(&e, "name");
                                 return n && kDerived.contains(*n);
                               }),
                env.end());
    }
  }
  return out;
}

// What the webhook would answer for this Pod now, the rest of the cluster as it is.
void ask_webhook(Worker& w, const Snapshot& s, const admission::Config& config) {
  std::vector<json> existing;
  for (const json& p : s.pods) {
    if (&p != w.pod) {
      existing.push_back(p);
    }
  }
  existing.insert(existing.end(), s.nodes.begin(), s.nodes.end());
  existing.insert(existing.end(), s.services.begin(), s.services.end());
  kube::ListedCluster cluster;
  cluster.list(existing);
  admission::Handler handler(config, cluster.pods(), cluster.nodes(), cluster.services());
  admission::Request req;
  req.uid = "tpu-slice-check";
  req.kind = "Pod";
  req.version = "v1";
  req.operation = "CREATE";
  req.dry_run = true;
  req.ns = w.ns;
  req.name = w.name;
  req.object = as_created(*w.pod);
  admission::PodDecision d;
  admission::Response r = handler.mutate(req, &d);
  if (d.facts) {
    w.hosts = d.facts->slice.hosts();
    w.group = d.facts->key.group;
  }
  if (d.placement) {
    w.replica = d.placement->placement.slot.replica;
    w.host = d.placement->placement.slot.host;
  }
  if (!r.allowed) {
    w.denial = r.message;
    return;
  }
  json mutated = admission::has_patch(r) ? req.object.patch(admission::patch_ops(r)) : req.object;
  if (webhook::Result<podpatch::PodView> view = podpatch::PodView::create(mutated)) {
    w.wanted = tpu_envs(mutated, *view);
  }
}

PodRow pod_row(const Worker& w, const podpatch::PodView& view, const Snapshot& s) {
  const json& pod = *w.pod;
  PodRow row;
  row.name = w.name;
  row.phase = text_at(pod, "status", "phase");
  row.node = text_at(pod, "spec", "nodeName");
  row.hostname = text_at(pod, "spec", "hostname");
  row.ready = condition_true(pod, "Ready");
  for (const json& n : s.nodes) {
    if (!row.node.empty() && text_at(n, "metadata", "name") == row.node) {
      row.node_pool = std::string(
          string_member(member(member(n, "metadata"), "labels"), keys::kGkeNodePool).value_or(""));
      row.pool_from = row.node_pool.empty() ? "" : "node";
    }
  }
  if (row.node_pool.empty()) {
    row.node_pool = std::string(view.node_selector(keys::kGkeNodePool).value_or(""));
    row.pool_from = row.node_pool.empty() ? "" : "nodeSelector";
  }
  for (const Env& env : w.envs) {
    auto id = env.find(std::string(keys::kWorkerId));
    row.worker_id += (row.worker_id.empty() ? "" : ",") + (id == env.end() ? "-" : id->second);
    row.has_env = row.has_env || id != env.end();
  }
  if (!row.has_env) {
    row.worker_id.clear();
  }
  row.tpu_name = detail::first_env(w, std::string(keys::kTpuName));
  std::optional<podpatch::TopologyField> topo = view.topology();
  row.topology = topo ? std::string(topo->value) : "";
  return row;
}

std::optional<Worker> read_worker(const json& pod, const Snapshot& s,
                                  const InspectOptions& options) {
  webhook::Result<podpatch::PodView> view = podpatch::PodView::create(pod);
  if (!view || !view->is_tpu_pod()) {
    return std::nullopt;
  }
  Worker w;
  w.pod = &pod;
  w.ns = text_at(pod, "metadata", "namespace");
  w.name = text_at(pod, "metadata", "name");
  w.cluster = std::string(view->label(keys::kClusterLabel).value_or(""));
  w.group = std::string(view->label(keys::kGroupLabel).value_or(""));
  w.subdomain = text_at(pod, "spec", "subdomain");
  w.envs = tpu_envs(pod, *view);
  ask_webhook(w, s, options.config);
  w.row = pod_row(w, *view, s);
  return w;
}

Model build_model(const Snapshot& s, const InspectOptions& options) {
  Model m;
  m.snapshot = &s;
  for (const json& pod : s.pods) {
    if (std::optional<Worker> w = read_worker(pod, s, options)) {
      m.workers.push_back(std::move(*w));
    }
  }
  for (const Worker& w : m.workers) {
    detail::Slice& slice = m.slices[{w.ns, w.cluster, w.group, w.replica}];
    slice.ns = w.ns;
    slice.cluster = w.cluster;
    slice.group = w.group;
    slice.replica = w.replica;
    slice.hosts = std::max(slice.hosts, w.hosts);
    slice.workers.push_back(&w);
  }
  for (auto& [key, slice] : m.slices) {
    std::stable_sort(slice.workers.begin(), slice.workers.end(),
                     [](const Worker* a, const Worker* b) {
                       return std::tie(a->host, a->name) < std::tie(b->host, b->name);
                     });
  }
  return m;
}

bool concerns(const Finding& f, const detail::Slice& s) {
  return !f.cluster.empty() && f.check != kAffinityPending && f.ns == s.ns &&
         f.cluster == s.cluster && (f.group.empty() || f.group == s.group) &&
         (f.replica < 0 || f.replica == s.replica);
}

SliceStatus slice_status(const detail::Slice& s, const std::vector<Finding>& findings) {
  SliceStatus out{s.ns, s.cluster, s.group, s.replica, s.hosts, {}, "pending"};
  bool all_ready = true;
  for (const Worker* w : s.workers) {
    out.pods.push_back(w->row);
    all_ready = all_ready && w->row.ready && w->row.phase == "Running";
  }
  if (std::any_of(findings.begin(), findings.end(),
                  [&](const Finding& f) { return concerns(f, s); })) {
    out.verdict = "broken";
  } else if (all_ready && static_cast<int>(s.workers.size()) >= s.hosts) {
    out.verdict = "ready";
  }
  return out;
}

void note_unchecked(const Snapshot& s, std::vector<std::string>& out) {
  static const std::map<std::string, std::string> kWhat = {
      {"rayclusters", "RayClusters (the slices are read from their Pods alone)"},
      {"nodes", "node pools from Nodes (read from each Pod's nodeSelector instead)"},
      {"services", "the headless Services, and whether TPU_WORKER_HOSTNAMES resolve"},
      {"endpointslices", "whether the webhook's Service has ready endpoints"},
  };
  for (const auto& [resource, why] : s.unreadable) {
    auto it = kWhat.find(resource);
    out.push_back((it == kWhat.end() ? resource : it->second) + ": " + why);
  }
}

}  // namespace

Report inspect(const Snapshot& snapshot, const InspectOptions& options) {
  Model m = build_model(snapshot, options);
  Report r;
  detail::check_worker_ids(m, r.findings);
  detail::check_hostnames(m, r.findings);
  detail::check_headless_services(m, r.findings);
  detail::check_env(m, r.findings);
  detail::check_node_pools(m, r.findings);
  detail::check_affinity_pending(m, r.findings);
  detail::check_megascale(m, r.findings);
  detail::check_exec_failures(m, r.findings);
  detail::check_webhook_endpoints(snapshot, r.findings);
  for (const auto& [key, slice] : m.slices) {
    r.slices.push_back(slice_status(slice, r.findings));
  }
  note_unchecked(snapshot, r.unchecked);
  return r;
}

}  // namespace tpuslice
