// lib/kube end to end against the fake kube-apiserver: admissions through admission::Handler
// with the live sources, label-less Pods placed through slot claims in Leases.
#include "kube/live_cluster.h"

#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "fake_apiserver.h"
#include "kube_support.h"

using nlohmann::json;
using podpatch::Slot;
using testing::eventually;
using testing::FakeApiServer;
using testing::FakeClock;

namespace {

struct Live {
  Live(FakeApiServer& api, kube::LiveClusterOptions options)
      : cluster(kube::LiveCluster::create(testing::loopback_config(api.port()), std::move(options))
                    .value()),
        handler({}, cluster->pods(), cluster->nodes(), cluster->services()) {
    cluster->start();
  }
  Live(FakeApiServer& api, FakeClock& clock) : Live(api, testing::test_options(clock)) {}

  // Admits `pod` through the Handler; returns the placed slot, or nullopt when denied.
  admission::Response admit(const json& pod, bool dry_run = false) const {
    return handler.mutate(testing::create_request(pod, dry_run));
  }
  kube::SliceRegistry::Stats stats() const { return cluster->registry().stats(); }
  kube::ClaimStore::Stats claims() const { return cluster->claims().stats(); }
  const kube::ReflectorCounters& counters(const char* resource = "pods") const {
    return cluster->reflector(resource)->counters();
  }

  std::unique_ptr<kube::LiveCluster> cluster;
  admission::Handler handler;
};

Slot slot_of(const admission::Response& r) {
  INFO("denied: " << r.message);
  REQUIRE(r.allowed);
  REQUIRE(r.placement.has_value());
  return r.placement->slot;
}

// Until the first Pod list is read and the Pod watch is established.
void wait_watching(const Live& live) {
  REQUIRE(eventually([&] { return live.cluster->pods_synced(); }));
  REQUIRE(eventually([&] { return live.counters().watches.load() > 0; }));
}

// Admits and then creates the Pod in the fake cluster, as kube-apiserver would.
json admit_and_create(const Live& live, FakeApiServer& api, const json& pod) {
  admission::Response r = live.admit(pod);
  INFO("denied: " << r.message);
  REQUIRE(r.allowed);
  return api.create("pods", testing::apply_patch(pod, r));
}

// The claims of the one claim Lease in the fake cluster (none: empty).

}  // namespace

TEST_CASE(
    "M3.3: 64 label-less Pods admitted concurrently for 4 replicas x 16 hosts get every slot "
    "once") {
  FakeApiServer api({});
  FakeClock clock;
  // 64 claims written one after another: on a busy machine past the default 3 s budget, which
  // other cases pin; the subject here is that every slot is given once.
  kube::LiveClusterOptions options = testing::test_options(clock);
  options.claims.budget = std::chrono::seconds(60);
  Live live(api, std::move(options));
  REQUIRE(eventually([&] { return live.cluster->pods_synced(); }));

  json pod = testing::worker_pod("rc", "tpu-group", "8x8");  // v6e 8x8, 4 chips/host: 16 hosts
  std::vector<admission::Response> responses(64);
  {
    std::vector<std::jthread> threads;
    for (std::size_t i = 0; i < responses.size(); ++i) {
      threads.emplace_back([&, i] { responses[i] = live.admit(pod); });
    }
  }
  std::set<Slot> slots;
  std::set<std::string> hostnames;
  for (const admission::Response& r : responses) {
    REQUIRE(r.allowed);
    REQUIRE(r.placement->path == podpatch::PlacementPath::kLegacy);
    slots.insert(r.placement->slot);
    json placed = testing::apply_patch(pod, r);
    hostnames.insert(placed["spec"]["hostname"].get<std::string>());
  }
  CHECK(slots.size() == 64);
  CHECK(hostnames.size() == 64);
  CHECK(slots.begin()->replica == 0);
  CHECK(slots.rbegin()->replica == 3);
  // One claim written per Pod, no conflict inside one process, all in the group's one Lease.
  CHECK(live.claims().claims_written == 64);
  CHECK(live.claims().conflicts == 0);
  CHECK(testing::lease_claims(api).size() == 64);
  std::vector<json> leases = api.objects("leases");
  REQUIRE(leases.size() == 1);
  CHECK(leases[0]["metadata"]["namespace"] == "ray-system");
  CHECK(leases[0]["metadata"]["name"] == kube::claim_object_name({"default", "rc", "tpu-group"}));
  CHECK(leases[0]["metadata"]["annotations"]["kuberay-tpu-webhook/group"] ==
        "default/rc/tpu-group");

  // kube-apiserver creates them; the watch shows every claimed slot taken by its Pod.
  for (const admission::Response& r : responses) {
    api.create("pods", testing::apply_patch(pod, r));
  }
  REQUIRE(eventually([&] { return live.stats().pods == 64; }));
  CHECK(slot_of(live.admit(pod)) == Slot{4, 0});  // every slice is full: a new replica
  CHECK(live.claims().confirmed == 64);
}

