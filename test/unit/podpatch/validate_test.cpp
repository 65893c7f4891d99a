// lib/podpatch/validate: docs/spec.md V1-V5, RayCluster (RayJob, RayService) validation with fake
// NodeSources.
#include "podpatch/validate.h"

#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

using podpatch::json;
using podpatch::Labels;

namespace {

constexpr std::string_view kMismatch =
    "Number of workers in worker group not equal to specified topology";

// Answers every query with `answer` and remembers the selectors it was asked for.
class FakeNodes : public podpatch::NodeSource {
 public:
  FakeNodes() = default;
  explicit FakeNodes(std::optional<std::vector<Labels>> answer) : answer_(std::move(answer)) {}
  std::optional<std::vector<Labels>> nodes_matching(const Labels& selector) override {
    asked.push_back(selector);
    return answer_;
  }
  std::vector<Labels> asked;

 private:
  std::optional<std::vector<Labels>> answer_;
};

// A cluster's Nodes; returns those whose labels contain the whole selector, as the API does.
class ListedNodes : public podpatch::NodeSource {
 public:
  explicit ListedNodes(std::vector<Labels> nodes) : nodes_(std::move(nodes)) {}
  std::optional<std::vector<Labels>> nodes_matching(const Labels& selector) override {
    std::vector<Labels> out;
    for (const Labels& n : nodes_) {
      if (podpatch::matches(n, selector)) {
        out.push_back(n);
      }
    }
    return out;
  }

 private:
  std::vector<Labels> nodes_;
};

// A worker group with one container requesting `chips` TPUs (0: a CPU group). Empty `topology`
// or `accelerator` leave the nodeSelector key out; a null `hosts` leaves numOfHosts out.
json group(const std::string& name, const std::string& accelerator, const std::string& topology,
           int chips, json hosts, const std::string& subslice = "") {
  json container = {{"name", "ray-worker"}, {"image", "rayproject/ray:2.52.0"}};
  if (chips > 0) {
    container["resources"] = {{"requests", {{"google.com/tpu", std::to_string(chips)}}},
                              {"limits", {{"google.com/tpu", std::to_string(chips)}}}};
  }
  json g = {{"groupName", name},
            {"replicas", 1},
            {"template", {{"spec", {{"containers", json::array({container})}}}}}};
  if (!hosts.is_null()) {
    g["numOfHosts"] = hosts;
  }
  json& selector = g["template"]["spec"]["nodeSelector"];
  selector = json::object();
  if (!accelerator.empty()) {
    selector["cloud.google.com/gke-tpu-accelerator"] = accelerator;
  }
  if (!topology.empty()) {
    selector["cloud.google.com/gke-tpu-topology"] = topology;
  }
  if (!subslice.empty()) {
    g["template"]["metadata"]["annotations"]["cloud.google.com/gke-tpu-slice-topology"] = subslice;
  }
  return g;
}

json cluster(std::vector<json> groups, const std::string& ns = "default") {
  json head = {{"template", {{"spec", {{"containers", json::array({json{{"name", "head"}}})}}}}}};
  return {{"apiVersion", "ray.io/v1"},
          {"kind", "RayCluster"},
          {"metadata", {{"name", "rc"}, {"namespace", ns}}},
          {"spec", {{"headGroupSpec", head}, {"workerGroupSpecs", json(std::move(groups))}}}};
}

// The denial reason of a report; "" when it passes.
std::string_view reason_of(const podpatch::ClusterReport& r) {
  return r.status.ok() ? std::string_view() : r.status.error().reason;
}

podpatch::ClusterReport validate(const json& c) {
  FakeNodes nodes;
  podpatch::ClusterReport v = podpatch::validate_raycluster(c, nodes);
  return v;
}

Labels tpu_node(const std::string& block, const std::string& subblock = "",
                const std::string& host = "") {
  Labels l = {{"cloud.google.com/gke-tpu-accelerator", "tpu-v6e-slice"},
              {"cloud.google.com/gke-tpu-topology", "4x4"},
              {"cloud.google.com/gke-nodepool", "pool"}};
  if (!block.empty()) {
    l["cloud.google.com/gce-topology-block"] = block;
  }
  if (!subblock.empty()) {
    l["cloud.google.com/gce-topology-subblock"] = subblock;
  }
  if (!host.empty()) {
    l["cloud.google.com/gce-topology-host"] = host;
  }
  return l;
}

}  // namespace

TEST_CASE("V1/V2: good worker groups pass (the worked examples as RayClusters)",
          "[podpatch][validate]") {
  auto [accelerator, topology, chips, hosts] = GENERATE(table<std::string, std::string, int, int>({
      {"tpu-v6e-slice", "4x4", 4, 4},         // E1
      {"tpu-v6e-slice", "2x4", 8, 1},         // E2
      {"tpu-v6e-slice", "2x4", 4, 2},         // E2 with tpu=4
      {"tpu-v5-lite-podslice", "4x4", 4, 4},  // E3
      {"tpu-v4-podslice", "2x2x4", 4, 4},     // E4
      {"tpu-v5p-slice", "2x2x2", 4, 2},       // E5
      {"tpu7x", "2x2x2", 4, 2},               // E6
      {"tpu7x", "2x2x1", 4, 1},               // E7
      {"tpu7x", "4x4x4", 4, 16},              // E8
  }));
  CAPTURE(accelerator, topology, chips);
  podpatch::ClusterReport v =
      validate(cluster({group("tpu-group", accelerator, topology, chips, hosts)}));
  CHECK(v.status.ok());
  CHECK(v.denied_group.empty());
  CHECK(reason_of(v).empty());
  CHECK(v.warnings.empty());
}

