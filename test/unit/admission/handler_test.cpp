// The Handler's decisions beyond the fixture goldens: scope (M1, V1), legacy placement across a
// sequence of admissions (M3.3), dry-run (docs/architecture.md "Caches that shape an answer"),
// --explain, and validation wiring.
#include "admission/handler.h"

#include <catch2/catch.hpp>
#include <set>

#include "kube/live_sources.h"
#include "kube/slot_allocators.h"
#include "support/test_support.h"

using testing::json;

namespace {

json worker(const std::string& file = "v6e-16-multihost-worker-no-indexing.json") {
  return testing::read_json(testing::fixture_path("pods/" + file));
}

}  // namespace

TEST_CASE("M1: only CREATE of v1 Pods is mutated", "[admission][handler]") {
  testing::Harness h;
  SECTION("other operations pass without a patch") {
    for (const char* op : {"UPDATE", "DELETE", "CONNECT"}) {
      admission::Request r = testing::pod_request(worker("v6e-16-multihost-worker-indexed.json"));
      r.operation = op;
      admission::Response out = h.handler.mutate(r);
      CAPTURE(op);
      CHECK(out.allowed);
      CHECK(!admission::has_patch(out));
    }
  }
  SECTION("another kind is denied with code 400 naming it") {
    admission::Request r = testing::pod_request(json::object());
    r.kind = "Deployment";
    r.group = "apps";
    admission::Response out = h.handler.mutate(r);
    CHECK_FALSE(out.allowed);
    CHECK(out.code == 400);
    CHECK_THAT(out.message, Catch::Contains("apps/Deployment"));
    CHECK(out.reason == "wrong_kind");
  }
}

TEST_CASE("M3.3: a burst of label-less Pods fills slices host by host, replica by replica",
          "[admission][handler][legacy]") {
  testing::Harness h;
  std::vector<podpatch::Slot> got;
  for (int i = 0; i < 9; ++i) {
    admission::Response out =
        h.handler.mutate(testing::pod_request(worker(), "uid-" + std::to_string(i)));
    REQUIRE(out.allowed);
    REQUIRE(out.placement);
    CHECK(out.placement->path == podpatch::PlacementPath::kLegacy);
    got.push_back(out.placement->slot);
    CHECK_THAT(out.warnings.back(), Catch::Contains("RayMultiHostIndexing"));
  }
  std::vector<podpatch::Slot> want = {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 0},
                                      {1, 1}, {1, 2}, {1, 3}, {2, 0}};
  CHECK(got == want);
}

TEST_CASE("M3.3: dry-run requests are placed but reserve nothing", "[admission][handler][legacy]") {
  testing::Harness h;
  for (int i = 0; i < 3; ++i) {
    admission::Response out =
        h.handler.mutate(testing::pod_request(worker(), "dry", /*dry_run=*/true));
    REQUIRE(out.placement);
    CHECK(out.placement->slot == podpatch::Slot{0, 0});
  }
  admission::Response real = h.handler.mutate(testing::pod_request(worker(), "real"));
  CHECK(real.placement->slot == podpatch::Slot{0, 0});
  admission::Response next = h.handler.mutate(testing::pod_request(worker(), "next"));
  CHECK(next.placement->slot == podpatch::Slot{0, 1});
}

TEST_CASE("M3.3: without legacy placement a label-less Pod is denied saying how to fix it",
          "[admission][handler][legacy]") {
  kube::DisabledSlotAllocator pods;
  kube::LiveNodeSource nodes;        // never listed: Nodes cannot be listed
  kube::LiveServiceSource services;  // never listed: no Services
  admission::Handler handler({}, pods, nodes, services);
  admission::Response out = handler.mutate(testing::pod_request(worker()));
  CHECK_FALSE(out.allowed);
  CHECK(out.code == 400);
  // Both fixes, the flag and the chart value that sets it.
  CHECK_THAT(out.message, Catch::Contains("RayMultiHostIndexing") &&
                              Catch::Contains("--legacy-indexing=auto") &&
                              Catch::Contains("Helm value tpuWebhook.legacyIndexing"));
  // Pods with KubeRay's labels are unaffected.
  admission::Response labelled =
      handler.mutate(testing::pod_request(worker("v6e-16-multihost-worker-indexed.json")));
  CHECK(labelled.allowed);
  CHECK(labelled.placement->path == podpatch::PlacementPath::kLabels);
}

