// The file-backed sources behind webhook-dryrun --existing and the tests.
#include <catch2/catch.hpp>

#include <set>
#include <thread>

#include "admission/static_sources.h"
#include "support/test_support.h"

using testing::json;

namespace {

json admitted_pod(int replica, int worker_id, const std::string& name) {
  json p = testing::read_json(testing::fixture_path("pods/v6e-16-multihost-worker-no-indexing.json"));
  p["metadata"]["name"] = name;
  p["metadata"]["labels"]["replicaIndex"] = "tpu-group-" + std::to_string(replica);
  p["spec"]["containers"][0]["env"].push_back({{"name", "TPU_WORKER_ID"}, {"value", std::to_string(worker_id)}});
  return p;
}

const podpatch::GroupKey kKey{"default", "raycluster-tpu-v6e-multihost", "tpu-group"};

}  // namespace

TEST_CASE("StaticPodSource records only Pods holding a slot (M3.3)", "[admission][sources]") {
  admission::StaticPodSource pods;
  CHECK(pods.add(admitted_pod(0, 0, "a")));
  json deleting = admitted_pod(0, 1, "b");
  deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  CHECK_FALSE(pods.add(deleting));
  json no_id = admitted_pod(0, 2, "c");
  no_id["spec"]["containers"][0]["env"].erase(no_id["spec"]["containers"][0]["env"].size() - 1);
  CHECK_FALSE(pods.add(no_id));
  json wrong_group_label = admitted_pod(0, 3, "d");
  wrong_group_label["metadata"]["labels"]["replicaIndex"] = "other-group-0";
  CHECK_FALSE(pods.add(wrong_group_label));
  CHECK_FALSE(pods.add(json{{"kind", "Node"}}));
  CHECK(pods.place(kKey, 4, false)->host == 1);
}

TEST_CASE("StaticPodSource gives 64 concurrent admissions 64 distinct slots", "[admission][sources]") {
  admission::StaticPodSource pods;
  std::vector<podpatch::Slot> slots(64);
  std::vector<std::thread> threads;
  for (int i = 0; i < 64; ++i) {
    threads.emplace_back([&, i] { slots[static_cast<std::size_t>(i)] = *pods.place(kKey, 16, false); });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  std::set<podpatch::Slot> unique(slots.begin(), slots.end());
  CHECK(unique.size() == 64);
  for (const podpatch::Slot& s : unique) {
    CHECK(s.replica < 4);
    CHECK(s.host < 16);
  }
}

TEST_CASE("StaticNodeSource matches every selector label; unlistable answers nullopt",
          "[admission][sources]") {
  admission::StaticNodeSource nodes;
  nodes.add_labels({{"cloud.google.com/gke-tpu-topology", "4x4"}, {"pool", "a"}});
  nodes.add_labels({{"cloud.google.com/gke-tpu-topology", "2x4"}, {"pool", "a"}});
  CHECK(nodes.nodes_matching({{"pool", "a"}})->size() == 2);
  CHECK(nodes.nodes_matching({{"pool", "a"}, {"cloud.google.com/gke-tpu-topology", "4x4"}})->size() == 1);
  CHECK(nodes.nodes_matching({{"pool", "b"}})->empty());
  admission::StaticNodeSource none(false);
  CHECK_FALSE(none.nodes_matching({}).has_value());
}

TEST_CASE("StaticServiceSource finds the Service labelled ray.io/headless-worker-svc", "[admission][sources]") {
  admission::StaticServiceSource services;
  CHECK(services.add({{"kind", "Service"},
                      {"metadata",
                       {{"name", "svc-x"}, {"namespace", "ns"}, {"labels", {{"ray.io/headless-worker-svc", "c"}}}}}}));
  CHECK_FALSE(services.add({{"kind", "Service"}, {"metadata", {{"name", "plain"}}}}));
  CHECK(services.headless_service("ns", "c") == "svc-x");
  CHECK_FALSE(services.headless_service("other", "c").has_value());
}
