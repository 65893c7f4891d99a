// The SlotAllocators over a SliceRegistry (kube/slot_allocators.h): the choice LocalSlotAllocator
// and the ClaimStore share (docs/spec.md M3.3), and LocalSlotAllocator's in-process reservations,
// the placement behind webhook-dryrun --existing and the Handler tests.
#include "kube/slot_allocators.h"

#include <catch2/catch.hpp>
#include <set>
#include <thread>
#include <vector>

#include "kube/listed_cluster.h"
#include "kube/live_sources.h"
#include "kube_support.h"

using kube::Reservation;
using podpatch::GroupKey;
using podpatch::Holder;
using podpatch::PlaceRequest;
using podpatch::Slot;
using testing::json;

namespace {

const GroupKey kKey{"default", "rc", "tpu-group"};

// A worker Pod of kKey on host `host` of replica `replica` (v6e 4x4: 4 hosts a slice).
json held_pod(const std::string& name, int replica, int host) {
  json pod = testing::worker_pod("rc", "tpu-group", "4x4");
  pod["metadata"]["name"] = name;
  pod["metadata"]["uid"] = "uid-" + name;
  pod["metadata"]["labels"]["replicaIndex"] = "tpu-group-" + std::to_string(replica);
  pod["spec"]["containers"][0]["env"].push_back(
      {{"name", "TPU_WORKER_ID"}, {"value", std::to_string(host)}});
  return pod;
}

// A SliceRegistry fed by a PodFeed, and a LocalSlotAllocator over it.
struct Local {
  testing::FakeClock clock;
  kube::SliceRegistry registry{clock};
  kube::PodFeed feed{registry};
  kube::LocalSlotAllocator pods{registry};
};

}  // namespace

TEST_CASE("choose_free_slot: M3.3 over the shown Pods and the reservations") {
  std::vector<Holder> pods = {{"p-0-0", {0, 0}}, {"p-0-2", {0, 2}}};
  SECTION("a reservation takes its slot") {
    std::vector<Reservation> reserved = {{{0, 1}, "r1"}};
    CHECK(*kube::choose_free_slot(pods, reserved, 4, kKey) == Slot{0, 3});
  }
  SECTION("a reservation on a slot a Pod holds is that Pod: it takes nothing more") {
    std::vector<Reservation> reserved = {{{0, 1}, "r1"}, {{0, 0}, "r0"}};
    std::vector<std::size_t> shown;
    webhook::Result<Slot> slot =
        kube::choose_free_slot(pods, reserved, 4, kKey, [&](std::size_t i) { shown.push_back(i); });
    CHECK(*slot == Slot{0, 3});
    CHECK(shown == std::vector<std::size_t>{1});
  }
  SECTION("two reservations on one slot take it once") {
    std::vector<Reservation> reserved = {{{0, 1}, "old"}, {{0, 1}, "new"}, {{0, 3}, "r3"}};
    CHECK(*kube::choose_free_slot(pods, reserved, 4, kKey) == Slot{1, 0});
  }
  SECTION("two Pods on one slot: AlreadyExists naming both") {
    pods.push_back({"p-dup", {0, 2}});
    webhook::Result<Slot> slot = kube::choose_free_slot(pods, {}, 4, kKey);
    REQUIRE_FALSE(slot.has_value());
    CHECK(slot.error().code == webhook::ErrorCode::kAlreadyExists);
    CHECK_THAT(slot.error().message, Catch::Contains("p-0-2") && Catch::Contains("p-dup"));
  }
}

TEST_CASE("LocalSlotAllocator: a placement reserves its slot; a dry run reserves nothing (M3.3)") {
  Local l;
  kube::list_objects(l.feed, std::vector<json>{held_pod("a", 0, 0)}, "Pod");
  CHECK(*l.pods.place(kKey, 4, /*dry_run=*/true) == Slot{0, 1});
  CHECK(*l.pods.place(kKey, 4, /*dry_run=*/true) == Slot{0, 1});
  CHECK(*l.pods.place(kKey, 4, /*dry_run=*/false) == Slot{0, 1});
  CHECK(*l.pods.place(kKey, 4, /*dry_run=*/false) == Slot{0, 2});
  CHECK(*l.pods.place(GroupKey{"default", "rc", "other"}, 4, false) == Slot{0, 0});
}

