// kube::CertManager against the fake kube-apiserver: several managers stand for several webhook
// replicas, each with its own API client, agreeing through the Secret's resourceVersion.
#include "kube/cert_manager.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "base/encoding/base64.h"
#include "fake_apiserver.h"
#include "kube_support.h"

using nlohmann::json;
using testing::FakeApiServer;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t kT0 = 1'800'000'000;

json webhook_config(const std::string& kind, const std::string& name) {
  json hook = {{"name", "a.tpu.example.com"},
               {"clientConfig",
                {{"service", {{"name", "kuberay-tpu-webhook"}, {"namespace", "ray-system"}}}}},
               {"sideEffects", "None"},
               {"admissionReviewVersions", {"v1"}}};
  json second = hook;
  second["name"] = "b.tpu.example.com";
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", kind},
          {"metadata", {{"name", name}}},
          {"webhooks", {hook, second}}};
}

void seed_configs(FakeApiServer& api) {
  api.create("mutatingwebhookconfigurations",
             webhook_config("MutatingWebhookConfiguration", "kuberay-tpu-mutating-webhook-cfg"));
  api.create(
      "validatingwebhookconfigurations",
      webhook_config("ValidatingWebhookConfiguration", "kuberay-tpu-validating-webhook-cfg"));
}

// Every webhook's caBundle of one configuration, decoded.
std::vector<std::string> bundles(FakeApiServer& api, const std::string& resource,
                                 const std::string& name) {
  std::vector<std::string> out;
  const json config = api.get(resource, "", name).value();
  for (const json& hook : config["webhooks"]) {
    out.push_back(webhook::base64_decode(hook["clientConfig"].value("caBundle", std::string()))
                      .value_or("?"));
  }
  return out;
}

struct Replica {
  Replica(FakeApiServer& api, std::atomic<std::int64_t>& clock)
      : client(kube::ApiClient::create(testing::loopback_config(api.port())).value()) {
    kube::CertManagerOptions o;
    o.ns = "ray-system";
    o.policy.validity = 1000s;
    o.policy.ca_validity = 3000s;
    o.policy.renew_before = 100s;
    o.now = [&clock] { return clock.load(); };
    manager = std::make_unique<kube::CertManager>(*client, o);
  }
  std::unique_ptr<kube::ApiClient> client;
  std::unique_ptr<kube::CertManager> manager;
};

std::string secret_data(FakeApiServer& api, const char* key) {
  json s = api.get("secrets", "ray-system", "kuberay-tpu-webhook-certs").value();
  return webhook::base64_decode(s["data"].value(key, std::string())).value_or("?");
}

}  // namespace