TEST_CASE("A deleted Pod's slot is reused; a dry run reserves nothing") {
  FakeApiServer api({});
  FakeClock clock;
  Live live(api, clock);
  REQUIRE(eventually([&] { return live.cluster->pods_synced(); }));
  json pod = testing::worker_pod("rc", "tpu-group", "4x4");  // 4 hosts
  std::vector<json> created;
  for (int i = 0; i < 8; ++i) {
    created.push_back(admit_and_create(live, api, pod));
  }
  REQUIRE(eventually([&] { return live.stats().pods == 8; }));

  // Replica 1 host 2 dies; KubeRay's replacement must take exactly that slot.
  const json& victim = created[6];
  REQUIRE(victim["metadata"]["labels"]["replicaIndex"] == "tpu-group-1");
  REQUIRE(api.remove("pods", "default", victim["metadata"]["name"]));
  REQUIRE(eventually([&] { return live.stats().pods == 7; }));

  std::uint64_t written = live.claims().claims_written;
  int writes = api.writes("leases");
  std::vector<kube::Claim> before = testing::lease_claims(api);
  CHECK(slot_of(live.admit(pod, /*dry_run=*/true)) == Slot{1, 2});
  CHECK(slot_of(live.admit(pod, /*dry_run=*/true)) == Slot{1, 2});
  CHECK(live.claims().claims_written == written);  // a dry run writes nothing
  CHECK(api.writes("leases") == writes);
  CHECK(testing::lease_claims(api) == before);
  CHECK(slot_of(live.admit(pod)) == Slot{1, 2});
  CHECK(slot_of(live.admit(pod)) == Slot{2, 0});
}

TEST_CASE(
    "M3.3: a claim whose Pod never appears expires after the TTL; the janitor deletes the Lease") {
  FakeApiServer api({});
  FakeClock clock;
  Live live(api, clock);  // claims live 10 s
  wait_watching(live);
  json pod = testing::worker_pod("rc", "tpu-group", "4x4");
  CHECK(slot_of(live.admit(pod)) == Slot{0, 0});  // refused later by another webhook: never created
  CHECK(slot_of(live.admit(pod)) == Slot{0, 1});
  clock.advance(std::chrono::seconds(9));
  CHECK(slot_of(live.admit(pod, /*dry_run=*/true)) == Slot{0, 2});  // both still held
  REQUIRE(live.cluster->claims().sweep());
  CHECK(testing::lease_claims(api).size() == 2);  // nothing expired yet: left alone
  clock.advance(std::chrono::seconds(2));
  CHECK(slot_of(live.admit(pod, /*dry_run=*/true)) == Slot{0, 0});
  REQUIRE(live.cluster->claims().sweep());
  CHECK(api.objects("leases").empty());  // it held no live claim
  CHECK(live.claims().objects_deleted == 1);
  CHECK(slot_of(live.admit(pod)) == Slot{0, 0});  // the Lease is created again
  CHECK(testing::lease_claims(api).size() == 1);
}