TEST_CASE("V1: groups without TPU containers pass whatever else they lack",
          "[podpatch][validate]") {
  auto c = GENERATE(
      // No worker groups at all.
      json::parse(R"({"metadata": {"name": "rc"}, "spec": {"headGroupSpec": {}}})"),
      json::parse(R"({"metadata": {"name": "rc"}, "spec": {"workerGroupSpecs": null}})"),
      json::parse(R"({"metadata": {"name": "rc"}, "spec": {"workerGroupSpecs": []}})"),
      // CPU groups: no numOfHosts, no topology, even a broken one.
      cluster({group("cpu", "", "", 0, json())}), cluster({group("cpu", "", "4x", 0, json(7))}),
      // google.com/tpu "0" is not a TPU container.
      json::parse(R"({"metadata": {"name": "rc"}, "spec": {"workerGroupSpecs": [{"groupName": "z",
          "template": {"spec": {"containers": [{"name": "c",
              "resources": {"limits": {"google.com/tpu": "0"}}}]}}}]}})"));
  CAPTURE(c.dump());
  podpatch::ClusterReport v = validate(c);
  CHECK(v.status.ok());
  CHECK(v.warnings.empty());
}

TEST_CASE("V1: a worker group without containers is denied", "[podpatch][validate]") {
  auto [row, g, label] = GENERATE(table<std::string, json, std::string>({
      {"empty list",
       json::parse(R"({"groupName": "tpu-group", "template": {"spec": {"containers": []}}})"),
       "\"tpu-group\""},
      {"no containers key", json::parse(R"({"groupName": "tpu-group", "template": {"spec": {}}})"),
       "\"tpu-group\""},
      {"no template", json::parse(R"({"groupName": "tpu-group", "numOfHosts": 1})"),
       "\"tpu-group\""},
      {"containers not a list",
       json::parse(R"({"groupName": "tpu-group", "template": {"spec": {"containers": {}}}})"),
       "\"tpu-group\""},
      // Without a groupName the group is named by its index.
      {"no groupName", json::parse(R"({"template": {"spec": {"containers": []}}})"),
       "workerGroupSpecs[1]"},
  }));
  CAPTURE(row);
  podpatch::ClusterReport v = validate(cluster({group("cpu", "", "", 0, json()), g}));
  REQUIRE_FALSE(v.status.ok());
  CHECK(v.status.error().code == webhook::ErrorCode::kInvalidArgument);
  CHECK(reason_of(v) == "no_containers");
  CHECK(v.status.error().message ==
        "RayCluster default/rc: worker group " + label +
            ": template.spec.containers is empty; a worker group needs a "
            "Ray container");
  CHECK(v.denied_group == g.value("groupName", ""));
}

TEST_CASE("V2: numOfHosts missing or 0 is denied", "[podpatch][validate]") {
  auto [row, set, hosts] = GENERATE(table<std::string, bool, json>({
      {"absent", false, json()},
      {"null", true, json()},
      {"zero", true, json(0)},
  }));
  CAPTURE(row);
  json g = group("tpu-group", "tpu-v6e-slice", "4x4", 4, json());
  if (set) {
    g["numOfHosts"] = hosts;
  }
  podpatch::ClusterReport v = validate(cluster({g}));
  REQUIRE_FALSE(v.status.ok());
  CHECK(v.status.error().code == webhook::ErrorCode::kInvalidArgument);
  CHECK(reason_of(v) == "missing_num_of_hosts");
  CHECK(v.denied_group == "tpu-group");
  CHECK_THAT(
      v.status.error().message,
      Catch::StartsWith("RayCluster default/rc: worker group \"tpu-group\": numOfHosts is "));
  CHECK_THAT(v.status.error().message,
             Catch::EndsWith("set numOfHosts: 4 (topology 4x4 has 16 chips at "
                             "4 chips per host)"));
}

TEST_CASE("V2: numOfHosts that is not a positive integer is denied", "[podpatch][validate]") {
  auto hosts = GENERATE(json("4"), json(-1), json(1.5), json(true), json::array({4}));
  CAPTURE(hosts.dump());
  podpatch::ClusterReport v =
      validate(cluster({group("tpu-group", "tpu-v6e-slice", "4x4", 4, hosts)}));
  REQUIRE_FALSE(v.status.ok());
  CHECK(reason_of(v) == "invalid_num_of_hosts");
  CHECK(v.status.error().message ==
        "RayCluster default/rc: worker group \"tpu-group\": numOfHosts " + hosts.dump() +
            " is not a positive integer; set numOfHosts: 4 (topology 4x4 has "
            "16 chips at 4 chips per host)");
}

TEST_CASE("V2: hosts != numOfHosts is denied with the searchable sentence",
          "[podpatch][validate]") {
  auto [row, g, message] = GENERATE(table<std::string, json, std::string>({
      {"too few", group("tpu-group", "tpu-v6e-slice", "4x4", 4, json(2)),
       "worker group \"tpu-group\": topology 4x4 (nodeSelector cloud.google.com/gke-tpu-topology) "
       "has 16 chips at 4 chips per host, so it needs 4 hosts, but numOfHosts is 2; set "
       "numOfHosts: 4"},
      {"too many", group("tpu-group", "tpu7x", "2x2x2", 4, json(4)),
       "worker group \"tpu-group\": topology 2x2x2 (nodeSelector "
       "cloud.google.com/gke-tpu-topology) "
       "has 8 chips at 4 chips per host, so it needs 2 hosts, but numOfHosts is 4; set "
       "numOfHosts: 2"},
      {"single host", group("g1", "tpu-v6e-slice", "2x4", 8, json(2)),
       "worker group \"g1\": topology 2x4 (nodeSelector cloud.google.com/gke-tpu-topology) has 8 "
       "chips at 8 chips per host, so it needs 1 hosts, but numOfHosts is 2; set numOfHosts: 1"},
      // The subslice annotation is the topology that counts.
      {"subslice", group("sub", "tpu-v6e-slice", "4x4", 4, json(4), "2x4"),
       "worker group \"sub\": topology 2x4 (annotation cloud.google.com/gke-tpu-slice-topology) "
       "has "
       "8 chips at 4 chips per host, so it needs 2 hosts, but numOfHosts is 4; set numOfHosts: 2"},
  }));
  CAPTURE(row);
  podpatch::ClusterReport v = validate(cluster({g}, "team"));
  REQUIRE_FALSE(v.status.ok());
  CHECK(v.status.error().code == webhook::ErrorCode::kInvalidArgument);
  CHECK(reason_of(v) == "hosts_mismatch");
  CHECK(v.status.error().message == std::string(kMismatch) + ": RayCluster team/rc: " + message);
  CHECK(v.denied_group == g["groupName"].get<std::string>());
}

