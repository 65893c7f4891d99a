#pragma once
// Null-safe reads of nlohmann::json without operator[] (which inserts, or is undefined on const),
// and a dump that never throws.
//
//   const json* labels = webhook::member(pod, "metadata", "labels");
//   std::optional<std::string_view> v = webhook::string_member(labels, "ray.io/cluster");
//   std::string text = webhook::dump_json(pod);   // invalid UTF-8 becomes U+FFFD

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace webhook {

using json = nlohmann::json;

// The member `key` of `obj`, or nullptr when obj is null, not an object, or lacks the key.
inline const json* member(const json* obj, std::string_view key) {
  if (obj == nullptr || !obj->is_object()) {
    return nullptr;
  }
  auto it = obj->find(key);
  return it == obj->end() ? nullptr : &*it;
}
inline const json* member(const json& obj, std::string_view key) { return member(&obj, key); }

// Nested lookup: member(member(obj, a), b) ...
template <class... Keys>
const json* member(const json* obj, std::string_view key, Keys... rest) {
  return member(member(obj, key), rest...);
}
template <class... Keys>
const json* member(const json& obj, std::string_view key, Keys... rest) {
  return member(member(&obj, key), rest...);
}

// The string value of `key`, or nullopt when absent or not a string.
inline std::optional<std::string_view> string_member(const json* obj, std::string_view key) {
  const json* v = member(obj, key);
  if (v == nullptr || !v->is_string()) {
    return std::nullopt;
  }
  return std::string_view(v->get_ref<const json::string_t&>());
}

// The object member `key` of a mutable object, created as {} when missing or null.
inline json& object_member(json& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    json& slot = obj[std::string(key)];
    slot = json::object();
    return slot;
  }
  return *it;
}

// Serializes without throwing: invalid UTF-8 in strings (YAML input may hold it) becomes U+FFFD
// where nlohmann's default handler throws. Use it for every dump of data that came from outside.
// indent -1 is compact.
inline std::string dump_json(const json& value, int indent = -1) {
  return value.dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace webhook