TEST_CASE("M3.3: the janitor drops expired claims from a Lease that still holds live ones") {
  FakeApiServer api({});
  FakeClock clock;
  Live live(api, clock);  // claims live 10 s
  wait_watching(live);
  json pod = testing::worker_pod("rc", "tpu-group", "4x4");
  CHECK(slot_of(live.admit(pod)) == Slot{0, 0});
  clock.advance(std::chrono::seconds(6));
  CHECK(slot_of(live.admit(pod)) == Slot{0, 1});
  clock.advance(std::chrono::seconds(6));  // the first expired, the second has 4 s left
  REQUIRE(live.cluster->claims().sweep());
  std::vector<kube::Claim> left = testing::lease_claims(api);
  REQUIRE(left.size() == 1);
  CHECK(left[0].slot == Slot{0, 1});
  CHECK(left[0].holder == "webhook-test");
  CHECK(left[0].pod == pod["metadata"]["generateName"]);
  // The cached Lease is stale now: the next claim conflicts once, reads again and succeeds.
  CHECK(slot_of(live.admit(pod)) == Slot{0, 0});
  CHECK(testing::lease_claims(api).size() == 2);
}

TEST_CASE("A restarted webhook rebuilds its view from the list, page by page or whole") {
  FakeApiServer api({});
  FakeClock clock;
  json pod = testing::worker_pod("rc", "tpu-group", "4x4");
  {
    Live first(api, clock);
    REQUIRE(eventually([&] { return first.cluster->pods_synced(); }));
    for (int i = 0; i < 10; ++i) {
      admit_and_create(first, api, pod);
    }
  }
  // Noise the selector must keep out, and another group.
  json other = testing::worker_pod("rc", "other-group", "4x4");
  other["metadata"]["labels"]["replicaIndex"] = "other-group-0";
  other["spec"]["containers"][0]["env"].push_back({{"name", "TPU_WORKER_ID"}, {"value", "0"}});
  api.create("pods", other);
  json head = other;
  head["metadata"]["labels"]["ray.io/node-type"] = "head";
  head["metadata"]["labels"]["replicaIndex"] = "tpu-group-2";
  head["metadata"]["labels"]["ray.io/group"] = "tpu-group";
  head["spec"]["containers"][0]["env"].back()["value"] = "2";
  api.create("pods", head);

  bool whole = GENERATE(false, true);
  CAPTURE(whole);
  api.set_ignore_limit(whole);
  kube::LiveClusterOptions options = testing::test_options(clock);
  options.reflector.page_size = 3;
  int lists_before = api.lists("pods");
  Live second(api, options);
  REQUIRE(eventually([&] { return second.cluster->pods_synced(); }));
  CHECK(second.stats().pods == 11);
  CHECK(api.lists("pods") - lists_before == (whole ? 1 : 4));  // 11 Pods in pages of 3
  CHECK(slot_of(second.admit(pod)) == Slot{2, 2});
  CHECK(slot_of(second.admit(testing::worker_pod("rc", "other-group", "4x4"))) == Slot{0, 1});

  bool saw_selector = false;
  for (const std::string& q : api.queries()) {
    if (q.starts_with("/api/v1/pods?") && q.find("limit=3") != std::string::npos) {
      saw_selector = q.find(
                         "labelSelector=ray.io/node-type=worker,app.kubernetes.io/"
                         "created-by=kuberay-operator") != std::string::npos;
    }
  }
  CHECK(saw_selector);
}