TEST_CASE("V2: a missing or invalid topology (any M2 rule) is denied", "[podpatch][validate]") {
  auto [row, g, reason, code,
        message] = GENERATE(table<std::string, json, std::string, webhook::ErrorCode, std::string>({
      {"missing", group("tpu-group", "tpu-v6e-slice", "", 4, json(4)), "missing_topology",
       webhook::ErrorCode::kInvalidArgument,
       "worker group \"tpu-group\": requests google.com/tpu but sets no TPU topology; add "
       "nodeSelector cloud.google.com/gke-tpu-topology (such as 4x4) to its template"},
      {"malformed", group("tpu-group", "tpu-v6e-slice", "4x", 4, json(4)), "invalid_topology",
       webhook::ErrorCode::kInvalidArgument,
       "worker group \"tpu-group\": nodeSelector cloud.google.com/gke-tpu-topology: topology "
       "\"4x\" is invalid: dimension 2 is empty"},
      {"zero", group("tpu-group", "tpu-v6e-slice", "0x4", 4, json(4)), "invalid_topology",
       webhook::ErrorCode::kInvalidArgument, "topology \"0x4\" is invalid: dimension 1 \"0\""},
      {"four dims", group("tpu-group", "tpu-v6e-slice", "4x4x4x4", 4, json(4)), "invalid_topology",
       webhook::ErrorCode::kInvalidArgument, "it has 4 dimensions"},
      {"too many chips", group("tpu-group", "tpu7x", "100x100x100", 4, json(4)), "invalid_topology",
       webhook::ErrorCode::kInvalidArgument, "more chips than the largest TPU slice"},
      {"bad subslice", group("tpu-group", "tpu-v6e-slice", "4x4", 4, json(2), "2x"),
       "invalid_topology", webhook::ErrorCode::kInvalidArgument,
       "worker group \"tpu-group\": annotation cloud.google.com/gke-tpu-slice-topology: topology "
       "\"2x\" is invalid"},
      {"chips not dividing", group("tpu-group", "tpu-v6e-slice", "4x4", 3, json(5)),
       "invalid_chips", webhook::ErrorCode::kFailedPrecondition,
       "worker group \"tpu-group\": nodeSelector cloud.google.com/gke-tpu-topology: google.com/tpu "
       "3 chips per host does not divide the 16 chips of topology 4x4"},
  }));
  CAPTURE(row);
  podpatch::ClusterReport v = validate(cluster({g}));
  REQUIRE_FALSE(v.status.ok());
  CHECK(reason_of(v) == reason);
  CHECK(v.status.error().code == code);
  CHECK_THAT(v.status.error().message, Catch::Contains(message));
  CHECK_THAT(v.status.error().message,
             Catch::StartsWith("RayCluster default/rc: worker group \"tpu-group\": "));
}

TEST_CASE("V2: a malformed google.com/tpu quantity is denied, naming the field",
          "[podpatch][validate]") {
  json g = group("tpu-group", "tpu-v6e-slice", "4x4", 4, json(4));
  g["template"]["spec"]["containers"][0]["resources"]["limits"]["google.com/tpu"] = "4.5";
  podpatch::ClusterReport v = validate(cluster({g}));
  REQUIRE_FALSE(v.status.ok());
  CHECK(reason_of(v) == "invalid_resources");
  CHECK_THAT(
      v.status.error().message,
      Catch::StartsWith("RayCluster default/rc: worker group \"tpu-group\": "
                        "template.spec.containers[ray-worker].resources.limits[google.com/tpu] "
                        "\"4.5\" is not a whole number of TPU chips"));
}

