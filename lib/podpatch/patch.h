#pragma once
// The JSON Patch (RFC 6902) between two JSON values.
//
//   json patch = podpatch::diff(before, after);   // before.patch(patch) == after
//
// It gives exactly the operations nlohmann::json::diff gives, in the same order (a test checks
// every fixture), so the webhook's patches are unchanged. nlohmann's version compares whole
// subtrees again at every level and builds a temporary array per element; on a Pod's env lists
// that made it a third of the time the webhook spends on an admission.

#include <nlohmann/json.hpp>

namespace podpatch {

using json = nlohmann::json;

// Objects: "remove" for keys only in `source`, recursion for keys in both, "add" for keys only
// in `target` (keys in sorted order, '~' and '/' escaped). Arrays: element-wise over the common
// prefix, then "remove" of the extra source elements from the last one back, then "add" of the
// extra target elements at "/-". Values of different types, or different scalars: "replace".
json diff(const json& source, const json& target);

}  // namespace podpatch