TEST_CASE("A dropped watch resumes from its resourceVersion without a relist") {
  FakeApiServer api({});
  FakeClock clock;
  Live live(api, clock);
  REQUIRE(eventually([&] { return live.counters().watches.load() == 1; }));
  json pod = testing::worker_pod("rc", "tpu-group", "4x4");
  admit_and_create(live, api, pod);
  REQUIRE(eventually([&] { return live.stats().pods == 1; }));

  // Placed while the watch is up (a label-less Pod is not placed for long without it: its
  // backoff moves this clock), created while it is down: the change arrives when it resumes.
  admission::Response second = live.admit(pod);
  INFO("denied: " << second.message);
  REQUIRE(second.allowed);
  api.drop_watches();
  REQUIRE(eventually([&] { return live.counters().watch_restarts.load() >= 1; }));
  api.create("pods", testing::apply_patch(pod, second));
  REQUIRE(eventually([&] { return live.stats().pods == 2; }));
  CHECK(live.counters().lists.load() == 1);
  CHECK(live.counters().relists.load() == 0);
  CHECK(clock.sleeps() >= 1);  // backed off before reconnecting

  // A bookmark moves the resourceVersion the next watch resumes from.
  api.send_bookmarks();
  REQUIRE(eventually([&] { return live.counters().bookmarks.load() >= 1; }));
  std::string rv = std::to_string(api.resource_version());
  api.drop_watches();
  REQUIRE(eventually([&] {
    for (const std::string& q : api.queries()) {
      if (q.starts_with("/api/v1/pods?") && q.find("watch=1") != std::string::npos &&
          q.find("resourceVersion=" + rv) != std::string::npos) {
        return true;
      }
    }
    return false;
  }));
  for (const std::string& q : api.queries()) {
    if (q.find("watch=1") != std::string::npos) {
      CHECK(q.find("allowWatchBookmarks=true") != std::string::npos);
      CHECK(q.find("timeoutSeconds=") != std::string::npos);
    }
  }
}

TEST_CASE("410 Gone relists, as an ERROR event or as an HTTP status") {
  bool as_status = GENERATE(false, true);
  CAPTURE(as_status);
  FakeApiServer::Options o;
  o.gone_as_status = as_status;
  FakeApiServer api(o);
  FakeClock clock;
  Live live(api, clock);
  REQUIRE(eventually([&] { return live.counters().watches.load() == 1; }));
  json pod = testing::worker_pod("rc", "tpu-group", "4x4");
  json a = admit_and_create(live, api, pod);
  json b = admit_and_create(live, api, pod);
  REQUIRE(eventually([&] { return live.stats().pods == 2; }));

  // A Pod is deleted and history compacted past it, then the watch is cut: only a relist can
  // tell. (The deletion leaves no event and the compaction comes before the cut, so however soon
  // the watch is back, it resumes from a resourceVersion that is gone; cut first, a watch back
  // before the compaction was sent the deletion and never relisted.)
  api.set_record_events(false);
  api.remove("pods", "default", a["metadata"]["name"]);
  api.compact();
  api.set_record_events(true);
  api.drop_watches();
  REQUIRE(eventually([&] { return live.counters().relists.load() >= 1; }));
  REQUIRE(eventually([&] { return live.stats().pods == 1; }));
  CHECK(live.counters().gone.load() >= 1);
  // The watch is back. (Until then a label-less Pod may be denied as retryable: the fake clock
  // moves with every backoff the reflector sleeps, past --reservation-ttl / 2.)
  REQUIRE(eventually(
      [&] { return live.cluster->registry().disconnected_for() == kube::Duration::zero(); }));
  CHECK(slot_of(live.admit(pod)) == Slot{0, 0});
  // And the relisted webhook keeps watching.
  api.create("pods", testing::apply_patch(pod, live.admit(pod)));
  REQUIRE(eventually([&] { return live.stats().pods == 2; }));
}

TEST_CASE("Labelled Pods are admitted whatever the API state; label-less ones wait for the list") {
  FakeClock clock;
  kube::LiveClusterOptions options = testing::test_options(clock);
  // Nothing listens on this port: the API is unreachable from the start.
  int dead_port = 0;
  {
    FakeApiServer probe({});
    dead_port = probe.port();
  }
  auto cluster = kube::LiveCluster::create(testing::loopback_config(dead_port), options).value();
  cluster->start();
  admission::Handler handler({}, cluster->pods(), cluster->nodes(), cluster->services());
  REQUIRE(
      eventually([&] { return cluster->reflector("pods")->counters().api_errors.load() >= 2; }));
  CHECK_FALSE(cluster->pods_synced());

  admission::Response labelled =
      handler.mutate(testing::create_request(testing::labelled_worker_pod(1, 3, "rc", "g", "4x4")));
  REQUIRE(labelled.allowed);
  CHECK(labelled.placement->slot == Slot{1, 3});

  admission::Response legacy =
      handler.mutate(testing::create_request(testing::worker_pod("rc", "g", "4x4")));
  CHECK_FALSE(legacy.allowed);
  CHECK(legacy.code == 503);
  CHECK_THAT(legacy.message, Catch::Contains("starting") && Catch::Contains("KubeRay retries"));
  CHECK(clock.sleeps() >= 1);  // retried with backoff, not in a tight loop
  cluster->stop();
}