TEST_CASE("M3.1: placement from KubeRay's labels consults no state", "[admission][handler]") {
  testing::Harness h;
  for (int i = 0; i < 3; ++i) {
    admission::Response out =
        h.handler.mutate(testing::pod_request(worker("v6e-16-multihost-worker-indexed.json")));
    CHECK(out.placement->slot == podpatch::Slot{0, 0});
    CHECK(out.placement->path == podpatch::PlacementPath::kLabels);
  }
  // The legacy source saw nothing: the first label-less Pod still gets host 0.
  CHECK(h.handler.mutate(testing::pod_request(worker())).placement->slot == podpatch::Slot{0, 0});
}

TEST_CASE("M4: the hostname is checked for the Pod's own replica, not replica 0",
          "[admission][handler]") {
  // A 59-character group: <g>-9-3 is 63 characters, a DNS label; <g>-10-3 is 64, not one.
  testing::Harness h;
  json pod = worker("v6e-16-multihost-worker-indexed.json");
  std::string group(59, 'g');
  pod["metadata"]["labels"]["ray.io/group"] = group;
  pod["metadata"]["labels"]["ray.io/replica-host-index"] = "3";
  pod["metadata"]["labels"]["ray.io/worker-group-replica-index"] = "9";
  admission::Response ok = h.handler.mutate(testing::pod_request(pod));
  CHECK(ok.allowed);
  pod["metadata"]["labels"]["ray.io/worker-group-replica-index"] = "10";
  admission::Response out = h.handler.mutate(testing::pod_request(pod));
  CHECK_FALSE(out.allowed);
  CHECK(out.code == 400);
  CHECK(out.reason == "invalid_name");
  CHECK_THAT(
      out.message,
      Catch::EndsWith("worker group name \"" + group + "\" gives hostnames such as \"" + group +
                      "-10-3\" that are not DNS labels (at most 63 lowercase letters, "
                      "digits and '-'); rename the worker group"));
}

TEST_CASE("explain: the derivation walks topology, chips, hosts, placement, names and addresses",
          "[admission][handler]") {
  testing::Harness h;
  admission::Request request = testing::pod_request(worker("v6e-16-multihost-worker-indexed.json"));
  admission::PodDecision decision;  // points into `request`, which outlives it
  admission::Response out = h.handler.mutate(request, &decision);
  REQUIRE(out.allowed);
  std::vector<std::string> lines = admission::explain(decision, h.handler.config());
  std::string all;
  for (const std::string& l : lines) {
    all += l + "\n";
  }
  CHECK_THAT(all,
             Catch::Contains("topology: 4x4 (nodeSelector cloud.google.com/gke-tpu-topology)"));
  CHECK_THAT(all, Catch::Contains("chips: 4 x 4 x 1 = 16"));
  CHECK_THAT(all, Catch::Contains("hosts: max(16 / 4, 1) = 4 (multi-host)"));
  CHECK_THAT(all, Catch::Contains("placement: replica 0, host 0"));
  CHECK_THAT(all, Catch::Contains("headless Service: raycluster-tpu-v6e-multihost-headless"));
  CHECK_THAT(all, Catch::Contains("TPU_WORKER_ID=0"));
  // Without the out-parameter nothing is collected and the answer is the same.
  admission::Response quiet =
      h.handler.mutate(testing::pod_request(worker("v6e-16-multihost-worker-indexed.json")));
  CHECK(quiet.patch == out.patch);
}

