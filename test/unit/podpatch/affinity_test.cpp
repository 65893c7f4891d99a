// lib/podpatch/affinity: docs/spec.md M4's topologyKey choice (own terms, Kueue annotation, node
// pool; subslices by the Nodes' host, subblock, block, node pool groups) and the merged affinity
// terms.
#include "podpatch/affinity.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "support/test_support.h"

using podpatch::json;
using podpatch::Labels;
using podpatch::PodView;

namespace {

constexpr std::string_view kHost = "cloud.google.com/gce-topology-host";
constexpr std::string_view kSubblock = "cloud.google.com/gce-topology-subblock";
constexpr std::string_view kBlock = "cloud.google.com/gce-topology-block";
constexpr std::string_view kPool = "cloud.google.com/gke-nodepool";

json term_with_key(const std::string& key) {
  return {{"labelSelector", {{"matchLabels", {{"app", "x"}}}}}, {"topologyKey", key}};
}

}  // namespace

TEST_CASE("M4: default_topology_key, own terms, then Kueue, then node pool",
          "[podpatch][affinity]") {
  auto [row, own_keys, kueue, want] =
      GENERATE(table<std::string, std::vector<std::string>, std::string, std::string>({
          {"nothing", {}, "", "cloud.google.com/gke-nodepool"},
          {"kueue block",
           {},
           "cloud.google.com/gce-topology-block",
           "cloud.google.com/gce-topology-block"},
          {"kueue not google", {}, "kubernetes.io/hostname", "cloud.google.com/gke-nodepool"},
          {"kueue empty", {}, "-", "cloud.google.com/gke-nodepool"},
          {"own term",
           {"cloud.google.com/gce-topology-subblock"},
           "",
           "cloud.google.com/gce-topology-subblock"},
          {"own term beats kueue",
           {"cloud.google.com/gce-topology-subblock"},
           "cloud.google.com/gce-topology-block",
           "cloud.google.com/gce-topology-subblock"},
          {"first google own term",
           {"kubernetes.io/hostname", "cloud.google.com/a", "cloud.google.com/b"},
           "",
           "cloud.google.com/a"},
          {"own terms not google",
           {"kubernetes.io/hostname", "topology.kubernetes.io/zone"},
           "cloud.google.com/gce-topology-host",
           "cloud.google.com/gce-topology-host"},
          {"prefix must lead", {"x.cloud.google.com/a"}, "", "cloud.google.com/gke-nodepool"},
      }));
  CAPTURE(row);
  json pod = {{"metadata", {{"name", "p"}}}, {"spec", json::object()}};
  if (!own_keys.empty()) {
    json terms = json::array();
    for (const std::string& k : own_keys) {
      terms.push_back(term_with_key(k));
    }
    pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
        terms;
  }
  if (!kueue.empty()) {
    pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] =
        kueue == "-" ? "" : kueue;
  }
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE(view.has_value());
  CHECK(podpatch::default_topology_key(*view) == want);
}

TEST_CASE("M4: only required pod-affinity terms give the key", "[podpatch][affinity]") {
  json pod = json::parse(R"({"spec": {"affinity": {
      "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
          {"weight": 1, "podAffinityTerm": {"topologyKey": "cloud.google.com/a"}}]},
      "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
          {"topologyKey": "cloud.google.com/b"}]}}}})");
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE(view.has_value());
  CHECK(podpatch::default_topology_key(*view) == "cloud.google.com/gke-nodepool");
}

namespace {

Labels node(std::string host, std::string subblock, std::string block, std::string pool) {
  Labels l = {{"kubernetes.io/hostname", "n"}};
  auto put = [&](std::string_view key, std::string value) {
    if (!value.empty()) {
      l.emplace(std::string(key), std::move(value));
    }
  };
  put(kHost, std::move(host));
  put(kSubblock, std::move(subblock));
  put(kBlock, std::move(block));
  put(kPool, std::move(pool));
  return l;
}

}  // namespace

