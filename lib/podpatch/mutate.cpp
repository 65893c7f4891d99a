#include "podpatch/mutate.h"

#include "base/json/access.h"
#include "base/text/text.h"
#include "podpatch/affinity.h"
#include "podpatch/env.h"
#include "podpatch/keys.h"
#include "podpatch/labels.h"
#include "topology/names.h"

namespace podpatch {

using webhook::member;
using webhook::object_member;
using webhook::string_member;
namespace {

// Values shared by every TPU container of the Pod.
struct SliceValues {
  std::vector<std::string> hostnames;  // multi-host: DNS names of the replica's hosts
  std::string hostnames_joined;
  std::string process_addresses;  // TPU7x, when multi-host or several TPU containers
  std::string torch_topology;
  std::string slicebuilder;  // from the computed host list (or localhost)
  std::string tpu_name;
  std::string coordinator;
};

SliceValues compute_values(const PodView& view, const MutationPlan& plan, std::string_view group) {
  const topology::Slice& slice = *plan.slice;
  SliceValues v;
  int tpu_containers = static_cast<int>(view.tpu_containers().size());
  std::vector<std::string> entries = {"localhost"};
  if (slice.multi_host()) {
    v.hostnames = topology::worker_hostnames(group, plan.slot.replica, slice.hosts(), plan.svc);
    v.hostnames_joined = topology::join(v.hostnames);
    entries = v.hostnames;
  }
  if (slice.tpu7x() && (slice.multi_host() || tpu_containers > 1)) {
    v.process_addresses =
        topology::address_list(entries, tpu_containers, plan.ports.tpu_process_base);
  }
  v.torch_topology = topology::torch_tpu_topology(slice.shape(), slice.chiplets());
  int ports = slice.chips() / static_cast<int>(entries.size()) * slice.chiplets();
  v.slicebuilder = topology::address_list(entries, ports, plan.ports.tpu_process_base);
  v.tpu_name = std::string(group) + "-" + std::to_string(plan.slot.replica);
  v.coordinator =
      topology::megascale_coordinator(group, plan.svc, slice.tpu7x(), plan.ports.megascale_base);
  return v;
}

// Env edits of one TPU container, collecting warnings.
class ContainerEnv {
 public:
  ContainerEnv(json& container, std::string_view name, std::vector<std::string>& warnings)
      : c_(container), name_(name), warnings_(warnings) {}

  std::optional<std::string_view> literal(std::string_view var) const {
    return env_literal(c_, var);
  }
  bool present(std::string_view var) const { return env_present(c_, var); }

  // Sets `var` unless present; warns when a present literal differs from `value`.
  void keep_or_set(std::string_view var, const std::string& value) {
    std::optional<EnvRef> e = find_env(c_, var);
    if (e && is_present(*e->entry)) {
      std::optional<std::string_view> lit = literal_value(*e->entry);
      if (lit && *lit != value) {
        warnings_.push_back(prefix() + "kept " + std::string(var) + "=\"" + std::string(*lit) +
                            "\" from the Pod spec, but this slice needs \"" + value +
                            "\"; remove it from the template unless you mean it");
      }
      return;
    }
    set_env(c_, var, {{"value", value}});
  }

  // Sets `var`, replacing a present literal for which `replace` holds.
  template <class Pred>
  void set_replacing(std::string_view var, const std::string& value, Pred replace) {
    std::optional<EnvRef> e = find_env(c_, var);
    if (e) {
      std::optional<std::string_view> lit = literal_value(*e->entry);
      if (lit && *lit != value && replace(*lit)) {
        replace_env_value(c_, e->index, value);
        return;
      }
    }
    keep_or_set(var, value);
  }

  void set_value_from(std::string_view var, json value_from) {
    if (!present(var)) {
      set_env(c_, var, {{"valueFrom", std::move(value_from)}});
    }
  }

  std::string prefix() const { return "container " + webhook::quote_bounded(name_) + ": "; }
  std::vector<std::string>& warnings() { return warnings_; }

