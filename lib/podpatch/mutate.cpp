#include "podpatch/mutate.h"

#include <algorithm>

#include "base/json/access.h"
#include "base/json/write.h"
#include "base/text/text.h"
#include "podpatch/affinity.h"
#include "podpatch/env.h"
#include "podpatch/keys.h"
#include "podpatch/labels.h"
#include "podpatch/limits.h"
#include "podpatch/patch.h"
#include "podpatch/reasons.h"
#include "topology/names.h"

namespace podpatch {

using webhook::member;
using webhook::object_member;
using webhook::string_member;
namespace {

// Values shared by every TPU container of the Pod.
struct SliceValues {
  std::string hostnames;          // multi-host: the DNS names of the replica's hosts, comma-joined
  std::string process_addresses;  // TPU7x, when multi-host or several TPU containers
  std::string torch_topology;
  std::string slicebuilder;    // from the computed host list (or localhost); empty when omitted
  int slicebuilder_ports = 0;  // per entry of that host list: devices per host
  std::size_t slicebuilder_bytes = 0;  // its environment string (M8)
  std::string tpu_name;
  std::string coordinator;
};

SliceValues compute_values(const PodView& view, const MutationPlan& plan, std::string_view group) {
  const topology::Slice& slice = *plan.slice;
  SliceValues v;
  int tpu_containers = static_cast<int>(view.tpu_containers().size());
  std::string_view entries = "localhost";  // the host list M5.3 uses, a view of v.hostnames
  if (slice.multi_host()) {
    v.hostnames = topology::worker_hostnames(group, plan.slot.replica, slice.hosts(), plan.svc);
    entries = v.hostnames;
  }
  if (slice.tpu7x() && (slice.multi_host() || tpu_containers > 1)) {
    v.process_addresses =
        topology::address_list(entries, tpu_containers, plan.ports.tpu_process_base);
  }
  v.torch_topology = topology::torch_tpu_topology(slice.shape(), slice.chiplets());
  v.slicebuilder_ports =
      slice.chips() / static_cast<int>(topology::list_size(entries)) * slice.chiplets();
  // M8.2: measured before it is made; a list that would not fit is not built.
  v.slicebuilder_bytes = list_sizes(slice, group.size(), plan.slot.replica, plan.svc.size(),
                                    tpu_containers, plan.ports)
                             .slicebuilder;
  if (v.slicebuilder_bytes <= kMaxEnvStringBytes) {
    v.slicebuilder =
        topology::address_list(entries, v.slicebuilder_ports, plan.ports.tpu_process_base);
  }
  v.tpu_name = std::string(group) + "-" + std::to_string(plan.slot.replica);
  v.coordinator =
      topology::megascale_coordinator(group, plan.svc, slice.tpu7x(), plan.ports.megascale_base);
  return v;
}

// The env changes of one TPU container, decided on the original container and collecting
// warnings. Reads see the changes already made (a later rule reads what an earlier one set).
class ContainerEnv {
 public:
  ContainerEnv(const json& container, std::string_view name, ContainerChanges& changes,
               std::vector<std::string>& warnings)
      : c_(container), name_(name), changes_(changes), warnings_(warnings) {}

  std::optional<std::string_view> literal(std::string_view var) const {
    if (const EnvChange* e = changed(var)) {
      return e->host_ip || e->value.empty() ? std::nullopt
                                            : std::optional<std::string_view>(e->value);
    }
    return env_literal(c_, var);
  }
  bool present(std::string_view var) const {
    if (const EnvChange* e = changed(var)) {
      return e->host_ip || !e->value.empty();
    }
    return env_present(c_, var);
  }

  // Sets `var` unless present; warns when a present literal differs from `value`.
  void keep_or_set(std::string_view var, const std::string& value) {
    if (present(var)) {
      std::optional<std::string_view> lit = literal(var);
      if (lit && *lit != value) {
        warnings_.push_back(prefix() + "kept " + std::string(var) + "=\"" + std::string(*lit) +
                            "\" from the Pod spec, but this slice needs \"" + value +
                            "\"; remove it from the template unless you mean it");
      }
      return;
    }
    set(var, value, false);
  }

  // Sets `var`, replacing a present literal for which `replace` holds.
  template <class Pred>
  void set_replacing(std::string_view var, const std::string& value, Pred replace) {
    if (changed(var) == nullptr) {
      std::optional<EnvRef> e = find_env(c_, var);
      std::optional<std::string_view> lit = e ? literal_value(*e->entry) : std::nullopt;
      if (lit && *lit != value && replace(*lit)) {
        changes_.env.push_back({EnvChange::Kind::kReplaceValue, e->index, var, value, false});
        return;
      }
    }
    keep_or_set(var, value);
  }

