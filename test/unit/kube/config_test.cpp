#include "kube/config.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>

#include "base/encoding/base64.h"
#include "kube_support.h"

using testing::TempDir;

TEST_CASE("parse_server_url splits scheme, host, port and path") {
  auto [url, https, host, port, path] =
      GENERATE(table<std::string, bool, std::string, int, std::string>({
          {"https://10.0.0.1", true, "10.0.0.1", 443, ""},
          {"https://10.0.0.1:6443", true, "10.0.0.1", 6443, ""},
          {"https://api.example.com:8443/k8s/clusters/c-1/", true, "api.example.com", 8443,
           "/k8s/clusters/c-1"},
          {"https://[fd00::1]:443", true, "fd00::1", 443, ""},
          {"https://[::1]", true, "::1", 443, ""},
          {"http://127.0.0.1:8001", false, "127.0.0.1", 8001, ""},
          {"http://localhost:8001", false, "localhost", 8001, ""},
          {"http://[::1]:8001", false, "::1", 8001, ""},
      }));
  CAPTURE(url);
  kube::ClusterConfig c;
  REQUIRE(kube::parse_server_url(url, c).ok());
  CHECK(c.https == https);
  CHECK(c.host == host);
  CHECK(c.port == port);
  CHECK(c.base_path == path);
}

TEST_CASE("parse_server_url refuses bad URLs and plain http off loopback") {
  auto [url, why] = GENERATE(table<std::string, std::string>({
      {"ftp://x", "must start with https://"},
      {"10.0.0.1:443", "must start with https://"},
      {"https://:443", "no host"},
      {"https://x:0", "bad port"},
      {"https://x:99999", "bad port"},
      {"https://x:44a", "bad port"},
      {"https://[fd00::1", "unclosed"},
      {"http://10.0.0.1:8080", "not loopback"},
  }));
  CAPTURE(url);
  kube::ClusterConfig c;
  webhook::Status s = kube::parse_server_url(url, c);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.error().message, Catch::Contains(why));
}