TEST_CASE("V3: subsliced groups are checked against the parent topology and the Nodes",
          "[podpatch][validate]") {
  using Nodes = std::optional<std::vector<Labels>>;
  // Row: accelerator, parent topology ("" none), subslice, numOfHosts (chips 4 per host), the Nodes
  // listed, and the verdict: a reason and message part, or "" and a warning part ("" none).
  auto [row, accelerator, parent, subslice, hosts, nodes, reason,
        text] = GENERATE(table<std::string, std::string, std::string, std::string, int, Nodes,
                               std::string, std::string>({
      // Good rows.
      {"block of 2", "tpu-v6e-slice", "4x4", "2x4", 2,
       std::vector<Labels>{tpu_node("b1"), tpu_node("b1"), tpu_node("b2")}, "", ""},
      {"subblock of 4", "tpu-v6e-slice", "4x4", "4x4", 4,
       std::vector<Labels>{tpu_node("b1", "s1"), tpu_node("b1", "s1"), tpu_node("b1", "s1"),
                           tpu_node("b1", "s1"), tpu_node("b1", "s2")},
       "", ""},
      {"3-D parent", "tpu-v4-podslice", "4x4x4", "2x2x2", 2,
       std::vector<Labels>{tpu_node("b1"), tpu_node("b1")}, "", ""},
      {"2-D sub of 3-D parent", "tpu-v6e-slice", "4x4x4", "2x4", 2,
       std::vector<Labels>{tpu_node("b1"), tpu_node("b1")}, "", ""},
      // No Nodes (yet), or no API access: allowed with a warning naming the group.
      {"no nodes", "tpu-v6e-slice", "4x4", "2x4", 2, std::vector<Labels>{}, "",
       "RayCluster default/rc: worker group \"sub\": this subsliced TPU worker group targets no "
       "Nodes yet, so its subslice placement cannot be chosen; recreate the RayCluster once its "
       "TPU Nodes exist"},
      {"cannot list", "tpu-v6e-slice", "4x4", "2x4", 2, std::nullopt, "",
       "worker group \"sub\": this subsliced TPU worker group targets no Nodes yet"},
      // Bad rows.
      {"no parent", "tpu-v6e-slice", "", "2x4", 2, std::nullopt, "subslice_invalid",
       "worker group \"sub\": annotation cloud.google.com/gke-tpu-slice-topology=\"2x4\" needs "
       "the parent slice's topology in nodeSelector cloud.google.com/gke-tpu-topology"},
      {"parent too small", "tpu-v6e-slice", "2x2", "2x4", 2, std::nullopt, "subslice_invalid",
       "worker group \"sub\": subslice \"2x4\" does not fit in its parent slice \"2x2\": "
       "dimension 2 is 4 > 2"},
      {"parent too small in dim 3", "tpu-v4-podslice", "4x4x4", "2x2x8", 8, std::nullopt,
       "subslice_invalid",
       "subslice \"2x2x8\" does not fit in its parent slice \"4x4x4\": dimension 3 is 8 > 4"},
      {"3-D sub of 2-D parent", "tpu-v6e-slice", "4x4", "2x2x2", 2, std::nullopt,
       "subslice_invalid", "dimension 3 is 2 > 1"},
      {"parent malformed", "tpu-v6e-slice", "4xx4", "2x4", 2, std::nullopt, "invalid_topology",
       "worker group \"sub\": nodeSelector cloud.google.com/gke-tpu-topology: topology \"4xx4\" "
       "is invalid"},
      {"no gce labels", "tpu-v6e-slice", "4x4", "2x4", 2,
       std::vector<Labels>{tpu_node(""), tpu_node(""), tpu_node("")}, "subslice_unplaceable",
       "worker group \"sub\": the 3 Nodes matching its nodeSelector carry no "
       "cloud.google.com/gce-topology-* labels, so a subslice cannot be placed; use a node pool "
       "with dynamic slicing enabled"},
      {"ambiguous", "tpu-v6e-slice", "4x4", "2x4", 2,
       std::vector<Labels>{tpu_node("b1", "s1", "h1"), tpu_node("b1", "s2", "h2"),
                           tpu_node("b1", "s3", "h3")},
       "subslice_ambiguous",
       "worker group \"sub\": ambiguous subslice: no TPU host, subblock, block or node pool "
       "among the 3 matching Nodes has exactly 2 Nodes"},
  }));
  CAPTURE(row);
  json g = group("sub", accelerator, parent, 4, json(hosts), subslice);
  FakeNodes fake(nodes);
  podpatch::ClusterReport v = podpatch::validate_raycluster(cluster({g}), fake);
  CAPTURE(v.warnings);
  if (reason.empty()) {
    CHECK(v.status.ok());
    if (text.empty()) {
      CHECK(v.warnings.empty());
    } else {
      REQUIRE(v.warnings.size() == 1);
      CHECK_THAT(v.warnings[0], Catch::Contains(text));
    }
  } else {
    REQUIRE_FALSE(v.status.ok());
    CHECK(reason_of(v) == reason);
    CHECK(v.denied_group == "sub");
    CHECK_THAT(v.status.error().message, Catch::Contains(text));
    CHECK(v.status.error().code ==
          (reason == "subslice_unplaceable" || reason == "subslice_ambiguous"
               ? webhook::ErrorCode::kFailedPrecondition
               : webhook::ErrorCode::kInvalidArgument));
  }
  // The Nodes are asked for only once the parent checks out, by the template's nodeSelector.
  if (!parent.empty() && reason != "subslice_invalid" && reason != "invalid_topology") {
    REQUIRE(fake.asked.size() == 1);
    Labels selector = {{"cloud.google.com/gke-tpu-accelerator", accelerator},
                       {"cloud.google.com/gke-tpu-topology", parent}};
    CHECK(fake.asked[0] == selector);
  } else {
    CHECK(fake.asked.empty());
  }
}

TEST_CASE("V3: the Nodes of the template's nodeSelector decide", "[podpatch][validate]") {
  // Two node pools: only the v6e 4x4 pool is the parent slice.
  std::vector<Labels> all = {tpu_node("b1"), tpu_node("b1"), tpu_node("b2"), tpu_node("b2")};
  for (int i = 0; i < 3; ++i) {
    all.push_back({{"cloud.google.com/gke-tpu-accelerator", "tpu-v6e-slice"},
                   {"cloud.google.com/gke-tpu-topology", "8x8"},
                   {"cloud.google.com/gce-topology-block", "other"}});
  }
  SECTION("a block of 2 in the parent's pool: allowed") {
    ListedNodes nodes(all);
    podpatch::ClusterReport v = podpatch::validate_raycluster(
        cluster({group("sub", "tpu-v6e-slice", "4x4", 4, json(2), "2x4")}), nodes);
    CHECK(v.status.ok());
    CHECK(v.warnings.empty());
  }
  SECTION("the other pool's block of 3 does not count for 3 hosts") {
    ListedNodes nodes(all);
    podpatch::ClusterReport v = podpatch::validate_raycluster(
        cluster({group("sub", "tpu-v6e-slice", "4x4", 4, json(3), "3x4")}), nodes);
    REQUIRE_FALSE(v.status.ok());
    CHECK(reason_of(v) == "subslice_ambiguous");
    CHECK_THAT(v.status.error().message,
               Catch::Contains("among the 4 matching Nodes has exactly 3 Nodes"));
  }
}

