// The SliceRegistry: the webhook's view of the Pods that hold a slot, fed by the Pod watch.
#include "kube/slice_registry.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "kube_support.h"

using kube::PodRecord;
using kube::SliceRegistry;
using podpatch::GroupKey;
using podpatch::Holder;
using podpatch::Slot;

namespace {

const GroupKey kKey{"default", "rc", "tpu-group"};

PodRecord record(const std::string& uid, int r, int h, const GroupKey& key = kKey) {
  return {uid, "pod-" + uid, key, {r, h}, "1"};
}

// The slots of `key`, sorted.
std::vector<Slot> slots(const SliceRegistry& reg, const GroupKey& key = kKey) {
  std::vector<Slot> out;
  for (const Holder& h : reg.holders(key)) {
    out.push_back(h.slot);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("SliceRegistry is unsynced until the first Pod list") {
  testing::FakeClock clock;
  SliceRegistry reg(clock);
  CHECK_FALSE(reg.synced());
  CHECK(reg.holders(kKey).empty());
  reg.replace({record("a", 0, 1)});
  CHECK(reg.synced());
  CHECK(slots(reg) == std::vector<Slot>{{0, 1}});
  CHECK(reg.holders(kKey).front().pod == "pod-a");
}

TEST_CASE("SliceRegistry: watch events add, move and free slots; groups are separate") {
  testing::FakeClock clock;
  SliceRegistry reg(clock);
  reg.replace({record("a", 0, 0), record("b", 0, 2)});
  GroupKey other{"default", "rc", "other"};
  reg.upsert("c", record("c", 1, 0));
  reg.upsert("d", record("d", 0, 0, other));
  CHECK(slots(reg) == std::vector<Slot>{{0, 0}, {0, 2}, {1, 0}});
  CHECK(slots(reg, other) == std::vector<Slot>{{0, 0}});
  reg.upsert("b", record("b", 0, 3));  // MODIFIED to another slot: the old one is free
  CHECK(slots(reg) == std::vector<Slot>{{0, 0}, {0, 3}, {1, 0}});
  reg.upsert("a", std::nullopt);  // being deleted: holds no slot
  reg.remove("c");
  reg.remove("never-seen");
  CHECK(slots(reg) == std::vector<Slot>{{0, 3}});
  SliceRegistry::Stats st = reg.stats();
  CHECK(st.pods == 2);
  CHECK(st.groups == 2);
  reg.remove("d");
  CHECK(reg.stats().groups == 1);
}

TEST_CASE("SliceRegistry: a relist replaces every Pod") {
  testing::FakeClock clock;
  SliceRegistry reg(clock);
  reg.replace({record("a", 0, 0), record("b", 0, 1)});
  reg.replace({record("a", 0, 0), record("c", 0, 2), record("c", 0, 3)});  // duplicate uid: first
  CHECK(slots(reg) == std::vector<Slot>{{0, 0}, {0, 2}});
  CHECK(reg.stats().pods == 2);
}

TEST_CASE("SliceRegistry: two Pods on one slot are both kept, so placement can name them") {
  testing::FakeClock clock;
  SliceRegistry reg(clock);
  reg.replace({record("a", 0, 1), record("b", 0, 1)});
  CHECK(reg.holders(kKey).size() == 2);
  webhook::Result<Slot> s = podpatch::choose_slot(reg.holders(kKey), 4, kKey);
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == webhook::ErrorCode::kAlreadyExists);
  CHECK(s.error().message.find("pod-a") != std::string::npos);
  CHECK(s.error().message.find("pod-b") != std::string::npos);
}

TEST_CASE("SliceRegistry times how long the Pod watch has been disconnected") {
  testing::FakeClock clock;
  SliceRegistry reg(clock);
  reg.set_watch_connected(true);
  CHECK(reg.disconnected_for() == kube::Duration::zero());
  reg.set_watch_connected(false);
  clock.advance(std::chrono::seconds(7));
  CHECK(reg.disconnected_for() >= std::chrono::seconds(7));
  CHECK(reg.disconnected_for() < std::chrono::seconds(8));
  reg.set_watch_connected(false);  // still down: the outage began earlier
  CHECK(reg.disconnected_for() >= std::chrono::seconds(7));
  reg.set_watch_connected(true);
  CHECK(reg.disconnected_for() == kube::Duration::zero());
}

TEST_CASE("SliceRegistry: concurrent watch events and readers") {
  testing::FakeClock clock;
  SliceRegistry reg(clock);
  reg.replace({});
  std::atomic<bool> done{false};
  std::jthread reader([&] {
    while (!done) {
      std::vector<Holder> h = reg.holders(kKey);
      REQUIRE(h.size() <= 256);
    }
  });
  for (int i = 0; i < 256; ++i) {
    reg.upsert("p" + std::to_string(i), record("p" + std::to_string(i), i / 16, i % 16));
  }
  done = true;
  reader.join();
  CHECK(reg.stats().pods == 256);
  CHECK(slots(reg).size() == 256);
}

TEST_CASE("pod_record keeps only what placement needs, and skips Pods holding no slot") {
  nlohmann::json pod = testing::worker_pod("rc", "tpu-group", "8x8", "ray");
  pod["metadata"]["name"] = "rc-worker-x1";
  pod["metadata"]["uid"] = "1234";
  pod["metadata"]["resourceVersion"] = "77";
  CHECK_FALSE(kube::pod_record(pod).has_value());  // no replicaIndex, no TPU_WORKER_ID
  pod["metadata"]["labels"]["replicaIndex"] = "tpu-group-2";
  pod["spec"]["containers"][0]["env"].push_back({{"name", "TPU_WORKER_ID"}, {"value", "5"}});
  std::optional<PodRecord> r = kube::pod_record(pod);
  REQUIRE(r.has_value());
  CHECK(r->uid == "1234");
  CHECK(r->name == "rc-worker-x1");
  CHECK(r->key == GroupKey{"ray", "rc", "tpu-group"});
  CHECK(r->slot == Slot{2, 5});
  CHECK(r->resource_version == "77");
  pod["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z";
  CHECK_FALSE(kube::pod_record(pod).has_value());
  pod["metadata"].erase("uid");
  CHECK(kube::pod_uid(pod) == "ray/rc-worker-x1");
}