  // Sets `var` to valueFrom status.hostIP unless present.
  void set_host_ip(std::string_view var) {
    if (!present(var)) {
      set(var, std::string(), true);
    }
  }

  std::string prefix() const { return "container " + webhook::quote_bounded(name_) + ": "; }
  std::vector<std::string>& warnings() { return warnings_; }

 private:
  // set_env's rule: a not-present entry of that name is filled in place, else one is appended;
  // appended too when the value refers to a variable ($(NAME)) whose entry would come after it,
  // which Kubernetes would not expand (M5). The last entry of a name is the one that counts.
  void set(std::string_view var, std::string value, bool host_ip) {
    std::optional<EnvRef> e = find_env(c_, var);
    bool fill = e && !is_present(*e->entry) && changed(var) == nullptr &&
                refers_only_before(value, e->index);
    changes_.env.push_back({fill ? EnvChange::Kind::kFill : EnvChange::Kind::kAppend,
                            fill ? e->index : 0, var, std::move(value), host_ip});
  }
  // Whether every $(NAME) in `value` names an entry before position `index`.
  bool refers_only_before(std::string_view value, std::size_t index) const {
    for (std::size_t at = value.find("$("); at != std::string_view::npos;
         at = value.find("$(", at + 2)) {
      std::size_t end = value.find(')', at);
      if (end == std::string_view::npos) {
        break;
      }
      std::string_view ref = value.substr(at + 2, end - at - 2);
      const EnvChange* c = changed(ref);
      std::optional<EnvRef> r = find_env(c_, ref);
      if ((c != nullptr && c->kind == EnvChange::Kind::kAppend) || !r || r->index >= index) {
        return false;
      }
    }
    return true;
  }
  const EnvChange* changed(std::string_view var) const {
    const EnvChange* last = nullptr;
    for (const EnvChange& e : changes_.env) {
      last = e.name == var ? &e : last;
    }
    return last;
  }

