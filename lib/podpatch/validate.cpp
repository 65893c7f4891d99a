#include "podpatch/validate.h"

#include <algorithm>
#include <array>
#include <set>

#include "base/json/access.h"
#include "base/text/numbers.h"
#include "base/text/text.h"
#include "podpatch/affinity.h"
#include "podpatch/env.h"
#include "podpatch/keys.h"
#include "podpatch/labels.h"
#include "podpatch/limits.h"
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
    std::string remedy = "set numOfHosts: " + std::to_string(slice.hosts());
    // A chips per host that no host of this slice has is the likelier mistake: offer the host
    // size that fits, with the numOfHosts that goes with it.
    if (!slice.chips_fix().empty()) {
      std::vector<int> valid = slice.known_accelerator()->chips_per_host_for(slice.chips());
      // Prefer the host size that makes the numOfHosts given right.
      auto fits = std::find_if(valid.begin(), valid.end(),
                               [&](int v) { return std::max(slice.chips() / v, 1) == given; });
      if (!valid.empty()) {
        int chips = fits != valid.end() ? *fits : valid.front();
        int hosts = std::max(slice.chips() / chips, 1);
        remedy = "a " + std::string(topo.value) + " slice has hosts of " + std::to_string(chips) +
                 " chips: set google.com/tpu to " + std::to_string(chips) + " per host" +
                 (hosts == given ? " (numOfHosts " + std::to_string(given) + " is then right)"
                                 : " and numOfHosts: " + std::to_string(hosts));
      }
    }
    return deny(reasons::kHostsMismatch,
                "Number of workers in worker group not equal to specified topology: " + where +
                    "topology " + std::string(topo.value) + " (" + std::string(topo.field) +
                    ") has " + std::to_string(slice.chips()) + " chips at " +
                    std::to_string(chips_per_host) + " chips per host, so it needs " +
                    std::to_string(slice.hosts()) + " hosts, but numOfHosts is " +
                    std::to_string(given) + "; " + remedy);
  }
  return given;
}

// What a group's checks share: the object, the cluster-wide facts and where warnings go.
struct GroupContext {
  const RayObject& object;
  const ValidationSources& sources;
  const std::string& id;  // "RayCluster ns/name: " or "RayJob ns/name: "
  bool cluster_kueue = false;
  bool cluster_multi_host = false;  // a group has numOfHosts > 1: KubeRay creates the Service
  std::vector<std::string>& warnings;
};

long long integer_member(const json& obj, std::string_view key, long long fallback) {
  const json* v = member(obj, key);
  return v != nullptr && v->is_number_integer() ? v->get<long long>() : fallback;
}

// M5.1 multi-slice groups: MEGASCALE_NUM_SLICES should be the number of slices, one per replica,
// and a single-host group's coordinator needs a headless Service KubeRay creates only for
// clusters with a multi-host group.
void check_multislice(const json& group, const std::string& where, const json& containers,
                      const std::vector<TpuContainer>& tpu, const topology::Slice& slice,
                      const GroupContext& ctx) {
  std::optional<std::string_view> slices;
  bool present = false;
  for (const TpuContainer& t : tpu) {
    const json& c = containers[static_cast<std::size_t>(t.index)];
    present = present || env_present(c, keys::kMegascaleNumSlices);
    if (!slices) {
      slices = env_literal(c, keys::kMegascaleNumSlices);
    }
  }
  if (!present) {
    return;
  }
  long long replicas = integer_member(group, "replicas", integer_member(group, "minReplicas", 1));
  if (slices) {
    std::optional<std::int64_t> n = webhook::parse_non_negative(*slices, 1'000'000);
    if (!n || *n != replicas) {
      ctx.warnings.push_back(
          where + std::string(keys::kMegascaleNumSlices) + " is " +
          webhook::quote_bounded(*slices) +
          " but the group has replicas: " + std::to_string(replicas) +
          " (each replica is one slice), so the slices wait for peers that never come or run "
          "apart; set " +
          std::string(keys::kMegascaleNumSlices) + " to " + std::to_string(replicas) +
          " or replicas to the number of slices");
    }
  }
  if (slice.multi_host() || ctx.cluster_multi_host) {
    return;
  }
  bool live = false;
  std::string svc = headless_service(ctx.sources.services, ctx.object.ns, ctx.object.cluster,
                                     ctx.sources.kuberay, &live);
  if (live) {
    return;
  }
  std::string group_name(string_member(&group, "groupName").value_or(""));
  ctx.warnings.push_back(
      where + "multi-slice on single-host slices: its Pods reach the coordinator as " +
      topology::host_name(group_name, 0, 0) + "." + svc +
      ", but KubeRay creates the headless Service " + webhook::quote(svc) +
      " only for clusters with a multi-host worker group; create it in namespace " +
      webhook::quote(ctx.object.ns) +
      " with clusterIP: None, publishNotReadyAddresses: true, selector ray.io/cluster=" +
      ctx.object.cluster +
      " and ray.io/node-type=worker, and label ray.io/headless-worker-svc=" + ctx.object.cluster);
}

