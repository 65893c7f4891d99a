// lib/podpatch/placement: docs/spec.md M3 (replica r, host h) from KubeRay's labels (M3.1, M3.2),
// from the webhook's own earlier placement, and legacy placement over existing Pods (M3.3).
#include "podpatch/placement.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using podpatch::GroupKey;
using podpatch::Holder;
using podpatch::json;
using podpatch::Placement;
using podpatch::PlacementPath;
using podpatch::PodView;
using podpatch::Slot;

namespace {

json worker(const json& labels) {
  return {{"metadata", {{"generateName", "c-g-worker-"}, {"namespace", "ns"}, {"labels", labels}}},
          {"spec",
           {{"containers", json::array({{{"name", "ray-worker"},
                                         {"resources", {{"limits", {{"google.com/tpu", "4"}}}}}}})},
            {"nodeSelector",
             {{"cloud.google.com/gke-tpu-accelerator", "tpu-v6e-slice"},
              {"cloud.google.com/gke-tpu-topology", "4x4"}}}}}};
}

// labels ray.io/worker-group-replica-index and ray.io/replica-host-index; "-" leaves one out.
json index_labels(const std::string& replica, const std::string& host) {
  json labels = {{"ray.io/cluster", "c"}, {"ray.io/group", "g"}};
  if (replica != "-") {
    labels["ray.io/worker-group-replica-index"] = replica;
  }
  if (host != "-") {
    labels["ray.io/replica-host-index"] = host;
  }
  return labels;
}

// placement_from_labels for a worker with these index labels ("-": absent) in a slice of `hosts`.
webhook::Result<std::optional<Placement>> place_by_labels(const std::string& replica,
                                                          const std::string& host, int hosts) {
  json pod = worker(index_labels(replica, host));
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE(view.has_value());
  return podpatch::placement_from_labels(*view, hosts);
}

}  // namespace

TEST_CASE("M3.1/M3.2: placement_from_labels, good rows", "[podpatch][placement]") {
  auto [replica, host, hosts, want_replica, want_host, path] =
      GENERATE(table<std::string, std::string, int, int, int, PlacementPath>({
          // M3.1: both labels decide, on any number of hosts.
          {"0", "0", 4, 0, 0, PlacementPath::kLabels},
          {"2", "3", 4, 2, 3, PlacementPath::kLabels},
          {"17", "1", 2, 17, 1, PlacementPath::kLabels},
          {"0", "0", 1, 0, 0, PlacementPath::kLabels},
          {"1000000", "0", 2, 1000000, 0, PlacementPath::kLabels},
          // M3.2: replica label only, single-host group: host 0 (better than upstream).
          {"0", "-", 1, 0, 0, PlacementPath::kReplicaLabel},
          {"5", "-", 1, 5, 0, PlacementPath::kReplicaLabel},
      }));
  CAPTURE(replica, host, hosts);
  webhook::Result<std::optional<Placement>> p = place_by_labels(replica, host, hosts);
  REQUIRE(p.has_value());
  REQUIRE(p->has_value());
  CHECK((*p)->slot == Slot{want_replica, want_host});
  CHECK((*p)->path == path);
  CHECK(podpatch::path_name((*p)->path) == "labels");
}

TEST_CASE("M3.3: placement_from_labels leaves undecided Pods to legacy placement",
          "[podpatch][placement]") {
  auto [replica, host, hosts] = GENERATE(table<std::string, std::string, int>({
      {"-", "-", 4},
      {"-", "-", 1},
      {"0", "-", 4},  // multi-host with only the replica label: which host is unknown
      {"-", "0", 4},  // a host without a replica
      {"-", "0", 1},
  }));
  CAPTURE(replica, host, hosts);
  webhook::Result<std::optional<Placement>> p = place_by_labels(replica, host, hosts);
  REQUIRE(p.has_value());
  CHECK_FALSE(p->has_value());
}

