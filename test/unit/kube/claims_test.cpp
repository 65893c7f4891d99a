// Slot claims shared through the API server (kube::ClaimStore) against the fake kube-apiserver:
// several stores stand for several webhook replicas, each with its own API client and its own
// view of the Pods.
#include "kube/claims.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "fake_apiserver.h"
#include "kube_support.h"

using nlohmann::json;
using podpatch::GroupKey;
using podpatch::PlaceRequest;
using podpatch::Slot;
using testing::FakeApiServer;
using testing::FakeClock;

namespace {

const GroupKey kKey{"default", "rc", "tpu-group"};

// One webhook replica: an API client, a synced Pod view with a connected watch, a claim store.
struct Replica {
  Replica(FakeApiServer& api, kube::Clock& clock, std::string name,
          kube::ClaimStoreOptions options = {})
      : client(kube::ApiClient::create(testing::loopback_config(api.port())).value()), pods(clock) {
    options.ns = "ray-system";
    options.holder = std::move(name);
    pods.replace({});
    pods.set_watch_connected(true);
    store = std::make_unique<kube::ClaimStore>(*client, pods, clock, options, kube::Logger{});
  }

  webhook::Result<Slot> place(int hosts = 4, bool dry_run = false, std::string uid = "") {
    return store->place(PlaceRequest{kKey, hosts, dry_run, "rc-tpu-group-worker-", std::move(uid)});
  }
  // The watch shows a Pod on `slot`.
  void show(const std::string& uid, Slot slot) {
    pods.upsert(uid, kube::PodRecord{uid, "pod-" + uid, kKey, slot, "1"});
    store->shown(kKey, slot);
  }

