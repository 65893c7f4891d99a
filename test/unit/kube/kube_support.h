#pragma once
// Shared by the lib/kube tests: a clock whose sleeps return at once, bounded waits, TPU worker
// Pods as KubeRay creates them, admission through the Handler, temporary files and a test CA.

#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "admission/handler.h"
#include "kube/claims.h"
#include "kube/clock.h"
#include "kube/config.h"
#include "kube/live_cluster.h"

namespace testing {

using json = nlohmann::json;

// Real time plus an offset; sleeps return at once (kube/clock.h).
using FakeClock = kube::FakeClock;

// Polls `pred` every 5 ms for at most `limit` (a bound against hangs, not a timing assertion).
bool eventually(const std::function<bool()>& pred,
                std::chrono::milliseconds limit = std::chrono::seconds(20));

// A label-less TPU worker Pod of KubeRay < 1.5 (test/fixtures/pods/...-no-indexing.json) in
// `cluster`/`group`, with the topology set (v6e, 4 chips per host: "8x8" gives 16 hosts).
json worker_pod(const std::string& cluster = "raycluster-tpu",
                const std::string& group = "tpu-group", const std::string& topology = "8x8",
                const std::string& ns = "default");
// The same Pod with KubeRay's index labels (replica `r`, host `h`).
json labelled_worker_pod(int r, int h, const std::string& cluster = "raycluster-tpu",
                         const std::string& group = "tpu-group",
                         const std::string& topology = "8x8");

admission::Request create_request(const json& pod, bool dry_run = false);
// The Pod after the response's patch (the response must allow it).
json apply_patch(const json& pod, const admission::Response& response);

class FakeApiServer;
// The claims held by the one claim Lease in `api` (none: empty); fails the test when there are
// several Leases or the claims do not decode.
std::vector<kube::Claim> lease_claims(const FakeApiServer& api);

// A fresh directory under the system's temp dir, removed by the destructor.
struct TempDir {
  TempDir();
  ~TempDir();
  std::filesystem::path path;
  std::string write(const std::string& name, const std::string& text) const;
};

// A CA and a server certificate for 127.0.0.1 signed by it, made with the openssl command.
struct TestPki {
  explicit TestPki(const TempDir& dir);
  std::string ca_pem, ca_file;
  std::string server_cert_file, server_key_file;
  std::string wrong_name_cert_file, wrong_name_key_file;  // signed by the CA for another name
  std::string client_cert_pem, client_key_pem;
  std::string other_ca_pem;  // a CA that signed nothing here
};

// A ClusterConfig for the fake API server on 127.0.0.1:`port` over plain HTTP.
kube::ClusterConfig loopback_config(int port);

// LiveCluster options for tests: the given clock, short watch timeouts, logs to a buffer.
kube::LiveClusterOptions test_options(kube::Clock& clock);

}  // namespace testing