  const json& c_;
  std::string_view name_;
  ContainerChanges& changes_;
  std::vector<std::string>& warnings_;
};

// M5.3's slicebuilder list for one container: from its literal TPU_WORKER_HOSTNAMES on a
// multi-host slice when that list divides the chips, else the computed one. `list` is empty when
// it would not fit in one environment string (M8.2): `ports` and `bytes` then say what it was.
struct Slicebuilder {
  std::string list;
  int ports = 0;  // addresses per host entry
  std::size_t bytes = 0;
};

Slicebuilder computed_slicebuilder(const SliceValues& values) {
  return {values.slicebuilder, values.slicebuilder_ports, values.slicebuilder_bytes};
}

Slicebuilder slicebuilder_for(ContainerEnv& env, const topology::Slice& slice,
                              const SliceValues& values, const MutationPlan& plan) {
  if (!slice.multi_host()) {
    return computed_slicebuilder(values);
  }
  std::optional<std::string_view> user = env.literal(keys::kWorkerHostnames);
  if (!user || *user == values.hostnames) {
    return computed_slicebuilder(values);
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
    return computed_slicebuilder(values);
  }
  Slicebuilder out;
  out.ports = slice.chips() / static_cast<int>(count) * slice.chiplets();
  out.bytes = env_string_bytes(keys::kTorchSlicebuilder.size(),
                               topology::address_list_size(user->size() - (count - 1), count,
                                                           out.ports, plan.ports.tpu_process_base));
  if (out.bytes <= kMaxEnvStringBytes) {
    out.list = topology::address_list(*user, out.ports, plan.ports.tpu_process_base);
  }
  return out;
}

// M8.2: TORCH_TPU_SLICEBUILDER_ADDRESSES left out, and what TorchTPU's launcher derives it from
// set instead: for each entry of TPU_WORKER_HOSTNAMES, ports TORCH_TPU_BASE_PORT ..
// TORCH_TPU_BASE_PORT + TORCH_TPU_DEVICES_PER_HOST - 1, which is the list the webhook would have
// written.
void omit_slicebuilder(ContainerEnv& env, int container, const Slicebuilder& sb,
                       const MutationPlan& plan, Mutation& m) {
  std::string base = std::to_string(plan.ports.tpu_process_base);
  std::string devices = std::to_string(sb.ports);
  env.keep_or_set(keys::kTorchBasePort, base);
  env.keep_or_set(keys::kTorchDevicesPerHost, devices);
  m.omitted.push_back({container, keys::kTorchSlicebuilder, sb.bytes});
  env.warnings().push_back(
      env.prefix() + "TORCH_TPU_SLICEBUILDER_ADDRESSES left out: it would be " +
      with_commas(sb.bytes) + " bytes as NAME=value, over Linux's limit of " +
      with_commas(kMaxEnvStringBytes) +
      " bytes for one environment string, and the container could not start; set instead " +
      std::string(keys::kTorchBasePort) + "=" + base + " and " +
      std::string(keys::kTorchDevicesPerHost) + "=" + devices +
      ", from which TorchTPU's launcher derives the same list from TPU_WORKER_HOSTNAMES");
}

void plan_env(ContainerEnv& env, int k, int container, const PodView& view,
              const MutationPlan& plan, const SliceValues& values, Mutation& m) {
  std::vector<std::string>& warnings = m.warnings;
  const topology::Slice& slice = *plan.slice;
  const topology::Ports& ports = plan.ports;
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
    env.set_replacing(keys::kWorkerHostnames, values.hostnames,
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
    Slicebuilder sb = slicebuilder_for(env, slice, values, plan);
    if (!sb.list.empty()) {
      env.keep_or_set(keys::kTorchSlicebuilder, sb.list);
    } else if (!env.present(keys::kTorchSlicebuilder)) {
      omit_slicebuilder(env, container, sb, plan, m);
    }
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
  env.set_host_ip(keys::kDevicePluginHostIp);
  std::string addr;  // "$(TPU_DEVICE_PLUGIN_HOST_IP):<port>", made at once
  addr.reserve(keys::kDevicePluginHostIp.size() + 16);
  addr.append("$(").append(keys::kDevicePluginHostIp).append("):");
  env.keep_or_set(keys::kDevicePluginAddr, addr.append(std::to_string(ports.device_plugin)));
}

// spec.hostname or spec.subdomain: set to `value`, with a warning when it replaces another
// non-empty one; nullopt when it already is `value`.
std::optional<std::string> spec_string(const json* spec, std::string_view key, std::string value,
                                       std::vector<std::string>& warnings) {
  std::optional<std::string_view> old = string_member(spec, key);
  if (old && *old == value) {
    return std::nullopt;
  }
  if (old && !old->empty()) {
    warnings.push_back("replaced spec." + std::string(key) + " \"" + std::string(*old) +
                       "\" with \"" + value + "\" so the slice's peers can resolve this Pod");
  }
  return value;
}

// The valueFrom of M5.6, as JSON text.
constexpr std::string_view kHostIpValueFrom =
    R"({"fieldRef":{"apiVersion":"v1","fieldPath":"status.hostIP"}})";

// The entry fields a change sets: {"value": v} or {"valueFrom": {...}}.
json env_fields(const EnvChange& c) {
  return c.host_ip ? json{{"valueFrom", json::parse(kHostIpValueFrom)}} : json{{"value", c.value}};
}

// {"name":N,"value":V} or {"name":N,"valueFrom":{...}}.
void append_env_entry(std::string& out, const EnvChange& c) {
  out += R"({"name":)";
  webhook::append_json_string(out, c.name);
  if (c.host_ip) {
    out += R"(,"valueFrom":)";
    out += kHostIpValueFrom;
  } else {
    out += R"(,"value":)";
    webhook::append_json_string(out, c.value);
  }
  out.push_back('}');
}

std::string json_string(std::string_view s) {
  std::string out;
  webhook::append_json_string(out, s);
  return out;
}

// The patch of a key that the mutation sets, in one of the three ways json::diff treats it.
enum class Presence { kAbsent, kNull, kPresent };
Presence presence_of(const json* parent, std::string_view key) {
  const json* v = member(parent, key);
  return v == nullptr ? Presence::kAbsent : v->is_null() ? Presence::kNull : Presence::kPresent;
}

// {"requiredDuringSchedulingIgnoredDuringExecution":[terms of `kind`]}, or the array alone.
void append_terms(std::string& out, const Mutation& m, std::string_view kind, bool wrap) {
  if (wrap) {
    out += R"({"requiredDuringSchedulingIgnoredDuringExecution":)";
  }
  out.push_back('[');
  bool first = true;
  for (AffinityTerm t : m.affinity_terms) {
    if (affinity_kind(t) == kind) {
      if (!first) {
        out.push_back(',');
      }
      first = false;
      append_affinity_term(out, m.match, t);
    }
  }
  out.push_back(']');
  if (wrap) {
    out.push_back('}');
  }
}

bool has_kind(const Mutation& m, std::string_view kind) {
  for (AffinityTerm t : m.affinity_terms) {
    if (affinity_kind(t) == kind) {
      return true;
    }
  }
  return false;
}

// spec.affinity's operations, `affinity` being the Pod's (present, not null).
void write_affinity(const json& affinity, const Mutation& m, PatchText& out) {
  static constexpr std::string_view kKinds[] = {"podAffinity", "podAntiAffinity"};
  std::string path;
  for (bool present_pass : {true, false}) {  // json::diff: keys in both first, then new ones
    for (std::string_view kind : kKinds) {
      Presence slot = presence_of(&affinity, kind);
      if (!has_kind(m, kind) || (slot != Presence::kAbsent) != present_pass) {
        continue;
      }
      path = "/spec/affinity/";
      path += kind;
      if (slot == Presence::kPresent) {
        const json& a = affinity[std::string(kind)];
        Presence terms = presence_of(&a, "requiredDuringSchedulingIgnoredDuringExecution");
        path += "/requiredDuringSchedulingIgnoredDuringExecution";
        if (terms == Presence::kPresent) {
          path += "/-";
          for (AffinityTerm t : m.affinity_terms) {
            if (affinity_kind(t) == kind) {
              append_affinity_term(out.begin_value("add", path), m.match, t);
              out.end_value();
            }
          }
        } else {
          append_terms(out.begin_value(terms == Presence::kNull ? "replace" : "add", path), m, kind,
                       false);
          out.end_value();
        }
      } else {
        append_terms(out.begin_value(slot == Presence::kNull ? "replace" : "add", path), m, kind,
                     true);
        out.end_value();
      }
    }
  }
}

// The whole spec.affinity the mutation creates.
void append_affinity(std::string& out, const Mutation& m) {
  out.push_back('{');
  bool first = true;
  for (std::string_view kind : {"podAffinity", "podAntiAffinity"}) {
    if (has_kind(m, kind)) {
      if (!first) {
        out.push_back(',');
      }
      first = false;
      webhook::append_json_string(out, kind);
      out.push_back(':');
      append_terms(out, m, kind, true);
    }
  }
  out.push_back('}');
}

// One container's env operations, `container` being the Pod's.
void write_env(const json& container, const ContainerChanges& c, PatchText& out) {
  std::string path = "/spec/containers/" + std::to_string(c.index) + "/env";
  Presence slot = presence_of(&container, "env");
  if (slot != Presence::kPresent) {  // only appends: the list is created whole
    std::string& text = out.begin_value(slot == Presence::kNull ? "replace" : "add", path);
    text.push_back('[');
    for (std::size_t i = 0; i < c.env.size(); ++i) {
      if (i > 0) {
        text.push_back(',');
      }
      append_env_entry(text, c.env[i]);
    }
    text.push_back(']');
    out.end_value();
    return;
  }
  const json& env = container["env"];
  // Changes in place first, by position (json::diff walks the list in order), then appends.
  std::vector<const EnvChange*> in_place;
  for (const EnvChange& e : c.env) {
    if (e.kind != EnvChange::Kind::kAppend) {
      in_place.push_back(&e);
    }
  }
  std::sort(in_place.begin(), in_place.end(),
            [](const EnvChange* a, const EnvChange* b) { return a->index < b->index; });
  const std::size_t base = path.size();
  for (const EnvChange* e : in_place) {
    path += '/';
    path += std::to_string(e->index);
    const json& entry = env[e->index];
    if (e->kind == EnvChange::Kind::kReplaceValue) {
      path += "/value";
      out.replace(path, json_string(e->value));
    } else {  // a fill: whatever the entry had besides its name may go, so diff it
      json filled = entry;
      filled.erase("value");
      filled.erase("valueFrom");
      json fields = env_fields(*e);
      for (auto& [key, value] : fields.items()) {
        filled[key] = value;
      }
      write_diff(entry, filled, path, out);
    }
    path.resize(base);
  }
  path += "/-";
  for (const EnvChange& e : c.env) {
    if (e.kind == EnvChange::Kind::kAppend) {
      append_env_entry(out.begin_value("add", path), e);
      out.end_value();
    }
  }
}

// {"labels":{"replicaIndex":V}} or {"replicaIndex":V}.
void append_labels(std::string& out, const std::string& value, bool wrap) {
  out += wrap ? R"({"labels":{)" : "{";
  webhook::append_json_string(out, keys::kLegacyReplicaLabel);
  out.push_back(':');
  webhook::append_json_string(out, value);
  out += wrap ? "}}" : "}";
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

Mutation plan_mutation(const PodView& view, const MutationPlan& plan) {
  Mutation m;
  const topology::Slice& slice = *plan.slice;
  std::string group(view.label(keys::kGroupLabel).value_or(""));
  std::string cluster(view.label(keys::kClusterLabel).value_or(""));
  std::string replica_value = group + "-" + std::to_string(plan.slot.replica);

  if (plan.add_replica_label && view.label(keys::kLegacyReplicaLabel) != replica_value) {
    m.replica_label = replica_value;
  }
  const json* spec = member(view.pod(), "spec");
  if (needs_pod_dns(view, slice)) {
    m.hostname =
        spec_string(spec, "hostname", topology::host_name(group, plan.slot.replica, plan.slot.host),
                    m.warnings);
    m.subdomain = spec_string(spec, "subdomain", std::string(plan.svc), m.warnings);
  }
  if (slice.multi_host()) {
    m.match = AffinityMatch{std::string(keys::kLegacyReplicaLabel), replica_value, cluster,
                            std::string(plan.topology_key)};
    auto replica_name = view.label(keys::kReplicaNameLabel);
    if (replica_name && view.label(keys::kHostIndexLabel)) {
      m.match.key = keys::kReplicaNameLabel;
      m.match.value = *replica_name;
    }
    m.affinity_terms = missing_affinity_terms(member(spec, "affinity"), m.match);
  }
  SliceValues values = compute_values(view, plan, group);
  int k = 0;
  m.containers.reserve(view.tpu_containers().size());
  for (const TpuContainer& t : view.tpu_containers()) {
    ContainerChanges changes{t.index, {}};
    changes.env.reserve(keys::kWebhookEnv.size());  // one change per variable at most
    ContainerEnv env(view.container(t.index), t.name, changes, m.warnings);
    plan_env(env, k++, t.index, view, plan, values, m);
    if (!changes.env.empty()) {
      m.containers.push_back(std::move(changes));
    }
  }
  return m;
}

void apply_mutation(json& pod, const Mutation& m) {
  if (m.replica_label) {
    json& labels = object_member(object_member(pod, "metadata"), "labels");
    labels[std::string(keys::kLegacyReplicaLabel)] = *m.replica_label;
  }
  if (m.hostname || m.subdomain) {
    json& spec = object_member(pod, "spec");
    for (auto [key, value] : {std::pair{"hostname", &m.hostname}, {"subdomain", &m.subdomain}}) {
      if (*value) {
        spec[key] = **value;
      }
    }
  }
  add_affinity_terms(pod, m.match, m.affinity_terms);
  for (const ContainerChanges& c : m.containers) {
    json& container = object_member(pod, "spec")["containers"][static_cast<std::size_t>(c.index)];
    for (const EnvChange& e : c.env) {
      if (e.kind == EnvChange::Kind::kReplaceValue) {
        replace_env_value(container, e.index, e.value);
      } else if (e.kind == EnvChange::Kind::kAppend) {
        append_env(container, e.name, env_fields(e));
      } else {
        set_env(container, e.name, env_fields(e));  // kFill: the not-present entry at e.index
      }
    }
  }
}

void write_patch(const PodView& view, const Mutation& m, std::string& out) {
  PatchText patch(out);
  const json& pod = view.pod();
  // json::diff's order: at each level the keys the Pod has, sorted (metadata < spec), then the
  // keys it lacks.
  Presence metadata = presence_of(&pod, "metadata");
  if (m.replica_label && metadata == Presence::kNull) {
    append_labels(patch.begin_value("replace", "/metadata"), *m.replica_label, true);
    patch.end_value();
  } else if (m.replica_label && metadata == Presence::kPresent) {
    const json* labels = member(pod, "metadata", "labels");
    if (labels != nullptr && !labels->is_null()) {
      std::string path = "/metadata/labels";
      append_pointer_token(path, keys::kLegacyReplicaLabel);
      bool has = labels->contains(keys::kLegacyReplicaLabel);
      patch.begin_value(has ? "replace" : "add", path);
      webhook::append_json_string(out, *m.replica_label);
      patch.end_value();
    } else {
      append_labels(patch.begin_value(labels != nullptr ? "replace" : "add", "/metadata/labels"),
                    *m.replica_label, false);
      patch.end_value();
    }
  }
  const json* spec = member(pod, "spec");
  bool affinity = !m.affinity_terms.empty();
  Presence affinity_slot = presence_of(spec, "affinity");
  if (affinity && affinity_slot == Presence::kPresent) {
    write_affinity((*spec)["affinity"], m, patch);
  } else if (affinity && affinity_slot == Presence::kNull) {
    append_affinity(patch.begin_value("replace", "/spec/affinity"), m);
    patch.end_value();
  }
  for (const ContainerChanges& c : m.containers) {
    write_env(view.container(c.index), c, patch);
  }
  const std::pair<std::string_view, const std::optional<std::string>*> strings[] = {
      {"hostname", &m.hostname}, {"subdomain", &m.subdomain}};
  for (const auto& [key, value] : strings) {
    if (*value && presence_of(spec, key) != Presence::kAbsent) {
      patch.replace("/spec/" + std::string(key), json_string(**value));
    }
  }
  if (affinity && affinity_slot == Presence::kAbsent) {
    append_affinity(patch.begin_value("add", "/spec/affinity"), m);
    patch.end_value();
  }
  for (const auto& [key, value] : strings) {
    if (*value && presence_of(spec, key) == Presence::kAbsent) {
      patch.add("/spec/" + std::string(key), json_string(**value));
    }
  }
  if (m.replica_label && metadata == Presence::kAbsent) {
    append_labels(patch.begin_value("add", "/metadata"), *m.replica_label, true);
    patch.end_value();
  }
  patch.finish();
}

webhook::Status check_env_strings(const Mutation& m, std::string_view group, std::string_view svc,
                                  std::string_view cluster) {
  const EnvChange* worst = nullptr;  // of the lists over the limit, the one needing the most cut
  std::size_t worst_cut = 0;
  for (const ContainerChanges& c : m.containers) {
    for (const EnvChange& e : c.env) {
      if (!e.host_ip && !env_string_fits(e.name.size(), e.value.size())) {
        std::size_t cut = names_cut(env_string_bytes(e.name.size(), e.value.size()),
                                    topology::list_size(e.value));
        if (worst == nullptr || cut > worst_cut) {
          worst = &e;
          worst_cut = cut;
        }
      }
    }
  }
  if (worst == nullptr) {
    return {};
  }
  return env_too_long(worst->name, env_string_bytes(worst->name.size(), worst->value.size()),
                      topology::list_size(worst->value), group, svc, cluster);
}

webhook::Status check_pod_size(std::size_t pod_bytes, std::size_t patch_bytes, const Mutation& m) {
  if (pod_bytes + patch_bytes <= kMaxPodBytes) {
    return {};
  }
  // What takes the space: the Pod as sent, and each variable written, over all its containers.
  std::vector<std::pair<std::size_t, std::string>> parts;
  for (const ContainerChanges& c : m.containers) {
    for (const EnvChange& e : c.env) {
      auto same = std::find_if(parts.begin(), parts.end(),
                               [&](const auto& p) { return p.second == e.name; });
      if (same == parts.end()) {
        parts.emplace_back(e.value.size(), e.name);
      } else {
        same->first += e.value.size();
      }
    }
  }
  std::sort(parts.begin(), parts.end(), std::greater<>());
  std::string what = "the Pod as sent " + with_commas(pod_bytes);
  for (std::size_t i = 0; i < parts.size() && i < 3; ++i) {
    what += ", " + parts[i].second + " " + with_commas(parts[i].first);
  }
  return webhook::invalid_argument(
             "the mutated Pod would be up to " + with_commas(pod_bytes + patch_bytes) +
             " bytes of JSON, over the webhook's budget of " + with_commas(kMaxPodBytes) +
             " bytes (etcd refuses to store an object over 1.5 MiB); bytes: " + what + " (over " +
             std::to_string(m.containers.size()) +
             " TPU container(s): each carries its own copy of the lists); use fewer TPU "
             "containers per Pod, shorter worker group and RayCluster names, or a smaller slice")
      .with_reason(reasons::kPodTooLarge);
}

std::vector<std::string> mutate(json& pod, const PodView& view, const MutationPlan& plan) {
  Mutation m = plan_mutation(view, plan);
  apply_mutation(pod, m);
  return std::move(m.warnings);
}

}  // namespace podpatch