TEST_CASE(
    "M4/V3: subslice_topology_key takes the first of host, subblock, block, node pool "
    "with a group of exactly `hosts` Nodes",
    "[podpatch][affinity]") {
  using Nodes = std::vector<Labels>;
  // 8 Nodes: each its own host; subblocks of 2; blocks of 4; one pool of 8.
  Nodes eight;
  for (int i = 0; i < 8; ++i) {
    eight.push_back(node("h" + std::to_string(i), "sb" + std::to_string(i / 2),
                         "b" + std::to_string(i / 4), "pool"));
  }
  auto [row, nodes, hosts, want] = GENERATE_COPY(table<std::string, Nodes, int, std::string>({
      {"host", eight, 1, std::string(kHost)},
      {"subblock", eight, 2, std::string(kSubblock)},
      {"block", eight, 4, std::string(kBlock)},
      {"node pool", eight, 8, std::string(kPool)},
      {"no group of 3", eight, 3, ""},
      {"no group of 16", eight, 16, ""},
      {"no Nodes", Nodes{}, 4, ""},
      // Only pools: the fallback.
      {"pools only", Nodes{node("", "", "", "p1"), node("", "", "", "p1"), node("", "", "", "p2")},
       2, std::string(kPool)},
      // Any one group of the right size is enough, even if others differ.
      {"uneven blocks",
       Nodes{node("", "", "b1", "p"), node("", "", "b1", "p"), node("", "", "b2", "p")}, 2,
       std::string(kBlock)},
      {"uneven blocks, other size",
       Nodes{node("", "", "b1", "p"), node("", "", "b1", "p"), node("", "", "b2", "p")}, 1,
       std::string(kBlock)},
      // Subblock beats block when both have a group of the size.
      {"subblock before block",
       Nodes{node("", "s1", "b1", ""), node("", "s1", "b2", ""), node("", "s2", "b2", "")}, 2,
       std::string(kSubblock)},
      // Empty label values are no group.
      {"empty values", Nodes{Labels{{std::string(kBlock), ""}}, Labels{{std::string(kBlock), ""}}},
       2, ""},
  }));
  CAPTURE(row, hosts);
  std::optional<std::string_view> key = podpatch::subslice_topology_key(nodes, hosts);
  CHECK(key.has_value() == !want.empty());
  if (key) {
    CHECK(*key == want);
  }
}

TEST_CASE("V3: has_gce_topology_labels", "[podpatch][affinity]") {
  using Nodes = std::vector<Labels>;
  CHECK_FALSE(podpatch::has_gce_topology_labels(Nodes{}));
  CHECK_FALSE(podpatch::has_gce_topology_labels(Nodes{node("", "", "", "pool")}));
  CHECK_FALSE(
      podpatch::has_gce_topology_labels(Nodes{Labels{{"cloud.google.com/gce-topology", "x"}}}));
  CHECK(podpatch::has_gce_topology_labels(
      Nodes{node("", "", "", "pool"), node("h", "", "", "pool")}));
  CHECK(podpatch::has_gce_topology_labels(Nodes{node("", "s", "", "")}));
  CHECK(podpatch::has_gce_topology_labels(Nodes{node("", "", "b", "")}));
}

namespace {

json expr(const std::string& key, const std::string& op, const std::string& value = "") {
  json r = {{"key", key}, {"operator", op}};
  if (!value.empty()) {
    r["values"] = json::array({value});
  }
  return r;
}

// The three terms of M4 for `match`, as docs/spec.md spells them.
json affinity_term(const podpatch::AffinityMatch& m) {
  return {{"labelSelector",
           {{"matchExpressions",
             json::array({expr(m.key, "In", m.value), expr("ray.io/cluster", "In", m.cluster)})}}},
          {"topologyKey", m.topology_key}};
}
json anti_same_cluster(const podpatch::AffinityMatch& m) {
  return {{"labelSelector",
           {{"matchExpressions", json::array({expr(m.key, "NotIn", m.value),
                                              expr("ray.io/cluster", "In", m.cluster)})}}},
          {"topologyKey", m.topology_key}};
}
json anti_other_clusters(const podpatch::AffinityMatch& m) {
  return {{"labelSelector",
           {{"matchExpressions",
             json::array({expr("ray.io/cluster", "NotIn", m.cluster), expr(m.key, "Exists")})}}},
          {"namespaceSelector",
           {{"matchExpressions",
             json::array({expr("kubernetes.io/metadata.name", "NotIn", "kube-system")})}}},
          {"topologyKey", m.topology_key}};
}

json worker_pod() {
  return json::parse(R"({"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "w", "namespace": "default",
                 "labels": {"ray.io/cluster": "rc", "ray.io/group": "g", "replicaIndex": "g-0"}},
    "spec": {"containers": [{"name": "ray-worker", "image": "ray",
                             "resources": {"limits": {"google.com/tpu": "4"}}}]}})");
}

json merge_and_record(const std::string& name, const json& original,
                      const podpatch::AffinityMatch& m) {
  json mutated = original;
  podpatch::merge_affinity(mutated, m);
  json patch = json::diff(original, mutated);
  CHECK(original.patch(patch) == mutated);
  testing::record_patch("unit-affinity-" + name, original, patch);
  return mutated;
}

}  // namespace

