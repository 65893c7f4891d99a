#include "podpatch/pod_view.h"

#include <type_traits>

#include "base/json/access.h"
#include "base/text/numbers.h"
#include "podpatch/env.h"
#include "podpatch/keys.h"
#include "podpatch/labels.h"

namespace podpatch {

using webhook::member;
using webhook::string_member;
namespace {

using webhook::invalid_argument;

std::string type_name(const json& v) { return v.type_name(); }

// Checks that `v` (may be null) is absent, null, or an object whose values are all strings.
webhook::Status check_string_map(const json* v, std::string_view field) {
  if (v == nullptr || v->is_null()) {
    return {};
  }
  if (!v->is_object()) {
    return invalid_argument(std::string(field) + " must be an object, got " + type_name(*v));
  }
  for (const auto& [key, value] : v->items()) {
    if (!value.is_string()) {
      return invalid_argument(std::string(field) + " \"" + key + "\" must be a string, got " +
                              type_name(value));
    }
  }
  return {};
}

// A field's name for a message: the text, or what a callable builds (only when a message is
// made: a Pod that is fine costs no string).
template <class Field>
std::string field_text(const Field& field) {
  if constexpr (std::is_invocable_v<const Field&>) {
    return field();
  } else {
    return std::string(field);
  }
}

template <class Field>
webhook::Status check_type(const json* v, const Field& field, json::value_t want,
                           std::string_view want_name) {
  if (v == nullptr || v->is_null() || v->type() == want) {
    return {};
  }
  return invalid_argument(field_text(field) + " must be " + std::string(want_name) + ", got " +
                          type_name(*v));
}

// google.com/tpu as a whole number of chips: a JSON integer, or a string of digits.
// Kubernetes quantities such as "4" arrive as strings.
template <class Field>
webhook::Result<int> chip_quantity(const json& q, const Field& field) {
  constexpr std::int64_t kMaxChipsPerContainer = 1024;
  std::optional<std::int64_t> n;
  if (q.is_number_unsigned()) {
    n = q.get<std::uint64_t>() <= kMaxChipsPerContainer
            ? std::optional<std::int64_t>(static_cast<std::int64_t>(q.get<std::uint64_t>()))
            : std::nullopt;
  } else if (q.is_number_integer()) {
    // A signed integer: what a YAML `google.com/tpu: 4` becomes (webhook-dryrun).
    std::int64_t v = q.get<std::int64_t>();
    n = v >= 0 && v <= kMaxChipsPerContainer ? std::optional<std::int64_t>(v) : std::nullopt;
  } else if (q.is_string()) {
    n = webhook::parse_non_negative(q.get_ref<const std::string&>(), kMaxChipsPerContainer);
  }
  if (!n) {
    return invalid_argument(field() + " " + webhook::dump_json(q) +
                            " is not a whole number of TPU chips; set it to the chips per "
                            "host the machine type has, such as \"4\"");
  }
  return static_cast<int>(*n);
}

// Request, else limit (docs/spec.md Terms "chips per host"); 0 when neither is set or both are
// zero.
template <class Field>
webhook::Result<int> container_chips(const json& container, const Field& where) {
  const json* resources = member(container, "resources");
  if (resources == nullptr || resources->is_null()) {
    return 0;
  }
  if (!resources->is_object()) {
    return invalid_argument(where() + ".resources must be an object, got " + type_name(*resources));
  }
  int request = 0;
  int limit = 0;
  for (std::string_view kind : {"requests", "limits"}) {
    const json* list = member(resources, kind);
    if (list == nullptr || list->is_null()) {
      continue;
    }
    if (!list->is_object()) {
      return invalid_argument(where() + ".resources." + std::string(kind) +
                              " must be an object, got " + type_name(*list));
    }
    const json* q = member(list, keys::kTpuResource);
    if (q == nullptr || q->is_null()) {
      continue;
    }
    webhook::Result<int> chips = chip_quantity(*q, [&] {
      return where() + ".resources." + std::string(kind) + "[" + std::string(keys::kTpuResource) +
             "]";
    });
    if (!chips) {
      return chips.error();
    }
    (kind == "requests" ? request : limit) = *chips;
  }
  return request != 0 ? request : limit;
}

// Each of `keys` in `obj` is absent, null or a string; the message names <prefix><key>.
webhook::Status check_strings(const json* obj, std::string_view prefix,
                              std::initializer_list<std::string_view> keys) {
  for (std::string_view key : keys) {
    if (webhook::Status s = check_type(
            member(obj, key), [&] { return std::string(prefix) + std::string(key); },
            json::value_t::string, "a string");
        !s) {
      return s;
    }
  }
  return {};
}

template <class Where>
webhook::Status check_env(const json& container, const Where& where) {
  const json* env = member(container, "env");
  if (webhook::Status s = check_type(
          env, [&] { return where() + ".env"; }, json::value_t::array, "an array");
      !s) {
    return s;
  }
  if (env == nullptr || env->is_null()) {
    return {};
  }
  if (env->size() > kMaxEnvEntries) {
    return webhook::Error{webhook::ErrorCode::kResourceExhausted,
                          where() + ".env has " + std::to_string(env->size()) +
                              " entries; the webhook handles at most " +
                              std::to_string(kMaxEnvEntries) + " per container"};
  }
  for (std::size_t i = 0; i < env->size(); ++i) {
    const json& e = (*env)[i];
    if (is_elided_env_entry(e)) {
      continue;  // well-formed when decoded
    }
    auto field = [&] { return where() + ".env[" + std::to_string(i) + "]"; };
    if (!e.is_object() || !string_member(&e, "name")) {
      return invalid_argument(field() + " must be an object with a string name");
    }
    const json* value = member(e, "value");
    if (value != nullptr && !value->is_null() && !value->is_string()) {
      return invalid_argument(field() + ".value must be a string, got " + type_name(*value));
    }
  }
  return {};
}

webhook::Status check_affinity(const json* spec) {
  const json* affinity = member(spec, "affinity");
  if (webhook::Status s = check_type(affinity, "spec.affinity", json::value_t::object, "an object");
      !s) {
    return s;
  }
  for (std::string_view kind : {"podAffinity", "podAntiAffinity"}) {
    auto field = [&] { return "spec.affinity." + std::string(kind); };
    const json* a = member(affinity, kind);
    if (webhook::Status s = check_type(a, field, json::value_t::object, "an object"); !s) {
      return s;
    }
    const json* terms = member(a, "requiredDuringSchedulingIgnoredDuringExecution");
    if (webhook::Status s = check_type(
            terms, [&] { return field() + ".requiredDuringSchedulingIgnoredDuringExecution"; },
            json::value_t::array, "an array");
        !s) {
      return s;
    }
  }
  return {};
}

}  // namespace

webhook::Result<std::vector<TpuContainer>> find_tpu_containers(const json* containers,
                                                               std::string_view where) {
  std::vector<TpuContainer> out;
  if (containers == nullptr || containers->is_null()) {
    return out;
  }
  if (!containers->is_array()) {
    return invalid_argument(std::string(where) + " must be an array, got " +
                            type_name(*containers));
  }
  if (containers->size() > kMaxContainers) {
    return webhook::Error{webhook::ErrorCode::kResourceExhausted,
                          std::string(where) + " has " + std::to_string(containers->size()) +
                              " containers; the webhook handles at most " +
                              std::to_string(kMaxContainers)};
  }
  for (std::size_t i = 0; i < containers->size(); ++i) {
    const json& c = (*containers)[i];
    if (!c.is_object()) {
      return invalid_argument(std::string(where) + "[" + std::to_string(i) +
                              "] must be an object, got " + type_name(c));
    }
    std::optional<std::string_view> name = string_member(&c, "name");
    // The field's name, for a message: spec.containers[<name>], else [<index>].
    auto field = [&] {
      return std::string(where) + "[" + (name ? std::string(*name) : std::to_string(i)) + "]";
    };
    webhook::Result<int> chips = container_chips(c, field);
    if (!chips) {
      return chips.error();
    }
    if (*chips > 0) {
      out.push_back({static_cast<int>(i), *chips, name.value_or("")});
    }
  }
  return out;
}

bool kueue_managed(const json* labels, const json* annotations) {
  return member(labels, keys::kKueueQueueLabel) != nullptr ||
         member(annotations, keys::kKueueTopologyAnnotation) != nullptr ||
         string_member(annotations, keys::kSkipCheckAnnotation) == std::string_view("true");
}

std::optional<TopologyField> topology_field(const json* annotations, const json* node_selector) {
  if (auto sub = string_member(annotations, keys::kSubsliceAnnotation)) {
    return TopologyField{*sub, "annotation cloud.google.com/gke-tpu-slice-topology"};
  }
  if (auto topo = string_member(node_selector, keys::kTopologySelector)) {
    return TopologyField{*topo, "nodeSelector cloud.google.com/gke-tpu-topology"};
  }
  return std::nullopt;
}

webhook::Result<PodView> PodView::create(const json& pod) {
  if (!pod.is_object()) {
    return invalid_argument("the Pod must be a JSON object, got " + type_name(pod));
  }
  PodView view(pod);
  const json* metadata = member(pod, "metadata");
  if (webhook::Status s = check_type(metadata, "metadata", json::value_t::object, "an object");
      !s) {
    return s.error();
  }
  if (webhook::Status s =
          check_strings(metadata, "metadata.", {"name", "generateName", "namespace"});
      !s) {
    return s.error();
  }
  view.labels_ = member(metadata, "labels");
  view.annotations_ = member(metadata, "annotations");
  if (webhook::Status s = check_string_map(view.labels_, "metadata.labels"); !s) {
    return s.error();
  }
  if (webhook::Status s = check_string_map(view.annotations_, "metadata.annotations"); !s) {
    return s.error();
  }
  const json* spec = member(pod, "spec");
  if (webhook::Status s = check_type(spec, "spec", json::value_t::object, "an object"); !s) {
    return s.error();
  }
  view.node_selector_ = member(spec, "nodeSelector");
  if (webhook::Status s = check_string_map(view.node_selector_, "spec.nodeSelector"); !s) {
    return s.error();
  }
  if (webhook::Status s = check_strings(spec, "spec.", {"hostname", "subdomain"}); !s) {
    return s.error();
  }
  view.containers_ = member(spec, "containers");
  webhook::Result<std::vector<TpuContainer>> tpu =
      find_tpu_containers(view.containers_, "spec.containers");
  if (!tpu) {
    return tpu.error();
  }
  view.tpu_ = std::move(tpu).value();
  for (const TpuContainer& t : view.tpu_) {
    auto where = [&] { return "spec.containers[" + std::string(t.name) + "]"; };
    if (webhook::Status s =
            check_env((*view.containers_)[static_cast<std::size_t>(t.index)], where);
        !s) {
      return s.error();
    }
  }
  if (webhook::Status s = check_affinity(spec); !s) {
    return s.error();
  }
  return view;
}

std::string_view PodView::name() const {
  return string_member(member(*pod_, "metadata"), "name").value_or("");
}
std::string_view PodView::generate_name() const {
  return string_member(member(*pod_, "metadata"), "generateName").value_or("");
}
std::string_view PodView::namespace_name() const {
  return string_member(member(*pod_, "metadata"), "namespace").value_or("");
}
std::string pod_name(const json& pod, std::string_view fallback) {
  const json* metadata = member(pod, "metadata");
  for (std::string_view candidate :
       {string_member(metadata, "name").value_or(""),
        string_member(metadata, "generateName").value_or(""), fallback}) {
    if (!candidate.empty()) {
      return std::string(candidate);
    }
  }
  return "(no name)";
}

std::optional<std::string_view> PodView::label(keys::Listed<keys::kPodLabelsRead> key) const {
  return string_member(labels_, key.key);
}
std::optional<std::string_view> PodView::annotation(
    keys::Listed<keys::kPodAnnotationsRead> key) const {
  return string_member(annotations_, key.key);
}
std::optional<std::string_view> PodView::node_selector(std::string_view key) const {
  return string_member(node_selector_, key);
}

int PodView::chips_per_host() const {
  int sum = 0;
  for (const TpuContainer& t : tpu_) {
    sum += t.chips;
  }
  return sum;
}

const json& PodView::container(int index) const {
  return (*containers_)[static_cast<std::size_t>(index)];
}

std::optional<TopologyField> PodView::topology() const {
  return topology_field(annotations_, node_selector_);
}

std::string_view PodView::accelerator() const {
  return node_selector(keys::kAcceleratorSelector).value_or("");
}

bool PodView::kueue_managed() const { return podpatch::kueue_managed(labels_, annotations_); }

bool PodView::deleting() const {
  const json* ts = member(*pod_, "metadata", "deletionTimestamp");
  return ts != nullptr && !ts->is_null();
}

const json* PodView::required_pod_affinity_terms() const {
  const json* terms = member(*pod_, "spec", "affinity", "podAffinity",
                             "requiredDuringSchedulingIgnoredDuringExecution");
  return terms != nullptr && terms->is_array() ? terms : nullptr;
}

}  // namespace podpatch
