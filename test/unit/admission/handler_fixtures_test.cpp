// Every AdmissionReview fixture (test/fixtures/admission/<case>.json, written by
// make_admission_fixtures.py) through the Handler, compared with its golden response
// (test/fixtures/responses/<case>.json; UPDATE_GOLDEN=1 rewrites them for review), plus the
// properties every answer must have: uid echoed (Envelope), original.patch(p) == mutated, and
// re-admitting the mutated Pod gives an empty patch (M6).
#include <catch2/catch.hpp>
#include <filesystem>

#include "admission/review.h"
#include "support/test_support.h"

namespace {

using testing::json;

struct Case {
  std::string name;
  json review;
  admission::Config config;
  std::string cluster_file;
};

Case load_case(const std::string& file) {
  Case c;
  c.name = file.substr(0, file.size() - 5);
  c.review = testing::read_json(testing::fixture_path("admission/" + file));
  std::string config = testing::fixture_path("admission/" + c.name + ".config.json");
  if (std::filesystem::exists(config)) {
    c.config = testing::config_from(testing::read_json(config));
  }
  std::string cluster = testing::fixture_path("admission/" + c.name + ".cluster.yaml");
  if (std::filesystem::exists(cluster)) {
    c.cluster_file = cluster;
  }
  return c;
}

std::vector<std::string> review_files() {
  std::vector<std::string> out;
  for (const std::string& f : testing::fixture_files("admission", ".json")) {
    if (!f.ends_with(".config.json")) {
      out.push_back(f);
    }
  }
  return out;
}

admission::Response run(const Case& c, const json& review) {
  testing::Harness h(c.config);
  if (!c.cluster_file.empty()) {
    h.cluster.load(c.cluster_file);
  }
  webhook::Result<admission::Request> req = admission::decode(review.dump());
  REQUIRE(req.has_value());
  return h.handler.mutate(*req);
}

}  // namespace

TEST_CASE("every admission fixture matches its golden response (M1-M7)", "[fixtures]") {
  std::vector<std::string> files = review_files();
  REQUIRE(files.size() >= 60);
  for (const std::string& file : files) {
    Case c = load_case(file);
    CAPTURE(c.name, c.review.value("_rule", ""));
    admission::Response r = run(c, c.review);
    // Envelope: the uid is echoed on every path.
    CHECK(r.uid == c.review["request"]["uid"].get<std::string>());
    json diff = testing::check_golden(testing::fixture_path("responses/" + c.name + ".json"),
                                      testing::readable(r));
    CAPTURE(diff.dump(2));
    CHECK(diff.empty());
    if (!r.allowed) {
      CHECK((r.code == 400 || r.code == 409));
      CHECK_FALSE(r.message.empty());
      CHECK(!admission::has_patch(r));
      continue;
    }
    const json& pod = c.review["request"]["object"];
    json mutated = testing::apply(pod, r);
    testing::record_patch("fixture-" + c.name, pod, admission::patch_ops(r));
    // M6: the Handler diffs only the parts it may change, with podpatch::diff; that is
    // nlohmann's diff of the whole Pods.
    if (admission::has_patch(r)) {
      CHECK(json::diff(pod, mutated) == admission::patch_ops(r));
    }
    // M6: the patch changes only what the webhook owns, and applying it twice is a no-op.
    json again = c.review;
    again["request"]["object"] = mutated;
    again["request"]["uid"] = "uid-readmit";
    admission::Response second = run(c, again);
    CAPTURE(second.patch);
    CHECK(second.allowed);
    CHECK(!admission::has_patch(second));
  }
}