TEST_CASE(
    "After the API goes away, label-less Pods are denied as retryable, labelled ones admitted") {
  FakeClock clock;
  auto api = std::make_unique<FakeApiServer>(FakeApiServer::Options{});
  auto cluster =
      kube::LiveCluster::create(testing::loopback_config(api->port()), testing::test_options(clock))
          .value();
  cluster->start();
  admission::Handler handler({}, cluster->pods(), cluster->nodes(), cluster->services());
  REQUIRE(eventually([&] { return cluster->pods_synced(); }));
  json pod = testing::worker_pod("rc", "g", "4x4");
  api->create("pods", testing::apply_patch(pod, handler.mutate(testing::create_request(pod))));
  REQUIRE(eventually([&] { return cluster->registry().stats().pods == 1; }));

  api.reset();  // the API server is gone
  REQUIRE(
      eventually([&] { return cluster->reflector("pods")->counters().api_errors.load() >= 1; }));
  // The claim cannot be written (and, once the watch has been down long enough, the replica no
  // longer trusts its view): the answer says so and that a retry may succeed.
  for (int i = 0; i < 2; ++i) {
    admission::Response r = handler.mutate(testing::create_request(pod));
    CHECK_FALSE(r.allowed);
    CHECK(r.code == 503);
    CHECK_THAT(r.message, Catch::Contains("KubeRay retries"));
    clock.advance(std::chrono::minutes(10));
  }
  CHECK(cluster->claims().stats().denied >= 1);
  CHECK(
      handler.mutate(testing::create_request(testing::labelled_worker_pod(0, 0, "rc", "g", "4x4")))
          .allowed);
  cluster->stop();
}

TEST_CASE("An oversized object is refused with a clear error, then the list is retried") {
  FakeApiServer api({});
  FakeClock clock;
  kube::LiveClusterOptions options = testing::test_options(clock);
  options.reflector.max_object_bytes = 64 << 10;
  json big = testing::worker_pod("rc", "g", "4x4");
  big["metadata"]["name"] = "huge";
  big["metadata"]["annotations"]["blob"] = std::string(100 << 10, 'x');
  api.create("pods", big);
  std::vector<std::string> lines;
  std::mutex mu;
  options.log = [&](kube::LogLevel, const std::string& line) {
    std::lock_guard lock(mu);
    lines.push_back(line);
  };
  Live live(api, options);
  REQUIRE(eventually([&] { return live.counters().oversized.load() >= 2; }));
  CHECK_FALSE(live.cluster->pods_synced());
  {
    std::lock_guard lock(mu);
    bool named = false;
    for (const std::string& l : lines) {
      named = named || (l.find("65536-byte bound") != std::string::npos &&
                        l.find("item 0") != std::string::npos);
    }
    CHECK(named);
  }
  REQUIRE(api.remove("pods", "default", "huge"));
  REQUIRE(eventually([&] { return live.cluster->pods_synced(); }));
  REQUIRE(eventually([&] { return live.counters().watches.load() >= 1; }));

  // In a watch event: the stream is abandoned and the list redone.
  std::uint64_t lists = live.counters().lists.load();
  api.create("pods", big);
  REQUIRE(eventually([&] { return live.counters().oversized.load() >= 3; }));
  REQUIRE(api.remove("pods", "default", "huge"));
  REQUIRE(eventually([&] { return live.counters().lists.load() > lists; }));
}

