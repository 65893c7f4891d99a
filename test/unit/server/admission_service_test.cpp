// lib/server/admission_service: docs/spec.md Envelope and the refusals of docs/server.md
// "Endpoints", without sockets. Every failure
// is an AdmissionReview denial with the request's uid when one can be read (HTTP 200), else an
// HTTP error with a one-line JSON Status; the log line and metrics follow each answer.
#include "server/admission_service.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/ostream_sink.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kube/live_sources.h"
#include "kube/slot_allocators.h"

namespace {

using json = nlohmann::json;

json read_fixture(const std::string& relative) {
  std::ifstream f(std::string(FIXTURE_DIR) + "/" + relative);
  REQUIRE(f.good());
  return json::parse(f);
}

struct Fixture {
  Fixture() {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(logged);
    sink->set_formatter(server::make_log_formatter(server::LogFormat::kJson));
    log = std::make_unique<server::Log>(std::make_shared<spdlog::logger>("t", sink),
                                        server::LogFormat::kJson, 0);
    service = std::make_unique<server::AdmissionService>(handler, metrics, *log, 64 * 1024);
  }
  server::HttpReply post(std::string_view path, std::string_view body,
                         std::string_view content_type = "application/json") {
    return serve({"POST", path, content_type, body});
  }
  // The transport's routes: /mutate and /validate to admit(), every other path to other().
  server::HttpReply serve(const server::HttpRequestView& request) {
    if (request.path == "/mutate") {
      return service->admit(server::Webhook::kMutate, request);
    }
    if (request.path == "/validate") {
      return service->admit(server::Webhook::kValidate, request);
    }
    return service->other(request);
  }
  json last_log() {
    std::string text = logged.str();
    text.pop_back();
    return json::parse(text.substr(text.rfind('\n') + 1));
  }

  kube::DisabledSlotAllocator pods;
  kube::LiveNodeSource nodes;        // never listed: Nodes cannot be listed
  kube::LiveServiceSource services;  // never listed: no Services
  admission::Handler handler{{}, pods, nodes, services};
  server::Metrics metrics;
  std::ostringstream logged;
  std::unique_ptr<server::Log> log;
  std::unique_ptr<server::AdmissionService> service;
};

json review_of(const server::HttpReply& reply) {
  REQUIRE(reply.status == 200);
  json r = json::parse(reply.body);
  REQUIRE(r["kind"] == "AdmissionReview");
  REQUIRE(r["apiVersion"] == "admission.k8s.io/v1");
  return r["response"];
}

// An HTTP error: one line of JSON, a metav1 Status with the code.
void check_status(const server::HttpReply& reply, int code, const std::string& message_part) {
  CAPTURE(reply.body);
  CHECK(reply.status == code);
  CHECK(reply.body.find('\n') == std::string::npos);
  json s = json::parse(reply.body);
  CHECK(s["kind"] == "Status");
  CHECK(s["code"] == code);
  CHECK_THAT(s["message"].get<std::string>(), Catch::Contains(message_part));
}

const std::string kUidPrefix =
    R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"uid-7",)";

}  // namespace

TEST_CASE("a worker Pod is patched through POST /mutate, uid echoed (Envelope, M6)", "[service]") {
  Fixture f;
  json review = read_fixture("admission/v5e-4x4-host2.json");
  server::HttpReply reply = f.post("/mutate", review.dump());
  json r = review_of(reply);
  CHECK(r["uid"] == review["request"]["uid"]);
  CHECK(r["allowed"] == true);
  CHECK(r["patchType"] == "JSONPatch");
  CHECK_FALSE(reply.close);
  json line = f.last_log();
  CHECK(line["msg"] == "admission");
  CHECK(line["uid"] == review["request"]["uid"]);
  CHECK(line["outcome"] == "patched");
  CHECK(line["kind"] == "Pod");
  CHECK(line["operation"] == "CREATE");
  CHECK(line["namespace"] == review["request"]["namespace"]);
  CHECK(line["cluster"] == "raycluster-tpu-v6e-multihost");
  CHECK(line["group"] == "tpu-group");
  CHECK(line["placement"] == "index-labels");
  CHECK(line["replica"] == 0);
  CHECK(line["host"] == 2);
  CHECK(line["generateName"].get<std::string>().ends_with("-worker-"));
  CHECK(line.contains("latency_us"));
  CHECK(reply.metric_code == 200);  // the transport counts it once written
  std::string metrics = f.metrics.render();
  CHECK_THAT(metrics, Catch::Contains(R"(placements_total{path="labels"} 1)"));
}

TEST_CASE("a Pod without KubeRay's index labels is denied while legacy placement is off",
          "[service]") {
  Fixture f;
  json review = read_fixture("admission/legacy-empty-cluster.json");
  json r = review_of(f.post("/mutate", review.dump()));
  CHECK(r["allowed"] == false);
  CHECK(r["status"]["code"] == 400);
  CHECK_THAT(r["status"]["message"].get<std::string>(),
             Catch::Contains("without legacy placement"));
  CHECK(r["auditAnnotations"] ==
        json({{"outcome", "denied"}, {"reason", "placement_unavailable"}}));
  json line = f.last_log();
  CHECK(line["reason"] == "placement_unavailable");
  CHECK(line["cluster"] == "raycluster-tpu-v6e-multihost");
  CHECK(line["group"] == "tpu-group");
  CHECK_FALSE(line.contains("placement"));
}

