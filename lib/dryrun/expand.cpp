#include "dryrun/expand.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <system_error>

#include "base/json/access.h"
#include "dryrun/quantity.h"
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

// ---- The worker's `ray start` command, as KubeRay's Pod builder writes it ---------------------

using Params = std::map<std::string, std::string>;

constexpr std::string_view kOverwriteCmdAnnotation = "ray.io/overwrite-container-cmd";
constexpr std::string_view kUlimit = "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ";

// The accelerators KubeRay advertises to Ray under a custom resource name.
std::optional<std::string_view> ray_accelerator_name(std::string_view resource) {
  if (resource == keys::kTpuResource) {
    return "TPU";
  }
  if (resource == "aws.amazon.com/neuroncore") {
    return "neuron_cores";
  }
  return std::nullopt;
}

// A value of a map[string]string field (rayStartParams, the group's resources and labels) as
// the API server holds it: YAML may type `8` as a number or `true` as a boolean, which read back
// as their JSON text. Other values are not strings at all and are dropped.
std::optional<std::string> scalar_text(const json& v) {
  if (v.is_string()) {
    return v.get<std::string>();
  }
  if (v.is_boolean()) {
    return v.get<bool>() ? "true" : "false";
  }
  if (v.is_number()) {
    return webhook::dump_json(v);
  }
  return std::nullopt;
}

Params string_map(const json* obj) {
  Params out;
  if (obj != nullptr && obj->is_object()) {
    for (const auto& [k, v] : obj->items()) {
      if (std::optional<std::string> text = scalar_text(v)) {
        out[k] = std::move(*text);
      }
    }
  }
  return out;
}

// A container's limits or requests, by resource name (sorted by bytes, as Go's sort.Strings).
// A quantity that does not parse is left out: the API server would have refused the Pod.
std::map<std::string, Quantity> quantities(const json* list) {
  std::map<std::string, Quantity> out;
  for (const auto& [name, text] : string_map(list)) {
    if (std::optional<Quantity> q = parse_quantity(text)) {
      out.emplace(name, std::move(*q));
    }
  }
  return out;
}

// KubeRay's IsGPUResourceKey: a name ending in "gpu", or an NVIDIA MIG slice
// (nvidia.com/mig-<n>g.<m>gb).
bool is_gpu_key(std::string_view key) {
  if (key.ends_with("gpu")) {
    return true;
  }
  auto digits = [](std::string_view& s) {
    std::size_t n = 0;
    while (n < s.size() && s[n] >= '0' && s[n] <= '9') {
      ++n;
    }
    s.remove_prefix(n);
    return n > 0;
  };
  constexpr std::string_view kMig = "nvidia.com/mig-";
  for (std::size_t at = key.find(kMig); at != std::string_view::npos; at = key.find(kMig, at + 1)) {
    std::string_view rest = key.substr(at + kMig.size());
    if (digits(rest) && rest.starts_with("g.") && (rest.remove_prefix(2), digits(rest)) &&
        rest == "gb") {
      return true;
    }
  }
  return false;
}

// The flag's value as Go's strconv.FormatInt(q.Value()) writes it; nothing when the value is
// beyond int64 (where Go's answer wraps).
void set_integer(Params& params, const std::string& flag, const Quantity& q) {
  if (std::optional<std::int64_t> v = q.value()) {
    params[flag] = std::to_string(*v);
  }
}

