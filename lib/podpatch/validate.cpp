#include "podpatch/validate.h"

#include "base/json/access.h"
#include "base/text/text.h"
#include "podpatch/affinity.h"
#include "podpatch/keys.h"
#include "podpatch/labels.h"
#include "podpatch/pod_view.h"
#include "podpatch/reasons.h"
#include "topology/slice.h"

namespace podpatch {

using webhook::member;
using webhook::string_member;
namespace {

webhook::Error deny(std::string_view reason, std::string message,
                    webhook::ErrorCode code = webhook::ErrorCode::kInvalidArgument) {
  return webhook::Error{code, std::move(message), reason};
}

// V3 for one subsliced group of `hosts` hosts.
webhook::Status check_subslice(const std::string& where, std::string_view subslice,
                               const json* node_selector, int hosts, NodeSource& nodes,
                               std::vector<std::string>& warnings) {
  std::optional<std::string_view> parent = string_member(node_selector, keys::kTopologySelector);
  if (!parent) {
    return deny(reasons::kSubsliceInvalid,
                where + "annotation " + std::string(keys::kSubsliceAnnotation) + "=" +
                    webhook::quote(subslice) +
                    " needs the parent slice's topology in nodeSelector " +
                    std::string(keys::kTopologySelector));
  }
  webhook::Result<topology::Shape> parent_shape = topology::parse_shape(*parent);
  if (!parent_shape) {
    return deny(reasons::kInvalidTopology, where + "nodeSelector " +
                                               std::string(keys::kTopologySelector) + ": " +
                                               parent_shape.error().message);
  }
  webhook::Result<topology::Shape> sub = topology::parse_shape(subslice);  // checked by Slice
  for (std::size_t i = 0; i < 3 && sub; ++i) {
    if (sub->dims3()[i] > parent_shape->dims3()[i]) {
      return deny(
          reasons::kSubsliceInvalid,
          where + "subslice " + webhook::quote(subslice) + " does not fit in its parent slice " +
              webhook::quote(*parent) + ": dimension " + std::to_string(i + 1) + " is " +
              std::to_string(sub->dims3()[i]) + " > " + std::to_string(parent_shape->dims3()[i]));
    }
  }
  std::optional<std::vector<Labels>> listed = nodes.nodes_matching(to_labels(node_selector));
  if (!listed || listed->empty()) {
    warnings.push_back(where +
                       "this subsliced TPU worker group targets no Nodes yet, so its subslice "
                       "placement cannot be chosen; "
                       "recreate the RayCluster once its TPU Nodes exist");
    return {};
  }
  if (!has_gce_topology_labels(*listed)) {
    return deny(reasons::kSubsliceUnplaceable,
                where + "the " + std::to_string(listed->size()) +
                    " Nodes matching its nodeSelector carry no cloud.google.com/gce-topology-* "
                    "labels, so a subslice cannot be placed; use a node pool with dynamic "
                    "slicing enabled",
                webhook::ErrorCode::kFailedPrecondition);
  }
  if (!subslice_topology_key(*listed, hosts)) {
    return deny(reasons::kSubsliceAmbiguous,
                where + "ambiguous subslice: no TPU host, subblock, block or node pool among the " +
                    std::to_string(listed->size()) + " matching Nodes has exactly " +
                    std::to_string(hosts) + " Nodes",
                webhook::ErrorCode::kFailedPrecondition);
  }
  return {};
}

// V2: the group's numOfHosts is the number of hosts its topology needs.
webhook::Result<long long> check_num_of_hosts(const json& group, const std::string& where,
                                              const TopologyField& topo,
                                              const topology::Slice& slice) {
  const json* num = member(group, "numOfHosts");
  int chips_per_host = slice.chips_per_host();
  std::string fix = "set numOfHosts: " + std::to_string(slice.hosts()) + " (topology " +
                    std::string(topo.value) + " has " + std::to_string(slice.chips()) +
                    " chips at " + std::to_string(chips_per_host) + " chips per host)";
  if (num == nullptr || num->is_null()) {
    return deny(reasons::kMissingNumOfHosts, where + "numOfHosts is not set; " + fix);
  }
  if (num->is_number_integer() && num->get<long long>() == 0) {
    return deny(reasons::kMissingNumOfHosts, where + "numOfHosts is 0; " + fix);
  }
  if (!num->is_number_integer() || num->get<long long>() < 0) {
    return deny(reasons::kInvalidNumOfHosts, where + "numOfHosts " + webhook::dump_json(*num) +
                                                 " is not a positive integer; " + fix);
  }
  long long given = num->get<long long>();
  if (given != slice.hosts()) {
    return deny(reasons::kHostsMismatch,
                "Number of workers in worker group not equal to specified topology: " + where +
                    "topology " + std::string(topo.value) + " (" + std::string(topo.field) +
                    ") has " + std::to_string(slice.chips()) + " chips at " +
                    std::to_string(chips_per_host) + " chips per host, so it needs " +
                    std::to_string(slice.hosts()) + " hosts, but numOfHosts is " +
                    std::to_string(given) + "; set numOfHosts: " + std::to_string(slice.hosts()));
  }
  return given;
}

// `id` names the RayCluster in messages.
webhook::Status check_group(const json& group, std::size_t index, const std::string& id,
                            bool cluster_kueue, NodeSource& nodes,
                            std::vector<std::string>& warnings) {
  std::string name(string_member(&group, "groupName").value_or(""));
  std::string label = name.empty() ? "workerGroupSpecs[" + std::to_string(index) + "]"
                                   : webhook::quote_bounded(name);
  std::string where = id + "worker group " + label + ": ";
  const json* tmpl = member(group, "template");
  const json* containers = member(tmpl, "spec", "containers");
  if (containers == nullptr || !containers->is_array() || containers->empty()) {
    return deny(reasons::kNoContainers,
                where + "template.spec.containers is empty; a worker group needs a Ray container");
  }
  webhook::Result<std::vector<TpuContainer>> tpu =
      find_tpu_containers(containers, "template.spec.containers");
  if (!tpu) {
    return deny(reasons::kInvalidResources, where + tpu.error().message);
  }
  if (tpu->empty()) {
    return {};  // not a TPU group (V1)
  }
  int chips_per_host = 0;
  for (const TpuContainer& t : *tpu) {
    chips_per_host += t.chips;
  }
  const json* annotations = member(tmpl, "metadata", "annotations");
  const json* node_selector = member(tmpl, "spec", "nodeSelector");
  std::optional<TopologyField> topo = topology_field(annotations, node_selector);
  if (!topo) {
    return deny(reasons::kMissingTopology,
                where + "requests google.com/tpu but sets no TPU topology; add nodeSelector " +
                    std::string(keys::kTopologySelector) + " (such as 4x4) to its template");
  }
  std::string_view accelerator =
      string_member(node_selector, keys::kAcceleratorSelector).value_or("");
  webhook::Result<topology::Slice> slice =
      topology::Slice::create({accelerator, topo->value, chips_per_host});
  if (!slice) {
    return deny(
        slice.error().code == webhook::ErrorCode::kInvalidArgument ? reasons::kInvalidTopology
                                                                   : reasons::kInvalidChips,
        where + std::string(topo->field) + ": " + slice.error().message, slice.error().code);
  }
  webhook::Result<long long> given = check_num_of_hosts(group, where, *topo, *slice);
  if (!given) {
    return given.error();
  }
  for (std::string& advice : slice->advisories()) {
    warnings.push_back(where + advice);
  }
  std::optional<std::string_view> subslice = string_member(annotations, keys::kSubsliceAnnotation);
  bool kueue = cluster_kueue || kueue_managed(member(tmpl, "metadata", "labels"), annotations) ||
               kueue_managed(member(group, "labels"), nullptr);
  if (subslice && !kueue && *given > 1) {
    return check_subslice(where, *subslice, node_selector, static_cast<int>(*given), nodes,
                          warnings);
  }
  return {};
}

}  // namespace

ClusterReport validate_raycluster(const json& cluster, NodeSource& nodes,
                                  std::string_view request_ns) {
  ClusterReport report;
  const json* metadata = member(cluster, "metadata");
  std::string name(string_member(metadata, "name").value_or(""));
  std::string ns(string_member(metadata, "namespace").value_or(request_ns));
  // Names are cut (webhook::bounded): `id` starts every message and warning about the cluster.
  std::string id = "RayCluster " + (ns.empty() ? "" : webhook::bounded(ns) + "/") +
                   webhook::bounded(name) + ": ";
  const json* groups = member(cluster, "spec", "workerGroupSpecs");
  if (groups == nullptr || groups->is_null()) {
    return report;
  }
  if (!groups->is_array()) {
    report.status = deny(reasons::kMalformedObject, id + "spec.workerGroupSpecs must be an array");
    return report;
  }
  bool cluster_kueue = kueue_managed(member(metadata, "labels"), member(metadata, "annotations"));
  for (std::size_t i = 0; i < groups->size(); ++i) {
    const json& group = (*groups)[i];
    report.status =
        group.is_object()
            ? check_group(group, i, id, cluster_kueue, nodes, report.warnings)
            : deny(reasons::kMalformedObject,
                   id + "spec.workerGroupSpecs[" + std::to_string(i) + "] must be an object");
    if (!report.status) {
      report.denied_group = string_member(&group, "groupName").value_or("");
      return report;
    }
  }
  return report;
}

}  // namespace podpatch
