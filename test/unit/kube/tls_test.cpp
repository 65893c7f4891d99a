// HTTPS to the API server: the CA is verified, and so is the server's name; kubeconfig end to
// end (--kube-config-path against the fake API, as against a real cluster).
#include <catch2/catch.hpp>

#include "base/encoding/base64.h"
#include "fake_apiserver.h"
#include "kube/api_client.h"
#include "kube/live_cluster.h"
#include "kube_support.h"

using testing::eventually;
using testing::FakeApiServer;

namespace {

kube::ClusterConfig https_config(int port, const std::string& ca_pem) {
  kube::ClusterConfig c;
  c.https = true;
  c.host = "127.0.0.1";
  c.port = port;
  c.ca_pem = ca_pem;
  c.origin = "test";
  return c;
}

// One list request; the status, or the error message.
std::string probe(const kube::ClusterConfig& config) {
  auto client = kube::ApiClient::create(config);
  if (!client) {
    return client.error().message;
  }
  kube::Call call;
  std::string body;
  webhook::Result<int> status = (*client)->get(
      "/api/v1/pods?limit=1",
      [&](std::string_view b) {
        body.append(b);
        return true;
      },
      std::chrono::seconds(10), call, nullptr);
  return status ? std::to_string(*status) : status.error().message;
}

}  // namespace

TEST_CASE("HTTPS: the server must present a certificate from the configured CA for its address") {
  testing::TempDir dir;
  testing::TestPki pki(dir);
  FakeApiServer::Options o;
  o.tls_cert_file = pki.server_cert_file;
  o.tls_key_file = pki.server_key_file;
  FakeApiServer api(o);

  CHECK(probe(https_config(api.port(), pki.ca_pem)) == "200");
  kube::ClusterConfig by_name = https_config(api.port(), pki.ca_pem);
  by_name.host = "localhost";
  CHECK(probe(by_name) == "200");
  // A client certificate is presented when configured (the server here does not ask for one).
  kube::ClusterConfig with_cert = https_config(api.port(), pki.ca_pem);
  with_cert.client_cert_pem = pki.client_cert_pem;
  with_cert.client_key_pem = pki.client_key_pem;
  CHECK(probe(with_cert) == "200");

  std::string wrong_ca = probe(https_config(api.port(), pki.other_ca_pem));
  CHECK_THAT(wrong_ca, Catch::Contains("TLS handshake failed") && Catch::Contains("127.0.0.1"));
  CHECK_THAT(wrong_ca, Catch::Contains("certificate verify failed"));

  FakeApiServer::Options w;
  w.tls_cert_file = pki.wrong_name_cert_file;
  w.tls_key_file = pki.wrong_name_key_file;
  FakeApiServer elsewhere(w);
  CHECK_THAT(probe(https_config(elsewhere.port(), pki.ca_pem)),
             Catch::Contains("TLS handshake failed"));
}

TEST_CASE("ApiClient refuses a CA or client key that does not parse or match") {
  testing::TempDir dir;
  testing::TestPki pki(dir);
  CHECK_THAT(probe(https_config(1, "not a certificate")), Catch::Contains("no PEM certificate"));
  kube::ClusterConfig c = https_config(1, pki.ca_pem);
  c.client_cert_pem = pki.client_cert_pem;
  c.client_key_pem = "garbage";
  CHECK_THAT(probe(c), Catch::Contains("client key is not a PEM private key"));
  c.client_cert_pem = pki.ca_pem;  // a certificate whose key is not this one
  testing::TempDir d2;
  testing::TestPki other(d2);
  c.client_key_pem = other.client_key_pem;
  CHECK_THAT(probe(c), Catch::Contains("does not match"));
}

TEST_CASE("A kubeconfig (--kube-config-path) with CA data and a token reaches the API over HTTPS") {
  testing::TempDir dir;
  testing::TestPki pki(dir);
  FakeApiServer::Options o;
  o.tls_cert_file = pki.server_cert_file;
  o.tls_key_file = pki.server_key_file;
  o.tokens = {"kubeconfig-token"};
  FakeApiServer api(o);
  std::string path =
      dir.write("kubeconfig",
                "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
                "clusters:\n- name: fake\n  cluster:\n    server: https://127.0.0.1:" +
                    std::to_string(api.port()) +
                    "\n    certificate-authority-data: " + webhook::base64_encode(pki.ca_pem) +
                    "\ncontexts:\n- name: fake\n  context: {cluster: fake, user: webhook}\n"
                    "users:\n- name: webhook\n  user:\n    token: kubeconfig-token\n");
  webhook::Result<kube::ClusterConfig> config = kube::load_config(path);
  REQUIRE(config.has_value());
  testing::FakeClock clock;
  auto live = kube::LiveCluster::create(*config, testing::test_options(clock)).value();
  live->start();
  CHECK(live->server() == "https://127.0.0.1:" + std::to_string(api.port()));
  REQUIRE(eventually([&] { return live->pods_synced(); }));
  admission::Handler handler({}, live->pods(), live->nodes(), live->services());
  nlohmann::json pod = testing::worker_pod("rc", "g", "4x4");
  admission::Response r = handler.mutate(testing::create_request(pod));
  REQUIRE(r.allowed);
  api.create("pods", testing::apply_patch(pod, r));
  REQUIRE(eventually([&] { return live->registry().stats().pods == 1; }));
  CHECK(live->claims().stats().claims_written == 1);  // the claim went over HTTPS too
  CHECK(api.writes("leases") == 1);
  live->stop();
}

TEST_CASE(
    "insecure_skip_verify reaches an HTTPS server without a CA, and without it no CA is refused") {
  testing::TempDir dir;
  testing::TestPki pki(dir);
  FakeApiServer::Options o;
  o.tls_cert_file = pki.server_cert_file;
  o.tls_key_file = pki.server_key_file;
  FakeApiServer api(o);
  kube::ClusterConfig c = https_config(api.port(), "");
  CHECK_THAT(probe(c), Catch::Contains("holds no PEM certificate"));
  c.insecure_skip_verify = true;
  CHECK(probe(c) == "200");
}