// A float64 as Go's encoding/json writes it: the shortest digits that read back, as %f below
// 1e21 and from 1e-6, else as %e with the exponent's leading zero dropped (1e-7, 1e+21).
std::string go_json_float(double f) {
  std::array<char, 64> buf{};
  auto [end, ec] =
      std::to_chars(buf.data(), buf.data() + buf.size(), f, std::chars_format::scientific);
  std::string sci(buf.data(), ec == std::errc() ? end : buf.data());
  double a = std::fabs(f);
  if (a != 0 && (a < 1e-6 || a >= 1e21)) {
    std::size_t n = sci.size();
    if (n >= 4 && sci[n - 4] == 'e' && sci[n - 3] == '-' && sci[n - 2] == '0') {
      sci.erase(n - 2, 1);
    }
    return sci;
  }
  // %f of the shortest digits. std::to_chars' fixed format would print a large double's exact
  // value (123456789012345683968) where Go pads the shortest digits with zeros.
  std::size_t e = sci.find('e');
  int exponent = std::stoi(sci.substr(e + 1));
  std::string sign = sci[0] == '-' ? "-" : "";
  std::string digits = sci.substr(sign.size(), e - sign.size());
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  if (exponent < 0) {
    return sign + "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  }
  auto point = static_cast<std::size_t>(exponent) + 1;
  if (digits.size() <= point) {
    return sign + digits + std::string(point - digits.size(), '0');
  }
  return sign + digits.substr(0, point) + "." + digits.substr(point);
}

// A JSON string as Go's encoding/json writes it (HTML-safe: <, > and & escaped). The input is
// valid UTF-8 (documents are read as text), so only U+2028 and U+2029 need care beyond ASCII.
void append_go_json_string(std::string& out, std::string_view s) {
  constexpr std::string_view kHex = "0123456789abcdef";
  out += '"';
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    std::string_view rest = s.substr(i);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f') {
      out += '\\';
      out += c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : c == '\b' ? 'b' : 'f';
    } else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    } else if (rest.starts_with("\xE2\x80\xA8") || rest.starts_with("\xE2\x80\xA9")) {
      out += rest[2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

// Go's json.Marshal of a map[string]float64: keys sorted by bytes, no spaces. nullopt for a NaN
// or an infinity, which Go refuses to encode (KubeRay then leaves --resources as it was).
std::optional<std::string> go_json_resources(const std::map<std::string, double>& resources) {
  std::string out = "{";
  for (const auto& [name, value] : resources) {
    if (!std::isfinite(value)) {
      return std::nullopt;
    }
    if (out.size() > 1) {
      out += ',';
    }
    append_go_json_string(out, name);
    out += ':';
    out += go_json_float(value);
  }
  return out + "}";
}

// The group's top-level `resources` (KubeRay >= 1.5) override the flags they name: cpu, memory
// and a GPU become --num-cpus, --memory and --num-gpus; anything else replaces --resources.
void apply_group_resources(Params& params, const json* resources) {
  std::map<std::string, double> custom;
  for (const auto& [name, text] : string_map(resources)) {
    std::optional<Quantity> q = parse_quantity(text);
    if (!q) {
      continue;  // KubeRay logs and skips it
    }
    std::string key = lower(name);
    if (key == "cpu") {
      set_integer(params, "num-cpus", *q);
    } else if (key == "memory") {
      set_integer(params, "memory", *q);
    } else if (is_gpu_key(key)) {
      set_integer(params, "num-gpus", *q);
    } else {
      custom[name] = q->approximate();
    }
  }
  if (!custom.empty()) {
    if (std::optional<std::string> text = go_json_resources(custom)) {
      params["resources"] = "'" + *text + "'";
    }
  }
}

// The group's top-level `labels` (KubeRay >= 1.5) become --labels=k1=v1,k2=v2, keys sorted.
void apply_group_labels(Params& params, const json* labels) {
  std::string text;
  for (const auto& [k, v] : string_map(labels)) {
    text += (text.empty() ? "" : ",") + k + "=" + v;
  }
  if (!text.empty()) {
    params["labels"] = std::move(text);
  }
}

// The --resources flag's current JSON object (surrounding quotes and spaces trimmed), or nullopt
// when it is not an object of numbers: KubeRay then adds neither a GPU nor an accelerator.
std::optional<std::map<std::string, double>> resources_map(const Params& params) {
  std::map<std::string, double> out;
  auto it = params.find("resources");
  if (it == params.end()) {
    return out;
  }
  constexpr std::string_view kTrim = "'\"` ";
  std::string_view text = it->second;
  std::size_t first = text.find_first_not_of(kTrim);
  text = first == std::string_view::npos
             ? std::string_view()
             : text.substr(first, text.find_last_not_of(kTrim) - first + 1);
  json v = json::parse(text.begin(), text.end(), nullptr, false);
  if (v.is_null()) {
    return out;  // Go decodes `null` as an empty map
  }
  if (!v.is_object()) {
    return std::nullopt;  // not JSON (discarded) or not an object
  }
  for (const auto& [name, value] : v.items()) {
    if (value.is_null()) {
      out[name] = 0;
    } else if (value.is_number() && std::isfinite(value.get<double>())) {
      out[name] = value.get<double>();
    } else {
      return std::nullopt;
    }
  }
  return out;
}

// --num-gpus from the first GPU limit, and the first accelerator limit (google.com/tpu ->
// "TPU") into --resources unless it already names an accelerator.
void add_accelerators(Params& params, const std::map<std::string, Quantity>& limits) {
  if (limits.empty()) {
    return;
  }
  std::optional<std::map<std::string, double>> resources = resources_map(params);
  if (!resources) {
    return;
  }
  bool accelerator_added = resources->contains("TPU") || resources->contains("neuron_cores");
  for (const auto& [name, q] : limits) {
    if (!params.contains("num-gpus") && is_gpu_key(name) && !q.is_zero()) {
      set_integer(params, "num-gpus", q);
    }
    std::optional<std::string_view> ray_name = ray_accelerator_name(name);
    if (accelerator_added || !ray_name || q.is_zero()) {
      continue;
    }
    accelerator_added = true;
    (*resources)[std::string(*ray_name)] = q.approximate();
    std::optional<std::string> text = go_json_resources(*resources);
    if (!text) {
      return;
    }
    params["resources"] = "'" + *text + "'";
  }
}

// Flags from the Ray container's resources when the params do not set them: --num-cpus from the
// cpu limit (else the request), --memory from the memory limit only, then the accelerators.
void add_container_resources(Params& params, const json& container) {
  std::map<std::string, Quantity> limits = quantities(member(container, "resources", "limits"));
  std::map<std::string, Quantity> requests = quantities(member(container, "resources", "requests"));
  if (!params.contains("num-cpus")) {
    for (const auto* list : {&limits, &requests}) {
      auto cpu = list->find("cpu");
      if (cpu != list->end() && !cpu->second.is_zero()) {
        set_integer(params, "num-cpus", cpu->second);
        break;
      }
    }
  }
  if (auto memory = limits.find("memory");
      !params.contains("memory") && memory != limits.end() && !memory->second.is_zero()) {
    set_integer(params, "memory", memory->second);
  }
  add_accelerators(params, limits);
}

// " --key=value " per param, keys sorted; a "true" value writes the bare switch " --key " and a
// "false" one nothing, except for the flags that take an explicit boolean.
std::string convert_param_map(const Params& params) {
  std::string out;
  for (const auto& [key, value] : params) {
    std::string v = lower(value);
    bool takes_boolean =
        key == "log-color" || key == "include-dashboard" || key == "include-log-monitor";
    if ((v == "true" || v == "false") && !takes_boolean) {
      out += v == "true" ? " --" + key + " " : "";
    } else {
      out += " --" + key + "=" + value + " ";
    }
  }
  return out;
}

// The worker's `ray start` command: the group's rayStartParams, its top-level resources and
// labels, KubeRay's defaults for a worker, then the Ray container's resources.
std::string ray_start_command(const json& group, const json& container,
                              const std::string& address) {
  Params params = string_map(member(group, "rayStartParams"));
  apply_group_resources(params, member(group, "resources"));
  apply_group_labels(params, member(group, "labels"));
  params.try_emplace("address", address);
  params.try_emplace("metrics-export-port", "8080");
  params["block"] = "true";  // always: KubeRay relies on `ray start` not returning
  params.try_emplace("dashboard-agent-listen-port", "52365");
  add_container_resources(params, container);
  return "ray start " + convert_param_map(params);
}

// KubeRay keeps the container's own command when it already runs `ray start` or the Pod asks
// (ray.io/overwrite-container-cmd: "true"); otherwise the command becomes bash running the
// container's command and args (each element as " <e> ", KubeRay's convertCmdToString), then the
// generated one.
void set_container_command(json& c, const std::string& start, bool overwrite) {
  std::string cmd;
  for (std::string_view key : {"command", "args"}) {
    if (const json* list = member(c, key); list != nullptr && list->is_array()) {
      for (const json& e : *list) {
        if (e.is_string()) {
          cmd += " " + e.get<std::string>() + " ";
        }
      }
    }
  }
  if (overwrite || cmd.find("ray start") != std::string::npos) {
    return;
  }
  std::string generated = std::string(kUlimit) + start;
  c["command"] = json::array({"/bin/bash", "-c", "--"});
  c["args"] = json::array({cmd.empty() ? generated : cmd + " && " + generated});
}

// The Ray container's additions (KubeRay setContainerEnvVars, command, metrics port). Returns the
// template's env, which the wait-gcs-ready init container copies.
json shape_ray_container(json& c, const json& group, bool overwrite_cmd, const std::string& fqdn,
                         const std::string& head_svc) {
  json template_env = member(c, "env") != nullptr && c["env"].is_array() ? c["env"] : json::array();
  json env = template_env;
  std::string address = fqdn + ":6379";
  std::string start = ray_start_command(group, c, address);
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
  set_container_command(c, start, overwrite_cmd);
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

// The template's annotations, plus ray.io/overwrite-container-cmd: "true" when the RayCluster
// itself carries it (KubeRay copies it onto every Pod template).
json template_annotations(const json& raycluster, const json& tmpl) {
  const json* ann = member(tmpl, "metadata", "annotations");
  json out = ann != nullptr && ann->is_object() ? *ann : json::object();
  Params cluster = string_map(member(raycluster, "metadata", "annotations"));
  if (lower(cluster[std::string(kOverwriteCmdAnnotation)]) == "true") {
    out[std::string(kOverwriteCmdAnnotation)] = "true";
  }
  return out;
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

// Where a worker Pod stands: its cluster, group and slot.
struct WorkerSlot {
  const std::string& cluster;
  const std::string& group;
  int hosts;
  int replica;
  int host;
};

// KubeRay's labels of a worker Pod: the template's and the group's, then KubeRay's own.
json worker_labels(const json& g, const json& tmpl, const WorkerSlot& w, bool from_service,
                   bool indexing) {
  json labels = json::object();
  for (const json* src : {member(tmpl, "metadata", "labels"), member(g, "labels")}) {
    if (src != nullptr && src->is_object()) {
      labels.update(*src);
    }
  }
  for (auto [k, v] : {std::pair<std::string_view, std::string>{keys::kAppNameLabel, "kuberay"},
                      {keys::kCreatedByLabel, "kuberay-operator"},
                      {"ray.io/identifier", check_label(w.cluster + "-worker")}}) {
    if (!labels.contains(k)) {
      labels[std::string(k)] = v;
    }
  }
  labels[std::string(keys::kClusterLabel)] = w.cluster;
  labels[std::string(keys::kNodeTypeLabel)] = "worker";
  labels[std::string(keys::kGroupLabel)] = w.group;
  labels["ray.io/is-ray-node"] = "yes";
  if (from_service) {
    labels["ray.io/serve"] = "true";  // a RayService's workers serve traffic
  }
  if (indexing) {
    labels[std::string(keys::kReplicaIndexLabel)] = std::to_string(w.replica);
    if (w.hosts > 1) {
      labels[std::string(keys::kReplicaNameLabel)] = replica_name(w.cluster, w.group, w.replica);
      labels[std::string(keys::kHostIndexLabel)] = std::to_string(w.host);
    }
  }
  return labels;
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
  std::vector<WorkerPod> out;
  RETURN_IF_ERROR(for_each_worker(raycluster, options, [&](WorkerPod&& w) {
    out.push_back(std::move(w));
    return webhook::Status();
  }));
  return out;
}

namespace {

// What every worker Pod of one RayCluster shares.
struct ClusterFacts {
  std::string cluster;
  std::string ns;
  std::string uid;
  bool from_service = false;  // the workers of a RayService's cluster
  std::string head_svc;
  std::string fqdn;  // of the head Service
};

// The worker Pod at `slot` of group `g` (whose template is `tmpl`), as KubeRay creates it.
json worker_pod(const json& raycluster, const json& g, const json& tmpl, const ClusterFacts& c,
                const WorkerSlot& slot, bool indexing) {
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"status", json::object()}};
  json md = json::object();
  md["generateName"] = lower((c.cluster + "-" + slot.group).substr(0, 50)) + "-worker-";
  md["namespace"] = c.ns;
  md["creationTimestamp"] = nullptr;
  md["labels"] = worker_labels(g, tmpl, slot, c.from_service, indexing);
  json annotations = template_annotations(raycluster, tmpl);
  bool overwrite_cmd =
      lower(string_map(&annotations)[std::string(kOverwriteCmdAnnotation)]) == "true";
  if (!annotations.empty()) {
    md["annotations"] = std::move(annotations);
  }
  md["ownerReferences"] = json::array({{{"apiVersion", "ray.io/v1"},
                                        {"kind", "RayCluster"},
                                        {"name", c.cluster},
                                        {"uid", c.uid},
                                        {"controller", true},
                                        {"blockOwnerDeletion", true}}});
  pod["metadata"] = std::move(md);
  json spec = member(tmpl, "spec") != nullptr ? tmpl["spec"] : json::object();
  if (spec.contains("containers") && spec["containers"].is_array() && !spec["containers"].empty() &&
      spec["containers"][0].is_object()) {
    json& ray = spec["containers"][0];
    json template_env = shape_ray_container(ray, g, overwrite_cmd, c.fqdn, c.head_svc);
    add_shared_memory(spec, ray);
    json& inits = spec["initContainers"];
    if (!inits.is_array()) {
      inits = json::array();
    }
    inits.push_back(wait_gcs_ready(ray, std::move(template_env), c.fqdn, c.head_svc));
  }
  pod["spec"] = std::move(spec);
  return pod;
}

}  // namespace

webhook::Status for_each_worker(const json& raycluster, const ExpandOptions& options,
                                const std::function<webhook::Status(WorkerPod&&)>& fn) {
  const json* metadata = member(raycluster, "metadata");
  ClusterFacts c;
  c.cluster = string_member(metadata, "name").value_or("");
  if (c.cluster.empty()) {
    return webhook::invalid_argument("RayCluster has no metadata.name");
  }
  c.ns = string_member(metadata, "namespace").value_or(options.default_namespace);
  c.uid = string_member(metadata, "uid").value_or("00000000-0000-4000-8000-000000000000");
  // KubeRay marks the workers of a RayService's cluster (the cluster's originated-from label).
  c.from_service = string_member(member(metadata, "labels"), "ray.io/originated-from-crd") ==
                   std::string_view("RayService");
  c.head_svc = c.cluster + "-head-svc";
  c.fqdn = c.head_svc + "." + c.ns + ".svc.cluster.local";
  const json* groups = member(raycluster, "spec", "workerGroupSpecs");
  if (groups == nullptr || !groups->is_array()) {
    return {};
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
      auto it = options.existing.find({c.ns, c.cluster, group});
      count = std::max(0, count - (it == options.existing.end() ? 0 : it->second));
    }
    for (int i = 0; i < count; ++i) {
      int replica = i / hosts;
      int host = i % hosts;
      json pod = worker_pod(raycluster, g, *tmpl, c, {c.cluster, group, hosts, replica, host},
                            options.indexing);
      RETURN_IF_ERROR(fn({std::move(pod), group, replica, host}));
    }
  }
  return {};
}

}  // namespace dryrun
