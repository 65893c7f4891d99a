// Every RayCluster, RayJob and RayService fixture (test/fixtures/{rayclusters,rayjobs,rayservices}
// /{valid,invalid}/*.yaml) through Handler::validate (docs/spec.md V1-V5): valid ones admitted,
// invalid ones denied with code 400. A fixture's <name>.expect.json holds what the answer must say,
// written by hand: the exact denial message and reason, or the exact warnings.
#include <catch2/catch.hpp>
#include <filesystem>

#include "dryrun/documents.h"
#include "support/test_support.h"

namespace {

using testing::json;

struct Fixture {
  std::string path;  // relative to FIXTURE_DIR
  bool valid = false;
};

std::vector<Fixture> fixtures() {
  std::vector<Fixture> out;
  for (std::string kind : {"rayclusters", "rayjobs", "rayservices"}) {
    for (std::string verdict : {"valid", "invalid"}) {
      for (const std::string& f : testing::fixture_files(kind + "/" + verdict, ".yaml")) {
        out.push_back({kind + "/" + verdict + "/" + f, verdict == "valid"});
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("V1-V5: every ray.io fixture gets the answer its directory and expect file say",
          "[admission][validate][fixtures]") {
  std::vector<Fixture> all = fixtures();
  REQUIRE(all.size() >= 30);
  int with_expectations = 0;
  int kinds_seen[3] = {0, 0, 0};
  for (const Fixture& f : all) {
    CAPTURE(f.path);
    webhook::Result<std::vector<json>> docs =
        dryrun::parse_documents(testing::read_text(testing::fixture_path(f.path)));
    REQUIRE(docs.has_value());
    REQUIRE(docs->size() == 1);
    json object = docs->front();
    std::string kind = object["kind"];
    kinds_seen[kind == "RayCluster" ? 0 : kind == "RayJob" ? 1 : 2]++;
    admission::Request req = testing::cluster_request(object);
    req.kind = kind;
    req.ns = "default";
    req.name = object["metadata"]["name"];
    testing::Harness h;
    admission::Response r = h.handler.validate(req);
    CHECK(r.uid == req.uid);
    CHECK(r.allowed == f.valid);
    if (!f.valid) {
      CHECK(r.code == 400);
      CHECK_THAT(r.message, Catch::Contains(kind + " default/" + req.name + ": "));
    }
    std::string expect =
        testing::fixture_path(f.path.substr(0, f.path.size() - 5) + ".expect.json");
    if (!std::filesystem::exists(expect)) {
      continue;
    }
    ++with_expectations;
    json want = testing::read_json(expect);
    if (want.contains("message")) {
      CHECK(r.message == want["message"].get<std::string>());
      CHECK(r.reason == want["reason"].get<std::string>());
    }
    if (want.contains("warnings")) {
      CHECK(json(r.warnings) == want["warnings"]);
    }
  }
  CHECK(with_expectations >= 13);
  CHECK(kinds_seen[1] >= 7);  // KubeRay's four TPU RayJob samples among them
  CHECK(kinds_seen[2] >= 2);
}