  std::unique_ptr<kube::ApiClient> client;
  kube::SliceRegistry pods;
  std::unique_ptr<kube::ClaimStore> store;
};

kube::WallTime at(int seconds) {
  return kube::WallTime(std::chrono::seconds(1'800'000'000 + seconds));
}

}  // namespace

TEST_CASE("claim_object_name: a valid object name, one per group, from the group alone") {
  std::string a = kube::claim_object_name({"ns", "rc", "g"});
  CHECK(a == kube::claim_object_name({"ns", "rc", "g"}));
  CHECK(a.starts_with("kuberay-tpu-slots-"));
  CHECK(a.size() == std::string("kuberay-tpu-slots-").size() + 24);
  CHECK(a.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos);
  std::set<std::string> names{
      a, kube::claim_object_name({"ns", "rc", "h"}), kube::claim_object_name({"ns", "rcg", ""}),
      kube::claim_object_name({"ns2", "rc", "g"}), kube::claim_object_name({"ns", "r", "cg"})};
  CHECK(names.size() == 5);
  // A group name that is no DNS label still gives a valid name.
  std::string odd = kube::claim_object_name({"ns", "rc", "V6E_16 group"});
  CHECK(odd.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos);
}

TEST_CASE("Claims round-trip through the annotation's JSON") {
  std::vector<kube::Claim> claims = {
      {{0, 3}, at(0) + std::chrono::milliseconds(123), "rc-g-worker-", "webhook-a", "webhook-a/u1"},
      {{12, 0}, at(59), "", "", "b/2"}};
  std::string text = kube::encode_claims(claims);
  CHECK_THAT(text, Catch::Contains("\"expires\":\"2027-01-15T08:00:00.123Z\""));
  CHECK(kube::decode_claims(text).value() == claims);
  CHECK(kube::decode_claims("[]").value().empty());
}

TEST_CASE("decode_claims refuses malformed claims, naming what is wrong") {
  auto bad = [](const std::string& text, const std::string& says) {
    CAPTURE(text);
    webhook::Result<std::vector<kube::Claim>> r = kube::decode_claims(text);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == webhook::ErrorCode::kInvalidArgument);
    CHECK_THAT(r.error().message, Catch::Contains(says));
  };
  bad("", "not a JSON array");
  bad("{}", "not a JSON array");
  bad("[1]", "[0]: not an object");
  std::string ok = R"("expires":"2027-01-15T08:00:00.000Z","id":"x")";
  bad("[{" + ok + ",\"replica\":0}]", "replica and host");
  bad("[{" + ok + ",\"replica\":-1,\"host\":0}]", "replica and host");
  bad("[{" + ok + ",\"replica\":\"0\",\"host\":0}]", "replica and host");
  bad(R"([{"replica":0,"host":0,"id":"x"}])", "expires and id");
  bad(R"([{"replica":0,"host":0,"expires":"2027-01-15T08:00:00Z","id":""}])", "expires and id");
  for (const char* t : {"2027-01-15 08:00:00Z", "2027-01-15T08:00:00", "2027-01-15T08:00:00+01:00",
                        "2027-13-15T08:00:00Z", "2027-01-15T08:00:00.Z", "tomorrow"}) {
    bad(std::string(R"([{"replica":0,"host":0,"id":"x","expires":")") + t + "\"}]",
        "[0]: expires is not an RFC 3339 UTC time");
  }
}

TEST_CASE(
    "The webhook's namespace: POD_NAMESPACE, else the service account's file, else --namespace") {
  testing::TempDir dir;
  std::map<std::string, std::string> vars;
  kube::EnvLookup env = [&](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  std::string sa = dir.path.string();
  webhook::Result<kube::NamespaceSource> none = kube::webhook_namespace(env, sa, "");
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().code == webhook::ErrorCode::kFailedPrecondition);
  CHECK_THAT(none.error().message,
             Catch::Contains("POD_NAMESPACE") && Catch::Contains("--namespace"));

  CHECK(kube::webhook_namespace(env, sa, "flagged").value().ns == "flagged");
  CHECK(kube::webhook_namespace(env, sa, "flagged").value().origin == "--namespace");
  dir.write("namespace", "from-file\n");
  CHECK(kube::webhook_namespace(env, sa, "flagged").value().ns == "from-file");
  CHECK(kube::webhook_namespace(env, sa, "flagged").value().origin == sa + "/namespace");
  vars["POD_NAMESPACE"] = "";
  CHECK(kube::webhook_namespace(env, sa, "").value().ns == "from-file");  // empty is unset
  vars["POD_NAMESPACE"] = "from-env";
  CHECK(kube::webhook_namespace(env, sa, "flagged").value().ns == "from-env");
  CHECK(kube::webhook_namespace(env, sa, "flagged").value().origin == "POD_NAMESPACE");

  CHECK_FALSE(kube::replica_identity(env).empty());  // the host name
  vars["POD_NAME"] = "kuberay-tpu-webhook-7d9f-abcde";
  CHECK(kube::replica_identity(env) == "kuberay-tpu-webhook-7d9f-abcde");
}

TEST_CASE("M3.3: three replicas placing 64 Pods of one group concurrently give every slot once") {
  FakeApiServer api({});
  kube::SystemClock clock;
  // The subject is that every slot is given once. 64 placements through three replicas are
  // serialized per group and conflict with each other; on a busy machine they outlast the
  // default 3 s budget, whose bound other cases pin, so this one is not a timing test.
  kube::ClaimStoreOptions options;
  options.budget = std::chrono::seconds(60);
  std::vector<std::unique_ptr<Replica>> replicas;
  for (const char* name : {"webhook-a", "webhook-b", "webhook-c"}) {
    replicas.push_back(std::make_unique<Replica>(api, clock, name, options));
  }
  std::vector<Slot> got(64);
  std::vector<std::string> denials(got.size());  // Catch's macros are for the test's own thread
  {
    std::vector<std::jthread> threads;
    for (std::size_t i = 0; i < got.size(); ++i) {
      threads.emplace_back([&, i] {
        webhook::Result<Slot> s = replicas[i % 3]->place(16, false, "uid-" + std::to_string(i));
        if (s) {
          got[i] = *s;
        } else {
          denials[i] = s.error().message;
        }
      });
    }
  }
  for (const std::string& d : denials) {
    CHECK(d.empty());
  }
  REQUIRE(std::count(denials.begin(), denials.end(), "") == 64);
  std::set<Slot> slots(got.begin(), got.end());
  CHECK(slots.size() == 64);
  CHECK(*slots.begin() == Slot{0, 0});
  CHECK(*slots.rbegin() == Slot{3, 15});
  std::vector<kube::Claim> claims = testing::lease_claims(api);
  CHECK(claims.size() == 64);
  std::set<std::string> holders;
  for (const kube::Claim& c : claims) {
    holders.insert(c.holder);
    CHECK(c.pod == "rc-tpu-group-worker-");
  }
  CHECK(holders == std::set<std::string>{"webhook-a", "webhook-b", "webhook-c"});
  std::uint64_t written = 0, conflicts = 0;
  for (const auto& r : replicas) {
    written += r->store->stats().claims_written;
    conflicts += r->store->stats().conflicts;
  }
  CHECK(written == 64);
  // Each successful write is one Lease write; a conflict costs one more write (and a read).
  CHECK(api.writes("leases") == 64);
  CHECK(api.write_attempts("leases") == static_cast<int>(64 + conflicts));
}

TEST_CASE(
    "M3.3: a claim stops counting once the watch shows its Pod; a deleted Pod's slot is reused") {
  FakeApiServer api({});
  FakeClock clock;
  Replica a(api, clock, "webhook-a");
  Replica b(api, clock, "webhook-b");
  REQUIRE(a.place().value() == Slot{0, 0});
  REQUIRE(b.place().value() == Slot{0, 1});  // b reads a's claim
  // The Pods appear in a's view, then (0,0)'s Pod dies: a hands (0,0) out again at once,
  // although both claims are still live in the Lease.
  a.show("p0", {0, 0});
  a.show("p1", {0, 1});
  a.pods.remove("p0");
  CHECK(a.place(4, /*dry_run=*/true).value() == Slot{0, 0});
  // b's watch lags: it has not shown the Pods yet, so the live claims keep both slots.
  CHECK(b.place(4, /*dry_run=*/true).value() == Slot{0, 2});
  CHECK(testing::lease_claims(api).size() == 2);
}

TEST_CASE(
    "M3.3: an old and a new claim on one slot take it once for a replica that saw neither Pod") {
  FakeApiServer api({});
  FakeClock clock;
  Replica a(api, clock, "webhook-a");
  Replica b(api, clock, "webhook-b");
  REQUIRE(a.place().value() == Slot{0, 0});
  a.show("p0", {0, 0});  // the Pod appears in a's view, then is deleted: a reuses its slot
  a.pods.remove("p0");
  REQUIRE(a.place().value() == Slot{0, 0});
  std::vector<kube::Claim> claims = testing::lease_claims(api);
  REQUIRE(claims.size() == 2);
  CHECK(claims[0].slot == claims[1].slot);
  // b's watch showed neither Pod: the slot is taken, not held twice.
  webhook::Result<Slot> s = b.place(4, /*dry_run=*/true);
  REQUIRE(s.has_value());
  CHECK(*s == Slot{0, 1});
}

TEST_CASE("M3.3: injected 409s and 500s are retried within the budget; a dry run writes nothing") {
  FakeApiServer api({});
  FakeClock clock;
  Replica a(api, clock, "webhook-a");
  api.fail_next_writes("leases", 409, 3);
  CHECK(a.place().value() == Slot{0, 0});
  CHECK(a.store->stats().conflicts == 3);
  api.fail_next_writes("leases", 500, 2);
  CHECK(a.place().value() == Slot{0, 1});
  CHECK(a.store->stats().api_errors >= 2);
  CHECK(testing::lease_claims(api).size() == 2);

  int writes = api.write_attempts("leases");
  CHECK(a.place(4, /*dry_run=*/true).value() == Slot{0, 2});
  CHECK(a.place(4, /*dry_run=*/true).value() == Slot{0, 2});
  CHECK(api.write_attempts("leases") == writes);
  CHECK(testing::lease_claims(api).size() == 2);
}

TEST_CASE(
    "M3.3: when no claim can be written within the budget, the denial is retryable and says why") {
  FakeApiServer api({});
  FakeClock clock;
  kube::ClaimStoreOptions o;
  o.budget = std::chrono::seconds(3);
  Replica a(api, clock, "webhook-a", o);

  SECTION("the API answers 500") {
    api.fail_next_writes("leases", 500, 1000);
    webhook::Result<Slot> s = a.place();
    REQUIRE_FALSE(s.has_value());
    CHECK(s.error().code == webhook::ErrorCode::kUnavailable);
    CHECK_THAT(s.error().message, Catch::Contains("within --claim-timeout (3000ms)") &&
                                      Catch::Contains("HTTP 500") && Catch::Contains("retryable") &&
                                      Catch::Contains(kube::claim_object_name(kKey)));
    CHECK(a.store->stats().denied == 1);
  }
  SECTION("every write conflicts") {
    api.fail_next_writes("leases", 409, 100000);
    webhook::Result<Slot> s = a.place();
    REQUIRE_FALSE(s.has_value());
    CHECK(s.error().code == webhook::ErrorCode::kUnavailable);
    CHECK_THAT(s.error().message, Catch::Contains("conflicted with other webhook replicas"));
  }
  SECTION("this replica is cut off from the API server") {
    kube::ClusterConfig config = testing::loopback_config(api.port());
    config.token = "t-a";
    api.set_tokens({"t-a"});
    a.client = kube::ApiClient::create(config).value();
    a.store = std::make_unique<kube::ClaimStore>(*a.client, a.pods, clock,
                                                 kube::ClaimStoreOptions{"ray-system", "webhook-a"},
                                                 kube::Logger{});
    REQUIRE(a.place().value() == Slot{0, 0});
    api.partition("t-a");
    webhook::Result<Slot> s = a.place();
    REQUIRE_FALSE(s.has_value());
    CHECK(s.error().code == webhook::ErrorCode::kUnavailable);
    CHECK_THAT(s.error().message, Catch::Contains("HTTP 503"));
    api.heal();
    CHECK(a.place().value() == Slot{0, 1});
  }
  CHECK(api.writes("leases") <= 2);
}

namespace {

// One replica on the real clock with a `budget`, whose writes the API server delays.
struct SlowApi {
  explicit SlowApi(std::chrono::milliseconds budget)
      : a(api, clock, "webhook-a", options(budget)) {}
  static kube::ClaimStoreOptions options(std::chrono::milliseconds budget) {
    kube::ClaimStoreOptions o;
    o.budget = budget;
    return o;
  }
  struct Timed {
    webhook::Result<Slot> slot;
    std::chrono::steady_clock::duration took;
  };
  // A placement while every write takes `delay`.
  Timed place(std::chrono::milliseconds delay) {
    api.set_write_delay(delay);
    auto start = std::chrono::steady_clock::now();
    webhook::Result<Slot> slot = a.place();
    auto took = std::chrono::steady_clock::now() - start;
    api.set_write_delay(std::chrono::milliseconds(0));
    return {std::move(slot), took};
  }

