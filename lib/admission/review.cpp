#include "admission/review.h"

#include "base/encoding/base64.h"
#include "base/json/access.h"

namespace admission {

using webhook::member;
using webhook::string_member;
namespace {


constexpr std::string_view kApiVersion = "admission.k8s.io/v1";

Decoded failure(webhook::Error error, std::string uid = "") {
  Decoded d;
  d.error = std::move(error);
  d.uid = std::move(uid);
  return d;
}

}  // namespace

webhook::Status check_json_depth(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) {
        return webhook::Error{webhook::ErrorCode::kResourceExhausted,
                              "JSON nesting is deeper than " + std::to_string(max_depth) +
                                  " levels; a Kubernetes object is far shallower"};
      }
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return {};
}

Decoded decode(std::string_view body) {
  if (body.empty()) {
    return failure(webhook::invalid_argument(
        "empty request body; expected an admission.k8s.io/v1 AdmissionReview"));
  }
  if (webhook::Status s = check_json_depth(body, kMaxJsonDepth); !s) {
    return failure(s.error());
  }
  json review = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (review.is_discarded()) {
    return failure(webhook::invalid_argument(
        "request body is not valid JSON; expected an admission.k8s.io/v1 AdmissionReview"));
  }
  const json* req = member(review, "request");
  std::string uid(string_member(req, "uid").value_or(""));
  if (!review.is_object()) {
    return failure(webhook::invalid_argument("request body is a JSON " +
                                             std::string(review.type_name()) +
                                             ", not an AdmissionReview object"));
  }
  std::optional<std::string_view> api = string_member(&review, "apiVersion");
  std::optional<std::string_view> kind = string_member(&review, "kind");
  if (kind != std::string_view("AdmissionReview") || api != kApiVersion) {
    return failure(webhook::invalid_argument(
                       "expected apiVersion admission.k8s.io/v1, kind AdmissionReview; got " +
                       std::string(api.value_or("(none)")) + ", " +
                       std::string(kind.value_or("(none)")) +
                       " (set admissionReviewVersions: [v1] in the webhook configuration)"),
                   uid);
  }
  if (req == nullptr || !req->is_object()) {
    return failure(webhook::invalid_argument("AdmissionReview has no request object"), uid);
  }
  if (uid.empty()) {
    return failure(webhook::invalid_argument("AdmissionReview request has no uid"));
  }
  const json* gvk = member(req, "kind");
  std::optional<std::string_view> op = string_member(req, "operation");
  if (!string_member(gvk, "kind") || !op) {
    return failure(webhook::invalid_argument(
                       "AdmissionReview request needs kind {group, version, kind} and operation"),
                   uid);
  }
  Request r;
  r.uid = uid;
  r.kind = string_member(gvk, "kind").value_or("");
  r.group = string_member(gvk, "group").value_or("");
  r.version = string_member(gvk, "version").value_or("");
  r.operation = *op;
  const json* dry = member(req, "dryRun");
  r.dry_run = dry != nullptr && dry->is_boolean() && dry->get<bool>();
  r.ns = string_member(req, "namespace").value_or("");
  r.name = string_member(req, "name").value_or("");
  json& request = review["request"];
  if (auto obj = request.find("object"); obj != request.end()) {
    r.object = std::move(*obj);  // the one copy of the object is moved, not copied
  }
  if (auto old = request.find("oldObject"); old != request.end()) {
    r.old_object = std::move(*old);
  }
  Decoded d;
  d.uid = r.uid;
  d.request = std::move(r);
  return d;
}

Response allowed(std::string uid) {
  Response r;
  r.uid = std::move(uid);
  return r;
}

Response patched(std::string uid, json patch) {
  Response r = allowed(std::move(uid));
  r.patch = std::move(patch);
  return r;
}

Response denied(std::string uid, const webhook::Error& error, std::string reason) {
  Response r;
  r.uid = std::move(uid);
  r.allowed = false;
  r.code = webhook::http_code(error.code);
  r.message = error.message;
  r.reason = std::move(reason);
  return r;
}

json to_json(const Response& response) {
  json out = {{"uid", response.uid}, {"allowed", response.allowed}};
  if (response.patch.is_array() && !response.patch.empty()) {
    out["patchType"] = "JSONPatch";
    out["patch"] = webhook::base64_encode(webhook::dump_json(response.patch));
  }
  if (!response.allowed) {
    out["status"] = {{"code", response.code}, {"message", response.message}};
  }
  if (!response.warnings.empty()) {
    out["warnings"] = response.warnings;
  }
  return {{"apiVersion", kApiVersion}, {"kind", "AdmissionReview"}, {"response", std::move(out)}};
}

std::string encode(const Response& response) {
  // Written directly rather than through to_json(): the response is small, but the base64 patch
  // would otherwise be copied into a json value and escaped once more. to_json() is the reference
  // (review_test checks that both give the same JSON).
  std::string out;
  out.reserve(4096 + response.message.size());
  out += R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":)";
  out += webhook::dump_json(json(response.uid));
  out += response.allowed ? R"(,"allowed":true)" : R"(,"allowed":false)";
  if (response.patch.is_array() && !response.patch.empty()) {
    out += R"(,"patchType":"JSONPatch","patch":")";
    out += webhook::base64_encode(webhook::dump_json(response.patch));
    out += '"';
  }
  if (!response.allowed) {
    out += R"(,"status":{"code":)" + std::to_string(response.code) + R"(,"message":)";
    out += webhook::dump_json(json(response.message));
    out += '}';
  }
  if (!response.warnings.empty()) {
    out += R"(,"warnings":)";
    out += webhook::dump_json(json(response.warnings));
  }
  out += "}}";
  return out;
}


}  // namespace admission