TEST_CASE("V3: Kueue-managed or single-host subsliced groups skip the Node checks",
          "[podpatch][validate]") {
  auto [row, hosts, subslice, chips, where, key, value] =
      GENERATE(table<std::string, int, std::string, int, std::string, std::string, std::string>({
          {"cluster queue label", 2, "2x4", 4, "cluster labels", "kueue.x-k8s.io/queue-name", "q"},
          {"cluster skip annotation", 2, "2x4", 4, "cluster annotations",
           "cloud.google.com/skip-tpu-webhook-check", "true"},
          {"template queue label", 2, "2x4", 4, "template labels", "kueue.x-k8s.io/queue-name",
           "q"},
          {"template kueue topology", 2, "2x4", 4, "template annotations",
           "kueue.x-k8s.io/podset-required-topology", "cloud.google.com/gce-topology-block"},
          {"template skip annotation", 2, "2x4", 4, "template annotations",
           "cloud.google.com/skip-tpu-webhook-check", "true"},
          {"group labels field", 2, "2x4", 4, "group labels", "kueue.x-k8s.io/queue-name", "q"},
          {"single host", 1, "2x4", 8, "", "", ""},
      }));
  CAPTURE(row);
  // Nodes without gce topology labels would deny the group if they were looked at.
  FakeNodes fake(std::vector<Labels>{tpu_node(""), tpu_node("")});
  json g = group("sub", "tpu-v6e-slice", "4x4", chips, json(hosts), subslice);
  json c = cluster({g});
  if (where == "cluster labels") {
    c["metadata"]["labels"][key] = value;
  } else if (where == "cluster annotations") {
    c["metadata"]["annotations"][key] = value;
  } else if (where == "template labels") {
    c["spec"]["workerGroupSpecs"][0]["template"]["metadata"]["labels"][key] = value;
  } else if (where == "template annotations") {
    c["spec"]["workerGroupSpecs"][0]["template"]["metadata"]["annotations"][key] = value;
  } else if (where == "group labels") {
    c["spec"]["workerGroupSpecs"][0]["labels"][key] = value;
  }
  podpatch::ClusterReport v = podpatch::validate_raycluster(c, fake);
  CHECK(v.status.ok());
  CHECK(v.warnings.empty());
  CHECK(fake.asked.empty());
}

TEST_CASE("V3: without a Kueue trigger the same Nodes deny the group", "[podpatch][validate]") {
  FakeNodes fake(std::vector<Labels>{tpu_node(""), tpu_node("")});
  json c = cluster({group("sub", "tpu-v6e-slice", "4x4", 4, json(2), "2x4")});
  c["metadata"]["annotations"]["cloud.google.com/skip-tpu-webhook-check"] = "false";
  podpatch::ClusterReport v = podpatch::validate_raycluster(c, fake);
  REQUIRE_FALSE(v.status.ok());
  CHECK(reason_of(v) == "subslice_unplaceable");
}

TEST_CASE("V4: the first failing group decides; every group's warnings are returned",
          "[podpatch][validate]") {
  SECTION("first of two failing groups, after groups with advice") {
    json c = cluster({group("cpu", "", "", 0, json()),
                      group("odd-accel", "tpu-v9-slice", "4x4", 4, json(4)),
                      group("bad-a", "tpu-v6e-slice", "4x4", 4, json(3)),
                      group("bad-b", "tpu-v6e-slice", "", 4, json(4))});
    podpatch::ClusterReport v = validate(c);
    REQUIRE_FALSE(v.status.ok());
    CHECK(v.denied_group == "bad-a");
    CHECK(reason_of(v) == "hosts_mismatch");
    CHECK_THAT(v.status.error().message, Catch::Contains("worker group \"bad-a\""));
    CHECK_THAT(v.status.error().message, !Catch::Contains("bad-b"));
    REQUIRE(v.warnings.size() == 1);
    CHECK_THAT(v.warnings[0],
               Catch::StartsWith("RayCluster default/rc: worker group \"odd-accel\": accelerator "
                                 "\"tpu-v9-slice\" is not a known GKE TPU accelerator"));
  }
  SECTION("the order of groups decides which failure is reported") {
    json c = cluster({group("bad-b", "tpu-v6e-slice", "", 4, json(4)),
                      group("bad-a", "tpu-v6e-slice", "4x4", 4, json(3))});
    podpatch::ClusterReport v = validate(c);
    REQUIRE_FALSE(v.status.ok());
    CHECK(v.denied_group == "bad-b");
    CHECK(reason_of(v) == "missing_topology");
  }
  SECTION("all warnings of an allowed cluster, in group order") {
    FakeNodes none(std::vector<Labels>{});
    json c = cluster({group("v4-2d", "tpu-v4-podslice", "4x4", 4, json(4)),
                      group("sub", "tpu-v6e-slice", "4x4", 4, json(2), "2x4"),
                      group("tpu-8", "tpu7x", "2x2x2", 8, json(1))});
    podpatch::ClusterReport v = podpatch::validate_raycluster(c, none);
    CHECK(v.status.ok());
    REQUIRE(v.warnings.size() == 3);
    CHECK_THAT(v.warnings[0], Catch::StartsWith("RayCluster default/rc: worker group \"v4-2d\": "
                                                "topology 4x4 has 2 dimensions"));
    CHECK_THAT(v.warnings[1], Catch::StartsWith("RayCluster default/rc: worker group \"sub\": this "
                                                "subsliced TPU worker group targets no Nodes yet"));
    CHECK_THAT(v.warnings[2], Catch::StartsWith("RayCluster default/rc: worker group \"tpu-8\": "
                                                "google.com/tpu 8 per host"));
  }
}