TEST_CASE("in-cluster config reads the service account and KUBERNETES_SERVICE_*") {
  TempDir dir;
  dir.write("ca.crt", "CA PEM");
  dir.write("token", "tok-1\n");
  auto [host, expect] = GENERATE(table<std::string, std::string>(
      {{"10.96.0.1", "10.96.0.1"}, {"fd00:10:96::1", "fd00:10:96::1"}, {"[fd00::1]", "fd00::1"}}));
  std::map<std::string, std::string> env = {{"KUBERNETES_SERVICE_HOST", host},
                                            {"KUBERNETES_SERVICE_PORT", "443"}};
  auto lookup = [&](const std::string& k) -> std::optional<std::string> {
    auto it = env.find(k);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  webhook::Result<kube::ClusterConfig> c = kube::in_cluster_config(lookup, dir.path.string());
  REQUIRE(c.has_value());
  CHECK(c->https);
  CHECK(c->host == expect);
  CHECK(c->port == 443);
  CHECK(c->ca_pem == "CA PEM");
  CHECK(c->token_file == (dir.path / "token").string());
  kube::TokenSource token(c->token, c->token_file);
  CHECK(token.get().value() == "tok-1");
}

TEST_CASE("in-cluster config says what is missing outside a Pod") {
  TempDir dir;
  auto none = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  webhook::Result<kube::ClusterConfig> c = kube::in_cluster_config(none, dir.path.string());
  REQUIRE_FALSE(c.has_value());
  CHECK_THAT(c.error().message,
             Catch::Contains("KUBERNETES_SERVICE_HOST") && Catch::Contains("--kube-config-path"));
  auto env = [](const std::string& k) -> std::optional<std::string> {
    return k == "KUBERNETES_SERVICE_HOST" ? "10.0.0.1" : "443";
  };
  webhook::Result<kube::ClusterConfig> no_ca = kube::in_cluster_config(env, dir.path.string());
  REQUIRE_FALSE(no_ca.has_value());
  CHECK_THAT(no_ca.error().message, Catch::Contains("ca.crt"));
  dir.write("ca.crt", "x");
  webhook::Result<kube::ClusterConfig> no_token = kube::in_cluster_config(env, dir.path.string());
  REQUIRE_FALSE(no_token.has_value());
  CHECK_THAT(no_token.error().message, Catch::Contains("token"));
}

namespace {

std::string kubeconfig(const std::string& cluster, const std::string& user,
                       const std::string& current = "dev") {
  return "apiVersion: v1\nkind: Config\ncurrent-context: " + current +
         "\ncontexts:\n- name: other\n  context: {cluster: nowhere, user: nobody}\n"
         "- name: dev\n  context:\n    cluster: c1\n    user: u1\n    namespace: ray\n"
         "clusters:\n- name: c1\n  cluster:\n" +
         cluster + "users:\n- name: u1\n  user:\n" + user;
}

}  // namespace

TEST_CASE("kubeconfig: the current context's server, CA and credentials") {
  TempDir dir;
  dir.write("ca.pem", "CA FROM FILE");
  dir.write("client.crt", "CERT FROM FILE");
  dir.write("client.key", "KEY FROM FILE");
  dir.write("token.txt", "file-token\n");

  SECTION("CA file (relative to the kubeconfig), token") {
    std::string path = dir.write(
        "config",
        kubeconfig("    server: https://[fd00::1]:6443\n    certificate-authority: ca.pem\n",
                   "    token: abc.def\n"));
    webhook::Result<kube::ClusterConfig> c = kube::kubeconfig_config(path);
    REQUIRE(c.has_value());
    CHECK(c->host == "fd00::1");
    CHECK(c->port == 6443);
    CHECK(c->ca_pem == "CA FROM FILE");
    CHECK(c->token == "abc.def");
    CHECK(c->token_file.empty());
    CHECK_THAT(c->origin, Catch::Contains("context \"dev\""));
  }
  SECTION("inline data wins over files; client certificate and key; tokenFile") {
    std::string path = dir.write(
        "config", kubeconfig("    server: https://k8s.example:443/prefix\n"
                             "    certificate-authority-data: " +
                                 webhook::base64_encode("CA DATA") +
                                 "\n"
                                 "    certificate-authority: ca.pem\n",
                             "    client-certificate-data: " + webhook::base64_encode("CERT DATA") +
                                 "\n"
                                 "    client-key: client.key\n    tokenFile: token.txt\n"));
    webhook::Result<kube::ClusterConfig> c = kube::kubeconfig_config(path);
    REQUIRE(c.has_value());
    CHECK(c->base_path == "/prefix");
    CHECK(c->ca_pem == "CA DATA");
    CHECK(c->client_cert_pem == "CERT DATA");
    CHECK(c->client_key_pem == "KEY FROM FILE");
    CHECK(c->token_file == (dir.path / "token.txt").string());
    kube::TokenSource t(c->token, c->token_file);
    CHECK(t.get().value() == "file-token");
  }
  SECTION("kubectl proxy: plain http on loopback, no user") {
    std::string path =
        dir.write("config",
                  "current-context: p\ncontexts:\n- name: p\n  context: {cluster: proxy}\n"
                  "clusters:\n- name: proxy\n  cluster: {server: 'http://127.0.0.1:8001'}\n");
    webhook::Result<kube::ClusterConfig> c = kube::kubeconfig_config(path);
    REQUIRE(c.has_value());
    CHECK_FALSE(c->https);
    CHECK(c->token.empty());
  }
}

TEST_CASE("kubeconfig: every refusal names the file and the field") {
  TempDir dir;
  dir.write("ca.pem", "CA");
  std::string ca = "    server: https://10.0.0.1\n    certificate-authority: ca.pem\n";
  auto [text, why] = GENERATE_COPY(table<std::string, std::string>({
      {kubeconfig(ca, "    token: t\n", "missing"), "current-context \"missing\" is not among"},
      {kubeconfig(ca, "    token: t\n", "other"), "names cluster \"nowhere\""},
      {kubeconfig(ca, "    token: t\n", ""), "current-context is not set"},
      {kubeconfig("    server: https://10.0.0.1\n", "    token: t\n"),
       "neither certificate-authority"},
      {kubeconfig("    server: https://10.0.0.1\n    insecure-skip-tls-verify: true\n",
                  "    token: t\n"),
       "insecure-skip-tls-verify is not supported"},
      {kubeconfig(ca, "    exec:\n      command: gke-gcloud-auth-plugin\n"),
       "exec credential plugins"},
      {kubeconfig(ca, "    auth-provider: {name: gcp}\n"),
       "auth-provider \"gcp\" is not supported"},
      {kubeconfig(ca, "    client-certificate-data: '!!!'\n    client-key-data: eA==\n"),
       "not valid base64"},
      {kubeconfig(ca, "    client-certificate-data: eA==\n"), "one of them is missing"},
      {kubeconfig("    server: https://10.0.0.1\n    certificate-authority: nope.pem\n", ""),
       "nope.pem"},
      {kubeconfig("    certificate-authority: ca.pem\n", ""), "server is not set"},
      {kubeconfig("    server: http://10.0.0.1:8080\n", ""), "not loopback"},
      {std::string("current-context: [unclosed"), "not valid YAML"},
      {std::string("- a\n- b\n"), "not a kubeconfig"},
  }));
  std::string path = dir.write("config", text);
  webhook::Result<kube::ClusterConfig> c = kube::kubeconfig_config(path);
  CAPTURE(text);
  REQUIRE_FALSE(c.has_value());
  CHECK(c.error().code == webhook::ErrorCode::kInvalidArgument);
  CHECK_THAT(c.error().message, Catch::Contains(why) && Catch::Contains(path));
}

TEST_CASE("kubeconfig: a missing file is named") {
  webhook::Result<kube::ClusterConfig> c = kube::load_config("/nonexistent/kubeconfig");
  REQUIRE_FALSE(c.has_value());
  CHECK_THAT(c.error().message, Catch::Contains("/nonexistent/kubeconfig"));
}

TEST_CASE("TokenSource re-reads a rotated token file, and keeps the last token mid-rotation") {
  TempDir dir;
  std::string file = dir.write("token", "first\n");
  kube::TokenSource token("ignored-static", file);
  CHECK(token.get().value() == "first");
  CHECK(token.get().value() == "first");
  CHECK(token.reads() == 1);  // unchanged file: not read again

  // Rotation as the kubelet does it: a new file swapped in atomically.
  std::string next = dir.write("token.new", "second-token\n");
  std::filesystem::rename(next, file);
  CHECK(token.get().value() == "second-token");
  CHECK(token.reads() == 2);

  // Forced re-read after a 401, even when the file looks unchanged.
  CHECK(token.get(/*force=*/true).value() == "second-token");
  CHECK(token.reads() == 3);

  std::filesystem::remove(file);
  CHECK(token.get().value() == "second-token");

  kube::TokenSource missing("", (dir.path / "absent").string());
  webhook::Result<std::string> m = missing.get();
  REQUIRE_FALSE(m.has_value());
  CHECK_THAT(m.error().message, Catch::Contains("absent"));
  CHECK(kube::TokenSource("static", "").get().value() == "static");
}

TEST_CASE("kubeconfig options: another context, its namespace, and insecure-skip-tls-verify") {
  TempDir dir;
  dir.write("ca.pem", "CA");
  std::string insecure = "    server: https://10.0.0.1:6443\n    insecure-skip-tls-verify: true\n";
  std::string path = dir.write("config", kubeconfig(insecure, "    token: t\n", "other"));
  kube::KubeconfigOptions options{.context = "dev", .allow_insecure = true};
  webhook::Result<kube::ClusterConfig> c = kube::kubeconfig_config(path, options);
  REQUIRE(c.has_value());
  CHECK(c->insecure_skip_verify);
  CHECK(c->ca_pem.empty());
  CHECK(c->context_namespace == "ray");
  CHECK(c->port == 6443);
  CHECK_THAT(c->origin, Catch::Contains("context \"dev\""));

  options.context = "absent";
  webhook::Result<kube::ClusterConfig> absent = kube::kubeconfig_config(path, options);
  REQUIRE_FALSE(absent.has_value());
  CHECK_THAT(absent.error().message, Catch::Contains("context \"absent\" is not among"));

  // The webhook itself still refuses it.
  webhook::Result<kube::ClusterConfig> strict =
      kube::kubeconfig_config(path, kube::KubeconfigOptions{.context = "dev"});
  REQUIRE_FALSE(strict.has_value());
  CHECK_THAT(strict.error().message, Catch::Contains("insecure-skip-tls-verify is not supported"));
}

TEST_CASE("kubeconfig: an exec plugin is refused, pointing at kubectl create token") {
  TempDir dir;
  dir.write("ca.pem", "CA");
  std::string path = dir.write(
      "config", kubeconfig("    server: https://10.0.0.1\n    certificate-authority: ca.pem\n",
                           "    exec:\n      command: gke-gcloud-auth-plugin\n"));
  webhook::Result<kube::ClusterConfig> c = kube::kubeconfig_config(path, {});
  REQUIRE_FALSE(c.has_value());
  CHECK_THAT(c.error().message, Catch::Contains("exec credential plugins are not supported") &&
                                    Catch::Contains("kubectl create token"));
  CHECK(c.error().message.find('\n') == std::string::npos);
}

TEST_CASE("kubeconfig_paths: the flag alone, else every file of $KUBECONFIG, else ~/.kube/config") {
  std::map<std::string, std::string> vars;
  kube::EnvLookup env = [&](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  using Paths = std::vector<std::string>;
  CHECK(kube::kubeconfig_paths("", env).empty());
  vars["HOME"] = "/home/u";
  CHECK(kube::kubeconfig_paths("", env) == Paths{"/home/u/.kube/config"});
  vars["KUBECONFIG"] = "";
  CHECK(kube::kubeconfig_paths("", env) == Paths{"/home/u/.kube/config"});
  vars["KUBECONFIG"] = "/a/one::/b/two:/a/one:";  // empty entries and repeats dropped
  CHECK(kube::kubeconfig_paths("", env) == Paths{"/a/one", "/b/two"});
  CHECK(kube::kubeconfig_paths("/flag/file", env) == Paths{"/flag/file"});
}

namespace {

// Three kubeconfig files in three directories, merged as kubectl merges $KUBECONFIG.
struct ThreeFiles {
  TempDir a, b, c;
  std::string first, second, missing;
  ThreeFiles() {
    a.write("ca-a.pem", "CA OF A");
    b.write("ca-b.pem", "CA OF B");
    b.write("token-b", "token-of-b\n");
    // No current-context; context "main", cluster "k" and user "u" are its first.
    first = a.write("config",
                    "clusters:\n- name: k\n  cluster:\n    server: https://10.0.0.1\n"
                    "    certificate-authority: ca-a.pem\n"
                    "contexts:\n- name: main\n  context: {cluster: k, user: u, namespace: from-a}\n"
                    "users:\n- name: u\n  user: {token: token-of-a}\n");
    // Sets current-context and redefines main, k and u (ignored: the first file wins), and adds
    // context "dev" with user "v" whose tokenFile is relative to this file's directory.
    second = b.write("config",
                     "current-context: main\n"
                     "clusters:\n- name: k\n  cluster:\n    server: https://10.9.9.9\n"
                     "    certificate-authority: ca-b.pem\n"
                     "- name: kb\n  cluster:\n    server: https://10.0.0.2\n"
                     "    certificate-authority: ca-b.pem\n"
                     "contexts:\n- name: main\n  context: {cluster: kb, user: v}\n"
                     "- name: dev\n  context: {cluster: kb, user: v, namespace: from-b}\n"
                     "users:\n- name: u\n  user: {token: other}\n"
                     "- name: v\n  user: {tokenFile: token-b}\n");
    missing = (c.path / "absent").string();
  }
};

}  // namespace

TEST_CASE(
    "KUBECONFIG files merged: the first file to name an entry wins, current-context from "
    "a later file, relative paths against each entry's file") {
  ThreeFiles f;
  std::vector<std::string> paths{f.first, f.missing, f.second};
  webhook::Result<kube::ClusterConfig> c = kube::kubeconfig_config(paths, {});
  REQUIRE(c.has_value());
  CHECK(c->host == "10.0.0.1");
  CHECK(c->ca_pem == "CA OF A");
  CHECK(c->token == "token-of-a");
  CHECK(c->context_namespace == "from-a");
  CHECK(c->origin == "kubeconfig " + f.first + ":" + f.second + " (context \"main\")");

  webhook::Result<kube::ClusterConfig> dev =
      kube::kubeconfig_config(paths, kube::KubeconfigOptions{.context = "dev"});
  REQUIRE(dev.has_value());
  CHECK(dev->host == "10.0.0.2");
  CHECK(dev->ca_pem == "CA OF B");
  CHECK(dev->token_file == (f.b.path / "token-b").string());
  CHECK(dev->context_namespace == "from-b");

  // In the other order the second file's entries win.
  webhook::Result<kube::ClusterConfig> swapped =
      kube::kubeconfig_config(std::vector<std::string>{f.second, f.first}, {});
  REQUIRE(swapped.has_value());
  CHECK(swapped->host == "10.0.0.2");
  CHECK(swapped->token_file == (f.b.path / "token-b").string());
}

TEST_CASE("KUBECONFIG files merged: none existing, or one that does not parse, is an error") {
  ThreeFiles f;
  webhook::Result<kube::ClusterConfig> none = kube::kubeconfig_config(
      std::vector<std::string>{f.missing, (f.c.path / "also-absent").string()}, {});
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().message == "kubeconfig: none of the files of KUBECONFIG exists (" + f.missing +
                                    ", " + (f.c.path / "also-absent").string() + ")");
  std::string bad = f.c.write("bad", "current-context: [unclosed");
  webhook::Result<kube::ClusterConfig> broken =
      kube::kubeconfig_config(std::vector<std::string>{f.first, bad}, {});
  REQUIRE_FALSE(broken.has_value());
  CHECK_THAT(broken.error().message, Catch::StartsWith("kubeconfig " + bad + ": not valid YAML"));
  // Only the first file, which sets no current-context.
  webhook::Result<kube::ClusterConfig> no_context =
      kube::kubeconfig_config(std::vector<std::string>{f.first, f.missing}, {});
  REQUIRE_FALSE(no_context.has_value());
  CHECK_THAT(no_context.error().message, Catch::Contains("current-context is not set"));
}

TEST_CASE("kubeconfig: auth-provider users are refused, naming what replaces each") {
  auto [provider, names] = GENERATE(table<std::string, std::vector<std::string>>({
      {"gcp",
       {"kubectl 1.26 removed the gcp auth-provider", "gke-gcloud-auth-plugin",
        "gcloud container clusters get-credentials"}},
      {"azure", {"kubectl 1.26 removed the azure auth-provider", "kubelogin convert-kubeconfig"}},
      {"oidc", {"kubelogin", "kubectl oidc-login", "or a token"}},
      {"custom", {"use an exec credential plugin or a token"}},
  }));
  TempDir dir;
  std::string path = dir.write(
      "config", kubeconfig("    server: https://10.0.0.1\n    insecure-skip-tls-verify: true\n",
                           "    auth-provider:\n      name: " + provider +
                               "\n      config: {cmd-path: /usr/bin/gcloud}\n"));
  webhook::Result<kube::ClusterConfig> c = kube::kubeconfig_config(
      path, kube::KubeconfigOptions{.allow_insecure = true, .allow_exec = true});
  REQUIRE_FALSE(c.has_value());
  CAPTURE(provider);
  CHECK_THAT(c.error().message,
             Catch::StartsWith("kubeconfig " + path + ": user \"u1\": auth-provider \"" + provider +
                               "\" is not supported; "));
  for (const std::string& n : names) {
    CHECK_THAT(c.error().message, Catch::Contains(n));
  }
  CHECK(c.error().message.find('\n') == std::string::npos);
}

// docs/legacy-placement.md "Connecting to the API": the server runs no plugin, so it does not
// advise one.
TEST_CASE(
    "kubeconfig: without exec plugins, an auth-provider user is told what the caller can use") {
  TempDir dir;
  dir.write("ca.pem", "CA");
  std::string path = dir.write(
      "config", kubeconfig("    server: https://10.0.0.1\n    certificate-authority: ca.pem\n",
                           "    auth-provider:\n      name: gcp\n"));
  webhook::Result<kube::ClusterConfig> c = kube::kubeconfig_config(path);
  REQUIRE_FALSE(c.has_value());
  CHECK_THAT(c.error().message,
             Catch::Contains("auth-provider \"gcp\" is not supported; use a token") &&
                 Catch::Contains("tokenFile or client certificate, or run in the cluster") &&
                 !Catch::Contains("gke-gcloud-auth-plugin") && !Catch::Contains("exec user"));
}

TEST_CASE("kubeconfig: an exec section is checked as client-go checks it") {
  auto [exec, why] = GENERATE(table<std::string, std::string>({
      {"      command: p\n", "exec.apiVersion is not set"},
      {"      apiVersion: client.authentication.k8s.io/v1alpha1\n      command: p\n",
       "exec.apiVersion \"client.authentication.k8s.io/v1alpha1\" is not supported"},
      {"      apiVersion: client.authentication.k8s.io/v1\n      command: p\n",
       "exec.interactiveMode must be set with client.authentication.k8s.io/v1"},
      {"      apiVersion: client.authentication.k8s.io/v1\n      command: p\n"
       "      interactiveMode: Sometimes\n",
       "exec.interactiveMode \"Sometimes\" is not Never, IfAvailable or Always"},
      {"      apiVersion: client.authentication.k8s.io/v1beta1\n", "exec.command is not set"},
      {"      apiVersion: client.authentication.k8s.io/v1beta1\n      command: p\n"
       "      env: [{value: x}]\n",
       "an exec.env entry has no name"},
  }));
  TempDir dir;
  std::string path = dir.write(
      "config", kubeconfig("    server: https://10.0.0.1\n    insecure-skip-tls-verify: true\n",
                           "    exec:\n" + exec));
  webhook::Result<kube::ClusterConfig> c = kube::kubeconfig_config(
      path, kube::KubeconfigOptions{.allow_insecure = true, .allow_exec = true});
  CAPTURE(exec);
  REQUIRE_FALSE(c.has_value());
  CHECK_THAT(c.error().message, Catch::Contains("user \"u1\": " + why));
}