TEST_CASE("V1: validation scope", "[admission][handler][validate]") {
  testing::Harness h;
  SECTION("a Pod sent to /validate is denied naming the kind") {
    admission::Request r = testing::cluster_request(json::object());
    r.kind = "Pod";
    r.group = "";
    admission::Response out = h.handler.validate(r);
    CHECK_FALSE(out.allowed);
    CHECK(out.code == 400);
    CHECK_THAT(out.message, Catch::Contains("\"Pod\""));
  }
  SECTION("DELETE passes") {
    admission::Response out = h.handler.validate(testing::cluster_request(nullptr, "DELETE"));
    CHECK(out.allowed);
  }
  json invalid = {
      {"apiVersion", "ray.io/v1"},
      {"kind", "RayCluster"},
      {"metadata", {{"name", "c"}}},
      {"spec",
       {{"workerGroupSpecs",
         json::array({{{"groupName", "g"},
                       {"numOfHosts", 2},
                       {"template",
                        {{"spec",
                          {{"nodeSelector",
                            {{"cloud.google.com/gke-tpu-accelerator", "tpu-v6e-slice"},
                             {"cloud.google.com/gke-tpu-topology", "4x4"}}},
                           {"containers",
                            json::array({{{"name", "w"},
                                          {"resources",
                                           {{"limits", {{"google.com/tpu", "4"}}}}}}})}}}}}}})}}}};
  SECTION("UPDATE is validated too (better than upstream)") {
    admission::Response out = h.handler.validate(testing::cluster_request(invalid, "UPDATE"));
    CHECK_FALSE(out.allowed);
    CHECK_THAT(
        out.message,
        Catch::StartsWith("Number of workers in worker group not equal to specified topology"));
    CHECK(out.reason == "hosts_mismatch");
    CHECK(out.uid == "uid-cluster");
  }
  SECTION("an UPDATE that keeps the spec, or of a RayCluster being deleted, is not blocked") {
    admission::Request r = testing::cluster_request(invalid, "UPDATE");
    r.old_object = invalid;
    r.object["metadata"]["finalizers"] = json::array();
    CHECK(h.handler.validate(r).allowed);
    admission::Request d = testing::cluster_request(invalid, "UPDATE");
    d.object["metadata"]["deletionTimestamp"] = "2026-11-30T00:00:00Z";
    CHECK(h.handler.validate(d).allowed);
    admission::Request changed = testing::cluster_request(invalid, "UPDATE");
    changed.old_object = invalid;
    changed.old_object["spec"]["workerGroupSpecs"][0]["numOfHosts"] = 3;
    CHECK_FALSE(h.handler.validate(changed).allowed);
  }
  SECTION("a non-object RayCluster is denied") {
    admission::Response out = h.handler.validate(testing::cluster_request("text"));
    CHECK_FALSE(out.allowed);
    CHECK(out.reason == "malformed_object");
  }
  SECTION("a RayJob and a RayService are validated by their RayCluster spec, named as written") {
    for (auto [kind, field] : {std::pair<std::string, std::string>{"RayJob", "rayClusterSpec"},
                               {"RayService", "rayClusterConfig"}}) {
      json object = {{"apiVersion", "ray.io/v1"},
                     {"kind", kind},
                     {"metadata", {{"name", "work"}}},
                     {"spec", {{field, invalid["spec"]}}}};
      admission::Request r = testing::cluster_request(object);
      r.kind = kind;
      r.ns = "team";
      admission::Response out = h.handler.validate(r);
      CAPTURE(kind);
      CHECK_FALSE(out.allowed);
      CHECK(out.reason == "hosts_mismatch");
      CHECK_THAT(out.message, Catch::Contains(": " + kind + " team/work: worker group \"g\": "));
      // Its UPDATE that keeps the cluster spec (a RayJob's suspend) is not blocked.
      admission::Request u = testing::cluster_request(object, "UPDATE");
      u.kind = kind;
      u.old_object = object;
      u.object["spec"]["suspend"] = true;
      CHECK(h.handler.validate(u).allowed);
    }
  }
  SECTION("another ray.io kind is refused naming the three it handles") {
    admission::Request r = testing::cluster_request(invalid);
    r.kind = "RayCronJob";
    admission::Response out = h.handler.validate(r);
    CHECK_FALSE(out.allowed);
    CHECK(out.reason == "wrong_kind");
    CHECK(out.message ==
          "the /validate webhook handles ray.io RayClusters, RayJobs and RayServices, but this "
          "request is for kind \"ray.io/RayCronJob\"; point the ValidatingWebhookConfiguration's "
          "rules at rayclusters, rayjobs and rayservices only");
  }
}

TEST_CASE("bounds: too many containers or env entries are refused, not processed",
          "[admission][handler][bounds]") {
  testing::Harness h;
  json many_containers = worker("v6e-16-multihost-worker-indexed.json");
  json c = many_containers["spec"]["containers"][0];
  for (int i = 0; i < 300; ++i) {
    c["name"] = "c" + std::to_string(i);
    many_containers["spec"]["containers"].push_back(c);
  }
  admission::Response out = h.handler.mutate(testing::pod_request(many_containers));
  CHECK_FALSE(out.allowed);
  CHECK(out.code == 413);
  CHECK_THAT(out.message, Catch::Contains("301 containers") && Catch::Contains("at most 256"));

  json many_env = worker("v6e-16-multihost-worker-indexed.json");
  for (int i = 0; i < 5000; ++i) {
    many_env["spec"]["containers"][0]["env"].push_back(
        {{"name", "V" + std::to_string(i)}, {"value", "x"}});
  }
  out = h.handler.mutate(testing::pod_request(many_env));
  CHECK_FALSE(out.allowed);
  CHECK(out.code == 413);
  CHECK_THAT(out.message, Catch::Contains(".env has 5015 entries"));
}