TEST_CASE("M3.1: bad index labels are denied, naming the label and value",
          "[podpatch][placement]") {
  auto [replica, host, hosts, message] =
      GENERATE(table<std::string, std::string, int, std::string>({
          // Host index out of range.
          {"0", "4", 4,
           "label ray.io/replica-host-index=\"4\" is not below the slice's 4 hosts; numOfHosts "
           "of the worker group must match its TPU topology"},
          {"0", "1", 1, "label ray.io/replica-host-index=\"1\" is not below the slice's 1 hosts"},
          {"3", "9", 2, "label ray.io/replica-host-index=\"9\" is not below the slice's 2 hosts"},
          // Not non-negative integers.
          {"-1", "0", 4,
           "label ray.io/worker-group-replica-index=\"-1\" is not a non-negative integer; KubeRay "
           "sets it, so remove it from the Pod template"},
          {"abc", "0", 4, "label ray.io/worker-group-replica-index=\"abc\" is not a non-negative"},
          {"", "0", 4, "label ray.io/worker-group-replica-index=\"\" is not a non-negative"},
          {"1.5", "0", 4, "label ray.io/worker-group-replica-index=\"1.5\" is not a non-negative"},
          {"+1", "0", 4, "label ray.io/worker-group-replica-index=\"+1\" is not a non-negative"},
          {" 1", "0", 4, "label ray.io/worker-group-replica-index=\" 1\" is not a non-negative"},
          {"1000001", "0", 4,
           "label ray.io/worker-group-replica-index=\"1000001\" is not a non-negative"},
          {"0", "x", 4, "label ray.io/replica-host-index=\"x\" is not a non-negative integer"},
          {"0", "-1", 4, "label ray.io/replica-host-index=\"-1\" is not a non-negative integer"},
          {"0", "", 4, "label ray.io/replica-host-index=\"\" is not a non-negative integer"},
          // M3.2 checks the replica label too.
          {"one", "-", 1, "label ray.io/worker-group-replica-index=\"one\" is not a non-negative"},
      }));
  CAPTURE(replica, host, hosts);
  webhook::Result<std::optional<Placement>> p = place_by_labels(replica, host, hosts);
  REQUIRE_FALSE(p.has_value());
  CHECK(p.error().code == webhook::ErrorCode::kInvalidArgument);
  CHECK_THAT(p.error().message, Catch::StartsWith(message));
}

TEST_CASE("path_name: metrics call the stateless paths \"labels\"", "[podpatch][placement]") {
  CHECK(podpatch::path_name(PlacementPath::kLabels) == "labels");
  CHECK(podpatch::path_name(PlacementPath::kReplicaLabel) == "labels");
  CHECK(podpatch::path_name(PlacementPath::kAlreadyPlaced) == "labels");
  CHECK(podpatch::path_name(PlacementPath::kLegacy) == "legacy");
}

TEST_CASE("path_detail: the log line and audit annotations name each path (M3, Envelope)",
          "[podpatch][placement]") {
  CHECK(podpatch::path_detail(PlacementPath::kLabels) == "index-labels");
  CHECK(podpatch::path_detail(PlacementPath::kReplicaLabel) == "replica-label");
  CHECK(podpatch::path_detail(PlacementPath::kAlreadyPlaced) == "already-placed");
  CHECK(podpatch::path_detail(PlacementPath::kLegacy) == "legacy");
}

TEST_CASE("M3: group_key", "[podpatch][placement]") {
  auto [metadata, want] = GENERATE(table<json, std::optional<GroupKey>>({
      {json::parse(
           R"({"namespace": "ns", "labels": {"ray.io/cluster": "c", "ray.io/group": "g"}})"),
       GroupKey{"ns", "c", "g"}},
      // No namespace on the object: the request's.
      {json::parse(R"({"labels": {"ray.io/cluster": "c", "ray.io/group": "g"}})"),
       GroupKey{"default-ns", "c", "g"}},
      {json::parse(R"({"namespace": "", "labels": {"ray.io/cluster": "c", "ray.io/group": "g"}})"),
       GroupKey{"default-ns", "c", "g"}},
      // Bad rows: a missing or empty label.
      {json::parse(R"({"namespace": "ns", "labels": {"ray.io/group": "g"}})"), std::nullopt},
      {json::parse(R"({"namespace": "ns", "labels": {"ray.io/cluster": "c"}})"), std::nullopt},
      {json::parse(R"({"namespace": "ns", "labels": {"ray.io/cluster": "", "ray.io/group": "g"}})"),
       std::nullopt},
      {json::parse(R"({"namespace": "ns", "labels": {"ray.io/cluster": "c", "ray.io/group": ""}})"),
       std::nullopt},
      {json::parse(R"({"namespace": "ns"})"), std::nullopt},
  }));
  CAPTURE(metadata.dump());
  json pod = {{"metadata", metadata}};
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE(view.has_value());
  CHECK(podpatch::group_key(*view, "default-ns") == want);
}

