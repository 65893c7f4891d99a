#include "admission/review.h"

#include <algorithm>
#include <new>

#include "base/encoding/base64.h"
#include "base/json/access.h"
#include "base/json/write.h"
#include "base/memory/heap_limit.h"
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
      if (s.size() <= kMaxUidBytes) {  // longer is no uid to echo
        uid = s;
      }
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

webhook::Error too_deep(int max_depth) {
  return webhook::Error{webhook::ErrorCode::kResourceExhausted,
                        "JSON nesting is deeper than " + std::to_string(max_depth) +
                            " levels; a Kubernetes object is far shallower"};
}

std::string approx_size(std::size_t bytes) {
  constexpr double kMiB = 1024.0 * 1024.0;
  if (bytes < std::size_t{1024} * 1024) {
    return std::to_string((bytes + 1023) / 1024) + " KiB";
  }
  std::string mib = std::to_string(static_cast<double>(bytes) / kMiB);
  return mib.substr(0, mib.find('.') + 2) + " MiB";
}

webhook::Error too_costly(std::size_t body_bytes) {
  return webhook::Error{
      webhook::ErrorCode::kResourceExhausted,
      "the review's JSON takes more than " + approx_size(parse_memory_bound(body_bytes)) +
          " of memory to parse, " + std::to_string(kParseMemoryPerBodyByte) + " times its " +
          std::to_string(body_bytes) +
          " bytes: it is mostly tiny values (such as [{},{},...] or long lists of numbers), "
          "where a Kubernetes object is mostly strings; remove the field that repeats them",
      podpatch::reasons::kJsonTooCostly};
}

// The deepest nesting of arrays and objects in `text`, strings skipped (a quote ends a string
// after an even number of backslashes); stops one past max_depth.
int json_depth(std::string_view text, int max_depth) {
  int depth = 0;
  int deepest = 0;
  for (std::size_t i = 0; i < text.size() && deepest <= max_depth; ++i) {
    switch (text[i]) {
      case '"':
        while (++i < text.size() && text[i] != '"') {
          if (text[i] == '\\') {
            ++i;  // the escaped byte
          }
        }
        break;
      case '[':
      case '{':
        deepest = std::max(deepest, ++depth);
        break;
      case ']':
      case '}':
        depth -= depth > 0 ? 1 : 0;
        break;
      default:
        break;
    }
  }
  return deepest;
}

// Empties `value` children first, so that destroying it allocates nothing: nlohmann::json's own
// destructor moves a container's children onto a heap stack first, up to 16 bytes for each
// value of the text, more than parse_memory_bound leaves when the text is mostly small values.
// Recursion is bounded by the depth decode accepts.
void release_tree(json& value) noexcept {
  if (value.is_array()) {
    for (json& child : value) {
      release_tree(child);
    }
    value.get_ref<json::array_t&>().clear();
  } else if (value.is_object()) {
    for (auto& member : value.get_ref<json::object_t&>()) {
      release_tree(member.second);
    }
    value.get_ref<json::object_t&>().clear();
  }
  value = nullptr;
}

// Releases a value as release_tree does when it goes out of scope.
struct ReleasedTree {
  json& value;
  explicit ReleasedTree(json& v) : value(v) {}
  ReleasedTree(const ReleasedTree&) = delete;
  ReleasedTree& operator=(const ReleasedTree&) = delete;
  ~ReleasedTree() { release_tree(value); }
};

// `body` parsed as nlohmann's json::parse does; discarded when the text is not JSON. What it
// built is released before an exception (a HeapLimit's std::bad_alloc) leaves.
json parse_json(std::string_view body) {
  json value;
  try {
    nlohmann::detail::json_sax_dom_parser<json> builder(value, /*allow_exceptions_=*/false);
    if (json::sax_parse(body, &builder) && !builder.is_errored()) {
      return value;
    }
  } catch (...) {
    release_tree(value);
    throw;
  }
  release_tree(value);
  value = json::value_t::discarded;
  return value;
}

// The review parsed as JSON, with its envelope (apiVersion, kind, request) checked.
webhook::Result<json> parse_review(std::string_view body) {
  if (body.empty()) {
    return malformed("empty request body; expected an admission.k8s.io/v1 AdmissionReview");
  }
  if (json_depth(body, kMaxJsonDepth) > kMaxJsonDepth) {
    return too_deep(kMaxJsonDepth).with_reason(podpatch::reasons::kMalformedRequest);
  }
  json review = parse_json(body);
  ReleasedTree released{review};
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
  std::string_view uid = string_member(req, "uid").value_or("");
  if (uid.empty()) {
    return malformed("AdmissionReview request has no uid");
  }
  if (uid.size() > kMaxUidBytes) {
    return malformed("AdmissionReview request.uid is " + std::to_string(uid.size()) +
                     " bytes, more than " + std::to_string(kMaxUidBytes) +
                     "; the API server sends a UUID of 36: send the uid it gave");
  }
  if (!string_member(member(req, "kind"), "kind") || !string_member(req, "operation")) {
    return malformed("AdmissionReview request needs kind {group, version, kind} and operation");
  }
  return review;
}

}  // namespace