TEST_CASE("every /mutate answer carries audit annotations, /validate answers none (Envelope)",
          "[service]") {
  Fixture f;
  SECTION("a placed Pod: the slot and the path that chose it") {
    json r = review_of(f.post("/mutate", read_fixture("admission/v5e-4x4-host2.json").dump()));
    CHECK(r["auditAnnotations"] == json({{"outcome", "patched"},
                                         {"placement", "index-labels"},
                                         {"replica", "0"},
                                         {"host", "2"}}));
  }
  SECTION("a Pod that is no TPU worker: the outcome only") {
    json review = read_fixture("admission/v5e-4x4-host2.json");
    review["request"]["object"]["spec"]["containers"][0]["resources"] = json::object();
    json r = review_of(f.post("/mutate", review.dump()));
    CHECK(r["allowed"] == true);
    CHECK_FALSE(r.contains("patch"));
    CHECK(r["auditAnnotations"] == json({{"outcome", "allowed"}}));
    json line = f.last_log();
    CHECK(line["placement"] == "");
    CHECK(line["replica"] == -1);
  }
  SECTION("a review the server cannot read, but whose uid it can") {
    json r = review_of(f.post("/mutate", kUidPrefix + R"("kind":7}})"));
    CHECK(r["allowed"] == false);
    CHECK(r["auditAnnotations"]["outcome"] == "denied");
    CHECK(r["auditAnnotations"]["reason"] == "malformed_request");
    CHECK(f.last_log()["cluster"] == "");
  }
  SECTION("/validate") {
    json review = read_fixture("admission/v5e-4x4-host2.json");
    json r = review_of(f.post("/validate", review.dump()));
    CHECK_FALSE(r.contains("auditAnnotations"));
  }
}

TEST_CASE("a Pod review sent to /validate is denied as the wrong kind", "[service]") {
  Fixture f;
  json r = review_of(f.post("/validate", read_fixture("admission/v5e-4x4-host2.json").dump()));
  CHECK(r["allowed"] == false);
  CHECK(r["status"]["code"] == 400);
  CHECK_THAT(f.metrics.render(),
             Catch::Contains(R"(denials_total{webhook="validate",reason="wrong_kind"} 1)"));
}

TEST_CASE(
    "envelope failures with a readable uid are AdmissionReview denials (docs/server.md answers)",
    "[service]") {
  Fixture f;
  std::string good = read_fixture("admission/v5e-4x4-host2.json").dump();
  std::string uid = read_fixture("admission/v5e-4x4-host2.json")["request"]["uid"];
  struct Case {
    std::string name;
    server::HttpRequestView request;
    int code;
    std::string message;
    bool close;
  };
  std::string deep =
      kUidPrefix + R"("object":)" + std::string(150, '[') + std::string(150, ']') + "}}";
  std::string truncated = kUidPrefix + R"("kind":{"group":"","vers)";
  std::vector<Case> cases = {
      {"wrong method", {"PUT", "/mutate", "application/json", good}, 405, "method PUT", false},
      {"too large",
       {"POST", "/mutate", "application/json", truncated, server::Refused::kTooLarge},
       413,
       "larger than 65536 bytes",
       true},
      {"timed out",
       {.method = "POST",
        .path = "/mutate",
        .content_type = "application/json",
        .body = truncated,
        .refused = server::Refused::kTimedOut},
       408,
       "--read-timeout",
       true},
      {"wrong content type",
       {"POST", "/mutate", "text/plain", good},
       415,
       "Content-Type is \"text/plain\"",
       false},
      {"missing content type",
       {"POST", "/validate", "", good},
       415,
       "Content-Type is missing",
       false},
      {"malformed JSON",
       {"POST", "/mutate", "application/json", truncated},
       400,
       "not valid JSON",
       false},
      {"nesting too deep", {"POST", "/mutate", "application/json", deep}, 413, "nesting", false},
      {"not a v1 review",
       {"POST", "/mutate", "application/json",
        R"({"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"uid-7"}})"},
       400,
       "admission.k8s.io/v1",
       false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    server::HttpReply reply = f.serve(c.request);
    json r = review_of(reply);
    std::string expected_uid = c.request.body == good ? uid : "uid-7";
    CHECK(r["uid"] == expected_uid);
    CHECK(r["allowed"] == false);
    CHECK(r["status"]["code"] == c.code);
    CHECK_THAT(r["status"]["message"].get<std::string>(), Catch::Contains(c.message));
    CHECK(reply.close == c.close);
    CHECK(f.last_log()["outcome"] == "rejected");
  }
}

