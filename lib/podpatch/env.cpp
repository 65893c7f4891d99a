#include "podpatch/env.h"

#include "base/json/access.h"
#include "podpatch/labels.h"

namespace podpatch {

using webhook::member;
using webhook::string_member;

std::optional<EnvRef> find_env(const json& container, std::string_view name) {
  const json* env = member(container, "env");
  if (env == nullptr || !env->is_array()) {
    return std::nullopt;
  }
  for (std::size_t i = env->size(); i-- > 0;) {
    const json& e = (*env)[i];
    if (string_member(&e, "name") == name) {
      return EnvRef{i, &e};
    }
  }
  return std::nullopt;
}

std::optional<std::string_view> literal_value(const json& entry) {
  std::optional<std::string_view> v = string_member(&entry, "value");
  if (v && !v->empty()) {
    return v;
  }
  return std::nullopt;
}

bool is_present(const json& entry) {
  const json* from = member(entry, "valueFrom");
  return literal_value(entry).has_value() || (from != nullptr && !from->is_null());
}

std::optional<std::string_view> env_literal(const json& container, std::string_view name) {
  std::optional<EnvRef> e = find_env(container, name);
  return e ? literal_value(*e->entry) : std::nullopt;
}

bool env_present(const json& container, std::string_view name) {
  std::optional<EnvRef> e = find_env(container, name);
  return e && is_present(*e->entry);
}

void set_env(json& container, std::string_view name, json fields) {
  if (std::optional<EnvRef> e = find_env(container, name); e && !is_present(*e->entry)) {
    json& entry = container["env"][e->index];  // the not-present entry, in place (spec Terms)
    entry.erase("value");
    entry.erase("valueFrom");
    for (auto& [key, value] : fields.items()) {
      entry[key] = std::move(value);
    }
    return;
  }
  append_env(container, name, std::move(fields));
}

void append_env(json& container, std::string_view name, json fields) {
  auto it = container.find("env");
  if (it == container.end() || !it->is_array()) {
    container["env"] = json::array();
  }
  json entry = json::object();
  entry["name"] = name;
  for (auto& [key, value] : fields.items()) {
    entry[key] = std::move(value);
  }
  container["env"].push_back(std::move(entry));
}

void replace_env_value(json& container, std::size_t index, std::string_view value) {
  container["env"][index]["value"] = value;
}

}  // namespace podpatch