TEST_CASE("V1: malformed workerGroupSpecs are denied", "[podpatch][validate]") {
  auto [row, specs, message] = GENERATE(table<std::string, json, std::string>({
      {"not a list", json::object(),
       "RayCluster default/rc: spec.workerGroupSpecs must be an array"},
      {"group not an object", json::array({"g"}),
       "RayCluster default/rc: spec.workerGroupSpecs[0] must be an object"},
  }));
  CAPTURE(row);
  json c = cluster({});
  c["spec"]["workerGroupSpecs"] = specs;
  podpatch::ClusterReport v = validate(c);
  REQUIRE_FALSE(v.status.ok());
  CHECK(reason_of(v) == "malformed_object");
  CHECK(v.status.error().code == webhook::ErrorCode::kInvalidArgument);
  CHECK(v.status.error().message == message);
}

TEST_CASE("V2: messages show names longer than 253 bytes cut", "[podpatch][validate]") {
  std::string cluster_name(16384, 'r');
  std::string group_name(300, 'g');
  std::string accelerator(1000, 'a');
  json c = cluster({group(group_name, accelerator, "2x2", 4, json(1)),
                    group("bad", "tpu-v6e-slice", "4x4", 4, json(3))},
                   std::string(400, 's'));
  c["metadata"]["name"] = cluster_name;
  podpatch::ClusterReport v = validate(c);
  const std::string id = "RayCluster " + std::string(253, 's') + "\u2026(400 bytes)/" +
                         std::string(253, 'r') + "\u2026(16384 bytes): ";
  REQUIRE(v.warnings.size() == 1);
  CHECK_THAT(v.warnings[0],
             Catch::StartsWith(id + "worker group \"" + std::string(253, 'g') +
                               "\"\u2026(300 bytes): accelerator \"" + std::string(253, 'a') +
                               "\"\u2026(1000 bytes) is not a known GKE TPU accelerator ("));
  REQUIRE_FALSE(v.status.ok());
  CHECK(reason_of(v) == "hosts_mismatch");
  CHECK_THAT(v.status.error().message,
             Catch::Contains(": " + id + "worker group \"bad\": topology 4x4"));
  CHECK(v.status.error().message.size() < 1000);
}

namespace {

class NoServices : public podpatch::ServiceSource {
 public:
  std::optional<std::string> headless_service(std::string_view, std::string_view) override {
    return std::nullopt;
  }
};

class OneService : public podpatch::ServiceSource {
 public:
  std::optional<std::string> headless_service(std::string_view ns,
                                              std::string_view cluster) override {
    if (ns == "default" && cluster == "rc") {
      return "rc-workers";
    }
    return std::nullopt;
  }
};

podpatch::ClusterReport validate_as(const json& object, const std::string& kind,
                                    podpatch::ServiceSource& services) {
  FakeNodes nodes;
  webhook::Result<podpatch::RayObject> o = podpatch::read_ray_object(object, kind, "default");
  REQUIRE(o.has_value());
  return podpatch::validate_ray_object(*o, {nodes, services, topology::KubeRayVersion{}});
}

json ray_job(const json& cluster_spec, const std::string& name = "job") {
  return {{"apiVersion", "ray.io/v1"},
          {"kind", "RayJob"},
          {"metadata", {{"name", name}, {"namespace", "ml"}}},
          {"spec", {{"entrypoint", "python train.py"}, {"rayClusterSpec", cluster_spec}}}};
}

json with_env(json g, const std::string& name, const std::string& value) {
  g["template"]["spec"]["containers"][0]["env"] =
      json::array({json{{"name", name}, {"value", value}}});
  return g;
}

}  // namespace

TEST_CASE("V1: a RayJob's rayClusterSpec and a RayService's rayClusterConfig are validated",
          "[podpatch][validate]") {
  NoServices services;
  json spec = cluster({group("tpu", "tpu-v6e-slice", "4x4", 4, json(2))})["spec"];
  podpatch::ClusterReport job = validate_as(ray_job(spec), "RayJob", services);
  REQUIRE_FALSE(job.status.ok());
  CHECK(reason_of(job) == "hosts_mismatch");
  CHECK(job.denied_group == "tpu");
  CHECK(job.status.error().message ==
        "Number of workers in worker group not equal to specified topology: RayJob ml/job: "
        "worker group \"tpu\": topology 4x4 (nodeSelector cloud.google.com/gke-tpu-topology) has "
        "16 chips at 4 chips per host, so it needs 4 hosts, but numOfHosts is 2; set numOfHosts: "
        "4");

  json service = {{"apiVersion", "ray.io/v1"},
                  {"kind", "RayService"},
                  {"metadata", {{"name", "serve"}}},
                  {"spec", {{"serveConfigV2", "applications: []"}, {"rayClusterConfig", spec}}}};
  podpatch::ClusterReport svc = validate_as(service, "RayService", services);
  REQUIRE_FALSE(svc.status.ok());
  CHECK_THAT(svc.status.error().message,
             Catch::Contains(": RayService default/serve: worker group \"tpu\": topology 4x4"));

  json good = cluster({group("tpu", "tpu-v6e-slice", "4x4", 4, json(4))})["spec"];
  CHECK(validate_as(ray_job(good), "RayJob", services).status.ok());
}

