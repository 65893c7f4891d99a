// The server's fast path against the reference, on every admission fixture and on the corpus of
// odd Pods (fuzz/corpus/admission, also the admission fuzzer's seeds):
//   - decode_for_mutation (simdjson, only the Pod fields the Handler reads) gives the same
//     answer, byte for byte, as decode (nlohmann, the whole review);
//   - the patch written straight from the changes (podpatch::write_patch) is the same as
//     json::diff of the Pod's mutable parts before and after apply_mutation (what the webhook
//     answered before it wrote patches itself), applies to the Pod like it, and re-admitting the
//     patched Pod gives no patch. Each patch is also applied by kubectl (record_patch).
#include <catch2/catch.hpp>
#include <filesystem>

#include "admission/review.h"
#include "podpatch/mutate.h"
#include "support/test_support.h"

namespace {

using testing::json;

struct Input {
  std::string name;
  std::string body;
  admission::Config config;
  std::string cluster_file;
};

std::vector<Input> inputs() {
  std::vector<Input> out;
  for (const std::string& f : testing::fixture_files("admission", ".json")) {
    if (f.ends_with(".config.json")) {
      continue;
    }
    Input in;
    in.name = "fixture-" + f.substr(0, f.size() - 5);
    std::string stem = testing::fixture_path("admission/" + f.substr(0, f.size() - 5));
    in.body = testing::read_text(testing::fixture_path("admission/" + f));
    if (std::filesystem::exists(stem + ".config.json")) {
      in.config = testing::config_from(testing::read_json(stem + ".config.json"));
    }
    if (std::filesystem::exists(stem + ".cluster.yaml")) {
      in.cluster_file = stem + ".cluster.yaml";
    }
    out.push_back(std::move(in));
  }
  const std::string corpus = "../../fuzz/corpus/admission";
  for (const std::string& f : testing::fixture_files(corpus, ".json")) {
    out.push_back({"corpus-" + f.substr(0, f.size() - 5),
                   testing::read_text(testing::fixture_path(corpus + "/" + f)),
                   {},
                   ""});
  }
  return out;
}

// One admission on a fresh cluster (legacy placement gives the same slot every time).
admission::Response admit(const Input& in, const webhook::Result<admission::Request>& req,
                          admission::PodDecision* decision = nullptr) {
  testing::Harness h(in.config);
  if (!in.cluster_file.empty()) {
    h.cluster.load(in.cluster_file);
  }
  if (!req) {
    return admission::denied(admission::request_uid(in.body), req.error());
  }
  return h.handler.mutate(*req, decision);
}

}  // namespace

TEST_CASE("decode_for_mutation answers every fixture and corpus review as decode does",
          "[admission][two-paths]") {
  std::vector<Input> all = inputs();
  REQUIRE(all.size() >= 80);
  int patched = 0;
  for (const Input& in : all) {
    CAPTURE(in.name);
    std::string reference = admission::encode(admit(in, admission::decode(in.body)));
    std::string fast = admission::encode(admit(in, admission::decode_for_mutation(in.body)));
    CHECK(fast == reference);
    patched += reference.find("\"patchType\"") != std::string::npos ? 1 : 0;
  }
  CHECK(patched >= 40);  // the comparison covers patches, not only denials
}

TEST_CASE("the patch written from the changes is json::diff of the mutated Pod (M6)",
          "[admission][two-paths]") {
  int compared = 0;
  for (const Input& in : inputs()) {
    CAPTURE(in.name);
    webhook::Result<admission::Request> req = admission::decode(in.body);
    if (!req || !req->object.is_object()) {
      continue;
    }
    admission::PodDecision d;
    admission::Response r = admit(in, req, &d);
    if (!r.allowed || d.mutated.is_null()) {
      continue;
    }
    ++compared;
    const json& pod = req->object;
    json reference = json::diff(podpatch::mutable_parts(pod), d.mutated);
    json written = admission::has_patch(r) ? json::parse(r.patch) : json::array();
    CHECK(written == reference);
    CHECK(r.patch == webhook::dump_json(reference));  // the same bytes, too
    json mutated = pod.patch(written);
    CHECK(mutated == pod.patch(reference));
    testing::record_patch("two-paths-" + in.name, pod, written);
    // Re-admitting the patched Pod changes nothing.
    json again = json::parse(in.body);
    again["request"]["object"] = mutated;
    admission::Response second = admit(in, admission::decode(webhook::dump_json(again)));
    CHECK(second.allowed);
    CHECK_FALSE(admission::has_patch(second));
  }
  CHECK(compared >= 40);
}

