#include "admission/review.h"

#include "base/encoding/base64.h"
#include "base/json/access.h"
#include "podpatch/reasons.h"

namespace admission {

using webhook::member;
using webhook::string_member;
namespace {

constexpr std::string_view kApiVersion = "admission.k8s.io/v1";

webhook::Error malformed(std::string message) {
  return webhook::invalid_argument(std::move(message))
      .with_reason(podpatch::reasons::kMalformedRequest);
}

// Stops at request.uid of a top-level object; everything else is skipped unparsed into values.
class UidSniffer final : public nlohmann::json_sax<json> {
 public:
  std::string uid;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool string(string_t& s) override {
    if (depth_ == 2 && in_request_ && key_ == "uid") {
      uid = s;
      return false;  // found: stop parsing
    }
    return value();
  }
  bool start_object(std::size_t) override {
    if (depth_ == 1 && key_ == "request") {
      in_request_ = true;
    }
    ++depth_;
    key_.clear();
    return true;
  }
  bool end_object() override {
    --depth_;
    if (depth_ == 1) {
      in_request_ = false;
    }
    return depth_ > 0;  // the top-level object ended without a uid
  }
  bool start_array(std::size_t) override {
    ++depth_;
    key_.clear();
    return depth_ > 1;  // a top-level array is not a review
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ <= 2) {
      key_ = k;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  bool value() {
    if (depth_ <= 2) {
      key_.clear();
    }
    return depth_ > 0;
  }

  int depth_ = 0;
  bool in_request_ = false;
  std::string key_;
};

// The review parsed as JSON, with its envelope (apiVersion, kind, request) checked.
webhook::Result<json> parse_review(std::string_view body) {
  if (body.empty()) {
    return malformed("empty request body; expected an admission.k8s.io/v1 AdmissionReview");
  }
  if (webhook::Status s = check_json_depth(body, kMaxJsonDepth); !s) {
    return webhook::Error(s.error()).with_reason(podpatch::reasons::kMalformedRequest);
  }
  json review = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (review.is_discarded()) {
    return malformed(
        "request body is not valid JSON; expected an admission.k8s.io/v1 AdmissionReview");
  }
  if (!review.is_object()) {
    return malformed("request body is a JSON " + std::string(review.type_name()) +
                     ", not an AdmissionReview object");
  }
  std::optional<std::string_view> api = string_member(&review, "apiVersion");
  std::optional<std::string_view> kind = string_member(&review, "kind");
  if (kind != std::string_view("AdmissionReview") || api != kApiVersion) {
    return malformed("expected apiVersion admission.k8s.io/v1, kind AdmissionReview; got " +
                     std::string(api.value_or("(none)")) + ", " +
                     std::string(kind.value_or("(none)")) +
                     " (set admissionReviewVersions: [v1] in the webhook configuration)");
  }
  const json* req = member(review, "request");
  if (req == nullptr || !req->is_object()) {
    return malformed("AdmissionReview has no request object");
  }
  if (string_member(req, "uid").value_or("").empty()) {
    return malformed("AdmissionReview request has no uid");
  }
  if (!string_member(member(req, "kind"), "kind") || !string_member(req, "operation")) {
    return malformed("AdmissionReview request needs kind {group, version, kind} and operation");
  }
  return review;
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

webhook::Result<Request> decode(std::string_view body) {
  ASSIGN_OR_RETURN(json review, parse_review(body));
  json& request = review["request"];
  const json* gvk = member(request, "kind");
  const json* dry = member(request, "dryRun");
  Request r;
  r.uid = string_member(&request, "uid").value_or("");
  r.kind = string_member(gvk, "kind").value_or("");
  r.group = string_member(gvk, "group").value_or("");
  r.version = string_member(gvk, "version").value_or("");
  r.operation = string_member(&request, "operation").value_or("");
  r.dry_run = dry != nullptr && dry->is_boolean() && dry->get<bool>();
  r.ns = string_member(&request, "namespace").value_or("");
  r.name = string_member(&request, "name").value_or("");
  if (auto obj = request.find("object"); obj != request.end()) {
    r.object = std::move(*obj);  // the one copy of the object is moved, not copied
    const json* metadata = member(r.object, "metadata");
    r.object_name = string_member(metadata, "name").value_or("");
    r.generate_name = string_member(metadata, "generateName").value_or("");
  }
  if (auto old = request.find("oldObject"); old != request.end()) {
    r.old_object = std::move(*old);
  }
  return r;
}

std::string request_uid(std::string_view text) {
  UidSniffer sniffer;
  json::sax_parse(text.begin(), text.end(), &sniffer, nlohmann::detail::input_format_t::json,
                  /*strict=*/false);
  return sniffer.uid;
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

Response denied(std::string uid, const webhook::Error& error) {
  Response r;
  r.uid = std::move(uid);
  r.allowed = false;
  r.code = webhook::http_code(error.code);
  r.message = error.message;
  r.reason = error.reason;
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