TEST_CASE("CertManager: the first replica creates the Secret, the second uses it") {
  FakeApiServer api({});
  seed_configs(api);
  std::atomic<std::int64_t> clock{kT0};
  Replica a(api, clock);
  Replica b(api, clock);

  kube::ServingPair pa = a.manager->sync().value();
  kube::ServingPair pb = b.manager->sync().value();
  CHECK(pa.cert_pem == pb.cert_pem);
  CHECK(pa.resource_version == pb.resource_version);
  CHECK(pa.bundles_current);
  CHECK(pb.bundles_current);
  CHECK(api.creates("secrets") == 1);
  CHECK(api.updates("secrets") == 0);

  json secret = api.get("secrets", "ray-system", "kuberay-tpu-webhook-certs").value();
  CHECK(secret["type"] == "kubernetes.io/tls");
  CHECK(secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kuberay-tpu-webhook");
  CHECK(secret_data(api, "tls.crt") == pa.cert_pem);
  CHECK(secret_data(api, "ca-bundle.crt") == pa.ca_bundle);

  // Both webhooks of both configurations trust the bundle; one write each, none from b.
  std::vector<std::string> want{pa.ca_bundle, pa.ca_bundle};
  CHECK(bundles(api, "mutatingwebhookconfigurations", "kuberay-tpu-mutating-webhook-cfg") == want);
  CHECK(bundles(api, "validatingwebhookconfigurations", "kuberay-tpu-validating-webhook-cfg") ==
        want);
  CHECK(api.updates("mutatingwebhookconfigurations") == 1);
  CHECK(api.updates("validatingwebhookconfigurations") == 1);
}

TEST_CASE("CertManager: two replicas creating at once agree on one Secret (409 AlreadyExists)") {
  FakeApiServer api({});
  seed_configs(api);
  api.set_write_delay(300ms);  // both read "missing" before either create lands
  std::atomic<std::int64_t> clock{kT0};
  Replica a(api, clock);
  Replica b(api, clock);
  webhook::Result<kube::ServingPair> pa = webhook::failed_precondition("unset");
  webhook::Result<kube::ServingPair> pb = webhook::failed_precondition("unset");
  std::thread ta([&] { pa = a.manager->sync(); });
  std::thread tb([&] { pb = b.manager->sync(); });
  ta.join();
  tb.join();
  REQUIRE(pa);
  REQUIRE(pb);
  CHECK(pa->cert_pem == pb->cert_pem);
  CHECK(pa->resource_version == pb->resource_version);
  CHECK(api.creates("secrets") == 1);
  CHECK(api.write_stats("secrets").already_exists == 1);
}

TEST_CASE(
    "CertManager: renewal replaces the Secret once, and a replica that loses re-reads theirs") {
  FakeApiServer api({});
  seed_configs(api);
  std::atomic<std::int64_t> clock{kT0};
  Replica a(api, clock);
  Replica b(api, clock);
  kube::ServingPair first = a.manager->sync().value();

  SECTION("near expiry, one new leaf under the same CA") {
    clock = kT0 + 950;
    kube::ServingPair pa = a.manager->sync().value();
    kube::ServingPair pb = b.manager->sync().value();
    CHECK(pa.cert_pem != first.cert_pem);
    CHECK(pb.cert_pem == pa.cert_pem);
    CHECK(pa.ca_bundle == first.ca_bundle);
    CHECK(api.updates("secrets") == 1);
  }
  SECTION("a stale resourceVersion: 409 Conflict, then theirs is used") {
    clock = kT0 + 950;
    api.fail_next_writes("secrets", 409, 1);  // another writer won the race
    kube::ServingPair pa = a.manager->sync().value();
    CHECK(api.conflicts("secrets") == 1);
    CHECK(pa.cert_pem != first.cert_pem);
    CHECK(secret_data(api, "tls.crt") == pa.cert_pem);
  }
  SECTION("a new CA: the configurations trust the new and the old CA") {
    clock = kT0 + 1950;
    kube::ServingPair pa = a.manager->sync().value();
    CHECK(pa.ca_bundle != first.ca_bundle);
    CHECK(kube::bundle_contains(pa.ca_bundle, first.ca_bundle));
    for (const std::string& b64 :
         bundles(api, "mutatingwebhookconfigurations", "kuberay-tpu-mutating-webhook-cfg")) {
      CHECK(kube::bundle_contains(b64, pa.ca_bundle));
      CHECK(kube::bundle_contains(b64, first.ca_bundle));
    }
    // A replica still holding the old Secret never takes the new CA away.
    CHECK(b.manager->sync().value().ca_bundle == pa.ca_bundle);
    CHECK(kube::bundle_contains(
        bundles(api, "validatingwebhookconfigurations", "kuberay-tpu-validating-webhook-cfg")[0],
        pa.ca_bundle));
  }
}

TEST_CASE("CertManager: a broken Secret is replaced, keeping its type") {
  FakeApiServer api({});
  seed_configs(api);
  api.create("secrets",
             {{"metadata", {{"name", "kuberay-tpu-webhook-certs"}, {"namespace", "ray-system"}}},
              {"type", "Opaque"},
              {"data", {{"tls.crt", webhook::base64_encode("not a certificate")}}}});
  std::atomic<std::int64_t> clock{kT0};
  Replica a(api, clock);
  kube::ServingPair p = a.manager->sync().value();
  CHECK(p.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
  CHECK(api.updates("secrets") == 1);
  json secret = api.get("secrets", "ray-system", "kuberay-tpu-webhook-certs").value();
  CHECK(secret["type"] == "Opaque");
  CHECK(secret_data(api, "tls.key") == p.key_pem);
}

TEST_CASE("CertManager: configurations that are missing or refused") {
  FakeApiServer api({});
  std::atomic<std::int64_t> clock{kT0};
  Replica a(api, clock);

  SECTION("missing ones are skipped: nothing to trust") {
    kube::ServingPair p = a.manager->sync().value();
    CHECK(p.bundles_current);
  }
  SECTION("RBAC refusing the update leaves bundles_current false") {
    seed_configs(api);
    api.forbid_writes("validatingwebhookconfigurations");
    kube::ServingPair p = a.manager->sync().value();
    CHECK_FALSE(p.bundles_current);
    CHECK(bundles(api, "mutatingwebhookconfigurations", "kuberay-tpu-mutating-webhook-cfg")[0] ==
          p.ca_bundle);
  }
  SECTION("RBAC refusing the Secret: Unavailable naming it") {
    api.forbid_writes("secrets");
    webhook::Result<kube::ServingPair> p = a.manager->sync();
    REQUIRE_FALSE(p);
    CHECK(p.error().message.starts_with(
        "POST Secret ray-system/kuberay-tpu-webhook-certs: HTTP 403"));
  }
}

TEST_CASE("cert_check_interval: an eighth of the renewal window, from 200ms to 60s") {
  CHECK(kube::cert_check_interval(8s) == 1s);
  CHECK(kube::cert_check_interval(1s) == 200ms);
  CHECK(kube::cert_check_interval(720h) == 60s);
}
