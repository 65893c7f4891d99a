#pragma once
// Kubernetes label maps: a Pod's labels, a nodeSelector, a Node's labels.
//
//   podpatch::Labels selector = podpatch::to_labels(webhook::member(pod, "spec", "nodeSelector"));
//   bool fits = podpatch::matches(node_labels, selector);

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace podpatch {

using json = nlohmann::json;
using Labels = std::map<std::string, std::string, std::less<>>;

// Whether `labels` has every key of `selector` with the same value (a Kubernetes equality
// selector such as a Pod's nodeSelector).
inline bool matches(const Labels& labels, const Labels& selector) {
  for (const auto& [key, value] : selector) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) {
      return false;
    }
  }
  return true;
}

// The string members of `obj` (a labels map, a nodeSelector) as Labels; other members, a null
// or a non-object give nothing.
inline Labels to_labels(const nlohmann::json* obj) {
  Labels out;
  if (obj != nullptr && obj->is_object()) {
    for (const auto& [key, value] : obj->items()) {
      if (value.is_string()) {
        out.emplace(key, value.get<std::string>());
      }
    }
  }
  return out;
}

}  // namespace podpatch
