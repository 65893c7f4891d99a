// kubectl-tpu_slice's command line, kubeconfig and API errors, RBAC, TLS and paging, against the
// fake kube-apiserver on 127.0.0.1.
#include "tpuslice/cli.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "base/encoding/base64.h"
#include "kube/api_client.h"
#include "tpuslice/snapshot.h"
#include "tpuslice_support.h"

using nlohmann::json;
using testing::CliRun;
using testing::RecordedCluster;
using testing::run_plugin;

namespace {

bool one_line(const std::string& s) {
  return !s.empty() && s.back() == '\n' && s.find('\n') == s.size() - 1;
}

// A loopback port nothing listens on: bound, then closed.
int dead_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string config_for(const std::string& server, const std::string& cluster_extra,
                       const std::string& user) {
  return "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
         "clusters:\n- name: k\n  cluster:\n    server: " +
         server + "\n" + cluster_extra +
         "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
         "users:\n- name: u\n  user:\n" +
         user;
}

}  // namespace

TEST_CASE("usage: --help with an example for each command, bad usage in one line with exit 2") {
  CliRun help = run_plugin({"--help"}, {});
  CHECK(help.code == 0);
  CHECK_THAT(help.out, Catch::Contains("kubectl tpu-slice status my-cluster -n ray") &&
                           Catch::Contains("kubectl tpu-slice check my-cluster -n ray") &&
                           Catch::Contains("--kubeconfig FILE") &&
                           Catch::Contains("-A, --all-namespaces"));
  auto [args, why] = GENERATE(table<std::vector<std::string>, std::string>({
      {std::vector<std::string>{}, "no command"},
      {{"describe"}, "unknown command \"describe\""},
      {{"check", "a", "b"}, "unexpected argument \"b\""},
      {{"check", "-o", "xml"}, "expected table, json or yaml"},
      {{"status", "--bogus"}, "unknown flag --bogus"},
      {{"status", "--request-timeout", "0"}, "expected whole seconds"},
  }));
  CliRun r = run_plugin(args, {});
  CAPTURE(args);
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(one_line(r.err));
  CHECK_THAT(r.err, Catch::StartsWith("kubectl-tpu_slice: ") && Catch::Contains(why));
}

TEST_CASE(
    "version: the flag prints the program and the project's version, and reads no kubeconfig") {
  CliRun r = run_plugin({"--version"}, {});
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  CHECK(r.out == "kubectl-tpu_slice 0.3.0\n");
}

TEST_CASE("bad kubeconfigs: one line naming the file and the problem, exit 2") {
  testing::TempDir dir;
  std::string ca = "    certificate-authority-data: " + webhook::base64_encode("x") + "\n";
  auto [text, why] = GENERATE_COPY(table<std::string, std::string>({
      {std::string("current-context: [unclosed"), "not valid YAML"},
      {config_for("https://10.0.0.1", ca, "    exec:\n      command: gke-gcloud-auth-plugin\n"),
       "user \"u\": exec.apiVersion is not set"},
      {config_for("https://10.0.0.1", "    insecure-skip-tls-verify: true\n",
                  "    exec:\n      command: gke-gcloud-auth-plugin\n"
                  "      apiVersion: client.authentication.k8s.io/v1beta1\n"
                  "      installHint: install it with gcloud\n"),
       "exec plugin \"gke-gcloud-auth-plugin\": is not found on PATH; install it with gcloud"},
      {config_for("https://10.0.0.1", ca, "    auth-provider: {name: gcp}\n"),
       "auth-provider \"gcp\" is not supported; kubectl 1.26 removed the gcp auth-provider; "
       "install gke-gcloud-auth-plugin"},
      {config_for("https://10.0.0.1", "", "    token: t\n"), "neither certificate-authority"},
      {config_for("https://10.0.0.1", ca, "    token: t\n"), "holds no PEM certificate"},
  }));
  std::string path = dir.write("kubeconfig", text);
  CliRun r = run_plugin({"check", "--kubeconfig", path}, {});
  CAPTURE(text);
  CHECK(r.code == 2);
  CHECK(one_line(r.err));
  CHECK_THAT(r.err, Catch::Contains(why));

  CliRun absent = run_plugin({"status"}, {{"KUBECONFIG", dir.path.string() + "/none"}});
  CHECK(absent.code == 2);
  CHECK_THAT(absent.err, Catch::Contains("cannot read " + dir.path.string() + "/none"));
  CliRun nothing = run_plugin({"status"}, {});
  CHECK(nothing.code == 2);
  CHECK_THAT(nothing.err, Catch::Contains("no kubeconfig: pass --kubeconfig"));
  CliRun context = run_plugin({"status", "--kubeconfig", path, "--context", "nope"}, {});
  CHECK(context.code == 2);
}

TEST_CASE("an unreachable API server: one line naming it, exit 2") {
  testing::TempDir dir;
  int port = dead_port();
  std::string path = dir.write(
      "kubeconfig", config_for("http://127.0.0.1:" + std::to_string(port), "", "    token: t\n"));
  CliRun r = run_plugin({"check", "-n", "ml", "--request-timeout", "5s"},
                        {{"HOME", "/nowhere"}, {"KUBECONFIG", path}});
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(one_line(r.err));
  CHECK_THAT(r.err,
             Catch::Contains("127.0.0.1:" + std::to_string(port) + "/api/v1/namespaces/ml/pods"));
}

