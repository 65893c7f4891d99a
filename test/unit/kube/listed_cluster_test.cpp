// kube::ListedCluster: objects given up front (webhook-dryrun --existing, the tests) fed to the
// server's own sources through their Sinks, as one complete list each.
#include "kube/listed_cluster.h"

#include <catch2/catch.hpp>
#include <vector>

#include "kube_support.h"

using podpatch::GroupKey;
using podpatch::Slot;
using testing::json;

namespace {

const GroupKey kKey{"default", "rc", "tpu-group"};

// A worker Pod of kKey on host `worker_id` of replica `replica` (v6e 4x4: 4 hosts a slice).
json admitted_pod(int replica, int worker_id, const std::string& name) {
  json p = testing::worker_pod("rc", "tpu-group", "4x4");
  p["metadata"]["name"] = name;
  p["metadata"]["labels"]["replicaIndex"] = "tpu-group-" + std::to_string(replica);
  p["spec"]["containers"][0]["env"].push_back(
      {{"name", "TPU_WORKER_ID"}, {"value", std::to_string(worker_id)}});
  return p;
}

json node(const std::string& name, const podpatch::Labels& labels) {
  json l = json::object();
  for (const auto& [k, v] : labels) {
    l[k] = v;
  }
  return {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}, {"labels", l}}}};
}

}  // namespace

TEST_CASE("ListedCluster: only Pods holding a slot take one (M3.3)") {
  json deleting = admitted_pod(0, 1, "b");
  deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  json no_id = admitted_pod(0, 2, "c");
  no_id["spec"]["containers"][0]["env"].erase(no_id["spec"]["containers"][0]["env"].size() - 1);
  json wrong_group_label = admitted_pod(0, 3, "d");
  wrong_group_label["metadata"]["labels"]["replicaIndex"] = "other-group-0";
  kube::ListedCluster cluster;
  cluster.list(std::vector<json>{admitted_pod(0, 0, "a"), deleting, no_id, wrong_group_label,
                                 json{{"kind", "Node"}}});
  std::vector<podpatch::Holder> holders = cluster.registry().holders(kKey);
  REQUIRE(holders.size() == 1);
  CHECK(holders[0].pod == "a");
  CHECK(holders[0].slot == Slot{0, 0});
  CHECK(cluster.registry().stats().pods == 1);
  CHECK(cluster.pods().place(kKey, 4, false)->host == 1);
}

// docs/legacy-placement.md "What the webhook watches": the dry run sees what the server's watches
// select, so an object the server would never see cannot change its answer.
TEST_CASE("ListedCluster: what the server's watches do not select holds nothing (M3.3)") {
  json not_kuberays = admitted_pod(0, 0, "a");
  not_kuberays["metadata"]["labels"].erase("app.kubernetes.io/created-by");
  json head = admitted_pod(0, 1, "b");
  head["metadata"]["labels"]["ray.io/node-type"] = "head";
  json worker = admitted_pod(0, 2, "c");
  kube::ListedCluster cluster;
  cluster.list(std::vector<json>{
      not_kuberays,
      head,
      worker,
      node("plain", {{"pool", "a"}}),
      node("tpu", {{"cloud.google.com/gke-tpu-accelerator", "tpu-v6e-slice"}}),
      {{"kind", "Service"}, {"metadata", {{"name", "svc"}, {"namespace", "default"}}}}});
  std::vector<podpatch::Holder> holders = cluster.registry().holders(kKey);
  REQUIRE(holders.size() == 1);
  CHECK(holders[0].pod == "c");
  CHECK(*cluster.pods().place(kKey, 4, false) == Slot{0, 0});  // hosts 0 and 1 are free
  REQUIRE(cluster.nodes().nodes_matching({}).has_value());
  CHECK(cluster.nodes().nodes_matching({})->size() == 1);
}

TEST_CASE("selected: every term must hold, key=value by value and key by presence") {
  json o = {{"metadata", {{"labels", {{"a", "1"}, {"b", ""}}}}}};
  CHECK(kube::selected(o, ""));
  CHECK(kube::selected(o, "a=1"));
  CHECK(kube::selected(o, "a"));
  CHECK(kube::selected(o, "b"));
  CHECK(kube::selected(o, "b="));
  CHECK(kube::selected(o, "a=1,b"));
  CHECK_FALSE(kube::selected(o, "a=2"));
  CHECK_FALSE(kube::selected(o, "c"));
  CHECK_FALSE(kube::selected(o, "a=1,c"));
  CHECK_FALSE(kube::selected(json{{"kind", "Pod"}}, "a"));
  CHECK(kube::selected(json{{"kind", "Pod"}}, ""));
}

TEST_CASE("ListedCluster before any list(): listed and empty, no Pods, Nodes or Services") {
  kube::ListedCluster cluster;
  CHECK(cluster.registry().synced());
  CHECK(*cluster.pods().place(kKey, 4, false) == Slot{0, 0});
  std::optional<std::vector<podpatch::Labels>> nodes = cluster.nodes().nodes_matching({});
  REQUIRE(nodes.has_value());  // listable, and empty
  CHECK(nodes->empty());
  CHECK_FALSE(cluster.services().headless_service("default", "rc").has_value());
}

TEST_CASE("ListedCluster: a list replaces the previous one, kind by kind") {
  kube::ListedCluster cluster;
  cluster.list(std::vector<json>{admitted_pod(0, 0, "a"), node("n0", {{"pool", "a"}})});
  cluster.list(std::vector<json>{admitted_pod(0, 1, "b")});
  CHECK(cluster.registry().holders(kKey).size() == 1);
  CHECK(cluster.registry().holders(kKey)[0].pod == "b");
  CHECK(cluster.nodes().nodes_matching({})->empty());
}

TEST_CASE("LiveNodeSource listed: matches every selector label; never listed: cannot list") {
  kube::LiveNodeSource nodes;
  CHECK_FALSE(nodes.nodes_matching({}).has_value());
  kube::list_objects(nodes,
                     std::vector<json>{
                         node("n0", {{"cloud.google.com/gke-tpu-topology", "4x4"}, {"pool", "a"}}),
                         node("n1", {{"cloud.google.com/gke-tpu-topology", "2x4"}, {"pool", "a"}}),
                     },
                     "Node");
  CHECK(nodes.nodes_matching({{"pool", "a"}})->size() == 2);
  CHECK(
      nodes.nodes_matching({{"pool", "a"}, {"cloud.google.com/gke-tpu-topology", "4x4"}})->size() ==
      1);
  CHECK(nodes.nodes_matching({{"pool", "b"}})->empty());
}
