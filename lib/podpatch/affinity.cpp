#include "podpatch/affinity.h"

#include <map>

#include "base/json/access.h"
#include "podpatch/keys.h"
#include "podpatch/labels.h"

namespace podpatch {

using webhook::object_member;
using webhook::string_member;
namespace {

json requirement(std::string_view key, std::string_view op, std::optional<std::string_view> value) {
  json r = {{"key", key}, {"operator", op}};
  if (value) {
    r["values"] = json::array({*value});
  }
  return r;
}

json term(json expressions, std::string_view topology_key) {
  return {{"labelSelector", {{"matchExpressions", std::move(expressions)}}},
          {"topologyKey", topology_key}};
}

void add_term(json& affinity, std::string_view kind, json t) {
  json& a = object_member(affinity, kind);
  json& terms = a["requiredDuringSchedulingIgnoredDuringExecution"];
  if (!terms.is_array()) {
    terms = json::array();
  }
  for (const json& existing : terms) {
    if (existing == t) {
      return;
    }
  }
  terms.push_back(std::move(t));
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

void merge_affinity(json& pod, const AffinityMatch& m) {
  json& affinity = object_member(object_member(pod, "spec"), "affinity");
  add_term(affinity, "podAffinity",
           term(json::array({requirement(m.key, "In", m.value),
                             requirement(keys::kClusterLabel, "In", m.cluster)}),
                m.topology_key));
  add_term(affinity, "podAntiAffinity",
           term(json::array({requirement(m.key, "NotIn", m.value),
                             requirement(keys::kClusterLabel, "In", m.cluster)}),
                m.topology_key));
  json other_clusters = term(json::array({requirement(keys::kClusterLabel, "NotIn", m.cluster),
                                          requirement(m.key, "Exists", std::nullopt)}),
                             m.topology_key);
  other_clusters["namespaceSelector"] = {
      {"matchExpressions",
       json::array({requirement(keys::kNamespaceNameLabel, "NotIn", "kube-system")})}};
  add_term(affinity, "podAntiAffinity", std::move(other_clusters));
}

}  // namespace podpatch
