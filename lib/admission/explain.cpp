// webhook-dryrun --explain: the derivation of one Pod's answer, rendered from the PodDecision the
// Handler returned (admission/handler.h), stage by stage as far as the stages got.
#include "admission/handler.h"
#include "base/json/access.h"
#include "base/text/text.h"
#include "podpatch/keys.h"

namespace admission {
namespace {

using Lines = std::vector<std::string>;

std::string_view path_story(podpatch::PlacementPath path) {
  switch (path) {
    case podpatch::PlacementPath::kLabels:
      return "from KubeRay's labels ray.io/worker-group-replica-index and "
             "ray.io/replica-host-index (M3.1)";
    case podpatch::PlacementPath::kReplicaLabel:
      return "from KubeRay's label ray.io/worker-group-replica-index; a single-host slice has "
             "host 0 (M3.2)";
    case podpatch::PlacementPath::kAlreadyPlaced:
      return "kept from the Pod's own replicaIndex label and TPU_WORKER_ID (already placed)";
    case podpatch::PlacementPath::kLegacy:
      return "chosen from the group's existing Pods: the lowest replica in use with a free host "
             "(else the lowest replica not in use), then its lowest free host (legacy placement, "
             "M3.3)";
  }
  return "";
}

void explain_facts(const PodFacts& f, const podpatch::PodView& view, Lines& out) {
  const topology::Slice& slice = f.slice;
  const auto& d = slice.shape().dims3();
  out.push_back("topology: " + std::string(f.topology.value) + " (" +
                std::string(f.topology.field) + ")");
  out.push_back("chips: " + std::to_string(d[0]) + " x " + std::to_string(d[1]) + " x " +
                std::to_string(d[2]) + " = " + std::to_string(slice.chips()));
  std::string per;
  for (const podpatch::TpuContainer& t : view.tpu_containers()) {
    per += (per.empty() ? "" : " + ") + std::to_string(t.chips) + " (" + std::string(t.name) + ")";
  }
  out.push_back("chips per host: google.com/tpu " + per + " = " +
                std::to_string(slice.chips_per_host()));
  out.push_back("hosts: max(" + std::to_string(slice.chips()) + " / " +
                std::to_string(slice.chips_per_host()) + ", 1) = " + std::to_string(slice.hosts()) +
                (slice.multi_host() ? " (multi-host)" : " (single-host)"));
  out.push_back("accelerator: " + webhook::quote(slice.accelerator()) + " -> " +
                std::to_string(slice.chiplets()) + " device(s) per chip, " +
                std::to_string(slice.devices_per_host()) + " per host, " +
                std::to_string(slice.total_devices()) + " in the slice");
}

void explain_placement(const PodDecision& d, const Config& config, Lines& out) {
  const podpatch::Placement& p = d.placement->placement;
  out.push_back("placement: replica " + std::to_string(p.slot.replica) + ", host " +
                std::to_string(p.slot.host) + ", " + std::string(path_story(p.path)));
  std::string story =
      d.names->live ? "the Service labelled ray.io/headless-worker-svc=" + d.facts->key.cluster
      : config.kuberay.legacy_headless_service()
          ? "KubeRay " + config.kuberay.text() +
                " names it CheckName(<cluster>-headless-worker-svc)"
          : "KubeRay >= 1.4 names it <cluster>-headless";
  out.push_back("headless Service: " + d.names->service + " (" + story + ")");
}

// What the mutation wrote: hostname, affinity and each TPU container's TPU env.
void explain_result(const PodDecision& d, Lines& out) {
  const podpatch::Slot& slot = d.placement->placement.slot;
  if (d.names->dns) {
    out.push_back("hostname: " + topology::host_name(d.facts->key.group, slot.replica, slot.host) +
                  "." + d.names->service + " (<group>-<replica>-<host>.<service>)");
  }
  if (d.facts->slice.multi_host()) {
    out.push_back("affinity: Pods of this replica share " + d.placement->topology_key +
                  "; other replicas and clusters are kept off it (M4)");
  }
  const json* containers = webhook::member(d.mutated, "spec", "containers");
  for (const podpatch::TpuContainer& t : d.view->tpu_containers()) {
    out.push_back("container " + webhook::quote(t.name) + ":");
    const json* env = containers != nullptr && containers->is_array()
                          ? webhook::member((*containers)[static_cast<std::size_t>(t.index)], "env")
                          : nullptr;
    if (env == nullptr) {
      continue;
    }
    for (const json& e : *env) {
      std::string_view name = webhook::string_member(&e, "name").value_or("");
      if (podpatch::keys::webhook_env(name)) {
        const json* v = webhook::member(e, "value");
        out.push_back("  " + std::string(name) + "=" +
                      (v != nullptr && v->is_string() ? v->get<std::string>() : "(valueFrom)"));
      }
    }
  }
}

}  // namespace

std::vector<std::string> explain(const PodDecision& d, const Config& config) {
  Lines out;
  if (!d.view) {
    return out;
  }
  if (!d.view->is_tpu_pod()) {
    out.push_back("not a TPU Pod: no container requests google.com/tpu, so nothing changes (M1)");
    return out;
  }
  if (!d.facts) {
    return out;
  }
  explain_facts(*d.facts, *d.view, out);
  if (!d.placement) {
    return out;
  }
  explain_placement(d, config, out);
  if (!d.mutated.is_null()) {
    explain_result(d, out);
  }
  return out;
}

}  // namespace admission