namespace {

json id_value(const std::string& v) { return {{"name", "TPU_WORKER_ID"}, {"value", v}}; }

// A Pod this webhook placed before: label replicaIndex and TPU_WORKER_ID per TPU container.
json placed_pod(const std::string& accelerator, const std::string& replica_label,
                const std::vector<json>& worker_ids) {
  json pod = {{"metadata",
               {{"name", "placed"}, {"labels", {{"ray.io/cluster", "c"}, {"ray.io/group", "g"}}}}},
              {"spec",
               {{"containers", json::array()},
                {"nodeSelector", {{"cloud.google.com/gke-tpu-accelerator", accelerator}}}}}};
  if (!replica_label.empty()) {
    pod["metadata"]["labels"]["replicaIndex"] = replica_label;
  }
  // A sidecar first: the first *TPU* container holds the id that counts.
  pod["spec"]["containers"].push_back(
      json{{"name", "sidecar"}, {"env", json::array({id_value("99")})}});
  int k = 0;
  for (const json& id : worker_ids) {
    json c = {{"name", "tpu-" + std::to_string(k++)},
              {"resources",
               {{"limits",
                 {{"google.com/tpu", std::to_string(4 / static_cast<int>(worker_ids.size()))}}}}},
              {"env", json::array()}};
    if (!id.is_null()) {
      c["env"].push_back(id);
    }
    pod["spec"]["containers"].push_back(c);
  }
  return pod;
}

}  // namespace

TEST_CASE("M3.3: recorded_slot reads the webhook's earlier placement", "[podpatch][placement]") {
  auto [row, accelerator, replica_label, ids, want] = GENERATE(
      table<std::string, std::string, std::string, std::vector<json>, std::optional<Slot>>({
          {"v6e", "tpu-v6e-slice", "g-2", {id_value("3")}, Slot{2, 3}},
          {"v6e host 0", "tpu-v6e-slice", "g-0", {id_value("0")}, Slot{0, 0}},
          // TPU7x: TPU_WORKER_ID = h x TPU containers + k, so the host is id / containers.
          {"tpu7x 2 containers", "tpu7x", "g-1", {id_value("4"), id_value("5")}, Slot{1, 2}},
          {"tpu7x 1 container", "tpu7x", "g-0", {id_value("3")}, Slot{0, 3}},
          {"tpu7x-prefixed label", "tpu7x-foo", "g-0", {id_value("6"), id_value("7")}, Slot{0, 3}},
          // Better than upstream: other generations are not divided, even with 2 containers.
          {"v6e 2 containers", "tpu-v6e-slice", "g-1", {id_value("3"), id_value("3")}, Slot{1, 3}},
          {"v5p 2 containers", "tpu-v5p-slice", "g-0", {id_value("1"), id_value("1")}, Slot{0, 1}},
          // No placement recorded.
          {"no replicaIndex", "tpu-v6e-slice", "", {id_value("3")}, std::nullopt},
          {"other group", "tpu-v6e-slice", "h-2", {id_value("3")}, std::nullopt},
          {"group prefix only", "tpu-v6e-slice", "gg-2", {id_value("3")}, std::nullopt},
          {"not a number", "tpu-v6e-slice", "g-x", {id_value("3")}, std::nullopt},
          {"nested dash", "tpu-v6e-slice", "g-1-2", {id_value("3")}, std::nullopt},
          {"empty replica", "tpu-v6e-slice", "g-", {id_value("3")}, std::nullopt},
          {"no TPU_WORKER_ID", "tpu-v6e-slice", "g-2", {json()}, std::nullopt},
          {"empty TPU_WORKER_ID", "tpu-v6e-slice", "g-2", {id_value("")}, std::nullopt},
          {"bad TPU_WORKER_ID", "tpu-v6e-slice", "g-2", {id_value("-1")}, std::nullopt},
          {"valueFrom TPU_WORKER_ID",
           "tpu-v6e-slice",
           "g-2",
           {json{{"name", "TPU_WORKER_ID"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "x"}}}}}}},
           std::nullopt},
          {"not a TPU Pod", "tpu-v6e-slice", "g-2", std::vector<json>{}, std::nullopt},
      }));
  CAPTURE(row);
  json pod = placed_pod(accelerator, replica_label, ids);
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE(view.has_value());
  CHECK(podpatch::recorded_slot(*view) == want);
}

