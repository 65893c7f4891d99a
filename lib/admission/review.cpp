#include "admission/review.h"

#include <algorithm>
#include <array>
#include <bit>

#include "base/encoding/base64.h"
#include "base/json/access.h"
#include "base/json/write.h"
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

webhook::Error too_costly(std::size_t parse_bytes, std::size_t body_bytes) {
  return webhook::Error{
      webhook::ErrorCode::kResourceExhausted,
      "the review's JSON would take about " + approx_size(parse_bytes) +
          " of memory to parse, more than " + std::to_string(kParseMemoryPerBodyByte) +
          " times its " + std::to_string(body_bytes) +
          " bytes: it is mostly tiny values (such as [{},{},...] or long lists of numbers), "
          "where a Kubernetes object is mostly strings; remove the field that repeats them",
      podpatch::reasons::kJsonTooCostly};
}

// The heap nlohmann::json 3.11 takes on a 64-bit machine, each allocation counted at what the
// larger of the two allocators the project links holds for it (chunk). test/unit/parse_memory
// measures every allocation under each to check the model stays an upper bound for both.
// glibc's malloc: an 8-byte header, 16-byte alignment, 32 bytes at least; a large request is
// mapped, a page more at most.
constexpr std::size_t glibc_chunk(std::size_t n) {
  std::size_t c = std::max<std::size_t>(32, (n + 8 + 15) & ~std::size_t{15});
  return n >= std::size_t{128} * 1024 ? ((c + 4095) & ~std::size_t{4095}) + 4096 : c;
}
// jemalloc (the server's allocator): no header; size classes 16 bytes apart up to 128, then four
// between each power of two and the next (so up to a quarter more than asked, 1,048,592 bytes
// taking 1.25 MiB).
constexpr std::size_t jemalloc_class(std::size_t n) {
  if (n <= 128) {
    return std::max<std::size_t>(16, (n + 15) & ~std::size_t{15});
  }
  std::size_t spacing = std::bit_floor(n - 1) / 4;
  return (n + spacing - 1) / spacing * spacing;
}
constexpr std::size_t chunk(std::size_t n) { return std::max(glibc_chunk(n), jemalloc_class(n)); }
static_assert(chunk(33) == 48 && chunk(129) == 160 && chunk(20481) == 24576 &&
              glibc_chunk(20481) == 20496 && chunk(1048592) == 1310720);
constexpr std::size_t kSlotBytes = sizeof(json);                     // one element of an array
constexpr std::size_t kArrayBytes = chunk(sizeof(json::array_t));    // a [ ]: its std::vector
constexpr std::size_t kObjectBytes = chunk(sizeof(json::object_t));  // a { }: its std::map
constexpr std::size_t kStringBytes = chunk(sizeof(json::string_t));  // a string value
// A member: a std::map node (colour and three links, then the key and the value).
constexpr std::size_t kMemberBytes = chunk(sizeof(int*) * 4 + sizeof(json::object_t::value_type));
constexpr std::size_t kInlineString = 15;  // libstdc++ keeps a string this short in place
// Strings decode copies out of the review: uid, kind, group, version, operation, namespace,
// name, and the object's name and generateName.
constexpr std::size_t kDecodeCopies = 9;
// The parser's own: its stack of open values (up to kMaxJsonDepth), and an error's fixed text.
constexpr std::size_t kParserBytes = 4096;

constexpr std::size_t string_heap(std::size_t length) {
  return length > kInlineString ? chunk(length + 1) : 0;
}

// scan_json: one pass that counts what json::parse will build. Every object, array, member and
// string costs its chunks; an array its buffer at the capacity doubling leaves it; a string over
// kInlineString its copy of the bytes (escapes only shorten it). Beyond what stays built:
// - while parsing, the lexer's two buffers (each up to twice the longest stretch of text it
//   holds: it keeps every byte from one string or number to the next) and the largest of one
//   array growing (its old buffer), an error message quoting that stretch, or the partial value
//   freed on an error;
// - after it, decode's copies and destroying the value, which stacks the children of a path.
// Text that is not JSON stops the parser at its first error, before which the scan counted
// exactly what was built, so the estimate stays an upper bound.
class JsonScanner {
 public:
  JsonScanner(std::string_view text, int max_depth) : text_(text), max_depth_(max_depth) {}

  JsonScan run() {
    for (i_ = 0; i_ < text_.size(); ++i_) {
      if (!step(text_[i_])) {
        return {depth_, 0};
      }
    }
    while (depth_ > 0) {
      close();
    }
    stretch(text_.size());
    return {deepest_, total()};
  }

 private:
  struct Level {
    bool array = false;
    bool empty = true;
    std::size_t commas = 0;
    std::size_t widest_path = 0;  // the most children along one path below this level
  };

  bool step(char c) {
    switch (c) {
      case '"':
        string();
        break;
      case '{':
      case '[':
        return open(c == '[');
      case '}':
      case ']':
        if (depth_ > 0) {
          close();
        }
        break;
      case ',':
        if (depth_ > 0) {
          ++top().commas;
        }
        break;
      case ':':
        break;
      case ' ':
      case '\t':
      case '\n':
      case '\r':
        in_scalar_ = false;
        return true;
      default:
        scalar(c);
        return true;
    }
    last_ = c;
    in_scalar_ = false;
    return true;
  }