TEST_CASE("decode_for_mutation builds only the Pod fields the Handler reads, else defers to decode",
          "[admission][two-paths]") {
  auto corpus = [](const std::string& name) {
    return testing::read_text(testing::fixture_path("../../fuzz/corpus/admission/" + name));
  };
  SECTION("an ordinary review: the subset, at its own paths") {
    std::string body = corpus("env-fill-in-place.json");
    webhook::Result<admission::Request> fast = admission::decode_for_mutation(body);
    webhook::Result<admission::Request> full = admission::decode(body);
    REQUIRE(fast.has_value());
    REQUIRE(full.has_value());
    CHECK(full->object["spec"].contains("volumes"));
    CHECK_FALSE(fast->object["spec"].contains("volumes"));
    CHECK_FALSE(fast->object["spec"].contains("initContainers"));
    CHECK_FALSE(fast->object["metadata"].contains("ownerReferences"));
    CHECK_FALSE(fast->object["spec"]["containers"][0].contains("image"));
    CHECK_FALSE(fast->object.contains("status"));
    CHECK(fast->object["spec"]["containers"][0]["resources"]["limits"].size() == 1);
    // A variable the webhook neither reads nor writes: a placeholder without allocation (nlohmann's
    // discarded value, which no parsed JSON holds), in its place.
    CHECK(fast->object["spec"]["containers"][0]["env"][0].is_discarded());
    CHECK(fast->object["spec"]["containers"][0]["env"][1].is_discarded());
    CHECK(fast->object["spec"]["containers"][0]["env"].size() ==
          full->object["spec"]["containers"][0]["env"].size());
    for (const char* pointer :
         {"/metadata/generateName", "/metadata/namespace", "/spec/nodeSelector",
          "/spec/containers/0/env/12", "/spec/containers/0/env/13", "/spec/containers/0/env/14",
          "/spec/containers/0/env/15", "/spec/containers/0/resources/limits/google.com~1tpu",
          "/spec/containers/0/resources/requests/google.com~1tpu", "/spec/containers/0/name"}) {
      CAPTURE(pointer);
      CHECK(fast->object.at(json::json_pointer(pointer)) ==
            full->object.at(json::json_pointer(pointer)));
    }
    // Of the labels, those the mutation reads; the others are not built.
    const json& labels = full->object["metadata"]["labels"];
    json read = json::object();
    for (const char* key :
         {"ray.io/cluster", "ray.io/group", "ray.io/replica-host-index",
          "ray.io/worker-group-replica-index", "ray.io/worker-group-replica-name"}) {
      REQUIRE(labels.contains(key));
      read[key] = labels[key];
    }
    CHECK(labels.contains("ray.io/identifier"));
    CHECK(fast->object["metadata"]["labels"] == read);
    CHECK(fast->uid == full->uid);
    CHECK(fast->generate_name == full->generate_name);
    CHECK(fast->operation == "CREATE");
  }
  SECTION(
      "env: a webhook variable whole, with a valueFrom only as there; a malformed entry whole") {
    json review = json::parse(corpus("env-fill-in-place.json"));
    json& env = review["request"]["object"]["spec"]["containers"][0]["env"];
    env[2] = {{"name", "TPU_WORKER_ID"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "x"}}}}}};
    env[3] = {{"name", "OTHER"}, {"value", 5}};  // PodView denies it: kept for its message
    env[4] = {{"name", 7}, {"value", "x"}};
    env[5] = "not an object";
    webhook::Result<admission::Request> fast =
        admission::decode_for_mutation(webhook::dump_json(review));
    REQUIRE(fast.has_value());
    const json& got = fast->object["spec"]["containers"][0]["env"];
    CHECK(got[2] == json({{"name", "TPU_WORKER_ID"}, {"valueFrom", true}}));
    CHECK(got[3] == env[3]);
    CHECK(got[4] == env[4]);
    CHECK(got[5] == env[5]);
    CHECK(got[6].is_discarded());  // RAY_NODE_TYPE_NAME, well-formed
  }
  SECTION("labels and annotations: only those read; one that is not a string is decode's") {
    json review = json::parse(corpus("env-fill-in-place.json"));
    json& metadata = review["request"]["object"]["metadata"];
    metadata["annotations"] = {{"cloud.google.com/gke-tpu-slice-topology", "2x2"},
                               {"kueue.x-k8s.io/podset-required-topology", "x"},
                               {"example.com/note", "not read"}};
    webhook::Result<admission::Request> fast =
        admission::decode_for_mutation(webhook::dump_json(review));
    REQUIRE(fast.has_value());
    CHECK(fast->object["metadata"]["annotations"] ==
          json({{"cloud.google.com/gke-tpu-slice-topology", "2x2"},
                {"kueue.x-k8s.io/podset-required-topology", "x"}}));
    CHECK(fast->object["metadata"]["labels"].contains("ray.io/group"));
    // An unread label that is not a string: PodView denies the Pod, naming it, so the whole
    // review is decode()'s.
    metadata["labels"]["example.com/count"] = 3;
    std::string body = webhook::dump_json(review);
    fast = admission::decode_for_mutation(body);
    REQUIRE(fast.has_value());
    CHECK(fast->object["metadata"]["labels"]["example.com/count"] == 3);
    CHECK(fast->object["spec"].contains("volumes"));  // the whole object: decode()'s
  }
  SECTION("an integer beyond 64 bits and a byte-order mark, which simdjson refuses: decode's") {
    for (const char* name : {"big-integer.json", "byte-order-mark.json"}) {
      CAPTURE(name);
      webhook::Result<admission::Request> fast = admission::decode_for_mutation(corpus(name));
      REQUIRE(fast.has_value());
      CHECK(fast->object["spec"].contains("volumes"));  // the whole object: decode() read it
    }
  }
  SECTION("repeated keys: the last one, as nlohmann keeps it") {
    webhook::Result<admission::Request> fast =
        admission::decode_for_mutation(corpus("duplicate-keys.json"));
    REQUIRE(fast.has_value());
    CHECK(fast->uid == "corpus-duplicate-keys");
    CHECK_FALSE(fast->object["metadata"]["labels"].empty());
  }
  SECTION("a refused review gets decode's error") {
    for (std::string body : {std::string(), std::string("{"), std::string("[1]"),
                             std::string(R"({"apiVersion":"v1","kind":"AdmissionReview"})")}) {
      CAPTURE(body);
      webhook::Result<admission::Request> fast = admission::decode_for_mutation(body);
      webhook::Result<admission::Request> full = admission::decode(body);
      REQUIRE_FALSE(fast.has_value());
      REQUIRE_FALSE(full.has_value());
      CHECK(fast.error().message == full.error().message);
      CHECK(fast.error().reason == full.error().reason);
    }
  }
}