TEST_CASE("LocalSlotAllocator: a reservation ends once the registry shows a Pod on its slot") {
  Local l;
  kube::list_objects(l.feed, {}, "Pod");
  REQUIRE(*l.pods.place(kKey, 4, false) == Slot{0, 0});
  l.feed.event(kube::EventType::kAdded, held_pod("a", 0, 0));  // the reserved Pod appears
  CHECK(*l.pods.place(kKey, 4, false) == Slot{0, 1});
  l.feed.event(kube::EventType::kDeleted, held_pod("a", 0, 0));  // and goes: its slot is free
  CHECK(*l.pods.place(kKey, 4, false) == Slot{0, 0});
  CHECK(*l.pods.place(kKey, 4, false) == Slot{0, 2});
}

TEST_CASE("M3.3: PodFeed tells of a shown Pod only once the registry holds it on its slot") {
  // The ClaimStore stops counting a claim once told its Pod was shown; told before the registry
  // held the Pod, a placement in between would find the slot free and hand it out twice.
  testing::FakeClock clock;
  kube::SliceRegistry registry{clock};
  std::vector<std::vector<Holder>> held_when_told;
  kube::PodFeed feed{registry, [&](const kube::PodRecord& pod) {
                       held_when_told.push_back(registry.holders(pod.key));
                       CHECK(pod.slot == Slot{1, 3});
                     }};
  kube::list_objects(feed, {}, "Pod");
  feed.event(kube::EventType::kAdded, held_pod("a", 1, 3));
  feed.event(kube::EventType::kModified, held_pod("a", 1, 3));
  feed.event(kube::EventType::kDeleted, held_pod("a", 1, 3));  // not a showing
  REQUIRE(held_when_told.size() == 2);
  for (const std::vector<Holder>& held : held_when_told) {
    REQUIRE(held.size() == 1);
    CHECK(held[0].slot == Slot{1, 3});
  }
  CHECK(registry.holders(kKey).empty());
}

TEST_CASE("LocalSlotAllocator refuses before the first list and for slices of no hosts") {
  Local l;
  webhook::Result<Slot> starting = l.pods.place(kKey, 4, false);
  REQUIRE_FALSE(starting.has_value());
  CHECK(starting.error().code == webhook::ErrorCode::kUnavailable);
  CHECK_THAT(starting.error().message, Catch::Contains("is starting"));
  kube::list_objects(l.feed, {}, "Pod");
  webhook::Result<Slot> none = l.pods.place(PlaceRequest{kKey, 0, false, "p", ""});
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().code == webhook::ErrorCode::kInvalidArgument);
  CHECK(*l.pods.place(kKey, 4, false) == Slot{0, 0});
}

TEST_CASE("LocalSlotAllocator gives 64 concurrent admissions 64 distinct slots") {
  kube::ListedCluster cluster;
  std::vector<Slot> slots(64);
  std::vector<std::thread> threads;
  for (int i = 0; i < 64; ++i) {
    threads.emplace_back(
        [&, i] { slots[static_cast<std::size_t>(i)] = *cluster.pods().place(kKey, 16, false); });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  std::set<Slot> unique(slots.begin(), slots.end());
  CHECK(unique.size() == 64);
  for (const Slot& s : unique) {
    CHECK(s.replica < 4);
    CHECK(s.host < 16);
  }
}

TEST_CASE("DisabledSlotAllocator denies, naming the feature gate and the flag") {
  kube::DisabledSlotAllocator off;
  webhook::Result<Slot> slot = off.place(kKey, 4, false);
  REQUIRE_FALSE(slot.has_value());
  CHECK(slot.error().code == webhook::ErrorCode::kFailedPrecondition);
  CHECK_THAT(slot.error().message, Catch::Contains("ray.io/replica-host-index") &&
                                       Catch::Contains("RayMultiHostIndexing") &&
                                       Catch::Contains("--legacy-indexing=auto"));
}
