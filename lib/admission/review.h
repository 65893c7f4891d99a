#pragma once
// The admission.k8s.io/v1 AdmissionReview envelope (docs/spec.md Envelope).
//
//   webhook::Result<admission::Request> req = admission::decode(body);
//   admission::Response r = req ? handler.mutate(*req)
//                               : admission::denied(admission::request_uid(body), req.error());
//   std::string out = admission::encode(r);   // response.uid == request.uid on every path

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status/result.h"
#include "podpatch/placement.h"

namespace admission {

using json = nlohmann::json;

// Nesting deeper than this is refused before parsing: a Pod or RayCluster is ~15 levels deep,
// and recursion over unbounded depth (diff, dump) would exhaust the stack.
inline constexpr int kMaxJsonDepth = 100;

struct Request {
  std::string uid;
  std::string kind;       // request.kind.kind, e.g. "Pod"
  std::string group;      // request.kind.group, "" for core
  std::string version;    // request.kind.version
  std::string operation;  // CREATE, UPDATE, DELETE, CONNECT
  bool dry_run = false;
  std::string ns;
  std::string name;           // request.name
  std::string object_name;    // request.object.metadata.name
  std::string generate_name;  // request.object.metadata.generateName
  json object;                // request.object (null for DELETE)
  json old_object;            // request.oldObject (UPDATE and DELETE), else null
};

// Parses an AdmissionReview. Fails with reason malformed_request and a message saying what is
// wrong and what is expected on an empty body, bytes that are not JSON, nesting deeper than
// kMaxJsonDepth (ResourceExhausted), a JSON that is not an admission.k8s.io/v1 AdmissionReview,
// or one without `request`, `request.uid`, `request.kind` or `request.operation`.
webhook::Result<Request> decode(std::string_view body);

// request.uid of an AdmissionReview read from the start of `text` without parsing the rest:
// works on a body cut short, malformed or too large to parse, so that a refusal can still name
// the request it answers. "" when none can be read.
std::string request_uid(std::string_view text);

// Refuses JSON text nested deeper than `max_depth` (arrays and objects), scanning the bytes once
// without parsing. ResourceExhausted naming the depth; other syntax errors are left to the parser.
webhook::Status check_json_depth(std::string_view text, int max_depth);

struct Response {
  std::string uid;
  bool allowed = true;
  int code = 200;
  std::string message;      // denials: what is wrong and how to fix it
  std::string_view reason;  // denials: a name from podpatch/reasons.h, e.g. "invalid_topology"
  json patch;               // RFC 6902 operations; null or empty means no patch
  std::vector<std::string> warnings;
  std::optional<podpatch::Placement> placement;  // for logs and metrics, not encoded
};

Response allowed(std::string uid);
Response patched(std::string uid, json patch);
// A denial carrying error.message, the HTTP code of error.code and error.reason.
Response denied(std::string uid, const webhook::Error& error);

// The AdmissionReview JSON the API server expects: uid echoed; patch base64-encoded with
// patchType JSONPatch only when non-empty; status {code, message} on denials; warnings.
std::string encode(const Response& response);

// The same response as a json value (for printing by the CLI).
json to_json(const Response& response);

}  // namespace admission
