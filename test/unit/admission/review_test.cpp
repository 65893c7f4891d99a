// docs/spec.md Envelope: AdmissionReview v1 decode/encode.
#include "admission/review.h"

#include <catch2/catch.hpp>

#include "base/encoding/base64.h"
#include "support/test_support.h"

using testing::json;

namespace {

json review_with(json request) {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request", std::move(request)}};
}

json minimal_request() {
  return {{"uid", "u-1"},
          {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
          {"operation", "CREATE"},
          {"namespace", "team-a"},
          {"dryRun", true},
          {"object", {{"kind", "Pod"}, {"metadata", {{"generateName", "w-"}}}}}};
}

}  // namespace

TEST_CASE("decode reads uid, kind, operation, dryRun, namespace and moves the object",
          "[admission][envelope]") {
  webhook::Result<admission::Request> d = admission::decode(review_with(minimal_request()).dump());
  REQUIRE(d);
  CHECK(d->uid == "u-1");
  CHECK(d->kind == "Pod");
  CHECK(d->group.empty());
  CHECK(d->version == "v1");
  CHECK(d->operation == "CREATE");
  CHECK(d->dry_run);
  CHECK(d->ns == "team-a");
  CHECK(d->object["metadata"]["generateName"] == "w-");
}

TEST_CASE("decode refuses malformed bodies with a precise message (Envelope)",
          "[admission][envelope]") {
  json no_uid = minimal_request();
  no_uid.erase("uid");
  json no_kind = minimal_request();
  no_kind.erase("kind");
  json no_op = minimal_request();
  no_op.erase("operation");
  std::string deep(500, '[');
  auto [name, body, uid, message] =
      GENERATE_COPY(table<std::string, std::string, std::string, std::string>({
          {"empty body", "", "", "empty request body"},
          {"not JSON", "{\"apiVersion\": ", "", "not valid JSON"},
          {"JSON array", "[1,2]", "", "not an AdmissionReview object"},
          {"v1beta1",
           json({{"apiVersion", "admission.k8s.io/v1beta1"},
                 {"kind", "AdmissionReview"},
                 {"request", minimal_request()}})
               .dump(),
           "u-1", "admissionReviewVersions: [v1]"},
          {"wrong kind", json({{"apiVersion", "admission.k8s.io/v1"}, {"kind", "Pod"}}).dump(), "",
           "expected apiVersion admission.k8s.io/v1, kind AdmissionReview"},
          {"no request",
           json({{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}}).dump(), "",
           "has no request"},
          {"request not an object", review_with("x").dump(), "", "has no request"},
          {"no uid", review_with(no_uid).dump(), "", "has no uid"},
          {"no kind", review_with(no_kind).dump(), "u-1", "needs kind"},
          {"no operation", review_with(no_op).dump(), "u-1", "and operation"},
          {"nesting bomb", deep, "", "deeper than 100"},
      }));
  CAPTURE(name);
  webhook::Result<admission::Request> d = admission::decode(body);
  REQUIRE_FALSE(d);
  CHECK(admission::request_uid(body) == uid);  // the uid is kept whenever it can be read
  CHECK_THAT(d.error().message, Catch::Contains(message));
  CHECK(d.error().reason == "malformed_request");
}

namespace {

// A valid Pod review whose object carries `x` (raw JSON text) as spec.x.
std::string review_carrying(const std::string& x) {
  json request = minimal_request();
  request["object"]["spec"] = {{"x", "@X@"}};
  std::string text = review_with(request).dump();
  return text.replace(text.find("\"@X@\""), 5, x);
}

// `item` n times, comma-separated, in brackets.
std::string repeated(const std::string& item, std::size_t n) {
  std::string s = "[";
  for (std::size_t i = 0; i < n; ++i) {
    s += (i > 0 ? "," : "") + item;
  }
  return s + "]";
}

// An object of n members with distinct keys, each holding `value`.
std::string members(const std::string& value, std::size_t n) {
  std::string s = "{";
  for (std::size_t i = 0; i < n; ++i) {
    s += (i > 0 ? ",\"k" : "\"k") + std::to_string(i) + "\":" + value;
  }
  return s + "}";
}

}  // namespace

TEST_CASE(
    "decode refuses, with json_too_costly, a review of tiny values too costly to parse (server.md "
    "Denial reasons)",
    "[admission][bounds]") {
  auto [name, x] = GENERATE_COPY(table<std::string, std::string>({
      {"[{}] x 200000", repeated("{}", 200000)},
      {"[[]] x 200000", repeated("[]", 200000)},
      {"[0,0,...] x 131073", repeated("0", 131073)},
      {"[[0]] x 100000", repeated("[0]", 100000)},
  }));
  CAPTURE(name);
  std::string body = review_carrying(x);
  webhook::Result<admission::Request> d = admission::decode(body);
  REQUIRE_FALSE(d);
  CHECK(d.error().reason == "json_too_costly");
  CHECK(d.error().code == webhook::ErrorCode::kResourceExhausted);
  CHECK(webhook::http_code(d.error().code) == 413);
  CHECK_THAT(d.error().message, Catch::StartsWith("the review's JSON takes more than "));
  CHECK_THAT(d.error().message,
             Catch::Contains("to parse, 16 times its " + std::to_string(body.size()) + " bytes"));
  CHECK_THAT(d.error().message, Catch::Contains("remove the field that repeats them"));
  CHECK(admission::request_uid(body) == "u-1");  // the refusal still names its request
}

TEST_CASE("the cost message gives the bound in MiB (server.md Denial reasons)",
          "[admission][bounds]") {
  // 2.4 million empty objects: the shape of a 6.9 MiB review that would take 229 MB to parse; the
  // parse stops at 16 times its size.
  webhook::Result<admission::Request> d =
      admission::decode(review_carrying(repeated("{}", 2400000)));
  REQUIRE_FALSE(d);
  CHECK(d.error().reason == "json_too_costly");
  CHECK_THAT(d.error().message, Catch::Matches("the review's JSON takes more than [0-9]{3}\\.[0-9] "
                                               "MiB of memory to parse, .*"));
}

TEST_CASE("decode accepts costly shapes that stay under the bound (server.md Denial reasons)",
          "[admission][bounds]") {
  // Under the bound of 16 heap bytes per body byte, as test/unit/parse_memory measures them.
  auto [name, x] = GENERATE_COPY(table<std::string, std::string>({
      {"[[0,0,0,0,0,0,0,0]] x 65536", repeated("[0,0,0,0,0,0,0,0]", 65536)},
      {R"(["0123456789abcdef"] x 65536)", repeated("\"0123456789abcdef\"", 65536)},
      {"one string of 4 MiB", "\"" + std::string(std::size_t{4} << 20, 'x') + "\""},
      {"[{}] x 20", repeated("{}", 20)},
      {R"({"k0":0,...} x 10000)", members("0", 10000)},
      {"[true,...] x 100000", repeated("true", 100000)},
      {R"({"k0":{},...} x 50000)", members("{}", 50000)},
  }));
  CAPTURE(name);
  webhook::Result<admission::Request> d = admission::decode(review_carrying(x));
  REQUIRE(d);
  CHECK(d->object["spec"]["x"] == json::parse(x));
}

TEST_CASE("genuine reviews decode under the parse-memory bound", "[admission][bounds]") {
  std::vector<std::string> files = testing::fixture_files("admission", ".json");
  REQUIRE(files.size() > 50);
  for (const std::string& file : files) {
    if (file.ends_with(".config.json")) {
      continue;
    }
    std::string pretty = testing::read_text(testing::fixture_path("admission/" + file));
    std::string compact = json::parse(pretty).dump();  // as the API server sends it
    for (const std::string& body : {pretty, compact}) {
      CAPTURE(file, body.size());
      CHECK(admission::decode(body));  // test/unit/parse_memory measures how far below
    }
  }
}

TEST_CASE("a uid longer than kMaxUidBytes is refused and never echoed", "[admission][envelope]") {
  auto uid_review = [](std::string uid) {
    json request = minimal_request();
    request["uid"] = std::move(uid);
    return review_with(request).dump();
  };
  std::string longest(admission::kMaxUidBytes, 'u');
  REQUIRE(admission::decode(uid_review(longest)));
  CHECK(admission::decode(uid_review(longest))->uid == longest);
  CHECK(admission::request_uid(uid_review(longest)) == longest);

  for (std::size_t size : {admission::kMaxUidBytes + 1, std::size_t{6} << 20}) {
    CAPTURE(size);
    std::string body = uid_review(std::string(size, 'u'));
    webhook::Result<admission::Request> d = admission::decode(body);
    REQUIRE_FALSE(d);
    CHECK(d.error().reason == "malformed_request");
    CHECK(webhook::http_code(d.error().code) == 400);
    CHECK_THAT(d.error().message,
               Catch::Contains("request.uid is " + std::to_string(size) + " bytes, more than 128"));
    CHECK_THAT(d.error().message, Catch::Contains("UUID"));
    CHECK(d.error().message.size() < 200);        // the uid itself is not quoted
    CHECK(admission::request_uid(body).empty());  // answered with a plain HTTP error
  }
}

TEST_CASE("check_json_depth counts brackets outside strings only", "[admission][bounds]") {
  CHECK(admission::check_json_depth("[[[]]]", 3).ok());
  CHECK_FALSE(admission::check_json_depth("[[[[]]]]", 3).ok());
  CHECK(admission::check_json_depth(R"({"a":"[[[[[[[[\"[[["})", 1).ok());
  CHECK(admission::check_json_depth(R"(["\\", [1]])", 2).ok());
  CHECK(admission::check_json_depth(R"(["\\", [[1]]])", 2).error().code ==
        webhook::ErrorCode::kResourceExhausted);
  CHECK(admission::check_json_depth(R"(["{}{}{}{}", "\"]]]"])", 1).ok());
  CHECK_FALSE(admission::check_json_depth("[[[[[[[[[[", 3).ok());  // cut short, still too deep
  CHECK(admission::check_json_depth("]]]][]", 1).ok());            // stray closers count nothing
}

TEST_CASE("encode echoes the uid and sets patchType only with a non-empty patch (Envelope, M6)",
          "[admission][envelope]") {
  SECTION("allowed without patch: no patchType, no patch, no status") {
    json out = json::parse(admission::encode(admission::allowed("u-2")));
    CHECK(out["apiVersion"] == "admission.k8s.io/v1");
    CHECK(out["kind"] == "AdmissionReview");
    CHECK(out["response"] == json({{"uid", "u-2"}, {"allowed", true}}));
  }
  SECTION("an empty patch is no patch") {
    json out = json::parse(admission::encode(admission::patched("u-3", "[]")));
    CHECK_FALSE(out["response"].contains("patchType"));
    CHECK_FALSE(out["response"].contains("patch"));
  }
  SECTION("patched: base64 of the JSON Patch, patchType JSONPatch") {
    json patch = json::array({{{"op", "add"}, {"path", "/spec/hostname"}, {"value", "g-0-1"}}});
    json out = json::parse(admission::encode(admission::patched("u-4", patch.dump())));
    CHECK(out["response"]["uid"] == "u-4");
    CHECK(out["response"]["patchType"] == "JSONPatch");
    std::optional<std::string> raw =
        webhook::base64_decode(out["response"]["patch"].get<std::string>());
    REQUIRE(raw);
    CHECK(json::parse(*raw) == patch);
  }
  SECTION("denied: status with code and message, warnings kept") {
    admission::Response r =
        admission::denied("u-5", webhook::Error{webhook::ErrorCode::kAlreadyExists,
                                                "two Pods on one slot", "slot_conflict"});
    r.warnings = {"w1"};
    json out = json::parse(admission::encode(r))["response"];
    CHECK(out["uid"] == "u-5");
    CHECK(out["allowed"] == false);
    CHECK(out["status"] == json({{"code", 409}, {"message", "two Pods on one slot"}}));
    CHECK(out["warnings"] == json::array({"w1"}));
  }
}

namespace {

// `a` and `b` hold the same values with the same JSON types, signed and unsigned integers told
// apart (json's == compares 1 and 1u, and 0.0 and -0.0, as equal).
bool same_typed(const json& a, const json& b) {
  if (a.type() != b.type() || a.size() != b.size()) {
    return false;
  }
  if (a.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (!b.contains(it.key()) || !same_typed(it.value(), b[it.key()])) {
        return false;
      }
    }
    return true;
  }
  if (a.is_array()) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!same_typed(a[i], b[i])) {
        return false;
      }
    }
    return true;
  }
  return a.dump() == b.dump();
}

}  // namespace

TEST_CASE("patch_ops reads a patch as nlohmann's parser does, number types included",
          "[admission][envelope]") {
  // The dry run applies each worker's patch as read back by patch_ops (docs/dryrun.md "Large
  // clusters"). The expected value is nlohmann's json::parse of the same text.
  const char* patches[] = {
      R"([{"op":"add","path":"/spec/hostname","value":"g-0-1"}])",
      R"([{"op":"add","path":"/a","value":{"u":1,"i":-1,"big":18446744073709551615,)"
      R"("min":-9223372036854775808,"d":1.5,"e":1e300,"z":0,"t":true,"f":false,"n":null,)"
      R"("s":"\u00e9\"\\\n","nested":[[],{},[{"k":[1,2.0,"3"]}]]}}])",
      R"([{"op":"add","path":"/a","value":{"k":1,"k":"the last one"}}])",
      R"([{"op":"add","path":"/a","value":-0.0},{"op":"add","path":"/b","value":-0}])",
  };
  for (const char* text : patches) {
    CAPTURE(text);
    json ops = admission::patch_ops(admission::patched("u", text));
    CHECK(same_typed(ops, json::parse(text)));
  }
  CHECK(admission::patch_ops(admission::allowed("u")).is_null());
}

TEST_CASE("audit annotations: the outcome, the slot and its path, the denial's reason (Envelope)",
          "[admission][envelope]") {
  admission::Response r = admission::patched("u-8", R"([{"op":"add","path":"/x","value":1}])");
  r.placement = podpatch::Placement{{2, 3}, podpatch::PlacementPath::kReplicaLabel};
  CHECK_FALSE(json::parse(admission::encode(r))["response"].contains("auditAnnotations"));
  r.audit = true;
  CHECK(json::parse(admission::encode(r))["response"]["auditAnnotations"] ==
        json({{"outcome", "patched"},
              {"placement", "replica-label"},
              {"replica", "2"},
              {"host", "3"}}));
  admission::Response d =
      admission::denied("u-9", webhook::invalid_argument("no").with_reason("invalid_topology"));
  d.audit = true;
  CHECK(json::parse(admission::encode(d))["response"]["auditAnnotations"] ==
        json({{"outcome", "denied"}, {"reason", "invalid_topology"}}));
}

TEST_CASE("dump_json never throws on invalid UTF-8", "[admission][envelope]") {
  json v = std::string("bad \xff\xfe utf8");
  CHECK_NOTHROW(webhook::dump_json(v));
  CHECK_THAT(webhook::dump_json(v), Catch::Contains("bad"));
}

TEST_CASE("encode writes the same JSON as to_json on every path", "[admission][envelope]") {
  admission::Response patched = admission::patched(
      "u\"quote",
      json::array({{{"op", "add"}, {"path", "/spec/hostname"}, {"value", "g-0-1"}}}).dump());
  patched.warnings = {"first \"warning\"", "second\nline"};
  admission::Response denied = admission::denied(
      "u-6", webhook::invalid_argument("bad \\ value \"4x\"\t").with_reason("invalid_topology"));
  admission::Response bad_utf8 = admission::denied(
      "u-7", webhook::invalid_argument(std::string("bytes \xff\xfe")).with_reason("x"));
  admission::Response audited = patched;
  audited.audit = true;
  audited.placement = podpatch::Placement{{3, 1}, podpatch::PlacementPath::kLegacy};
  admission::Response audited_denial = denied;
  audited_denial.audit = true;
  for (const admission::Response& r :
       {admission::allowed("u-1"), patched, denied, bad_utf8, audited, audited_denial}) {
    CAPTURE(r.uid);
    CHECK(json::parse(admission::encode(r)) ==
          json::parse(webhook::dump_json(admission::to_json(r))));
  }
}