 private:
  json& c_;
  std::string_view name_;
  std::vector<std::string>& warnings_;
};

// M5.3's slicebuilder list for one container: from its literal TPU_WORKER_HOSTNAMES on a
// multi-host slice when that list divides the chips, else the computed one.
std::string slicebuilder_for(ContainerEnv& env, const topology::Slice& slice,
                             const SliceValues& values, const MutationPlan& plan) {
  if (!slice.multi_host()) {
    return values.slicebuilder;
  }
  std::optional<std::string_view> user = env.literal(keys::kWorkerHostnames);
  if (!user || *user == values.hostnames_joined) {
    return values.slicebuilder;
  }
  // Counted before splitting: a list of more entries than the slice has chips cannot divide it,
  // and is not made into one string per entry.
  std::size_t count = topology::list_size(*user);
  auto chips = static_cast<std::size_t>(slice.chips());
  bool divides = count <= chips && chips % count == 0;
  bool empty_entry = topology::list_has_empty_item(*user);
  if (!divides || empty_entry) {
    std::string why = empty_entry ? " " + webhook::quote_bounded(*user) + " has an empty entry"
                                  : " has " + std::to_string(count) +
                                        " entries, which do not divide the slice's " +
                                        std::to_string(slice.chips()) + " chips";
    env.warnings().push_back(env.prefix() + "TPU_WORKER_HOSTNAMES" + why +
                             "; TORCH_TPU_SLICEBUILDER_ADDRESSES uses the webhook's host list "
                             "instead");
    return values.slicebuilder;
  }
  std::vector<std::string> entries = topology::split_list(*user);
  int ports = slice.chips() / static_cast<int>(entries.size()) * slice.chiplets();
  return topology::address_list(entries, ports, plan.ports.tpu_process_base);
}

void mutate_env(json& container, const TpuContainer& tpu, int k, const PodView& view,
                const MutationPlan& plan, const SliceValues& values,
                std::vector<std::string>& warnings) {
  const topology::Slice& slice = *plan.slice;
  const topology::Ports& ports = plan.ports;
  ContainerEnv env(container, tpu.name, warnings);
  int tpu_containers = static_cast<int>(view.tpu_containers().size());
  // M5.1 multi-slice.
  if (env.present(keys::kMegascaleNumSlices)) {
    env.keep_or_set(keys::kMegascaleSliceId, std::to_string(plan.slot.replica));
    env.keep_or_set(keys::kMegascaleCoordinator, values.coordinator);
    env.keep_or_set(keys::kMegascalePort,
                    std::to_string(ports.megascale_base + (slice.tpu7x() ? k : 0)));
  }
  // M5.2 peers.
  if (slice.multi_host()) {
    env.set_replacing(keys::kWorkerHostnames, values.hostnames_joined,
                      [](std::string_view v) { return v == "localhost"; });
  }
  if (!values.process_addresses.empty()) {
    bool multi = slice.multi_host();
    env.set_replacing(keys::kProcessAddresses, values.process_addresses,
                      [multi](std::string_view v) {
                        return multi && v.find("localhost") != std::string_view::npos;
                      });
    env.keep_or_set(keys::kProcessPort, std::to_string(ports.tpu_process_base + k));
  }
  // M5.3 TorchTPU: both are skipped when the user set TORCH_TPU_TOPOLOGY.
  bool user_topology = env.present(keys::kTorchTopology);
  env.keep_or_set(keys::kTorchTopology, values.torch_topology);
  if (!user_topology) {
    env.keep_or_set(keys::kTorchSlicebuilder, slicebuilder_for(env, slice, values, plan));
  }
  // M5.4 worker id: a literal from the template is replaced in place; valueFrom is kept.
  int id = slice.tpu7x() ? plan.slot.host * tpu_containers + k : plan.slot.host;
  std::string id_text = std::to_string(id);
  if (auto lit = env.literal(keys::kWorkerId); lit && *lit != id_text) {
    warnings.push_back(env.prefix() + "replaced TPU_WORKER_ID=\"" + std::string(*lit) +
                       "\" with \"" + id_text +
                       "\": a template value is copied to every host, so the webhook sets the "
                       "ID of each host");
  }
  env.set_replacing(keys::kWorkerId, id_text, [](std::string_view) { return true; });
  // M5.5, M5.6.
  env.keep_or_set(keys::kTpuName, values.tpu_name);
  env.set_value_from(keys::kDevicePluginHostIp,
                     {{"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", "status.hostIP"}}}});
  env.keep_or_set(keys::kDevicePluginAddr, "$(" + std::string(keys::kDevicePluginHostIp) +
                                               "):" + std::to_string(ports.device_plugin));
}

