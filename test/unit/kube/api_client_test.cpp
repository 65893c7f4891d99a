// kube::ApiClient's request timeout against the fake API server on 127.0.0.1: it bounds the
// whole call, the retry on a new connection included.
#include "kube/api_client.h"

#include <catch2/catch.hpp>
#include <chrono>

#include "fake_apiserver.h"
#include "kube_support.h"

using namespace std::chrono_literals;
using testing::FakeApiServer;

TEST_CASE("ApiClient: a timed-out request on a kept-alive connection is not sent again") {
  FakeApiServer api({});
  auto client = kube::ApiClient::create(testing::loopback_config(api.port())).value();
  const std::string leases = "/apis/coordination.k8s.io/v1/namespaces/ray-system/leases";
  // The first request leaves its connection open for the next one.
  auto first = client->send("GET", leases, "", "", 10s);
  REQUIRE(first.has_value());
  CHECK(first->status == 200);

  api.set_write_delay(3000ms);  // longer than the timeout
  auto start = std::chrono::steady_clock::now();
  auto late = client->send("POST", leases,
                           R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease",)"
                           R"("metadata":{"name":"a","namespace":"ray-system"}})",
                           "application/json", 1000ms);
  auto took = std::chrono::steady_clock::now() - start;
  api.set_write_delay(0ms);
  REQUIRE_FALSE(late.has_value());
  CHECK(late.error().message.find("timed out") != std::string::npos);
  CHECK(took >= 1000ms);
  // Sent again over a new connection with a fresh timeout, it would take 2 s.
  CHECK(took < 1900ms);
  CHECK(api.write_attempts("leases") == 1);
}

TEST_CASE("ApiClient: a call with no time left is not sent and does not wait") {
  FakeApiServer api({});
  auto client = kube::ApiClient::create(testing::loopback_config(api.port())).value();
  const std::string leases = "/apis/coordination.k8s.io/v1/namespaces/ray-system/leases";
  REQUIRE(client->send("GET", leases, "", "", 10s).has_value());  // a connection kept alive
  api.set_write_delay(3000ms);
  for (auto timeout : {0ms, -5ms}) {
    auto start = std::chrono::steady_clock::now();
    auto late = client->send("POST", leases,
                             R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease",)"
                             R"("metadata":{"name":"a","namespace":"ray-system"}})",
                             "application/json", timeout);
    auto took = std::chrono::steady_clock::now() - start;
    REQUIRE_FALSE(late.has_value());
    CHECK(late.error().code == webhook::ErrorCode::kUnavailable);
    CHECK(late.error().message.find("no time was left") != std::string::npos);
    // Sent with a negative timeout, httplib would wait for the answer: 3 s.
    CHECK(took < 1000ms);
  }
  api.set_write_delay(0ms);
  CHECK(api.write_attempts("leases") == 0);
  // The kept-alive connection still serves the next call.
  auto next = client->send("GET", leases, "", "", 10s);
  REQUIRE(next.has_value());
  CHECK(next->status == 200);
}