TEST_CASE("V1: the generated RayCluster's name, and RayJobs that create none",
          "[podpatch][validate]") {
  json spec = cluster({group("tpu", "tpu-v6e-slice", "4x4", 4, json(2))})["spec"];
  json job = ray_job(spec);  // a RayObject points into its object
  webhook::Result<podpatch::RayObject> o = podpatch::read_ray_object(job, "RayJob", "");
  REQUIRE(o.has_value());
  CHECK(o->cluster == "job-xxxxx");
  CHECK(o->generated_name);
  CHECK(o->display() == "RayJob ml/job");
  json rc = podpatch::generated_raycluster(*o);
  CHECK(rc["metadata"]["name"] == "job-xxxxx");
  CHECK(rc["metadata"]["namespace"] == "ml");
  CHECK(rc["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob");
  CHECK(rc["metadata"]["labels"]["ray.io/originated-from-cr-name"] == "job");
  CHECK(rc["spec"] == spec);

  // clusterSelector: the job runs on an existing RayCluster; rayClusterSpec is ignored.
  json selected = ray_job(spec);
  selected["spec"]["clusterSelector"] = {{"ray.io/cluster", "shared"}};
  o = podpatch::read_ray_object(selected, "RayJob", "");
  REQUIRE(o.has_value());
  CHECK(o->spec == nullptr);
  CHECK(o->existing_cluster == "shared");
  NoServices services;
  CHECK(validate_as(selected, "RayJob", services).status.ok());

  json bad = ray_job(spec);
  bad["spec"]["rayClusterSpec"] = "not a spec";
  CHECK(validate_as(job, "RayJob", services).status.error().reason == "hosts_mismatch");
  webhook::Result<podpatch::RayObject> malformed = podpatch::read_ray_object(bad, "RayJob", "");
  REQUIRE_FALSE(malformed.has_value());
  CHECK(malformed.error().message ==
        "RayJob ml/job: spec.rayClusterSpec must be an object (a RayCluster spec)");
  CHECK_FALSE(podpatch::read_ray_object(spec, "RayCronJob", "").has_value());
}

TEST_CASE("V5: names that cannot become the DNS labels the webhook writes are denied",
          "[podpatch][validate]") {
  NoServices services;
  // A group name with '_' is a valid label value for KubeRay, but no hostname.
  podpatch::ClusterReport v = validate_as(
      cluster({group("v6e_16", "tpu-v6e-slice", "4x4", 4, json(4))}), "RayCluster", services);
  REQUIRE_FALSE(v.status.ok());
  CHECK(reason_of(v) == "invalid_name");
  CHECK(v.status.error().message ==
        "RayCluster default/rc: worker group \"v6e_16\": worker group name \"v6e_16\" gives "
        "hostnames such as \"v6e_16-0-3\" that are not DNS labels (at most 63 lowercase letters, "
        "digits and '-'); rename the worker group");
  // Single-host, not multi-slice: no hostnames, so the name is fine.
  CHECK(validate_as(cluster({group("v6e_8", "tpu-v6e-slice", "2x4", 8, json(1))}), "RayCluster",
                    services)
            .status.ok());
  // Single-host multi-slice Pods get hostnames too.
  json ms =
      with_env(group("v6e_8", "tpu-v6e-slice", "2x4", 8, json(1)), "MEGASCALE_NUM_SLICES", "1");
  CHECK(reason_of(validate_as(cluster({ms}), "RayCluster", services)) == "invalid_name");

  // Hostnames up to the group's highest replica: <g>-9-3 fits in 63 characters, <g>-10-3 not.
  std::string g59(59, 'g');
  json ten = group(g59, "tpu-v6e-slice", "4x4", 4, json(4));
  ten["replicas"] = 10;
  ten["maxReplicas"] = 2147483647;  // KubeRay's default: no bound, left out
  CHECK(validate_as(cluster({ten}), "RayCluster", services).status.ok());
  json eleven = ten;
  eleven["replicas"] = 11;
  podpatch::ClusterReport v11 = validate_as(cluster({eleven}), "RayCluster", services);
  REQUIRE_FALSE(v11.status.ok());
  CHECK(reason_of(v11) == "invalid_name");
  CHECK_THAT(v11.status.error().message, Catch::Contains("\"" + g59 + "-10-3\""));
  json bounded = ten;
  bounded["maxReplicas"] = 11;  // an autoscaler may grow it to replica 10
  CHECK(reason_of(validate_as(cluster({bounded}), "RayCluster", services)) == "invalid_name");

  // A RayJob's generated cluster: <name>-xxxxx-headless must fit in 63 characters.
  json spec = cluster({group("tpu", "tpu-v6e-slice", "4x4", 4, json(4))})["spec"];
  std::string long_name(49, 'j');
  podpatch::ClusterReport job = validate_as(ray_job(spec, long_name), "RayJob", services);
  REQUIRE_FALSE(job.status.ok());
  CHECK(reason_of(job) == "invalid_name");
  CHECK(job.status.error().message ==
        "RayJob ml/" + long_name + ": worker group \"tpu\": headless Service name \"" + long_name +
            "-xxxxx-headless\" (from RayCluster \"" + long_name +
            "-xxxxx\") is not a DNS label (at most 63 lowercase letters, digits and '-'), so it "
            "cannot be the Pod's subdomain; shorten or rename the RayCluster");
  CHECK(validate_as(ray_job(spec, std::string(48, 'j')), "RayJob", services).status.ok());
}

TEST_CASE("V2: a chips per host this slice's hosts do not have gets the google.com/tpu fix",
          "[podpatch][validate]") {
  NoServices services;
  // 8 chips is a v6e machine type, but only of single-host 2x4 slices; a 4x4's hosts have 4.
  podpatch::ClusterReport v = validate_as(
      cluster({group("tpu", "tpu-v6e-slice", "4x4", 8, json(4))}), "RayCluster", services);
  REQUIRE_FALSE(v.status.ok());
  CHECK(reason_of(v) == "hosts_mismatch");
  CHECK_THAT(v.status.error().message,
             Catch::EndsWith("so it needs 2 hosts, but numOfHosts is 4; a 4x4 slice has hosts of "
                             "4 chips: set google.com/tpu to 4 per host (numOfHosts 4 is then "
                             "right)"));
  podpatch::ClusterReport three = validate_as(
      cluster({group("tpu", "tpu-v6e-slice", "4x4", 8, json(3))}), "RayCluster", services);
  CHECK_THAT(three.status.error().message,
             Catch::EndsWith("set google.com/tpu to 4 per host and numOfHosts: 4"));
  // numOfHosts matching the wrong chip count is admitted, with the warning naming the values.
  podpatch::ClusterReport two = validate_as(
      cluster({group("tpu", "tpu-v6e-slice", "4x4", 8, json(2))}), "RayCluster", services);
  CHECK(two.status.ok());
  CHECK(two.warnings == std::vector<std::string>{
                            "RayCluster default/rc: worker group \"tpu\": google.com/tpu 8 per "
                            "host: tpu-v6e-slice 4x4 slices do not run on VMs of 8 chips, so no "
                            "node can run this Pod; a 4x4 slice needs google.com/tpu 4 per host"});
}

TEST_CASE("V5: a mistyped accelerator is admitted with the label it probably meant",
          "[podpatch][validate]") {
  NoServices services;
  podpatch::ClusterReport v = validate_as(
      cluster({group("tpu", "tpu-v6e-slcie", "4x4", 4, json(4))}), "RayCluster", services);
  CHECK(v.status.ok());
  REQUIRE(v.warnings.size() == 1);
  CHECK_THAT(v.warnings[0],
             Catch::StartsWith("RayCluster default/rc: worker group \"tpu\": accelerator "
                               "\"tpu-v6e-slcie\" is not a known GKE TPU accelerator (did you "
                               "mean \"tpu-v6e-slice\"? known: "));
}

TEST_CASE("V5: MEGASCALE_NUM_SLICES should be the group's replicas", "[podpatch][validate]") {
  NoServices services;
  json g = with_env(group("tpu", "tpu-v6e-slice", "4x4", 4, json(4)), "MEGASCALE_NUM_SLICES", "4");
  g["replicas"] = 2;
  podpatch::ClusterReport v = validate_as(cluster({g}), "RayCluster", services);
  CHECK(v.status.ok());
  CHECK(v.warnings ==
        std::vector<std::string>{
            "RayCluster default/rc: worker group \"tpu\": MEGASCALE_NUM_SLICES is \"4\" but the "
            "group has replicas: 2 (each replica is one slice), so the slices wait for peers that "
            "never come or run apart; set MEGASCALE_NUM_SLICES to 2 or replicas to the number of "
            "slices"});
  g["replicas"] = 4;
  CHECK(validate_as(cluster({g}), "RayCluster", services).warnings.empty());
  json odd = with_env(g, "MEGASCALE_NUM_SLICES", "four");
  CHECK(validate_as(cluster({odd}), "RayCluster", services).warnings.size() == 1);
}

TEST_CASE("V5: single-host multi-slice without a headless Service is warned about, with the fix",
          "[podpatch][validate]") {
  NoServices none;
  json g =
      with_env(group("v6e-8", "tpu-v6e-slice", "2x4", 8, json(1)), "MEGASCALE_NUM_SLICES", "2");
  g["replicas"] = 2;
  podpatch::ClusterReport v = validate_as(cluster({g}), "RayCluster", none);
  CHECK(v.status.ok());
  CHECK(
      v.warnings ==
      std::vector<std::string>{
          "RayCluster default/rc: worker group \"v6e-8\": multi-slice on single-host slices: its "
          "Pods reach the coordinator as v6e-8-0-0.rc-headless, but KubeRay creates the headless "
          "Service \"rc-headless\" only for clusters with a multi-host worker group; create it in "
          "namespace \"default\" with clusterIP: None, publishNotReadyAddresses: true, selector "
          "ray.io/cluster=rc and ray.io/node-type=worker, and label "
          "ray.io/headless-worker-svc=rc"});
  // A live Service, or a multi-host group KubeRay creates the Service for: no warning.
  OneService live;
  CHECK(validate_as(cluster({g}), "RayCluster", live).warnings.empty());
  json multi = group("big", "tpu-v6e-slice", "4x4", 4, json(4));
  CHECK(validate_as(cluster({g, multi}), "RayCluster", none).warnings.empty());
}

TEST_CASE("V5: a template label that hides the Pods from the mutating webhook is warned about",
          "[podpatch][validate]") {
  NoServices services;
  json g = group("tpu", "tpu-v6e-slice", "4x4", 4, json(4));
  g["template"]["metadata"]["labels"]["app.kubernetes.io/name"] = "trainer";
  podpatch::ClusterReport v = validate_as(cluster({g}), "RayCluster", services);
  CHECK(v.status.ok());
  CHECK(v.warnings == std::vector<std::string>{
                          "RayCluster default/rc: worker group \"tpu\": its Pods are labelled "
                          "app.kubernetes.io/name=\"trainer\", so the mutating webhook (which "
                          "only sees Pods with app.kubernetes.io/name=kuberay) never sets their "
                          "TPU environment and the slice cannot initialize; remove the label from "
                          "the worker group"});
  g["template"]["metadata"]["labels"]["app.kubernetes.io/name"] = "kuberay";
  CHECK(validate_as(cluster({g}), "RayCluster", services).warnings.empty());
}
