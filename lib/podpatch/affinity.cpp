#include "podpatch/affinity.h"

#include <iterator>
#include <map>

#include "base/json/access.h"
#include "base/json/write.h"
#include "podpatch/keys.h"
#include "podpatch/labels.h"

namespace podpatch {

using webhook::object_member;
using webhook::string_member;
namespace {

constexpr std::string_view kRequired = "requiredDuringSchedulingIgnoredDuringExecution";

// {"key":K,"operator":OP[,"values":[V]]}
void append_requirement(std::string& out, std::string_view key, std::string_view op,
                        const std::string_view* value) {
  out += R"({"key":)";
  webhook::append_json_string(out, key);
  out += R"(,"operator":)";
  webhook::append_json_string(out, op);
  if (value != nullptr) {
    out += R"(,"values":[)";
    webhook::append_json_string(out, *value);
    out.push_back(']');
  }
  out.push_back('}');
}

}  // namespace

std::string default_topology_key(const PodView& pod) {
  if (const json* terms = pod.required_pod_affinity_terms()) {
    for (const json& t : *terms) {
      std::optional<std::string_view> key = string_member(&t, "topologyKey");
      if (key && key->starts_with(keys::kGoogleTopologyPrefix)) {
        return std::string(*key);
      }
    }
  }
  if (auto kueue = pod.annotation(keys::kKueueTopologyAnnotation);
      kueue && kueue->starts_with(keys::kGoogleTopologyPrefix)) {
    return std::string(*kueue);
  }
  return std::string(keys::kGkeNodePool);
}

std::optional<std::string_view> subslice_topology_key(std::span<const Labels> nodes, int hosts) {
  for (std::string_view label : {keys::kGceTopologyHost, keys::kGceTopologySubblock,
                                 keys::kGceTopologyBlock, keys::kGkeNodePool}) {
    std::map<std::string_view, int> groups;
    for (const Labels& n : nodes) {
      if (auto it = n.find(label); it != n.end() && !it->second.empty()) {
        ++groups[it->second];
      }
    }
    for (const auto& [value, count] : groups) {
      if (count == hosts) {
        return label;
      }
    }
  }
  return std::nullopt;
}

bool has_gce_topology_labels(std::span<const Labels> nodes) {
  for (const Labels& n : nodes) {
    for (std::string_view label :
         {keys::kGceTopologyHost, keys::kGceTopologySubblock, keys::kGceTopologyBlock}) {
      if (n.contains(label)) {
        return true;
      }
    }
  }
  return false;
}

std::string_view affinity_kind(AffinityTerm term) {
  return term == AffinityTerm::kSameReplica ? "podAffinity" : "podAntiAffinity";
}

void append_affinity_term(std::string& out, const AffinityMatch& m, AffinityTerm term) {
  const std::string_view value = m.value;
  const std::string_view cluster = m.cluster;
  out += R"({"labelSelector":{"matchExpressions":[)";
  if (term == AffinityTerm::kOtherClusters) {
    append_requirement(out, keys::kClusterLabel, "NotIn", &cluster);
    out.push_back(',');
    append_requirement(out, m.key, "Exists", nullptr);
    out += R"(]},"namespaceSelector":{"matchExpressions":[)";
    const std::string_view system = "kube-system";
    append_requirement(out, keys::kNamespaceNameLabel, "NotIn", &system);
  } else {
    append_requirement(out, m.key, term == AffinityTerm::kSameReplica ? "In" : "NotIn", &value);
    out.push_back(',');
    append_requirement(out, keys::kClusterLabel, "In", &cluster);
  }
  out += R"(]},"topologyKey":)";
  webhook::append_json_string(out, m.topology_key);
  out.push_back('}');
}

json affinity_term(const AffinityMatch& match, AffinityTerm term) {
  std::string text;
  append_affinity_term(text, match, term);
  return json::parse(text);
}

std::vector<AffinityTerm> missing_affinity_terms(const json* affinity, const AffinityMatch& m) {
  std::vector<AffinityTerm> out;
  out.reserve(std::size(kAffinityTerms));
  for (AffinityTerm t : kAffinityTerms) {
    const json* terms = webhook::member(affinity, affinity_kind(t), kRequired);
    bool present = false;
    if (terms != nullptr && terms->is_array() && !terms->empty()) {
      json wanted = affinity_term(m, t);
      for (const json& existing : *terms) {
        present = present || existing == wanted;
      }
    }
    if (!present) {
      out.push_back(t);
    }
  }
  return out;
}

void add_affinity_terms(json& pod, const AffinityMatch& m, std::span<const AffinityTerm> terms) {
  if (terms.empty()) {
    return;
  }
  json& affinity = object_member(object_member(pod, "spec"), "affinity");
  for (AffinityTerm t : terms) {
    json& list = object_member(affinity, affinity_kind(t))[std::string(kRequired)];
    if (!list.is_array()) {
      list = json::array();
    }
    list.push_back(affinity_term(m, t));
  }
}

void merge_affinity(json& pod, const AffinityMatch& m) {
  add_affinity_terms(pod, m, missing_affinity_terms(webhook::member(pod, "spec", "affinity"), m));
}

}  // namespace podpatch