// The mutating webhook only sees Pods labelled app.kubernetes.io/name=kuberay (its
// objectSelector); KubeRay sets that label unless the template sets another value.
void check_pods_reach_webhook(const json& group, const std::string& where,
                              const topology::Slice& slice, const GroupContext& ctx) {
  for (const json* labels :
       {member(group, "template", "metadata", "labels"), member(group, "labels")}) {
    std::optional<std::string_view> app = string_member(labels, keys::kAppNameLabel);
    if (app && *app != keys::kAppNameValue) {
      ctx.warnings.push_back(
          where + "its Pods are labelled " + std::string(keys::kAppNameLabel) + "=" +
          webhook::quote_bounded(*app) + ", so the mutating webhook (which only sees Pods with " +
          std::string(keys::kAppNameLabel) + "=" + std::string(keys::kAppNameValue) +
          ") never sets their TPU environment" +
          (slice.multi_host() ? " and the slice cannot initialize" : "") +
          "; remove the label from the worker group");
      return;
    }
  }
}

// The group's highest replica index (docs/spec.md V5): max(replicas, minReplicas, maxReplicas)
// - 1, where a maxReplicas of KubeRay's default 2^31-1 bounds nothing and is left out (an
// autoscaler's growth past the rest meets the Pod path's own checks).
int last_replica(const json& group) {
  constexpr long long kUnbounded = 2147483647;
  long long max_replicas = integer_member(group, "maxReplicas", 1);
  long long replicas =
      std::max({integer_member(group, "replicas", 1), integer_member(group, "minReplicas", 1),
                max_replicas < kUnbounded ? max_replicas : 1LL, 1LL});
  return static_cast<int>(std::min<long long>(replicas, 1'000'000'000) - 1);
}

// V5 for a group whose slice passed V2: the names every Pod of the group would be given (the Pod
// path denies each Pod otherwise), then the advice that does not stop admission.
webhook::Status check_names_and_advise(const json& group, const std::string& name,
                                       const std::string& where, const json& containers,
                                       const std::vector<TpuContainer>& tpu,
                                       const topology::Slice& slice, const GroupContext& ctx) {
  bool megascale = std::any_of(tpu.begin(), tpu.end(), [&](const TpuContainer& t) {
    return env_present(containers[static_cast<std::size_t>(t.index)], keys::kMegascaleNumSlices);
  });
  if (slice.multi_host() || megascale) {
    std::string svc = headless_service(ctx.sources.services, ctx.object.ns, ctx.object.cluster,
                                       ctx.sources.kuberay);
    if (webhook::Status st =
            check_dns_names(svc, ctx.object.cluster, name, slice.hosts(), last_replica(group));
        !st) {
      return deny(reasons::kInvalidName, where + st.error().message);
    }
  }
  for (std::string& advice : slice.advisories()) {
    ctx.warnings.push_back(where + advice);
  }
  check_multislice(group, where, containers, tpu, slice, ctx);
  check_pods_reach_webhook(group, where, slice, ctx);
  return {};
}

// Whether the webhook writes `var` into this TPU container (M5.2): not present, or a value it
// replaces.
bool writes_list(const json& container, std::string_view var, bool replace_localhost_part) {
  std::optional<std::string_view> lit = env_literal(container, var);
  if (!env_present(container, var)) {
    return true;
  }
  return lit && (replace_localhost_part ? lit->find("localhost") != std::string_view::npos
                                        : *lit == "localhost");
}

// V5.1's warning: the group's Pods get TORCH_TPU_SLICEBUILDER_ADDRESSES's inputs, not the list.
void warn_slicebuilder_omitted(const std::string& where, const ListSizes& sizes,
                               const topology::Slice& slice, const GroupContext& ctx) {
  int devices = slice.chips() / static_cast<int>(sizes.hosts) * slice.chiplets();
  ctx.warnings.push_back(
      where + "TORCH_TPU_SLICEBUILDER_ADDRESSES would be " + with_commas(sizes.slicebuilder) +
      " bytes as NAME=value, over Linux's limit of " + with_commas(kMaxEnvStringBytes) +
      " bytes for one environment string, so the webhook leaves it out of the group's Pods and "
      "sets " +
      std::string(keys::kTorchBasePort) + "=" + std::to_string(ctx.sources.ports.tpu_process_base) +
      " and " + std::string(keys::kTorchDevicesPerHost) + "=" + std::to_string(devices) +
      " instead; TorchTPU's launcher derives the list from them and TPU_WORKER_HOSTNAMES, a "
      "program that reads the list itself must do the same");
}

// Of the lists over M8.1's limit, the one needing the most cut: the one reported, as the Pod path
// reports it.
struct LongestCut {
  std::optional<std::string_view> var;
  std::size_t bytes = 0;
  std::size_t entries = 0;
  // True when a list of `bytes` is over the limit (and then kept if it needs the most cut).
  bool over(std::string_view list, std::size_t list_bytes, std::size_t list_entries) {
    if (list_bytes <= kMaxEnvStringBytes) {
      return false;
    }
    if (!var || names_cut(list_bytes, list_entries) > names_cut(bytes, entries)) {
      var = list;
      bytes = list_bytes;
      entries = list_entries;
    }
    return true;
  }
};

// V5.1: the sizes of M8 for the group's Pods, from its template.
webhook::Status check_limits(const json& group, const std::string& name, const std::string& where,
                             const json& containers, const std::vector<TpuContainer>& tpu,
                             const topology::Slice& slice, const GroupContext& ctx) {
  int replica = last_replica(group);
  std::string svc = headless_service(ctx.sources.services, ctx.object.ns, ctx.object.cluster,
                                     ctx.sources.kuberay);
  int k = static_cast<int>(tpu.size());
  ListSizes sizes = list_sizes(slice, name.size(), replica, svc.size(), k, ctx.sources.ports);
  std::size_t lists = 0;  // bytes the webhook adds to a Pod, over its TPU containers
  bool omitted = false;
  LongestCut worst;
  for (const TpuContainer& t : tpu) {
    const json& c = containers[static_cast<std::size_t>(t.index)];
    if (slice.multi_host() && writes_list(c, keys::kWorkerHostnames, false) &&
        !worst.over(keys::kWorkerHostnames, sizes.hostnames, sizes.hosts)) {
      lists += sizes.hostnames;
    }
    if (sizes.process_addresses > 0 &&
        writes_list(c, keys::kProcessAddresses, slice.multi_host()) &&
        !worst.over(keys::kProcessAddresses, sizes.process_addresses, sizes.process_entries)) {
      lists += sizes.process_addresses;
    }
    if (!env_present(c, keys::kTorchTopology) && !env_present(c, keys::kTorchSlicebuilder)) {
      bool fits = sizes.slicebuilder <= kMaxEnvStringBytes;
      omitted = omitted || !fits;
      lists += fits ? sizes.slicebuilder : 0;
    }
  }
  if (worst.var) {
    webhook::Error e =
        env_too_long(*worst.var, worst.bytes, worst.entries, name, svc, ctx.object.cluster);
    e.message = where + e.message;
    return e;
  }
  if (omitted) {
    warn_slicebuilder_omitted(where, sizes, slice, ctx);
  }
  std::size_t template_bytes = webhook::dump_json(*member(group, "template")).size();
  if (template_bytes + lists > kMaxPodBytes) {
    return deny(reasons::kPodTooLarge,
                where + "its Pods would be more than " + with_commas(template_bytes + lists) +
                    " bytes of JSON once mutated, over the webhook's budget of " +
                    with_commas(kMaxPodBytes) +
                    " bytes (etcd refuses to store an object over 1.5 MiB): the template " +
                    with_commas(template_bytes) + " and the host lists " + with_commas(lists) +
                    " over " + std::to_string(k) +
                    " TPU container(s), each carrying its own copy; use fewer TPU containers "
                    "per Pod, shorter worker group and RayCluster names, or a smaller slice");
  }
  return {};
}

// The sub-slice annotation of a group Kueue does not manage: checked against the nodes.
webhook::Status check_unmanaged_subslice(const json& group, const std::string& where,
                                         long long hosts, const GroupContext& ctx) {
  const json* tmpl = member(group, "template");
  const json* annotations = member(tmpl, "metadata", "annotations");
  std::optional<std::string_view> subslice = string_member(annotations, keys::kSubsliceAnnotation);
  bool kueue = ctx.cluster_kueue ||
               kueue_managed(member(tmpl, "metadata", "labels"), annotations) ||
               kueue_managed(member(group, "labels"), nullptr);
  if (subslice && !kueue && hosts > 1) {
    return check_subslice(where, *subslice, member(tmpl, "spec", "nodeSelector"),
                          static_cast<int>(hosts), ctx.sources.nodes, ctx.warnings);
  }
  return {};
}

webhook::Status check_group(const json& group, std::size_t index, const GroupContext& ctx) {
  std::string name(string_member(&group, "groupName").value_or(""));
  std::string label = name.empty() ? "workerGroupSpecs[" + std::to_string(index) + "]"
                                   : webhook::quote_bounded(name);
  std::string where = ctx.id + "worker group " + label + ": ";
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
  if (webhook::Status st =
          check_names_and_advise(group, name, where, *containers, *tpu, *slice, ctx);
      !st) {
    return st;
  }
  if (webhook::Status st = check_limits(group, name, where, *containers, *tpu, *slice, ctx); !st) {
    return st;
  }
  return check_unmanaged_subslice(group, where, *given, ctx);
}

constexpr std::array<RayKind, 3> kRayKinds = {{
    {"RayCluster", "rayclusters", "spec"},
    {"RayJob", "rayjobs", "spec.rayClusterSpec"},
    {"RayService", "rayservices", "spec.rayClusterConfig"},
}};

// Answers no Service: validate_raycluster's callers know none.
class NoServices : public ServiceSource {
 public:
  std::optional<std::string> headless_service(std::string_view, std::string_view) override {
    return std::nullopt;
  }
};

}  // namespace

std::span<const RayKind> ray_kinds() { return kRayKinds; }

const RayKind* find_ray_kind(std::string_view kind) {
  for (const RayKind& k : kRayKinds) {
    if (k.kind == kind) {
      return &k;
    }
  }
  return nullptr;
}

std::string RayObject::display() const {
  return std::string(kind != nullptr ? kind->kind : "object") + " " +
         (ns.empty() ? "" : webhook::bounded(ns) + "/") + webhook::bounded(name);
}

webhook::Result<RayObject> read_ray_object(const json& object, std::string_view kind,
                                           std::string_view request_ns) {
  RayObject o;
  o.kind = find_ray_kind(kind);
  if (o.kind == nullptr) {
    return webhook::invalid_argument("kind " + webhook::quote_bounded(kind) +
                                     " is not a RayCluster, RayJob or RayService");
  }
  o.metadata = member(object, "metadata");
  o.name = std::string(string_member(o.metadata, "name").value_or(""));
  o.ns = std::string(string_member(o.metadata, "namespace").value_or(request_ns));
  if (o.kind->kind == "RayCluster") {
    o.cluster = o.name;
    o.spec = member(object, "spec");
  } else {
    o.cluster = o.name + "-" + std::string(kGeneratedSuffix);
    o.generated_name = true;
    o.spec = o.kind->kind == "RayJob" ? member(object, "spec", "rayClusterSpec")
                                      : member(object, "spec", "rayClusterConfig");
    if (o.kind->kind == "RayJob") {
      std::string_view selected =
          string_member(member(object, "spec", "clusterSelector"), keys::kClusterLabel)
              .value_or("");
      if (!selected.empty()) {
        // KubeRay runs the job on that RayCluster and ignores rayClusterSpec.
        o.existing_cluster = std::string(selected);
        o.cluster = o.existing_cluster;
        o.generated_name = false;
        o.spec = nullptr;
      }
    }
  }
  if (o.spec != nullptr && o.spec->is_null()) {
    o.spec = nullptr;
  }
  if (o.spec != nullptr && !o.spec->is_object()) {
    return webhook::invalid_argument(o.display() + ": " + std::string(o.kind->spec_field) +
                                     " must be an object (a RayCluster spec)")
        .with_reason(reasons::kMalformedObject);
  }
  return o;
}

json generated_raycluster(const RayObject& o) {
  if (o.spec == nullptr) {
    return nullptr;
  }
  json metadata = {{"name", o.cluster}, {"namespace", o.ns}};
  json labels = json::object();
  json annotations = json::object();
  if (const json* l = member(o.metadata, "labels"); l != nullptr && l->is_object()) {
    labels = *l;
  }
  if (const json* a = member(o.metadata, "annotations"); a != nullptr && a->is_object()) {
    annotations = *a;
  }
  if (o.generated_name) {
    labels["ray.io/originated-from-cr-name"] = o.name;
    labels["ray.io/originated-from-crd"] = std::string(o.kind->kind);
  }
  if (!labels.empty()) {
    metadata["labels"] = std::move(labels);
  }
  if (!annotations.empty()) {
    metadata["annotations"] = std::move(annotations);
  }
  return {{"apiVersion", "ray.io/v1"},
          {"kind", "RayCluster"},
          {"metadata", std::move(metadata)},
          {"spec", *o.spec}};
}

std::string headless_service(ServiceSource& services, std::string_view ns, std::string_view cluster,
                             topology::KubeRayVersion kuberay, bool* live) {
  std::optional<std::string> found = services.headless_service(ns, cluster);
  if (live != nullptr) {
    *live = found.has_value();
  }
  return found ? *found : topology::headless_service_name(cluster, kuberay);
}

webhook::Status check_dns_names(std::string_view service, std::string_view cluster,
                                std::string_view group, int hosts, int last_replica) {
  if (!topology::is_dns1123_label(service)) {
    return webhook::invalid_argument(
               "headless Service name " + webhook::quote_bounded(service) + " (from RayCluster " +
               webhook::quote_bounded(cluster) +
               ") is not a DNS label (at most 63 lowercase letters, digits and '-'), so it "
               "cannot be the Pod's subdomain; shorten or rename the RayCluster")
        .with_reason(reasons::kInvalidName);
  }
  std::string last_host = topology::host_name(group, last_replica, hosts - 1);
  if (!topology::is_dns1123_label(last_host)) {
    return webhook::invalid_argument(
               "worker group name " + webhook::quote_bounded(group) + " gives hostnames such as " +
               webhook::quote_bounded(last_host) +
               " that are not DNS labels (at most 63 lowercase letters, digits and '-'); rename "
               "the worker group")
        .with_reason(reasons::kInvalidName);
  }
  return {};
}

ClusterReport validate_ray_object(const RayObject& o, const ValidationSources& sources) {
  ClusterReport report;
  if (o.spec == nullptr) {
    return report;
  }
  // Names are cut (webhook::bounded): `id` starts every message and warning about the object.
  std::string id = o.display() + ": ";
  const json* groups = member(*o.spec, "workerGroupSpecs");
  if (groups == nullptr || groups->is_null()) {
    return report;
  }
  if (!groups->is_array()) {
    report.status = deny(reasons::kMalformedObject, id + std::string(o.kind->spec_field) +
                                                        ".workerGroupSpecs must be an array");
    return report;
  }
  std::vector<std::string> warnings;
  GroupContext ctx{
      o,     sources,
      id,    kueue_managed(member(o.metadata, "labels"), member(o.metadata, "annotations")),
      false, warnings};
  for (const json& g : *groups) {
    ctx.cluster_multi_host = ctx.cluster_multi_host || integer_member(g, "numOfHosts", 1) > 1;
  }
  for (std::size_t i = 0; i < groups->size() && report.status; ++i) {
    const json& group = (*groups)[i];
    report.status = group.is_object()
                        ? check_group(group, i, ctx)
                        : deny(reasons::kMalformedObject,
                               id + std::string(o.kind->spec_field) + ".workerGroupSpecs[" +
                                   std::to_string(i) + "] must be an object");
    if (!report.status) {
      report.denied_group = string_member(&group, "groupName").value_or("");
    }
  }
  // Each warning once: groups alike give alike warnings.
  std::set<std::string> seen;
  for (std::string& w : warnings) {
    if (seen.insert(w).second) {
      report.warnings.push_back(std::move(w));
    }
  }
  return report;
}

ClusterReport validate_raycluster(const json& cluster, NodeSource& nodes,
                                  std::string_view request_ns) {
  NoServices services;
  webhook::Result<RayObject> o = read_ray_object(cluster, "RayCluster", request_ns);
  if (!o) {
    ClusterReport report;
    report.status = o.error();
    return report;
  }
  return validate_ray_object(*o, {nodes, services, topology::KubeRayVersion{}});
}

}  // namespace podpatch