TEST_CASE("Failed requests back off and are retried") {
  FakeApiServer api({});
  api.fail_next("pods", 500, 3);
  FakeClock clock;
  Live live(api, clock);
  REQUIRE(eventually([&] { return live.cluster->pods_synced(); }));
  CHECK(live.counters().api_errors.load() == 3);
  CHECK(clock.sleeps() >= 3);
  // Exponential: 0.8s, 1.6s, 3.2s before jitter (which adds up to 100%).
  CHECK(clock.slept() >= std::chrono::milliseconds(800 + 1600 + 3200));
  CHECK(clock.slept() <
        std::chrono::milliseconds(2 * (800 + 1600 + 3200)) + std::chrono::seconds(1));
}

TEST_CASE("Token rotation: the rotated token file is re-read and sent") {
  testing::TempDir dir;
  std::string token_file = dir.write("token", "token-1\n");
  FakeApiServer::Options o;
  o.tokens = {"token-1"};
  FakeApiServer api(o);
  FakeClock clock;
  kube::ClusterConfig config = testing::loopback_config(api.port());
  config.token_file = token_file;
  auto cluster = kube::LiveCluster::create(config, testing::test_options(clock)).value();
  cluster->start();
  REQUIRE(eventually([&] { return cluster->pods_synced(); }));

  // The kubelet rotates the projected token; the API server stops accepting the old one.
  std::filesystem::rename(dir.write("token.next", "token-2\n"), token_file);
  api.set_tokens({"token-2"});
  std::uint64_t watches = cluster->reflector("pods")->counters().watches.load();
  api.drop_watches();
  REQUIRE(eventually([&] { return api.tokens_seen().contains("token-2"); }));
  REQUIRE(
      eventually([&] { return cluster->reflector("pods")->counters().watches.load() > watches; }));
  json pod = testing::worker_pod("rc", "g", "4x4");
  pod["metadata"]["labels"]["replicaIndex"] = "g-0";
  pod["spec"]["containers"][0]["env"].push_back({{"name", "TPU_WORKER_ID"}, {"value", "0"}});
  api.create("pods", pod);
  REQUIRE(eventually([&] { return cluster->registry().stats().pods == 1; }));
  cluster->stop();
}

TEST_CASE("Live Nodes decide subslices and the live headless Service names the subdomain") {
  FakeApiServer api({});
  FakeClock clock;
  Live live(api, clock);
  REQUIRE(eventually([&] { return live.cluster->pods_synced(); }));
  CHECK(eventually([&] { return live.cluster->reflector("nodes")->synced(); }));
  CHECK(live.cluster->nodes().nodes_matching({}) == std::vector<podpatch::Labels>{});

  for (int i = 0; i < 8; ++i) {
    api.create("nodes", {{"metadata",
                          {{"name", std::string("node-").append(std::to_string(i))},
                           {"labels",
                            {{"cloud.google.com/gke-tpu-accelerator", "tpu-v6e-slice"},
                             {"cloud.google.com/gke-tpu-topology", "8x8"},
                             {"cloud.google.com/gce-topology-block", "b1"},
                             {"cloud.google.com/gce-topology-subblock", i < 4 ? "s1" : "s2"},
                             {"cloud.google.com/gce-topology-host",
                              std::string("h").append(std::to_string(i))}}}}}});
  }
  api.create("nodes", {{"metadata", {{"name", "cpu-node"}, {"labels", {{"pool", "cpu"}}}}}});
  api.create("services", {{"metadata",
                           {{"name", "rc-custom-headless"},
                            {"namespace", "default"},
                            {"labels", {{"ray.io/headless-worker-svc", "rc"}}}}}});
  REQUIRE(eventually([&] {
    auto n = live.cluster->nodes().nodes_matching({});
    return n && n->size() == 8 && live.cluster->services().headless_service("default", "rc");
  }));
  CHECK(*live.cluster->services().headless_service("default", "rc") == "rc-custom-headless");
  CHECK_FALSE(live.cluster->services().headless_service("other", "rc").has_value());

  // A 4x4 subslice of the 8x8 nodes: 4 hosts, the subblock holds exactly 4.
  json pod = testing::worker_pod("rc", "tpu-group", "8x8");
  pod["metadata"]["annotations"]["cloud.google.com/gke-tpu-slice-topology"] = "4x4";
  admission::Response r = live.admit(pod);
  REQUIRE(r.allowed);
  json placed = testing::apply_patch(pod, r);
  CHECK(placed["spec"]["subdomain"] == "rc-custom-headless");
  CHECK(placed["spec"]["affinity"].dump().find("cloud.google.com/gce-topology-subblock") !=
        std::string::npos);

  // Deleting the Service: the computed name comes back.
  REQUIRE(api.remove("services", "default", "rc-custom-headless"));
  REQUIRE(eventually([&] { return !live.cluster->services().headless_service("default", "rc"); }));
  json again = testing::apply_patch(pod, live.admit(pod));
  CHECK(again["spec"]["subdomain"] == "rc-headless");
}

