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

TEST_CASE("check_json_depth counts brackets outside strings only", "[admission][bounds]") {
  CHECK(admission::check_json_depth("[[[]]]", 3).ok());
  CHECK_FALSE(admission::check_json_depth("[[[[]]]]", 3).ok());
  CHECK(admission::check_json_depth(R"({"a":"[[[[[[[[\"[[["})", 1).ok());
  CHECK(admission::check_json_depth(R"(["\\", [1]])", 2).ok());
  CHECK(admission::check_json_depth(R"(["\\", [[1]]])", 2).error().code ==
        webhook::ErrorCode::kResourceExhausted);
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
    json out = json::parse(admission::encode(admission::patched("u-3", json::array())));
    CHECK_FALSE(out["response"].contains("patchType"));
    CHECK_FALSE(out["response"].contains("patch"));
  }
  SECTION("patched: base64 of the JSON Patch, patchType JSONPatch") {
    json patch = json::array({{{"op", "add"}, {"path", "/spec/hostname"}, {"value", "g-0-1"}}});
    json out = json::parse(admission::encode(admission::patched("u-4", patch)));
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

TEST_CASE("dump_json never throws on invalid UTF-8", "[admission][envelope]") {
  json v = std::string("bad \xff\xfe utf8");
  CHECK_NOTHROW(webhook::dump_json(v));
  CHECK_THAT(webhook::dump_json(v), Catch::Contains("bad"));
}

TEST_CASE("encode writes the same JSON as to_json on every path", "[admission][envelope]") {
  admission::Response patched = admission::patched(
      "u\"quote", json::array({{{"op", "add"}, {"path", "/spec/hostname"}, {"value", "g-0-1"}}}));
  patched.warnings = {"first \"warning\"", "second\nline"};
  admission::Response denied = admission::denied(
      "u-6", webhook::invalid_argument("bad \\ value \"4x\"\t").with_reason("invalid_topology"));
  admission::Response bad_utf8 = admission::denied(
      "u-7", webhook::invalid_argument(std::string("bytes \xff\xfe")).with_reason("x"));
  for (const admission::Response& r : {admission::allowed("u-1"), patched, denied, bad_utf8}) {
    CAPTURE(r.uid);
    CHECK(json::parse(admission::encode(r)) ==
          json::parse(webhook::dump_json(admission::to_json(r))));
  }
}