TEST_CASE("M3.3: choose_slot, lowest replica with a free host, then lowest free host",
          "[podpatch][placement]") {
  using Slots = std::vector<Slot>;
  auto [row, taken, hosts, want] = GENERATE(table<std::string, Slots, int, Slot>({
      {"empty group", Slots{}, 4, Slot{0, 0}},
      {"next host", Slots{{0, 0}}, 4, Slot{0, 1}},
      {"gap", Slots{{0, 0}, {0, 2}}, 4, Slot{0, 1}},
      {"gap at 0", Slots{{0, 3}, {0, 1}}, 4, Slot{0, 0}},
      {"full replica", Slots{{0, 0}, {0, 1}, {0, 2}, {0, 3}}, 4, Slot{1, 0}},
      {"second replica", Slots{{0, 0}, {0, 1}, {1, 0}}, 2, Slot{1, 1}},
      {"unordered input", Slots{{1, 0}, {2, 1}, {0, 0}, {1, 1}, {0, 1}}, 2, Slot{2, 0}},
      {"lowest partial replica", Slots{{0, 0}, {0, 1}, {2, 0}, {1, 1}}, 2, Slot{1, 0}},
      // Only replicas in use count for "fewer than hosts Pods": replica 0 is unused here, and
      // replica 1 is partly filled, so the Pod completes replica 1.
      {"partial replica 1", Slots{{1, 0}}, 2, Slot{1, 1}},
      // All in-use replicas full: the lowest replica number not in use.
      {"unused replica between", Slots{{0, 0}, {0, 1}, {2, 0}, {2, 1}}, 2, Slot{1, 0}},
      {"single-host", Slots{{0, 0}, {1, 0}}, 1, Slot{2, 0}},
      {"single-host gap", Slots{{0, 0}, {2, 0}}, 1, Slot{1, 0}},
      // A stale Pod on a host beyond the slice does not fill the replica.
      {"stale host", Slots{{0, 5}}, 4, Slot{0, 0}},
  }));
  CAPTURE(row);
  std::vector<Holder> holders;
  for (const Slot& s : taken) {
    holders.push_back({"pod-" + std::to_string(s.replica) + "-" + std::to_string(s.host), s});
  }
  webhook::Result<Slot> slot = podpatch::choose_slot(holders, hosts, GroupKey{"ns", "c", "g"});
  REQUIRE(slot.has_value());
  CHECK(slot->replica == want.replica);
  CHECK(slot->host == want.host);
}

TEST_CASE("M3.3: two Pods on one slot are AlreadyExists naming both", "[podpatch][placement]") {
  std::vector<Holder> holders = {
      {"w-aaaaa", {0, 0}}, {"w-bbbbb", {0, 1}}, {"w-ccccc", {0, 1}}, {"w-ddddd", {1, 0}}};
  webhook::Result<Slot> slot =
      podpatch::choose_slot(holders, 2, GroupKey{"team", "rc", "tpu-group"});
  REQUIRE_FALSE(slot.has_value());
  CHECK(slot.error().code == webhook::ErrorCode::kAlreadyExists);
  CHECK(slot.error().message ==
        "Pods \"w-bbbbb\" and \"w-ccccc\" both hold host 1 of replica 0 of worker group "
        "\"tpu-group\" (RayCluster team/rc), so that slice cannot initialize; delete one of them "
        "(kubectl delete pod -n team w-ccccc) and it will be recreated on the free host");
}