TEST_CASE(
    "RBAC 403 on Nodes or EndpointSlices is said and the rest checked, on Pods it is exit 2") {
  RecordedCluster c("healthy-v6e-4x4");
  c.api().forbid("nodes");
  CliRun r = c.run({"check", "v6e-cluster", "-n", "ml", "-o", "json"});
  CHECK(r.code == 0);
  json a = r.json();
  CHECK(a["findings"].empty());
  CHECK(a["unchecked"] ==
        json::array({"node pools from Nodes (read from each Pod's nodeSelector instead): nodes is "
                     "forbidden: User \"system:serviceaccount:default:reader\" cannot list "
                     "resource \"nodes\" in API group \"\" at the cluster scope"}));
  CliRun table = c.run({"status", "v6e-cluster", "-n", "ml"});
  CHECK(table.code == 0);
  CHECK_THAT(table.out, Catch::Contains("Not checked: node pools from Nodes"));

  c.api().forbid("endpointslices");
  CliRun two = c.run({"check", "v6e-cluster", "-n", "ml", "-o", "json"});
  CHECK(two.code == 0);
  CHECK(two.json()["unchecked"].size() == 2);
  CHECK_THAT(two.json()["unchecked"][0].get<std::string>(),
             Catch::StartsWith("whether the webhook's Service has ready endpoints: "
                               "endpointslices.discovery.k8s.io is forbidden"));

  c.api().forbid("pods");
  CliRun pods = c.run({"check", "v6e-cluster", "-n", "ml"});
  CHECK(pods.code == 2);
  CHECK(one_line(pods.err));
  CHECK_THAT(pods.err, Catch::Contains("cannot list pods: pods is forbidden") &&
                           Catch::Contains("in the namespace \"ml\""));
}

TEST_CASE(
    "the namespace comes from -n, else the context, and a RayCluster that is not there is exit 2") {
  RecordedCluster c("healthy-v6e-4x4");
  CliRun wrong_ns = c.run({"check", "v6e-cluster"});
  CHECK(wrong_ns.code == 2);
  CHECK(wrong_ns.err ==
        "kubectl-tpu_slice: RayCluster \"v6e-cluster\" not found in namespace default\n");
  std::string path = c.kubeconfig("    namespace: ml\n");
  CliRun from_context = run_plugin({"check", "v6e-cluster"}, {{"KUBECONFIG", path}});
  CHECK(from_context.code == 0);
  CliRun all = c.run({"status", "-A", "-o", "json"});
  CHECK(all.code == 0);
  CHECK(all.json()["slices"].size() == 1);
  CHECK(c.api().tokens_seen() == std::set<std::string>{"t"});
}

TEST_CASE("HTTPS with the kubeconfig CA and token, and a refused token is exit 2") {
  testing::TempDir dir;
  testing::TestPki pki(dir);
  testing::FakeApiServer::Options o;
  o.tls_cert_file = pki.server_cert_file;
  o.tls_key_file = pki.server_key_file;
  o.tokens = {"good"};
  RecordedCluster c("healthy-v6e-4x4", o);
  std::string server = "https://127.0.0.1:" + std::to_string(c.api().port());
  std::string ca = "    certificate-authority-data: " + webhook::base64_encode(pki.ca_pem) + "\n";
  std::string good = dir.write("good", config_for(server, ca, "    token: good\n"));
  CHECK(run_plugin({"check", "v6e-cluster", "-n", "ml", "--kubeconfig", good}, {}).code == 0);
  std::string bad = dir.write("bad", config_for(server, ca, "    token: bad\n"));
  CliRun refused = run_plugin({"check", "v6e-cluster", "-n", "ml", "--kubeconfig", bad}, {});
  CHECK(refused.code == 2);
  CHECK_THAT(refused.err, Catch::Contains("HTTP 401") && Catch::Contains("were not accepted"));
  std::string insecure = dir.write(
      "insecure", config_for(server, "    insecure-skip-tls-verify: true\n", "    token: good\n"));
  CHECK(run_plugin({"check", "v6e-cluster", "-n", "ml", "--kubeconfig", insecure}, {}).code == 0);
}

TEST_CASE("lists are read page by page (limit and continue)") {
  RecordedCluster c("healthy-tpu7x-2x2x2");
  kube::ClusterConfig config;
  config.https = false;
  config.host = "127.0.0.1";
  config.port = c.api().port();
  config.origin = "test";
  auto client = kube::ApiClient::create(config).value();
  tpuslice::Scope scope;
  scope.ns = "ml";
  scope.page_size = 3;
  webhook::Result<tpuslice::Snapshot> s = tpuslice::read_snapshot(*client, scope);
  REQUIRE(s.has_value());
  CHECK(s->pods.size() == 4);
  CHECK(s->nodes.size() == 4);
  int continued = 0;
  for (const std::string& q : c.api().queries()) {
    continued += q.find("/pods?") != std::string::npos && q.find("continue=") != std::string::npos;
  }
  CHECK(continued == 1);
}