  FakeApiServer api{{}};
  kube::SystemClock clock;
  Replica a;
};

}  // namespace

TEST_CASE("M3.3: a slow API: a 2 s write inside a 3 s budget places the Pod") {
  SlowApi s(std::chrono::milliseconds(3000));
  auto [slot, took] = s.place(std::chrono::milliseconds(2000));
  CHECK(slot.value() == Slot{0, 0});
  CHECK(took < std::chrono::milliseconds(3500));  // bounded by the budget, not a speed check
}

TEST_CASE("M3.3: a write slower than what is left of the budget: denied within the budget") {
  SlowApi s(std::chrono::milliseconds(1000));
  CHECK(s.a.place().value() == Slot{0, 0});  // its connection stays open for the next write
  auto [late, took] = s.place(std::chrono::milliseconds(3000));
  REQUIRE_FALSE(late.has_value());
  CHECK(late.error().message.find("--claim-timeout") != std::string::npos);
  // The timed-out write is not sent again on a new connection past the budget (that took 2 s).
  CHECK(took < std::chrono::milliseconds(1900));
}

TEST_CASE("M3.3: a replica whose Pod watch is down or not yet synced denies instead of guessing") {
  FakeApiServer api({});
  FakeClock clock;
  Replica a(api, clock, "webhook-a");
  a.pods.set_watch_connected(false);
  CHECK(a.place().value() == Slot{0, 0});  // a reconnect gap: the claims cover it
  clock.advance(std::chrono::seconds(6));  // more than half the 10 s TTL
  webhook::Result<Slot> s = a.place();
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == webhook::ErrorCode::kUnavailable);
  CHECK_THAT(s.error().message, Catch::Contains("watch of Pods has been disconnected"));
  a.pods.set_watch_connected(true);
  CHECK(a.place().value() == Slot{0, 1});  // the first claim still holds (10 s TTL)
  clock.advance(std::chrono::seconds(11));
  CHECK(a.place().value() == Slot{0, 0});  // both expired

