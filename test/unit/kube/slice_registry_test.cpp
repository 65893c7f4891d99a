#include "kube/slice_registry.h"

#include <catch2/catch.hpp>

#include <set>
#include <thread>

#include "kube_support.h"

using kube::PodRecord;
using kube::SliceRegistry;
using podpatch::GroupKey;
using podpatch::Slot;

namespace {

const GroupKey kKey{"default", "rc", "tpu-group"};

PodRecord record(const std::string& uid, int r, int h, const GroupKey& key = kKey) {
  return {uid, "pod-" + uid, key, {r, h}, "1"};
}

Slot place(SliceRegistry& reg, int hosts = 4, bool dry_run = false) {
  webhook::Result<Slot> s = reg.place(kKey, hosts, dry_run);
  REQUIRE(s.has_value());
  return *s;
}

}  // namespace

TEST_CASE("SliceRegistry answers Unavailable until the first Pod list") {
  testing::FakeClock clock;
  SliceRegistry reg(clock, std::chrono::seconds(10));
  webhook::Result<Slot> s = reg.place(kKey, 4, false);
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == webhook::ErrorCode::kUnavailable);
  CHECK_THAT(s.error().message, Catch::Contains("starting") && Catch::Contains("KubeRay retries"));
  reg.replace({});
  CHECK(reg.synced());
  CHECK(place(reg) == Slot{0, 0});
}

TEST_CASE("SliceRegistry reserves at once: lowest replica with a free host, then lowest host") {
  testing::FakeClock clock;
  SliceRegistry reg(clock, std::chrono::seconds(10));
  reg.replace({record("a", 0, 0), record("b", 0, 2), record("c", 1, 0)});
  CHECK(place(reg) == Slot{0, 1});
  CHECK(place(reg) == Slot{0, 3});
  CHECK(place(reg) == Slot{1, 1});
  SliceRegistry::Stats st = reg.stats();
  CHECK(st.pods == 3);
  CHECK(st.reservations == 3);
  CHECK(st.reserved_total == 3);
}

TEST_CASE("SliceRegistry: dry-run reserves nothing") {
  testing::FakeClock clock;
  SliceRegistry reg(clock, std::chrono::seconds(10));
  reg.replace({});
  CHECK(place(reg, 4, true) == Slot{0, 0});
  CHECK(place(reg, 4, true) == Slot{0, 0});
  CHECK(reg.stats().reservations == 0);
  CHECK(place(reg) == Slot{0, 0});
  CHECK(place(reg, 4, true) == Slot{0, 1});
}

TEST_CASE("SliceRegistry: the watch confirms a reservation; deletion frees the slot") {
  testing::FakeClock clock;
  SliceRegistry reg(clock, std::chrono::seconds(10));
  reg.replace({});
  reg.set_watch_connected(true);
  CHECK(place(reg) == Slot{0, 0});
  CHECK(place(reg) == Slot{0, 1});
  reg.upsert("u1", record("u1", 0, 1));
  SliceRegistry::Stats st = reg.stats();
  CHECK(st.pods == 1);
  CHECK(st.reservations == 1);
  CHECK(st.confirmed_total == 1);
  // Confirmed Pods never expire; the other reservation does.
  clock.advance(std::chrono::seconds(11));
  st = reg.stats();
  CHECK(st.reservations == 0);
  CHECK(st.expired_total == 1);
  CHECK(place(reg) == Slot{0, 0});
  reg.upsert("u0", record("u0", 0, 0));
  // A MODIFIED event of the same Pod changes nothing; a deletion frees its slot.
  reg.upsert("u0", record("u0", 0, 0));
  CHECK(reg.stats().pods == 2);
  reg.remove("u1");
  CHECK(place(reg) == Slot{0, 1});
  // A Pod turning into "being deleted" (no record) frees its slot too.
  reg.upsert("u0", std::nullopt);
  CHECK(place(reg) == Slot{0, 0});
}

TEST_CASE("SliceRegistry: reservations age only while the Pod watch is connected") {
  testing::FakeClock clock;
  SliceRegistry reg(clock, std::chrono::seconds(10));
  reg.replace({});
  reg.set_watch_connected(true);
  CHECK(place(reg) == Slot{0, 0});
  clock.advance(std::chrono::seconds(9));
  reg.set_watch_connected(false);
  clock.advance(std::chrono::minutes(5));  // an outage: the Pod may exist, unreported
  CHECK(reg.stats().reservations == 1);
  CHECK(place(reg) == Slot{0, 1});
  reg.set_watch_connected(true);
  clock.advance(std::chrono::seconds(9));
  CHECK(reg.stats().reservations == 2);  // the reconnected watch gets its full TTL to report
  clock.advance(std::chrono::seconds(2));
  CHECK(reg.stats().reservations == 0);
  CHECK(reg.stats().expired_total == 2);
}

TEST_CASE("SliceRegistry: two Pods on one slot deny placement naming both") {
  testing::FakeClock clock;
  SliceRegistry reg(clock, std::chrono::seconds(10));
  reg.replace({record("a", 0, 1), record("b", 0, 1)});
  webhook::Result<Slot> s = reg.place(kKey, 4, false);
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == webhook::ErrorCode::kAlreadyExists);
  CHECK_THAT(s.error().message, Catch::Contains("pod-a") && Catch::Contains("pod-b"));
  reg.remove("b");
  CHECK(place(reg) == Slot{0, 0});
}

TEST_CASE("SliceRegistry: a relist replaces the Pods, keeps reservations, confirms them") {
  testing::FakeClock clock;
  SliceRegistry reg(clock, std::chrono::seconds(10));
  reg.replace({record("a", 0, 0), record("b", 0, 1)});
  CHECK(place(reg) == Slot{0, 2});
  CHECK(place(reg) == Slot{0, 3});
  // While the watch was away, b was deleted and the Pod of (0,2) created.
  reg.replace({record("a", 0, 0), record("c", 0, 2)});
  SliceRegistry::Stats st = reg.stats();
  CHECK(st.pods == 2);
  CHECK(st.reservations == 1);
  CHECK(st.confirmed_total == 1);
  CHECK(place(reg) == Slot{0, 1});
  // Groups are independent.
  GroupKey other{"default", "rc", "other"};
  CHECK(reg.place(other, 4, false).value() == Slot{0, 0});
}

TEST_CASE("SliceRegistry: concurrent admissions never share a slot") {
  testing::FakeClock clock;
  SliceRegistry reg(clock, std::chrono::seconds(10));
  reg.replace({});
  constexpr int kThreads = 8;
  constexpr int kEach = 32;  // 256 slots: 16 replicas of 16 hosts
  std::vector<std::vector<Slot>> got(kThreads);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) {
          got[static_cast<std::size_t>(t)].push_back(reg.place(kKey, 16, false).value());
        }
      });
    }
  }
  std::set<Slot> all;
  for (const auto& v : got) {
    all.insert(v.begin(), v.end());
  }
  CHECK(all.size() == kThreads * kEach);
  CHECK(all.begin()->replica == 0);
  CHECK(all.rbegin()->replica == 15);
  CHECK(all.rbegin()->host == 15);
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