TEST_CASE("envelope failures without a uid are HTTP errors with one line of JSON", "[service]") {
  Fixture f;
  check_status(f.serve({"GET", "/mutate", "", ""}), 405, "method GET");
  CHECK(f.serve({"GET", "/mutate", "", ""}).allow_post_header);
  check_status(f.serve({"POST", "/mutate", "application/json", "xxxx", server::Refused::kTooLarge}),
               413, "larger than");
  check_status(f.post("/mutate", "not json", "text/plain"), 415, "expected application/json");
  check_status(f.post("/mutate", ""), 400, "empty request body");
  check_status(f.serve({.method = "POST",
                        .path = "/validate",
                        .content_type = "application/json",
                        .body = "{\"api",
                        .refused = server::Refused::kTimedOut}),
               408, "--read-timeout");
  check_status(f.post("/mutate", "{\"a\":"), 400, "not valid JSON");
  check_status(f.post("/mutate", "[1,2]"), 400, "not an AdmissionReview");
  check_status(
      f.post("/validate", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})"), 400,
      "no request");
  check_status(f.post("/mutate/", "{}"), 404, "POST /mutate");
  check_status(f.post("/metrics", "{}"), 404, "no such path");
  // The code the transport's request metrics count is the HTTP status for these.
  CHECK(f.serve({"GET", "/mutate", "", ""}).metric_code == 405);
  CHECK(f.post("/metrics", "{}").metric_code == 0);
  std::string metrics = f.metrics.render();
  CHECK_THAT(metrics,
             Catch::Contains(R"(denials_total{webhook="mutate",reason="malformed_request"})"));
  CHECK_THAT(metrics,
             Catch::Contains(R"(denials_total{webhook="validate",reason="request_timeout"} 1)"));
}

// docs/architecture.md's stage 1: the method first, then the transport's refusal, then the
// Content-Type; a request wrong in several ways is answered for the first of them.
TEST_CASE("the envelope's checks answer the first failure: method, refusal, Content-Type",
          "[service]") {
  Fixture f;
  check_status(f.serve({"PUT", "/mutate", "text/plain", "xxxx", server::Refused::kTooLarge}), 405,
               "method PUT");
  check_status(f.serve({"POST", "/validate", "text/plain", "xxxx", server::Refused::kBusy}), 503,
               "retry");
  check_status(f.serve({"POST", "/mutate", "text/plain", "{}"}), 415, "Content-Type");
}

TEST_CASE("GET / answers as the Go webhook's probes expect", "[service]") {
  Fixture f;
  server::HttpReply reply = f.serve({"GET", "/", "", ""});
  CHECK(reply.status == 200);
  CHECK(reply.body == "kuberay-tpu-webhook");
}

TEST_CASE("a refusal the transport found keeps its code on any other path (Envelope)",
          "[service]") {
  Fixture f;
  // The uid is readable, but no other path answers with a review: always a metav1 Status.
  std::string body = kUidPrefix + R"("kind":{"group":"","vers)";
  server::HttpRequestView too_large{"GET", "/", "", body, server::Refused::kTooLarge};
  server::HttpReply r = f.serve(too_large);
  check_status(r, 413, "larger than 65536 bytes");
  CHECK(r.close);
  server::HttpRequestView busy{.method = "POST",
                               .path = "/nope",
                               .content_type = "",
                               .body = body,
                               .refused = server::Refused::kBusy};
  check_status(f.serve(busy), 503, "in-flight memory budget");
  server::HttpRequestView late{.method = "GET",
                               .path = "/",
                               .content_type = "",
                               .body = "",
                               .refused = server::Refused::kTimedOut};
  r = f.serve(late);
  check_status(r, 408, "--read-timeout");
  CHECK(r.close);
  CHECK(r.metric_code == 0);  // counted by its status
  // No denial is counted: no review was answered.
  CHECK_THAT(f.metrics.render(), !Catch::Contains("denials_total{"));
}

TEST_CASE("application/json is recognised with parameters and in any case", "[service]") {
  CHECK(server::is_json_content_type("application/json"));
  CHECK(server::is_json_content_type("application/json; charset=utf-8"));
  CHECK(server::is_json_content_type("Application/JSON"));
  CHECK_FALSE(server::is_json_content_type("application/jsonx"));
  CHECK_FALSE(server::is_json_content_type("application/yaml"));
  CHECK_FALSE(server::is_json_content_type(""));
}

TEST_CASE("the uid is read from the start of a review, however it ends", "[service]") {
  auto [text, uid] = GENERATE(table<std::string, std::string>({
      {R"({"request":{"uid":"a"}})", "a"},
      {R"({"kind":"AdmissionReview","request":{"kind":{"uid":"no"},"uid":"b","object":{)", "b"},
      {R"({"request":{"object":{"uid":"no"}},"x":{"request":{"uid":"no"}}})", ""},
      {R"({"uid":"top-level","request":{}})", ""},
      {R"([{"request":{"uid":"in-array"}}])", ""},
      {R"({"request":{"uid":"cut)", ""},
      {R"({"request":{"uid":7}})", ""},
      {"", ""},
      {"garbage", ""},
  }));
  CAPTURE(text);
  CHECK(admission::request_uid(text) == uid);
}
