// kube::ApiClient's request timeout against the fake API server on 127.0.0.1: it bounds the
// whole call, the retry on a new connection included, and a call with none left sends nothing.
#include "kube/api_client.h"

#include <catch2/catch.hpp>
#include <chrono>

#include "fake_apiserver.h"
#include "kube_support.h"

using namespace std::chrono_literals;
using testing::FakeApiServer;

namespace {

const std::string kLeases = "/apis/coordination.k8s.io/v1/namespaces/ray-system/leases";

// A client whose first request left its connection open for the next one.
struct KeptAlive {
  FakeApiServer api{{}};
  std::unique_ptr<kube::ApiClient> client =
      kube::ApiClient::create(testing::loopback_config(api.port())).value();

  KeptAlive() {
    auto first = client->send("GET", kLeases, "", "", 10s);
    REQUIRE(first.has_value());
    REQUIRE(first->status == 200);
  }

  struct Timed {
    webhook::Result<kube::ApiClient::Reply> reply;
    std::chrono::steady_clock::duration took;
  };
  // Creates a Lease within `timeout`.
  Timed create(kube::Duration timeout) {
    auto start = std::chrono::steady_clock::now();
    webhook::Result<kube::ApiClient::Reply> reply =
        client->send("POST", kLeases,
                     R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease",)"
                     R"("metadata":{"name":"a","namespace":"ray-system"}})",
                     "application/json", timeout);
    return {std::move(reply), std::chrono::steady_clock::now() - start};
  }
};

}  // namespace

TEST_CASE("M3.3: ApiClient: a timed-out request on a kept-alive connection is not sent again") {
  KeptAlive k;
  k.api.set_write_delay(3000ms);  // longer than the timeout
  auto [late, took] = k.create(1000ms);
  k.api.set_write_delay(0ms);
  REQUIRE_FALSE(late.has_value());
  CHECK(late.error().message.find("timed out") != std::string::npos);
  CHECK(took >= 1000ms);
  // Sent again over a new connection with a fresh timeout, it would take 2 s.
  CHECK(took < 1900ms);
  CHECK(k.api.write_attempts("leases") == 1);
}

TEST_CASE("M3.3: ApiClient: a call with no time left is not sent and does not wait") {
  KeptAlive k;
  k.api.set_write_delay(3000ms);
  for (auto timeout : {0ms, -5ms}) {
    auto [late, took] = k.create(timeout);
    REQUIRE_FALSE(late.has_value());
    CHECK(late.error().code == webhook::ErrorCode::kUnavailable);
    CHECK(late.error().message.find("no time was left") != std::string::npos);
    // Sent with a negative timeout, httplib would wait for the answer: 3 s.
    CHECK(took < 1000ms);
  }
  k.api.set_write_delay(0ms);
  CHECK(k.api.write_attempts("leases") == 0);
  // The kept-alive connection still serves the next call.
  auto next = k.client->send("GET", kLeases, "", "", 10s);
  REQUIRE(next.has_value());
  CHECK(next->status == 200);
}