TEST_CASE("M4: merge_affinity adds the affinity and both anti-affinity terms",
          "[podpatch][affinity]") {
  auto [row, match] = GENERATE(table<std::string, podpatch::AffinityMatch>({
      {"replica-index", {"replicaIndex", "g-0", "rc", "cloud.google.com/gke-nodepool"}},
      {"replica-name",
       {"ray.io/worker-group-replica-name", "g-x7k2b", "rc",
        "cloud.google.com/gce-topology-block"}},
  }));
  CAPTURE(row);
  json mutated = merge_and_record("empty-" + row, worker_pod(), match);
  const json& affinity = mutated["spec"]["affinity"];
  CHECK(affinity ==
        json{{"podAffinity",
              {{"requiredDuringSchedulingIgnoredDuringExecution",
                json::array({affinity_term(match)})}}},
             {"podAntiAffinity",
              {{"requiredDuringSchedulingIgnoredDuringExecution",
                json::array({anti_same_cluster(match), anti_other_clusters(match)})}}}});
  // Nothing but spec.affinity changed.
  json rest = mutated;
  rest["spec"].erase("affinity");
  CHECK(rest == worker_pod());
}

TEST_CASE("M4: merge_affinity keeps existing terms and never adds a term twice",
          "[podpatch][affinity]") {
  podpatch::AffinityMatch m{"replicaIndex", "g-1", "rc", "cloud.google.com/gke-nodepool"};
  const json user_term = term_with_key("kubernetes.io/hostname");
  json original = worker_pod();
  original["spec"]["affinity"] = {
      {"nodeAffinity",
       {{"requiredDuringSchedulingIgnoredDuringExecution",
         {{"nodeSelectorTerms", json::array({{{"matchExpressions", json::array()}}})}}}}},
      {"podAffinity",
       {{"requiredDuringSchedulingIgnoredDuringExecution", json::array({user_term})},
        {"preferredDuringSchedulingIgnoredDuringExecution",
         json::array({{{"weight", 10}, {"podAffinityTerm", user_term}}})}}},
      {"podAntiAffinity",
       {{"requiredDuringSchedulingIgnoredDuringExecution", json::array({anti_same_cluster(m)})}}}};

  SECTION("existing terms kept, one copy of each of ours") {
    json mutated = merge_and_record("merge-existing", original, m);
    const json& a = mutated["spec"]["affinity"];
    CHECK(a["nodeAffinity"] == original["spec"]["affinity"]["nodeAffinity"]);
    CHECK(a["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] ==
          original["spec"]["affinity"]["podAffinity"]
                  ["preferredDuringSchedulingIgnoredDuringExecution"]);
    CHECK(a["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] ==
          json::array({user_term, affinity_term(m)}));
    // The anti-affinity term that was already there is not added again.
    CHECK(a["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] ==
          json::array({anti_same_cluster(m), anti_other_clusters(m)}));
  }
  SECTION("merging twice changes nothing the second time (M6 idempotent)") {
    json once = merge_and_record("merge-once", original, m);
    json twice = once;
    podpatch::merge_affinity(twice, m);
    CHECK(json::diff(once, twice).empty());
  }
  SECTION("another replica's terms are added beside, not instead") {
    json once = merge_and_record("merge-replica-1", original, m);
    podpatch::AffinityMatch other = m;
    other.value = "g-2";
    json both = merge_and_record("merge-replica-2", once, other);
    CHECK(both["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
              .size() == 3);
  }
}

TEST_CASE("M4: merge_affinity creates a null or missing spec.affinity", "[podpatch][affinity]") {
  podpatch::AffinityMatch m{"replicaIndex", "g-0", "rc", "cloud.google.com/gke-nodepool"};
  json original = worker_pod();
  original["spec"]["affinity"] = nullptr;
  json mutated = merge_and_record("null-affinity", original, m);
  CHECK(mutated["spec"]["affinity"]["podAffinity"]
               ["requiredDuringSchedulingIgnoredDuringExecution"] ==
        json::array({affinity_term(m)}));
  original["spec"]["affinity"] = {{"podAffinity", nullptr}};
  mutated = merge_and_record("null-pod-affinity", original, m);
  CHECK(mutated["spec"]["affinity"]["podAffinity"]
               ["requiredDuringSchedulingIgnoredDuringExecution"] ==
        json::array({affinity_term(m)}));
}
