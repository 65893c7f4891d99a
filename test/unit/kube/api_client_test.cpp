// kube::ApiClient's request timeout against the fake API server on 127.0.0.1: it bounds the
// whole call, the retry on a new connection included, and a call with none left sends nothing.
#include "kube/api_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

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

// An HTTP server on 127.0.0.1 that answers the first request of each connection (200, kept
// alive), then reads the next one and closes without answering: a connection lost after the
// request went out, as when the API server restarts mid-request.
class LosesTheSecondRequest {
 public:
  LosesTheSecondRequest() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof at;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&at), len) == 0);
    REQUIRE(::listen(fd_, 8) == 0);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&at), &len) == 0);
    port_ = ntohs(at.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~LosesTheSecondRequest() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  LosesTheSecondRequest(const LosesTheSecondRequest&) = delete;
  LosesTheSecondRequest& operator=(const LosesTheSecondRequest&) = delete;

  int port() const { return port_; }
  // The requests received whole with this method.
  int received(const std::string& method) {
    std::lock_guard<std::mutex> lock(mu_);
    return received_[method];
  }

 private:
  void serve() {
    for (int c; (c = ::accept(fd_, nullptr, nullptr)) >= 0; ::close(c)) {
      timeval five{.tv_sec = 5, .tv_usec = 0};
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &five, sizeof five);
      std::string in;
      for (int n = 0; read_request(c, in); ++n) {
        if (n > 0) {
          break;  // read whole, never answered
        }
        std::string ok =
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
        ::send(c, ok.data(), ok.size(), MSG_NOSIGNAL);
      }
    }
  }
  // Reads one request (its head and a Content-Length body) from `c`, counting it.
  bool read_request(int c, std::string& in) {
    std::size_t head_end = std::string::npos;
    std::size_t body = 0;
    while (head_end == std::string::npos || in.size() < head_end + 4 + body) {
      char buf[4096];
      ssize_t got = ::recv(c, buf, sizeof buf, 0);
      if (got <= 0) {
        return false;
      }
      in.append(buf, static_cast<std::size_t>(got));
      if (head_end == std::string::npos && (head_end = in.find("\r\n\r\n")) != std::string::npos) {
        std::string head = in.substr(0, head_end);
        std::transform(head.begin(), head.end(), head.begin(),
                       [](unsigned char ch) { return std::tolower(ch); });
        std::size_t at = head.find("content-length:");
        body = at == std::string::npos ? 0 : std::stoul(head.substr(at + 15));
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++received_[in.substr(0, in.find(' '))];
    }
    in.erase(0, head_end + 4 + body);
    return true;
  }

  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, int> received_;
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

TEST_CASE("M3.3: ApiClient: a write whose kept-alive connection is lost is not sent again") {
  // The server may have acted on it: a Lease created twice, a claim written twice.
  LosesTheSecondRequest server;
  auto client = kube::ApiClient::create(testing::loopback_config(server.port())).value();
  REQUIRE(client->send("GET", kLeases, "", "", 10s).has_value());
  auto lost = client->send("POST", kLeases, R"({"kind":"Lease"})", "application/json", 10s);
  REQUIRE_FALSE(lost.has_value());
  CHECK(lost.error().code == webhook::ErrorCode::kUnavailable);
  CHECK(server.received("POST") == 1);
}

TEST_CASE("M3.3: ApiClient: a read whose kept-alive connection is lost goes once more") {
  LosesTheSecondRequest server;
  auto client = kube::ApiClient::create(testing::loopback_config(server.port())).value();
  REQUIRE(client->send("GET", kLeases, "", "", 10s).has_value());
  auto again = client->send("GET", kLeases, "", "", 10s);  // lost, then sent on a new connection
  REQUIRE(again.has_value());
  CHECK(again->status == 200);
  CHECK(server.received("GET") == 3);
}