void set_spec_string(json& spec, std::string_view key, const std::string& value,
                     std::vector<std::string>& warnings) {
  std::optional<std::string_view> old = string_member(&spec, key);
  if (old && !old->empty() && *old != value) {
    warnings.push_back("replaced spec." + std::string(key) + " \"" + std::string(*old) +
                       "\" with \"" + value + "\" so the slice's peers can resolve this Pod");
  }
  spec[std::string(key)] = value;
}

}  // namespace

json mutable_parts(const json& pod) {
  json parts = json::object();
  if (const json* metadata = member(pod, "metadata");
      metadata != nullptr && metadata->is_object()) {
    json& md = parts["metadata"] = json::object();
    if (const json* labels = member(metadata, "labels")) {
      md["labels"] = *labels;
    }
  }
  const json* spec = member(pod, "spec");
  if (spec == nullptr || !spec->is_object()) {
    return parts;
  }
  json& out = parts["spec"] = json::object();
  for (std::string_view key : {"hostname", "subdomain", "affinity"}) {
    if (const json* v = member(spec, key)) {
      out[std::string(key)] = *v;
    }
  }
  if (const json* containers = member(spec, "containers");
      containers != nullptr && containers->is_array()) {
    json& list = out["containers"] = json::array();
    for (const json& c : *containers) {
      json slot = json::object();
      if (const json* env = member(c, "env")) {
        slot["env"] = *env;
      }
      list.push_back(std::move(slot));
    }
  }
  return parts;
}

bool needs_pod_dns(const PodView& pod, const topology::Slice& slice) {
  if (slice.multi_host()) {
    return true;
  }
  for (const TpuContainer& t : pod.tpu_containers()) {
    if (env_present(pod.container(t.index), keys::kMegascaleNumSlices)) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> mutate(json& pod, const PodView& view, const MutationPlan& plan) {
  std::vector<std::string> warnings;
  const topology::Slice& slice = *plan.slice;
  std::string group(view.label(keys::kGroupLabel).value_or(""));
  std::string cluster(view.label(keys::kClusterLabel).value_or(""));
  std::string replica_value = group + "-" + std::to_string(plan.slot.replica);

  if (plan.add_replica_label) {
    json& labels = object_member(object_member(pod, "metadata"), "labels");
    labels[std::string(keys::kLegacyReplicaLabel)] = replica_value;
  }
  json& spec = object_member(pod, "spec");
  if (needs_pod_dns(view, slice)) {
    set_spec_string(spec, "hostname", topology::host_name(group, plan.slot.replica, plan.slot.host),
                    warnings);
    set_spec_string(spec, "subdomain", plan.svc, warnings);
  }
  if (slice.multi_host()) {
    AffinityMatch match{std::string(keys::kLegacyReplicaLabel), replica_value, cluster,
                        plan.topology_key};
    auto replica_name = view.label(keys::kReplicaNameLabel);
    if (replica_name && view.label(keys::kHostIndexLabel)) {
      match.key = keys::kReplicaNameLabel;
      match.value = *replica_name;
    }
    merge_affinity(pod, match);
  }
  SliceValues values = compute_values(view, plan, group);
  json& containers = spec["containers"];
  int k = 0;
  for (const TpuContainer& t : view.tpu_containers()) {
    mutate_env(containers[static_cast<std::size_t>(t.index)], t, k++, view, plan, values, warnings);
  }
  return warnings;
}

}  // namespace podpatch
