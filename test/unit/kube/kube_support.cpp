#include "kube_support.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "fake_apiserver.h"

namespace testing {

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error("cannot read " + path);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const json& fixture_pod() {
  static const json pod = json::parse(
      slurp(std::string(FIXTURE_DIR) + "/pods/v6e-16-multihost-worker-no-indexing.json"));
  return pod;
}

}  // namespace

json worker_pod(const std::string& cluster, const std::string& group, const std::string& topology,
                const std::string& ns) {
  json pod = fixture_pod();
  json& labels = pod["metadata"]["labels"];
  labels["ray.io/cluster"] = cluster;
  labels["ray.io/group"] = group;
  pod["metadata"]["namespace"] = ns;
  pod["metadata"]["generateName"] = cluster + "-" + group + "-worker-";
  pod["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-topology"] = topology;
  return pod;
}

json labelled_worker_pod(int r, int h, const std::string& cluster, const std::string& group,
                         const std::string& topology) {
  json pod = worker_pod(cluster, group, topology);
  json& labels = pod["metadata"]["labels"];
  labels["ray.io/worker-group-replica-index"] = std::to_string(r);
  labels["ray.io/replica-host-index"] = std::to_string(h);
  labels["ray.io/worker-group-replica-name"] = group + "-abcde";
  return pod;
}

admission::Request create_request(const json& pod, bool dry_run) {
  static std::atomic<int> n{0};
  admission::Request r;
  r.uid = "uid-" + std::to_string(++n);
  r.kind = "Pod";
  r.version = "v1";
  r.operation = "CREATE";
  r.dry_run = dry_run;
  r.ns = pod["metadata"].value("namespace", "default");
  r.object = pod;
  return r;
}

json apply_patch(const json& pod, const admission::Response& response) {
  if (!response.allowed) {
    throw std::runtime_error("denied: " + response.message);
  }
  if (!admission::has_patch(response)) {
    return pod;
  }
  return pod.patch(admission::patch_ops(response));
}

TempDir::TempDir() {
  std::random_device rd;
  path = std::filesystem::temp_directory_path() /
         ("kube-test-" + std::to_string(rd()) + std::to_string(rd()));
  std::filesystem::create_directories(path);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

std::string TempDir::write(const std::string& name, const std::string& text) const {
  std::filesystem::path p = path / name;
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  return p.string();
}

TestPki::TestPki(const TempDir& dir) {
  std::string d = dir.path.string();
  std::string ext = dir.write("san.ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  std::string script =
      "set -e; cd '" + d +
      "'; "
      "openssl req -x509 " +
      key +
      " -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca; "
      "openssl req -x509 " +
      key +
      " -keyout other.key -out other.crt -days 2 -subj /CN=other-ca; "
      "openssl req " +
      key +
      " -keyout server.key -out server.csr -subj /CN=127.0.0.1; "
      "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt "
      "-days 2 -extfile san.ext; "
      "printf 'subjectAltName=DNS:elsewhere.example\\n' > wrong.ext; "
      "openssl req " +
      key +
      " -keyout wrong.key -out wrong.csr -subj /CN=elsewhere.example; "
      "openssl x509 -req -in wrong.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out wrong.crt "
      "-days 2 -extfile wrong.ext; "
      "openssl req " +
      key +
      " -keyout client.key -out client.csr -subj /CN=webhook/O=test; "
      "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt "
      "-days 2";
  std::string cmd = "sh -c \"" + script + "\" >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) {  // NOLINT(cert-env33-c): test-only certificate setup
    throw std::runtime_error("openssl could not make the test certificates");
  }
  ca_file = d + "/ca.crt";
  ca_pem = slurp(ca_file);
  other_ca_pem = slurp(d + "/other.crt");
  server_cert_file = d + "/server.crt";
  server_key_file = d + "/server.key";
  wrong_name_cert_file = d + "/wrong.crt";
  wrong_name_key_file = d + "/wrong.key";
  client_cert_pem = slurp(d + "/client.crt");
  client_key_pem = slurp(d + "/client.key");
}

kube::ClusterConfig loopback_config(int port) {
  kube::ClusterConfig c;
  c.https = false;
  c.host = "127.0.0.1";
  c.port = port;
  c.origin = "test";
  return c;
}

std::vector<kube::Claim> lease_claims(const FakeApiServer& api) {
  std::vector<json> leases = api.objects("leases");
  REQUIRE(leases.size() <= 1);
  if (leases.empty()) {
    return {};
  }
  webhook::Result<std::vector<kube::Claim>> claims =
      kube::decode_claims(leases[0]["metadata"]["annotations"][std::string(kube::kClaimsAnnotation)]
                              .get<std::string>());
  REQUIRE(claims.has_value());
  return *claims;
}

kube::LiveClusterOptions test_options(kube::Clock& clock) {
  kube::LiveClusterOptions o;
  o.clock = &clock;
  o.claims.ns = "ray-system";
  o.claims.holder = "webhook-test";
  o.reflector.min_watch_timeout = std::chrono::seconds(30);
  o.reflector.read_slack = std::chrono::seconds(5);
  o.reflector.list_timeout = std::chrono::seconds(10);
  o.reflector.seed = 7;
  static const bool verbose = std::getenv("KUBE_TEST_LOG") != nullptr;  // NOLINT
  if (verbose) {
    o.log = [](kube::LogLevel, const std::string& line) {
      static std::mutex mu;
      std::lock_guard lock(mu);
      std::cerr << "[kube] " << line << "\n";
    };
  }
  return o;
}

}  // namespace testing