TEST_CASE("metrics_text names every family") {
  FakeApiServer api({});
  FakeClock clock;
  Live live(api, clock);
  REQUIRE(eventually([&] { return live.cluster->pods_synced(); }));
  std::string text = live.cluster->metrics_text();
  for (const char* name :
       {"kuberay_tpu_webhook_kube_synced{resource=\"pods\"} 1",
        "kuberay_tpu_webhook_kube_lists_total", "kuberay_tpu_webhook_kube_relists_total",
        "kuberay_tpu_webhook_kube_watch_restarts_total",
        "kuberay_tpu_webhook_kube_api_errors_total",
        "kuberay_tpu_webhook_kube_oversized_objects_total", "kuberay_tpu_webhook_legacy_pods 0",
        "kuberay_tpu_webhook_legacy_claims_written_total 0",
        "kuberay_tpu_webhook_legacy_claim_conflicts_total 0",
        "kuberay_tpu_webhook_legacy_claim_denied_total 0",
        "kuberay_tpu_webhook_legacy_claim_objects_deleted_total 0"}) {
    CHECK_THAT(text, Catch::Contains(name));
  }
  live.cluster->stop();
  live.cluster->stop();  // idempotent
}

TEST_CASE("A server answering every watch with 410 is relisted with backoff, not in a tight loop") {
  FakeApiServer::Options o;
  o.gone_as_status = true;
  FakeApiServer api(o);
  FakeClock clock;
  Live live(api, clock);
  REQUIRE(eventually([&] { return live.counters().watches.load() == 1; }));
  api.fail_next_watch("pods", 410, 6);  // every watch answers 410 for a while
  api.drop_watches();
  REQUIRE(eventually([&] { return live.counters().gone.load() >= 6; }));
  REQUIRE(eventually([&] { return live.counters().watches.load() >= 2; }));
  CHECK(live.counters().relists.load() >= 6);
  CHECK(clock.sleeps() >= 5);  // one per relist after the first in a row
  CHECK(live.cluster->pods_synced());
}

TEST_CASE("Without legacy placement, Nodes and Services are still watched, Pods are not") {
  FakeApiServer api({});
  FakeClock clock;
  kube::LiveClusterOptions options = testing::test_options(clock);
  options.watch_pods = false;
  auto live = kube::LiveCluster::create(testing::loopback_config(api.port()), options).value();
  live->start();
  CHECK(live->reflector("pods") == nullptr);
  api.create("services", {{"metadata",
                           {{"name", "svc"},
                            {"namespace", "ns"},
                            {"labels", {{"ray.io/headless-worker-svc", "rc"}}}}}});
  REQUIRE(eventually([&] { return live->services().headless_service("ns", "rc").has_value(); }));
  REQUIRE(eventually([&] { return live->nodes().nodes_matching({}).has_value(); }));
  CHECK_FALSE(live->pods_synced());
  CHECK(api.lists("pods") == 0);
  CHECK_THAT(live->metrics_text(), !Catch::Contains("resource=\"pods\""));
  live->stop();
}