webhook::Status check_json_depth(std::string_view text, int max_depth) {
  int limit = std::min(max_depth, kMaxJsonDepth);
  if (json_depth(text, limit) > limit) {
    return too_deep(limit);
  }
  return {};
}

Request::~Request() {
  release_tree(object);
  release_tree(old_object);
}

namespace {

webhook::Result<Request> decode_review(std::string_view body) {
  ASSIGN_OR_RETURN(json review, parse_review(body));
  ReleasedTree released{review};
  json& request = review["request"];
  const json* gvk = member(request, "kind");
  const json* dry = member(request, "dryRun");
  Request r;
  r.body_bytes = body.size();
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

}  // namespace

webhook::Result<Request> decode(std::string_view body) {
  webhook::HeapLimit limit(parse_memory_bound(body.size()));
  try {
    return decode_review(body);
  } catch (const std::bad_alloc&) {
    if (!limit.refused()) {
      throw;
    }
  }
  return too_costly(body.size());
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

Response patched(std::string uid, std::string patch) {
  Response r = allowed(std::move(uid));
  r.patch = std::move(patch);
  return r;
}

bool has_patch(const Response& response) {
  return !response.patch.empty() && response.patch != "[]";
}

std::string_view outcome(const Response& response) {
  if (!response.allowed) {
    return "denied";
  }
  return has_patch(response) ? "patched" : "allowed";
}

namespace {

// Calls fn(key, value) for each audit annotation of `response`, in a fixed order.
template <typename Fn>
void each_audit_annotation(const Response& response, Fn&& fn) {
  fn(kAuditOutcome, outcome(response));
  if (response.placement) {
    fn(kAuditPlacement, podpatch::path_detail(response.placement->path));
    fn(kAuditReplica, std::to_string(response.placement->slot.replica));
    fn(kAuditHost, std::to_string(response.placement->slot.host));
  }
  if (!response.allowed && !response.reason.empty()) {
    fn(kAuditReason, response.reason);
  }
  if (!response.omitted.empty()) {
    std::string names;
    for (std::string_view n : response.omitted) {
      names += names.empty() ? "" : ",";
      names += n;
    }
    fn(kAuditOmitted, names);
  }
}

}  // namespace

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
  if (has_patch(response)) {
    out["patchType"] = "JSONPatch";
    out["patch"] = webhook::base64_encode(response.patch);
  }
  if (!response.allowed) {
    out["status"] = {{"code", response.code}, {"message", response.message}};
  }
  if (!response.warnings.empty()) {
    out["warnings"] = response.warnings;
  }
  if (response.audit) {
    json& audit = out["auditAnnotations"] = json::object();
    each_audit_annotation(response, [&](std::string_view key, std::string_view value) {
      audit[std::string(key)] = value;
    });
  }
  return {{"apiVersion", kApiVersion}, {"kind", "AdmissionReview"}, {"response", std::move(out)}};
}

std::string encode(const Response& response) {
  // Written directly rather than through to_json(): the response is small, but the base64 patch
  // would otherwise be copied into a json value and escaped once more. to_json() is the reference
  // (review_test checks that both give the same JSON).
  std::string out;
  // Room for all but warnings and messages that need escaping: one allocation.
  out.reserve(1024 + response.uid.size() + 4 * ((response.patch.size() + 2) / 3) +
              response.message.size());
  out += R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":)";
  webhook::append_json_string(out, response.uid);
  out += response.allowed ? R"(,"allowed":true)" : R"(,"allowed":false)";
  if (has_patch(response)) {
    out += R"(,"patchType":"JSONPatch","patch":")";
    webhook::append_base64(out, response.patch);
    out += '"';
  }
  if (!response.allowed) {
    out += R"(,"status":{"code":)" + std::to_string(response.code) + R"(,"message":)";
    webhook::append_json_string(out, response.message);
    out += '}';
  }
  if (!response.warnings.empty()) {
    char sep = '[';
    out += R"(,"warnings":)";
    for (const std::string& w : response.warnings) {
      out += sep;
      webhook::append_json_string(out, w);
      sep = ',';
    }
    out += ']';
  }
  if (response.audit) {
    // Keys and values are this file's constants, path names, numbers and reason names: none
    // needs escaping.
    char sep = '{';
    out += R"(,"auditAnnotations":)";
    each_audit_annotation(response, [&](std::string_view key, std::string_view value) {
      out += sep;
      out += '"';
      out += key;
      out += R"(":")";
      out += value;
      out += '"';
      sep = ',';
    });
    out += '}';
  }
  out += "}}";
  return out;
}

}  // namespace admission