  FakeClock fresh_clock;
  kube::SliceRegistry unsynced(fresh_clock);
  kube::ClaimStore store(*a.client, unsynced, fresh_clock, {"ray-system", "x"}, kube::Logger{});
  webhook::Result<Slot> starting = store.place(PlaceRequest{kKey, 4, false, "p", ""});
  REQUIRE_FALSE(starting.has_value());
  CHECK_THAT(starting.error().message, Catch::Contains("is starting"));
}

TEST_CASE(
    "M3.3: a Lease holding undecodable claims denies its group until the janitor deletes it") {
  FakeApiServer api({});
  FakeClock clock;
  Replica a(api, clock, "webhook-a");
  json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata",
                 {{"name", kube::claim_object_name(kKey)},
                  {"namespace", "ray-system"},
                  {"labels",
                   {{"app.kubernetes.io/managed-by", "kuberay-tpu-webhook"},
                    {"app.kubernetes.io/component", "slot-claims"}}},
                  {"annotations", {{"kuberay-tpu-webhook/claims", "[{\"replica\":\"zero\"}]"}}}}},
                {"spec", json::object()}};
  api.create("leases", lease);
  webhook::Result<Slot> s = a.place();
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == webhook::ErrorCode::kUnavailable);
  CHECK_THAT(s.error().message,
             Catch::Contains("does not hold valid claims") && Catch::Contains("delete it by hand"));
  REQUIRE(a.store->sweep());
  CHECK(api.objects("leases").empty());
  CHECK(a.place().value() == Slot{0, 0});
}