  Level& top() { return levels_[static_cast<std::size_t>(depth_ - 1)]; }

  void value() {
    if (depth_ > 0) {
      top().empty = false;
    }
  }

  // The lexer keeps the bytes from one string or number to the next.
  void stretch(std::size_t at) {
    longest_stretch_ = std::max(longest_stretch_, at - stretch_start_);
    stretch_start_ = at;
  }

  // From the opening quote at i_ to the closing one: the first '"' after an even number of
  // backslashes (an odd number escapes it).
  void string() {
    stretch(i_);
    std::size_t start = i_;
    std::size_t from = i_ + 1;
    for (;;) {
      std::size_t quote = text_.find('"', from);
      if (quote == std::string_view::npos) {
        i_ = text_.size();
        break;
      }
      std::size_t backslashes = 0;
      while (quote - backslashes > start + 1 && text_[quote - backslashes - 1] == '\\') {
        ++backslashes;
      }
      if (backslashes % 2 == 0) {
        i_ = quote;
        break;
      }
      from = quote + 1;
    }
    std::size_t length = i_ - start - 1;
    longest_string_ = std::max(longest_string_, length);
    bool key = depth_ > 0 && !top().array && (last_ == '{' || last_ == ',');
    dom_ += (key ? kMemberBytes : kStringBytes) + string_heap(length);
    value();
  }

  void scalar(char c) {
    if (!in_scalar_) {
      value();
      if (c == '-' || (c >= '0' && c <= '9')) {
        stretch(i_);
      }
    }
    in_scalar_ = true;
  }

  bool open(bool array) {
    value();
    if (++depth_ > max_depth_) {
      return false;
    }
    deepest_ = std::max(deepest_, depth_);
    top() = Level{array};
    dom_ += array ? kArrayBytes : kObjectBytes;
    last_ = array ? '[' : '{';
    in_scalar_ = false;
    return true;
  }

  void close() {
    const Level& level = top();
    std::size_t children = level.commas + (level.empty ? 0 : 1);
    if (level.array && children > 0) {
      std::size_t capacity = std::bit_ceil(children);
      dom_ += chunk(capacity * kSlotBytes);
      growing_ = std::max(growing_, chunk(capacity / 2 * kSlotBytes));
    }
    // Destroying a value stacks its children, then a popped child's own: at most `path` at once,
    // in a vector reserved for the first ones and doubled past them.
    std::size_t path = children + level.widest_path;
    std::size_t stack = path == children ? chunk(children * kSlotBytes)
                                         : chunk(2 * path * kSlotBytes) + chunk(path * kSlotBytes);
    destroying_ = std::max(destroying_, children > 0 ? stack : 0);
    --depth_;
    if (depth_ > 0) {
      top().widest_path = std::max(top().widest_path, path);
    }
  }

  std::size_t total() const {
    std::size_t lexer = longest_stretch_ + 16;
    std::size_t parsing = 4 * lexer + std::max({growing_, 8 * lexer, destroying_});
    std::size_t after =
        std::min(text_.size(), kDecodeCopies * chunk(longest_string_ + 1)) + destroying_;
    // Reusing freed memory, malloc may hand out a chunk a little larger than asked (up to 16
    // bytes, when the rest would be too small to keep); a 32nd more covers far more than the
    // 0.01% measured on a used heap.
    return dom_ + dom_ / 32 + std::max(parsing, after) + kParserBytes;
  }

  std::string_view text_;
  int max_depth_;
  std::size_t i_ = 0;
  int depth_ = 0;
  int deepest_ = 0;
  std::array<Level, kMaxJsonDepth> levels_{};
  char last_ = 0;  // the last structural character or '"'
  bool in_scalar_ = false;
  std::size_t dom_ = 0;
  std::size_t growing_ = 0;
  std::size_t destroying_ = 0;
  std::size_t stretch_start_ = 0;
  std::size_t longest_stretch_ = 0;
  std::size_t longest_string_ = 0;
};

// The review parsed as JSON, with its envelope (apiVersion, kind, request) checked.
webhook::Result<json> parse_review(std::string_view body) {
  if (body.empty()) {
    return malformed("empty request body; expected an admission.k8s.io/v1 AdmissionReview");
  }
  JsonScan scan = scan_json(body);
  if (scan.depth > kMaxJsonDepth) {
    return too_deep(kMaxJsonDepth).with_reason(podpatch::reasons::kMalformedRequest);
  }
  if (scan.parse_bytes > parse_memory_bound(body.size())) {
    return too_costly(scan.parse_bytes, body.size());
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

JsonScan scan_json(std::string_view text, int max_depth) {
  return JsonScanner(text, std::min(max_depth, kMaxJsonDepth)).run();
}

webhook::Status check_json_depth(std::string_view text, int max_depth) {
  int limit = std::min(max_depth, kMaxJsonDepth);
  if (scan_json(text, limit).depth > limit) {
    return too_deep(limit);
  }
  return {};
}

webhook::Result<Request> decode(std::string_view body) {
  ASSIGN_OR_RETURN(json review, parse_review(body));
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

json patch_ops(const Response& response) {
  return has_patch(response) ? json::parse(response.patch) : json();
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
