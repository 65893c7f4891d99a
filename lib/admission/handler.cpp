#include "admission/handler.h"

#include <algorithm>

#include "base/json/access.h"
#include "base/json/write.h"
#include "base/text/text.h"
#include "podpatch/affinity.h"
#include "podpatch/env.h"
#include "podpatch/keys.h"
#include "podpatch/reasons.h"
#include "podpatch/validate.h"

namespace admission {
namespace {

namespace keys = podpatch::keys;
namespace reasons = podpatch::reasons;
using podpatch::Placement;
using podpatch::PlacementPath;
using podpatch::PodView;

webhook::Error wrong_kind(const Request& req, bool pods) {
  return webhook::invalid_argument(
             "the " + std::string(pods ? "/mutate" : "/validate") + " webhook handles " +
             (pods ? "v1 Pods" : "ray.io RayClusters, RayJobs and RayServices") +
             ", but this request is for kind " +
             webhook::quote(req.group.empty() ? req.kind : req.group + "/" + req.kind) +
             "; point the " + (pods ? "Mutating" : "Validating") +
             "WebhookConfiguration's rules at " +
             (pods ? "pods" : "rayclusters, rayjobs and rayservices") + " only")
      .with_reason(reasons::kWrongKind);
}

// A Pod denial names the Pod first: "Pod "<name>" in namespace "<ns>": <what is wrong>".
Response deny_pod(const Request& req, webhook::Error error) {
  std::string ns =
      !req.ns.empty()
          ? req.ns
          : std::string(webhook::string_member(webhook::member(req.object, "metadata"), "namespace")
                            .value_or(""));
  error.message = "Pod " + webhook::quote_bounded(podpatch::pod_name(req.object, req.name)) +
                  (ns.empty() ? "" : " in namespace " + webhook::quote_bounded(ns)) + ": " +
                  error.message;
  return denied(req.uid, error);
}

webhook::Result<PodView> read_pod(const json& object) {
  webhook::Result<PodView> view = PodView::create(object);
  if (!view) {
    return webhook::Error(view.error()).with_reason(reasons::kMalformedPod);
  }
  return view;
}

// Stage "facts" (M2): the worker group, the topology and the slice they make.
webhook::Result<PodFacts> read_facts(const PodView& view, std::string_view request_ns) {
  ASSIGN_OR_RETURN(podpatch::GroupKey key, podpatch::worker_group(view, request_ns));
  std::optional<podpatch::TopologyField> topo = view.topology();
  if (!topo) {
    return webhook::invalid_argument(
               "nodeSelector " + std::string(keys::kTopologySelector) +
               " is missing; set the TPU slice topology (such as 4x4 or 2x2x2) in the worker "
               "group's template")
        .with_reason(reasons::kMissingTopology);
  }
  webhook::Result<topology::Slice> slice =
      topology::Slice::create({view.accelerator(), topo->value, view.chips_per_host()});
  if (!slice) {
    bool malformed = slice.error().code == webhook::ErrorCode::kInvalidArgument;
    webhook::Error e = slice.error();
    e.message = std::string(topo->field) + ": " + e.message;
    return std::move(e).with_reason(malformed ? reasons::kInvalidTopology : reasons::kInvalidChips);
  }
  return PodFacts{std::move(key), *topo, std::move(slice).value()};
}

// A multi-host Pod's placement comes from its labels (M3.1, M3.2), from the slot it was already
// given, or else from legacy placement (M3.3).
webhook::Result<std::optional<Placement>> placement_without_source(const PodView& view, int hosts) {
  webhook::Result<std::optional<Placement>> labelled = podpatch::placement_from_labels(view, hosts);
  if (!labelled) {
    return webhook::Error(labelled.error()).with_reason(reasons::kInvalidIndexLabel);
  }
  if (*labelled) {
    return labelled;
  }
  if (std::optional<podpatch::Slot> recorded = podpatch::recorded_slot(view)) {
    return std::optional<Placement>(Placement{*recorded, PlacementPath::kAlreadyPlaced});
  }
  return std::optional<Placement>();
}

std::string legacy_warning(const podpatch::Slot& slot) {
  return "placed as replica " + std::to_string(slot.replica) + " host " +
         std::to_string(slot.host) +
         " from the group's existing Pods because the Pod has no KubeRay index labels; enable "
         "KubeRay's RayMultiHostIndexing feature gate (KubeRay >= 1.5) for stateless placement";
}

}  // namespace

// Stage "names": the live headless Service wins over the one KubeRay's version would create
// (docs/spec.md Terms); a Pod that gets DNS needs both the Service and its hostnames to be
// DNS labels.
webhook::Result<PodNames> Handler::choose_names(const PodFacts& facts, const PodView& view) const {
  PodNames names;
  const podpatch::GroupKey& key = facts.key;
  names.service =
      podpatch::headless_service(services_, key.ns, key.cluster, config_.kuberay, &names.live);
  names.dns = podpatch::needs_pod_dns(view, facts.slice);
  if (names.dns) {
    RETURN_IF_ERROR(
        podpatch::check_dns_names(names.service, key.cluster, key.group, facts.slice.hosts()));
  }
  return names;
}

// M4: the topology key the replica's affinity shares; a subslice picks the level with exactly
// as many Nodes as the slice has hosts.
webhook::Result<std::string> Handler::topology_key(const PodView& view,
                                                   const PodFacts& facts) const {
  if (!facts.slice.multi_host()) {
    return std::string();
  }
  std::string key = podpatch::default_topology_key(view);
  if (!view.annotation(keys::kSubsliceAnnotation) || view.kueue_managed()) {
    return key;
  }
  std::optional<std::vector<podpatch::Labels>> nodes =
      nodes_.nodes_matching(podpatch::to_labels(view.node_selector_object()));
  if (!nodes || nodes->empty()) {
    return key;
  }
  std::optional<std::string_view> sub =
      podpatch::subslice_topology_key(*nodes, facts.slice.hosts());
  if (!sub) {
    return webhook::failed_precondition(
               "ambiguous subslice: no TPU host, subblock, block or node pool among the " +
               std::to_string(nodes->size()) + " Nodes matching its nodeSelector has exactly " +
               std::to_string(facts.slice.hosts()) + " Nodes")
        .with_reason(reasons::kSubsliceAmbiguous);
  }
  return std::string(*sub);
}

// Stage "placement": the topology key is checked before any slot is reserved (M4), then the slot
// comes from the Pod itself or from the SlotAllocator (M3.3).
webhook::Result<PodPlacement> Handler::choose_placement(const Request& req, const PodView& view,
                                                        const PodFacts& facts) const {
  PodPlacement out;
  ASSIGN_OR_RETURN(out.topology_key, topology_key(view, facts));
  ASSIGN_OR_RETURN(std::optional<Placement> own,
                   placement_without_source(view, facts.slice.hosts()));
  if (own) {
    out.placement = *own;
    return out;
  }
  webhook::Result<podpatch::Slot> slot = pods_.place(podpatch::PlaceRequest{
      facts.key, facts.slice.hosts(), req.dry_run, view.display_name(), req.uid});
  if (!slot) {
    bool conflict = slot.error().code == webhook::ErrorCode::kAlreadyExists;
    return webhook::Error(slot.error())
        .with_reason(conflict ? reasons::kSlotConflict : reasons::kPlacementUnavailable);
  }
  out.placement = Placement{*slot, PlacementPath::kLegacy};
  return out;
}

// Stages facts -> names -> placement -> plan -> patch, for a Pod this webhook
// mutates.
webhook::Result<Response> Handler::mutate_tpu_pod(const Request& req, PodDecision& d) const {
  ASSIGN_OR_RETURN(d.view, read_pod(req.object));
  if (!d.view->is_tpu_pod()) {
    return allowed(req.uid);
  }
  const PodView& view = *d.view;
  ASSIGN_OR_RETURN(d.facts, read_facts(view, req.ns));
  ASSIGN_OR_RETURN(d.names, choose_names(*d.facts, view));
  ASSIGN_OR_RETURN(d.placement, choose_placement(req, view, *d.facts));

  const Placement& placed = d.placement->placement;
  if (d.names->dns && placed.slot.replica > 0) {  // replica 0's names were checked before placing
    RETURN_IF_ERROR(podpatch::check_dns_names(d.names->service, d.facts->key.cluster,
                                              d.facts->key.group, d.facts->slice.hosts(),
                                              placed.slot.replica));
  }
  podpatch::MutationPlan plan;
  plan.slice = &d.facts->slice;
  plan.slot = placed.slot;
  plan.svc = d.names->service;
  plan.topology_key = d.placement->topology_key;
  plan.ports = config_.ports;
  plan.add_replica_label =
      placed.path == PlacementPath::kLegacy || placed.path == PlacementPath::kAlreadyPlaced ||
      (placed.path == PlacementPath::kLabels && !view.label(keys::kReplicaNameLabel));

  std::vector<std::string> warnings = d.facts->slice.advisories();
  if (placed.path == PlacementPath::kLegacy) {
    warnings.push_back(legacy_warning(placed.slot));
  }
  // The patch is written straight from the changes (M6: exactly json::diff of the Pod and its
  // mutated copy, which webhook-dryrun makes when it shows the mutated Pod).
  podpatch::Mutation mutation = podpatch::plan_mutation(view, plan);
  // M8: every value a container can exec, a Pod the API server can store.
  RETURN_IF_ERROR(
      podpatch::check_env_strings(mutation, d.facts->key.group, plan.svc, d.facts->key.cluster));
  std::string patch;
  patch.reserve(2048);
  podpatch::write_patch(view, mutation, patch);
  std::size_t pod_bytes =
      req.body_bytes > 0 ? req.body_bytes : webhook::dump_json(req.object).size();
  RETURN_IF_ERROR(podpatch::check_pod_size(pod_bytes, patch.size(), mutation));
  if (d.record_mutated) {
    d.mutated = podpatch::mutable_parts(req.object);
    podpatch::apply_mutation(d.mutated, mutation);
  }
  warnings.insert(warnings.end(), std::make_move_iterator(mutation.warnings.begin()),
                  std::make_move_iterator(mutation.warnings.end()));
  Response out = patched(req.uid, std::move(patch));
  out.warnings = std::move(warnings);
  for (const podpatch::OmittedEnv& o : mutation.omitted) {
    if (std::find(out.omitted.begin(), out.omitted.end(), o.name) == out.omitted.end()) {
      out.omitted.push_back(o.name);
    }
  }
  out.placement = placed;
  return out;
}

Response Handler::mutate(const Request& req, PodDecision* decision) const {
  Response out = [&] {
    // M1: the endpoint handles one kind; a review of another kind is a configuration mistake.
    if (req.kind != "Pod" || !req.group.empty()) {
      return denied(req.uid, wrong_kind(req, true));
    }
    if (req.operation != "CREATE") {
      return allowed(req.uid);
    }
    PodDecision local;
    local.record_mutated = false;
    webhook::Result<Response> r = mutate_tpu_pod(req, decision != nullptr ? *decision : local);
    return r ? std::move(r).value() : deny_pod(req, r.error());
  }();
  out.audit = true;
  return out;
}

Response Handler::validate(const Request& req) const {
  // V1: RayClusters, and the RayCluster specs of RayJobs and RayServices.
  const podpatch::RayKind* kind = podpatch::find_ray_kind(req.kind);
  if (kind == nullptr || req.group != "ray.io") {
    return denied(req.uid, wrong_kind(req, false));
  }
  if (req.operation != "CREATE" && req.operation != "UPDATE") {
    return allowed(req.uid);
  }
  if (!req.object.is_object()) {
    return denied(req.uid, webhook::invalid_argument(
                               std::string(kind->kind) + " " + webhook::quote_bounded(req.name) +
                               ": request.object must be a " + std::string(kind->kind) + " object")
                               .with_reason(reasons::kMalformedObject));
  }
  webhook::Result<podpatch::RayObject> object =
      podpatch::read_ray_object(req.object, kind->kind, req.ns);
  if (!object) {
    return denied(req.uid, object.error());
  }
  // An UPDATE that leaves the cluster spec as it was (labels, annotations, finalizers, a RayJob's
  // suspend) or touches an object being deleted is not blocked: denying it could keep an object
  // admitted before this webhook from ever being cleaned up.
  if (req.operation == "UPDATE") {
    const json* deleting = webhook::member(req.object, "metadata", "deletionTimestamp");
    webhook::Result<podpatch::RayObject> old =
        podpatch::read_ray_object(req.old_object, kind->kind, req.ns);
    const json* spec = object->spec;
    const json* old_spec = old ? old->spec : nullptr;
    if ((deleting != nullptr && !deleting->is_null()) ||
        (spec != nullptr && old_spec != nullptr && *spec == *old_spec)) {
      return allowed(req.uid);
    }
  }
  podpatch::ClusterReport report =
      podpatch::validate_ray_object(*object, {nodes_, services_, config_.kuberay, config_.ports});
  Response out = report.status ? allowed(req.uid) : denied(req.uid, report.status.error());
  out.warnings = std::move(report.warnings);
  return out;
}

}  // namespace admission