TEST_CASE("M3.3: a group with too many open claims is refused until they expire") {
  FakeApiServer api({});
  FakeClock clock;
  kube::ClaimStoreOptions o;
  o.max_claims = 3;
  Replica a(api, clock, "webhook-a", o);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(a.place().has_value());
  }
  webhook::Result<Slot> s = a.place();
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == webhook::ErrorCode::kUnavailable);  // 503: they expire, retry
  CHECK_THAT(s.error().message, Catch::Contains("3 slot claims"));
  CHECK(a.store->stats().denied == 1);
  clock.advance(std::chrono::seconds(11));
  CHECK(a.place().value() == Slot{0, 0});
  CHECK(testing::lease_claims(api).size() == 1);  // the write dropped the expired ones
}

TEST_CASE("M3.3: the janitor of one replica cleans up after another that died") {
  FakeApiServer api({});
  FakeClock clock;
  auto dead = std::make_unique<Replica>(api, clock, "webhook-dead");
  REQUIRE(dead->place().value() == Slot{0, 0});
  REQUIRE(dead->place().value() == Slot{0, 1});
  dead.reset();  // killed: its claims stay in the Lease
  Replica b(api, clock, "webhook-b");
  CHECK(b.place(4, true).value() == Slot{0, 2});  // its unconfirmed claims still hold
  std::uint64_t placing = b.store->stats().writes;
  REQUIRE(b.store->sweep());
  CHECK(testing::lease_claims(api).size() == 2);
  CHECK(b.store->stats().writes == placing);  // nothing expired: the Lease was left alone
  clock.advance(std::chrono::seconds(11));
  CHECK(b.place(4, true).value() == Slot{0, 0});  // reused after the TTL
  placing = b.store->stats().writes;
  REQUIRE(b.store->sweep());
  CHECK(api.objects("leases").empty());
  CHECK(b.store->stats().objects_deleted == 1);
  CHECK(b.store->stats().writes == placing + 1);  // the DELETE
}
