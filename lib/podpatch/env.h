#pragma once
// A container's env list with docs/spec.md Terms "present" semantics.
//
//   auto e = podpatch::find_env(container, "TPU_WORKER_ID");
//   if (e && podpatch::is_present(*e->entry)) { ... }
//
// When a name appears more than once, the last entry is the one Kubernetes uses, so it is the
// one these functions find.

#include <optional>
#include <string_view>

#include "base/json/access.h"
#include "podpatch/labels.h"

namespace podpatch {

struct EnvRef {
  std::size_t index = 0;  // position in the env array
  const json* entry = nullptr;
};

// An entry the server's fast decode elided (admission::decode_for_mutation): a well-formed entry
// of a variable the webhook neither reads nor writes (keys::webhook_env), which holds only its
// place in the list. It is nlohmann's `discarded` value, which parsed JSON never holds and which
// costs no allocation; it has no name, so find_env never returns it.
inline json elided_env_entry() {
  json entry(json::value_t::discarded);  // (braces would make an array holding it)
  return entry;
}
inline bool is_elided_env_entry(const json& entry) { return entry.is_discarded(); }

// The last entry named `name` in container["env"], or nullopt.
std::optional<EnvRef> find_env(const json& container, std::string_view name);

// Present: a non-empty `value`, or a `valueFrom`.
bool is_present(const json& entry);

// The entry's non-empty literal `value`, or nullopt (no value, empty value, or valueFrom only).
std::optional<std::string_view> literal_value(const json& entry);

// The literal value of `name` in the container, when present as a literal.
std::optional<std::string_view> env_literal(const json& container, std::string_view name);

// Whether `name` is present in the container.
bool env_present(const json& container, std::string_view name);

// Sets `name` on a mutable container: an entry with that name that is not present (empty value,
// no valueFrom) is replaced in place; otherwise {name, ...fields} is appended. `fields` is the
// entry without its name, e.g. {"value": "3"} or {"valueFrom": {...}}.
void set_env(json& container, std::string_view name, json fields);
// Appends {name, ...fields}, whatever entries of that name the container has.
void append_env(json& container, std::string_view name, json fields);

// Replaces the literal value of the entry at `index`.
void replace_env_value(json& container, std::size_t index, std::string_view value);

}  // namespace podpatch
