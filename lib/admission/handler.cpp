#include "admission/handler.h"

#include "base/text/text.h"
#include "podpatch/affinity.h"
#include "podpatch/keys.h"
#include "podpatch/mutate.h"
#include "podpatch/patch.h"
#include "podpatch/placement.h"
#include "podpatch/pod_view.h"
#include "podpatch/validate.h"
#include "topology/slice.h"

namespace admission {
namespace {

namespace keys = podpatch::keys;
using podpatch::Placement;
using podpatch::PlacementPath;
using podpatch::PodView;

// How denial messages name a Pod: its name, else generateName (KubeRay's Pods have no name
// yet), and namespace; read from the raw object when the Pod could not be viewed.
std::string pod_id(const Request& req, const PodView* view) {
  const json* md = webhook::member(req.object, "metadata");
  std::string name = view != nullptr ? view->display_name() : "";
  if (name.empty()) {
    auto n = webhook::string_member(md, "name");
    auto g = webhook::string_member(md, "generateName");
    name = n && !n->empty() ? std::string(*n) : g && !g->empty() ? std::string(*g) : req.name;
  }
  std::string ns = req.ns.empty() ? std::string(webhook::string_member(md, "namespace").value_or(""))
                                  : req.ns;
  return "Pod " + webhook::quote(name.empty() ? "(no name)" : name) +
         (ns.empty() ? "" : " in namespace " + webhook::quote(ns)) + ": ";
}

Response deny_pod(const Request& req, const PodView* view, webhook::Error error,
                  std::string reason) {
  error.message = pod_id(req, view) + error.message;
  return denied(req.uid, error, std::move(reason));
}

// Collects --explain lines when asked; free otherwise.
class Notes {
 public:
  explicit Notes(std::vector<std::string>* out) : out_(out) {}
  bool on() const { return out_ != nullptr; }
  void add(std::string line) {
    if (out_ != nullptr) {
      out_->push_back(std::move(line));
    }
  }

 private:
  std::vector<std::string>* out_;
};

std::string_view path_story(PlacementPath path) {
  switch (path) {
    case PlacementPath::kLabels:
      return "from KubeRay's labels ray.io/worker-group-replica-index and "
             "ray.io/replica-host-index (M3.1)";
    case PlacementPath::kReplicaLabel:
      return "from KubeRay's label ray.io/worker-group-replica-index; a single-host slice has "
             "host 0 (M3.2)";
    case PlacementPath::kAlreadyPlaced:
      return "kept from the Pod's own replicaIndex label and TPU_WORKER_ID (already placed)";
    case PlacementPath::kLegacy:
      return "chosen from the group's existing Pods: lowest replica with a free host, then the "
             "lowest free host (legacy placement, M3.3)";
  }
  return "";
}

}  // namespace

Response Handler::mutate(const Request& req, std::vector<std::string>* explain) const {
  Notes notes(explain);
  // M1 scope.
  if (req.kind != "Pod" || !req.group.empty()) {
    return denied(req.uid,
                  webhook::invalid_argument(
                      "the /mutate webhook handles v1 Pods, but this request is for kind " +
                      webhook::quote(req.group.empty() ? req.kind : req.group + "/" + req.kind) +
                      "; point the MutatingWebhookConfiguration's rules at pods only"),
                  "wrong_kind");
  }
  if (req.operation != "CREATE") {
    return allowed(req.uid);
  }
  webhook::Result<PodView> view = PodView::create(req.object);
  if (!view) {
    return deny_pod(req, nullptr, view.error(), "malformed_pod");
  }
  if (!view->is_tpu_pod()) {
    notes.add("not a TPU Pod: no container requests google.com/tpu, so nothing changes (M1)");
    return allowed(req.uid);
  }
  // M2 required facts.
  std::optional<podpatch::GroupKey> key = podpatch::group_key(*view, req.ns);
  if (!key) {
    std::string_view missing = view->label(keys::kClusterLabel).value_or("").empty()
                                   ? keys::kClusterLabel
                                   : keys::kGroupLabel;
    return deny_pod(req, &*view,
                    webhook::invalid_argument(
                        "label " + std::string(missing) +
                        " is missing; KubeRay sets it on every worker Pod, so create TPU workers "
                        "through a RayCluster (or add the label)"),
                    "missing_label");
  }
  std::optional<podpatch::TopologyField> topo = view->topology();
  if (!topo) {
    return deny_pod(req, &*view,
                    webhook::invalid_argument(
                        "nodeSelector " + std::string(keys::kTopologySelector) +
                        " is missing; set the TPU slice topology (such as 4x4 or 2x2x2) in the "
                        "worker group's template"),
                    "missing_topology");
  }
  webhook::Result<topology::Slice> slice = topology::Slice::create(
      {view->accelerator(), topo->value, view->chips_per_host()});
  if (!slice) {
    bool topology_error = slice.error().code == webhook::ErrorCode::kInvalidArgument;
    webhook::Error e = slice.error();
    e.message = std::string(topo->field) + ": " + e.message;
    return deny_pod(req, &*view, e, topology_error ? "invalid_topology" : "invalid_chips");
  }
  if (notes.on()) {
    const auto& d = slice->shape().dims3();
    notes.add("topology: " + std::string(topo->value) + " (" + std::string(topo->field) + ")");
    notes.add("chips: " + std::to_string(d[0]) + " x " + std::to_string(d[1]) + " x " +
              std::to_string(d[2]) + " = " + std::to_string(slice->chips()));
    std::string per;
    for (const podpatch::TpuContainer& t : view->tpu_containers()) {
      per += (per.empty() ? "" : " + ") + std::to_string(t.chips) + " (" + std::string(t.name) + ")";
    }
    notes.add("chips per host: google.com/tpu " + per + " = " +
              std::to_string(slice->chips_per_host()));
    notes.add("hosts: max(" + std::to_string(slice->chips()) + " / " +
              std::to_string(slice->chips_per_host()) + ", 1) = " +
              std::to_string(slice->hosts()) +
              (slice->multi_host() ? " (multi-host)" : " (single-host)"));
    notes.add("accelerator: " + webhook::quote(slice->accelerator()) + " -> " +
              std::to_string(slice->chiplets()) + " device(s) per chip, " +
              std::to_string(slice->devices_per_host()) + " per host, " +
              std::to_string(slice->total_devices()) + " in the slice");
  }
  // docs/spec.md Terms "Headless Service name": the live one wins.
  std::string svc;
  std::string svc_story;
  if (std::optional<std::string> live = services_.headless_service(key->ns, key->cluster)) {
    svc = *live;
    svc_story = "the Service labelled ray.io/headless-worker-svc=" + key->cluster;
  } else {
    svc = topology::headless_service_name(key->cluster, config_.kuberay);
    svc_story = config_.kuberay.legacy_headless_service()
                    ? "KubeRay " + config_.kuberay.text() +
                          " names it CheckName(<cluster>-headless-worker-svc)"
                    : "KubeRay >= 1.4 names it <cluster>-headless";
  }
  bool dns = podpatch::needs_pod_dns(*view, *slice);
  if (dns && !topology::is_dns1123_label(svc)) {
    return deny_pod(req, &*view,
                    webhook::invalid_argument(
                        "headless Service name " + webhook::quote(svc) + " (from RayCluster " +
                        webhook::quote(key->cluster) +
                        ") is not a DNS label (at most 63 lowercase letters, digits and '-'), so "
                        "it cannot be the Pod's subdomain; shorten or rename the RayCluster"),
                    "invalid_name");
  }
  if (dns && !topology::is_dns1123_label(topology::host_name(key->group, 0, slice->hosts() - 1))) {
    return deny_pod(req, &*view,
                    webhook::invalid_argument(
                        "worker group name " + webhook::quote(key->group) + " gives hostnames such as " +
                        webhook::quote(topology::host_name(key->group, 0, slice->hosts() - 1)) +
                        " that are not DNS labels (at most 63 lowercase letters, digits and "
                        "'-'); rename the worker group"),
                    "invalid_name");
  }
  // M4 topology key, checked before any slot is reserved.
  std::string topology_key;
  if (slice->multi_host()) {
    topology_key = podpatch::default_topology_key(*view);
    if (view->annotation(keys::kSubsliceAnnotation) && !view->kueue_managed()) {
      std::optional<std::vector<podpatch::Labels>> nodes =
          nodes_.nodes_matching(podpatch::to_labels(view->node_selector_object()));
      if (nodes && !nodes->empty()) {
        std::optional<std::string_view> sub = podpatch::subslice_topology_key(*nodes, slice->hosts());
        if (!sub) {
          return deny_pod(
              req, &*view,
              webhook::failed_precondition(
                  "ambiguous subslice: no TPU host, subblock, block or node pool among the " +
                  std::to_string(nodes->size()) + " Nodes matching its nodeSelector has exactly " +
                  std::to_string(slice->hosts()) + " Nodes"),
              "subslice_ambiguous");
        }
        topology_key = *sub;
      }
    }
  }
  // M3 placement.
  webhook::Result<std::optional<Placement>> labelled =
      podpatch::placement_from_labels(*view, slice->hosts());
  if (!labelled) {
    return deny_pod(req, &*view, labelled.error(), "invalid_index_label");
  }
  std::optional<Placement> placement = *labelled;
  if (!placement) {
    if (std::optional<podpatch::Slot> recorded = podpatch::recorded_slot(*view)) {
      placement = Placement{*recorded, PlacementPath::kAlreadyPlaced};
    }
  }
  std::vector<std::string> warnings = slice->advisories();
  if (!placement) {
    webhook::Result<podpatch::Slot> slot = pods_.place(podpatch::PlaceRequest{
        *key, slice->hosts(), req.dry_run, view->display_name(), req.uid});
    if (!slot) {
      return deny_pod(req, &*view, slot.error(),
                      slot.error().code == webhook::ErrorCode::kAlreadyExists
                          ? "slot_conflict"
                          : "placement_unavailable");
    }
    placement = Placement{*slot, PlacementPath::kLegacy};
    warnings.push_back(
        "placed as replica " + std::to_string(slot->replica) + " host " +
        std::to_string(slot->host) +
        " from the group's existing Pods because the Pod has no KubeRay index labels; enable "
        "KubeRay's RayMultiHostIndexing feature gate (KubeRay >= 1.5) for stateless placement");
  }
  notes.add("placement: replica " + std::to_string(placement->slot.replica) + ", host " +
            std::to_string(placement->slot.host) + ", " + std::string(path_story(placement->path)));
  notes.add("headless Service: " + svc + " (" + svc_story + ")");

  podpatch::MutationPlan plan;
  plan.slice = &*slice;
  plan.slot = placement->slot;
  plan.svc = svc;
  plan.topology_key = topology_key;
  plan.ports = config_.ports;
  plan.add_replica_label = placement->path == PlacementPath::kLegacy ||
                           placement->path == PlacementPath::kAlreadyPlaced ||
                           (placement->path == PlacementPath::kLabels &&
                            !view->label(keys::kReplicaNameLabel));
  // Only the parts the mutation may change are copied and diffed (M6: the same patch as the
  // diff of the whole Pods).
  json before = podpatch::mutable_parts(req.object);
  json mutated = before;
  std::vector<std::string> changed = podpatch::mutate(mutated, *view, plan);
  warnings.insert(warnings.end(), changed.begin(), changed.end());
  if (notes.on()) {
    std::string group = key->group;
    if (dns) {
      notes.add("hostname: " + topology::host_name(group, plan.slot.replica, plan.slot.host) +
                "." + svc + " (<group>-<replica>-<host>.<service>)");
    }
    if (slice->multi_host()) {
      notes.add("affinity: Pods of this replica share " + topology_key +
                "; other replicas and clusters are kept off it (M4)");
    }
    for (const podpatch::TpuContainer& t : view->tpu_containers()) {
      notes.add("container " + webhook::quote(t.name) + ":");
      if (const json* env = webhook::member(mutated["spec"]["containers"][static_cast<std::size_t>(t.index)], "env")) {
        for (const json& e : *env) {
          std::string_view name = webhook::string_member(&e, "name").value_or("");
          if (name.starts_with("TPU_") || name.starts_with("TORCH_TPU_") ||
              name.starts_with("MEGASCALE_")) {
            const json* v = webhook::member(e, "value");
            notes.add("  " + std::string(name) + "=" +
                      (v != nullptr && v->is_string() ? v->get<std::string>()
                                                      : "(valueFrom)"));
          }
        }
      }
    }
  }
  Response out = patched(req.uid, podpatch::diff(before, mutated));
  out.warnings = std::move(warnings);
  out.placement = placement;
  return out;
}

Response Handler::validate(const Request& req) const {
  // V1 scope.
  if (req.kind != "RayCluster" || req.group != "ray.io") {
    return denied(req.uid,
                  webhook::invalid_argument(
                      "the /validate webhook handles ray.io RayClusters, but this request is for "
                      "kind " +
                      webhook::quote(req.group.empty() ? req.kind : req.group + "/" + req.kind) +
                      "; point the ValidatingWebhookConfiguration's rules at rayclusters only"),
                  "wrong_kind");
  }
  if (req.operation != "CREATE" && req.operation != "UPDATE") {
    return allowed(req.uid);
  }
  if (!req.object.is_object()) {
    return denied(req.uid,
                  webhook::invalid_argument("RayCluster " + webhook::quote(req.name) +
                                            ": request.object must be a RayCluster object"),
                  "malformed_object");
  }
  // An UPDATE that leaves the spec as it was (labels, annotations, finalizers) or touches a
  // RayCluster being deleted is not blocked: denying it could keep a cluster admitted before
  // this webhook from ever being cleaned up.
  if (req.operation == "UPDATE") {
    const json* deleting = webhook::member(req.object, "metadata", "deletionTimestamp");
    const json* spec = webhook::member(req.object, "spec");
    const json* old_spec = webhook::member(req.old_object, "spec");
    if ((deleting != nullptr && !deleting->is_null()) ||
        (spec != nullptr && old_spec != nullptr && *spec == *old_spec)) {
      return allowed(req.uid);
    }
  }
  podpatch::ClusterVerdict verdict = podpatch::validate_raycluster(req.object, nodes_, req.ns);
  Response out = verdict.denial ? denied(req.uid, *verdict.denial, verdict.reason)
                                : allowed(req.uid);
  out.warnings = std::move(verdict.warnings);
  return out;
}

}  // namespace admission
