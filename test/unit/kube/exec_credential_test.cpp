// kubeconfig exec credential plugins as kubectl runs them (a shell script written here stands in
// for gke-gcloud-auth-plugin), against the fake API server that requires the token the plugin
// prints; KUBECONFIG's files merged; auth-provider users refused.
#include "kube/exec_credential.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "base/encoding/base64.h"
#include "fake_apiserver.h"
#include "kube/api_client.h"
#include "kube/config.h"
#include "kube_support.h"

using nlohmann::json;
using testing::FakeApiServer;
using testing::TempDir;

namespace {

bool one_line(const std::string& s) { return s.find('\n') == std::string::npos; }

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A plugin script in `dir`: it checks its args (--audience "tpu slice") and the env the
// kubeconfig adds (PLUGIN_MODE=test), stores KUBERNETES_EXEC_INFO in info.json, appends a line to
// runs for each run and prints answer.json (which the test writes).
struct Plugin {
  explicit Plugin(const TempDir& d, const std::string& name = "fake-auth-plugin") : dir(d) {
    std::string p = dir.path.string();
    script = dir.write(name,
                       "#!/bin/sh\n"
                       "[ $# -eq 2 ] && [ \"$1\" = --audience ] && [ \"$2\" = 'tpu slice' ] || "
                       "{ echo \"fake-auth-plugin: bad args: $*\" >&2; exit 3; }\n"
                       "[ \"$PLUGIN_MODE\" = test ] || "
                       "{ echo \"fake-auth-plugin: PLUGIN_MODE is '$PLUGIN_MODE'\" >&2; exit 4; }\n"
                       "[ -n \"$KUBERNETES_EXEC_INFO\" ] || "
                       "{ echo 'fake-auth-plugin: no KUBERNETES_EXEC_INFO' >&2; exit 5; }\n"
                       "printf '%s' \"$KUBERNETES_EXEC_INFO\" > '" +
                           p + "/info.json'\necho run >> '" + p + "/runs'\nexec cat '" + p +
                           "/answer.json'\n");
    ::chmod(script.c_str(), 0755);
  }
  void answer(const json& j) const { dir.write("answer.json", j.dump()); }
  void token(const std::string& t, const std::string& version = kube::kExecApiV1beta1,
             const std::string& expiry = "2099-01-01T00:00:00Z") const {
    json status = {{"token", t}};
    if (!expiry.empty()) {
      status["expirationTimestamp"] = expiry;
    }
    answer({{"apiVersion", version}, {"kind", "ExecCredential"}, {"status", status}});
  }
  int runs() const {
    std::string text = slurp((dir.path / "runs").string());
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  }
  json info() const { return json::parse(slurp((dir.path / "info.json").string())); }

  const TempDir& dir;
  std::string script;
};

// A kubeconfig for `server` whose user runs `exec` (YAML lines under `exec:`).
std::string exec_kubeconfig(const std::string& server, const std::string& exec,
                            const std::string& cluster_extra = "") {
  return "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
         "clusters:\n- name: k\n  cluster:\n    server: " +
         server + "\n" + cluster_extra +
         "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
         "users:\n- name: u\n  user:\n    exec:\n" +
         exec;
}

std::string exec_block(const std::string& command, const std::string& version,
                       const std::string& extra = "") {
  return "      apiVersion: " + version + "\n      command: " + command +
         "\n      args: [--audience, tpu slice]\n"
         "      env:\n      - {name: PLUGIN_MODE, value: test}\n" +
         extra;
}

kube::KubeconfigOptions exec_options() {
  return {.allow_exec = true, .search_path = "/usr/bin:/bin"};
}

// One GET of the Pods; the HTTP status, or the error message.
std::string list_pods(kube::ApiClient& client) {
  auto r = client.send("GET", "/api/v1/pods", "", "", std::chrono::seconds(10));
  return r ? std::to_string(r->status) : r.error().message;
}

}  // namespace

TEST_CASE("exec plugin: its token is sent, cached until it expires, and a 401 runs it once more") {
  auto version = GENERATE(std::string(kube::kExecApiV1beta1), std::string(kube::kExecApiV1));
  CAPTURE(version);
  TempDir dir;
  Plugin plugin(dir);
  plugin.token("tok-1", version);
  FakeApiServer::Options options;
  options.tokens = {"tok-1"};
  FakeApiServer api(options);
  std::string server = "http://127.0.0.1:" + std::to_string(api.port());
  std::string path = dir.write(
      "config", exec_kubeconfig(server, exec_block(plugin.script, version,
                                                   "      interactiveMode: IfAvailable\n")));
  webhook::Result<kube::ClusterConfig> config = kube::kubeconfig_config(path, exec_options());
  REQUIRE(config.has_value());
  auto client = kube::ApiClient::create(*config);
  REQUIRE(client.has_value());

  CHECK(list_pods(**client) == "200");
  CHECK(plugin.runs() == 1);
  CHECK(list_pods(**client) == "200");  // within the expiry: not run again
  CHECK(plugin.runs() == 1);
  CHECK(api.tokens_seen() == std::set<std::string>{"tok-1"});
  json info = plugin.info();
  CHECK(info == json{{"kind", "ExecCredential"},
                     {"apiVersion", version},
                     {"spec", {{"interactive", false}}}});

  // The API server stops accepting tok-1: one 401, the plugin runs once more, the request is
  // sent again with its new token.
  api.set_tokens({"tok-2"});
  plugin.token("tok-2", version);
  CHECK(list_pods(**client) == "200");
  CHECK(plugin.runs() == 2);
  CHECK(api.tokens_seen() == std::set<std::string>{"tok-1", "tok-2"});

  // A plugin whose token is refused again: one more run, then the 401 is the answer (no loop).
  api.set_tokens({"tok-3"});
  CHECK(list_pods(**client) == "401");
  CHECK(plugin.runs() == 3);
}

TEST_CASE("exec plugin: cached until status.expirationTimestamp, then run again") {
  TempDir dir;
  Plugin plugin(dir);
  plugin.token("tok-1", kube::kExecApiV1beta1, "2030-06-01T12:00:00Z");
  auto now = std::chrono::system_clock::from_time_t(1906545600 - 60);  // 2030-06-01T11:59:00Z
  kube::ExecConfig c;
  c.api_version = kube::kExecApiV1beta1;
  c.command = plugin.script;
  c.args = {"--audience", "tpu slice"};
  c.env = {{"PLUGIN_MODE", "test"}};
  c.where = "test";
  kube::ExecCredentialSource source(c, [&] { return now; });
  REQUIRE(source.get().value().token == "tok-1");
  now += std::chrono::seconds(59);  // 11:59:59
  REQUIRE(source.get().value().token == "tok-1");
  CHECK(plugin.runs() == 1);
  now += std::chrono::seconds(1);  // 12:00:00: expired
  plugin.token("tok-2", kube::kExecApiV1beta1, "");
  CHECK(source.get().value().token == "tok-2");
  CHECK(plugin.runs() == 2);
  now += std::chrono::hours(1000);  // no expirationTimestamp: kept until a 401
  CHECK(source.get().value().token == "tok-2");
  CHECK(source.get(/*force=*/true).value().token == "tok-2");
  CHECK(plugin.runs() == 3);
  CHECK(source.runs() == 3);
}

TEST_CASE("exec plugin: provideClusterInfo gives the plugin the cluster, its CA and its config") {
  TempDir dir;
  Plugin plugin(dir);
  plugin.token("tok-1");
  dir.write("ca.pem", "CA PEM\n");
  std::string cluster_extra =
      "    certificate-authority: ca.pem\n"
      "    extensions:\n"
      "    - name: other.example.com/x\n      extension: {ignored: true}\n"
      "    - name: client.authentication.k8s.io/exec\n"
      "      extension: {audience: tpu, retries: 3, debug: false, label: \"007\"}\n";
  std::string path =
      dir.write("config", exec_kubeconfig("https://10.0.0.1:6443",
                                          exec_block(plugin.script, kube::kExecApiV1beta1,
                                                     "      provideClusterInfo: true\n"),
                                          cluster_extra));
  webhook::Result<kube::ClusterConfig> config = kube::kubeconfig_config(path, exec_options());
  REQUIRE(config.has_value());
  REQUIRE(config->exec != nullptr);
  webhook::Result<kube::ExecCredential> cred = kube::run_exec_plugin(*config->exec);
  REQUIRE(cred.has_value());
  CHECK(cred->token == "tok-1");
  CHECK(plugin.info() == json::parse(R"({"kind": "ExecCredential",
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "spec": {"interactive": false,
                                 "cluster": {"server": "https://10.0.0.1:6443",
                                             "certificate-authority-data": "Q0EgUEVNCg==",
                                             "config": {"audience": "tpu", "retries": 3,
                                                        "debug": false, "label": "007"}}}})"));
}

TEST_CASE("exec plugin: interactiveMode decides spec.interactive; Always needs a terminal") {
  TempDir dir;
  Plugin plugin(dir);
  plugin.token("tok-1", kube::kExecApiV1);
  kube::ExecConfig c;
  c.api_version = kube::kExecApiV1;
  c.command = plugin.script;
  c.args = {"--audience", "tpu slice"};
  c.env = {{"PLUGIN_MODE", "test"}};
  c.where = "kubeconfig x: user \"u\"";
  auto [mode, terminal, interactive] = GENERATE(table<std::string, bool, bool>({
      {"Never", false, false},
      {"Never", true, false},
      {"IfAvailable", false, false},
      {"IfAvailable", true, true},
      {"Always", true, true},
  }));
  CAPTURE(mode, terminal);
  c.interactive_mode = mode;
  c.stdin_is_terminal = terminal;
  REQUIRE(kube::run_exec_plugin(c).has_value());
  CHECK(plugin.info()["spec"]["interactive"] == interactive);

  c.interactive_mode = "Always";
  c.stdin_is_terminal = false;
  webhook::Result<kube::ExecCredential> refused = kube::run_exec_plugin(c);
  REQUIRE_FALSE(refused.has_value());
  CHECK_THAT(refused.error().message, Catch::Contains("interactiveMode Always") &&
                                          Catch::Contains("standard input is not a terminal") &&
                                          Catch::Contains("user \"u\""));
}

TEST_CASE("exec plugin: a missing command prints the kubeconfig's installHint on one line") {
  TempDir dir;
  std::string path = dir.write(
      "config", exec_kubeconfig("https://10.0.0.1",
                                exec_block("gke-gcloud-auth-plugin", kube::kExecApiV1beta1,
                                           "      installHint: Install "
                                           "gke-gcloud-auth-plugin for use with kubectl "
                                           "by following\n        https://example.test/install\n"),
                                "    insecure-skip-tls-verify: true\n"));
  kube::KubeconfigOptions options = exec_options();
  options.allow_insecure = true;
  options.search_path = dir.path.string();  // holds no such command
  webhook::Result<kube::ClusterConfig> config = kube::kubeconfig_config(path, options);
  REQUIRE(config.has_value());
  auto client = kube::ApiClient::create(*config);
  REQUIRE(client.has_value());
  std::string message = list_pods(**client);
  CHECK(message == "kubeconfig " + path +
                       ": user \"u\": exec plugin \"gke-gcloud-auth-plugin\": is not found on "
                       "PATH; Install gke-gcloud-auth-plugin for use with kubectl by following "
                       "https://example.test/install");
}

TEST_CASE(
    "exec plugin: a bare command is looked up on PATH, one with a slash in the kubeconfig's "
    "directory") {
  TempDir dir;
  std::filesystem::create_directories(dir.path / "bin");
  std::filesystem::create_directories(dir.path / "kube" / "plugins");
  TempDir other;
  Plugin on_path(other, "on-path-plugin");
  on_path.token("from-path");
  std::filesystem::rename(on_path.script, dir.path / "bin" / "on-path-plugin");
  TempDir third;
  Plugin relative(third, "rel-plugin");
  relative.token("from-relative");
  std::filesystem::rename(relative.script, dir.path / "kube" / "plugins" / "rel-plugin");

  kube::KubeconfigOptions options = exec_options();
  options.allow_insecure = true;
  options.search_path = "/nonexistent::" + (dir.path / "bin").string();
  auto token_for = [&](const std::string& command) {
    std::string path = (dir.path / "kube" / "config").string();
    std::ofstream(path) << exec_kubeconfig("https://10.0.0.1",
                                           exec_block(command, kube::kExecApiV1beta1),
                                           "    insecure-skip-tls-verify: true\n");
    webhook::Result<kube::ClusterConfig> config = kube::kubeconfig_config(path, options);
    REQUIRE(config.has_value());
    webhook::Result<kube::ExecCredential> cred = kube::run_exec_plugin(*config->exec);
    return cred ? cred->token : cred.error().message;
  };
  CHECK(token_for("on-path-plugin") == "from-path");
  CHECK(token_for("plugins/rel-plugin") == "from-relative");
  CHECK(token_for("./plugins/rel-plugin") == "from-relative");
  CHECK_THAT(token_for("rel-plugin"), Catch::Contains("is not found on PATH"));
  CHECK_THAT(token_for("bin/on-path-plugin"), Catch::Contains("is not an executable file"));
}

TEST_CASE("exec plugin: bad answers and failures are one-line errors naming the command") {
  TempDir dir;
  Plugin plugin(dir);
  kube::ExecConfig c;
  c.api_version = kube::kExecApiV1;
  c.command = plugin.script;
  c.args = {"--audience", "tpu slice"};
  c.env = {{"PLUGIN_MODE", "test"}};
  c.interactive_mode = "Never";
  c.where = "kubeconfig x: user \"u\"";
  auto [answer, why] = GENERATE(table<std::string, std::string>({
      {"not json", "printed no ExecCredential JSON"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential",
           "status":{"token":"t"}})",
       "configured for apiVersion client.authentication.k8s.io/v1 but answered "
       "client.authentication.k8s.io/v1beta1"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"Secret","status":{"token":"t"}})",
       "answered kind \"Secret\""},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"})",
       "without a status"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{}})",
       "neither status.token nor"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
           "status":{"clientCertificateData":"-----BEGIN CERTIFICATE-----"}})",
       "only one of status.clientCertificateData and status.clientKeyData"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
           "status":{"token":"t","expirationTimestamp":"tomorrow"}})",
       "not RFC 3339"},
  }));
  CAPTURE(answer);
  dir.write("answer.json", answer);
  webhook::Result<kube::ExecCredential> r = kube::run_exec_plugin(c);
  REQUIRE_FALSE(r.has_value());
  CHECK_THAT(r.error().message, Catch::StartsWith("kubeconfig x: user \"u\": exec plugin \"" +
                                                  plugin.script + "\": ") &&
                                    Catch::Contains(why));
  CHECK(one_line(r.error().message));
}

TEST_CASE("exec plugin: a non-zero exit, a wrong argument and a hang are errors") {
  TempDir dir;
  kube::ExecConfig c;
  c.api_version = kube::kExecApiV1;
  c.interactive_mode = "Never";
  c.where = "w";
  c.search_path = "/usr/bin:/bin";
  c.command = "sh";
  c.args = {"-c", "echo denied >&2; exit 7"};
  webhook::Result<kube::ExecCredential> r = kube::run_exec_plugin(c);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().message ==
        "w: exec plugin \"sh\": exited with status 7 (its stderr above says why)");

  Plugin plugin(dir);
  plugin.token("t", kube::kExecApiV1);
  c.command = plugin.script;
  c.args = {"--audience", "wrong"};  // the script refuses it (exit 3)
  c.env = {{"PLUGIN_MODE", "test"}};
  r = kube::run_exec_plugin(c);
  REQUIRE_FALSE(r.has_value());
  CHECK_THAT(r.error().message, Catch::Contains("exited with status 3"));
  c.args = {"--audience", "tpu slice"};
  c.env = {{"PLUGIN_MODE", "other"}};
  r = kube::run_exec_plugin(c);
  REQUIRE_FALSE(r.has_value());
  CHECK_THAT(r.error().message, Catch::Contains("exited with status 4"));

  c.command = "sh";
  c.args = {"-c", "exec sleep 30"};
  c.timeout = std::chrono::milliseconds(300);
  auto start = std::chrono::steady_clock::now();
  r = kube::run_exec_plugin(c);
  REQUIRE_FALSE(r.has_value());
  CHECK_THAT(r.error().message, Catch::Contains("did not answer within 300ms; it was stopped"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));

  // A plugin that may be asking the user gets at least five minutes: one second is not too long.
  c.interactive_mode = "IfAvailable";
  c.stdin_is_terminal = true;
  c.args = {"-c", "sleep 1; cat '" + (dir.path / "answer.json").string() + "'"};
  r = kube::run_exec_plugin(c);
  REQUIRE(r.has_value());
  CHECK(r->token == "t");
}

TEST_CASE("exec plugin: a client certificate from status is presented to the API server") {
  TempDir dir;
  testing::TestPki pki(dir);
  Plugin plugin(dir);
  plugin.answer(
      {{"apiVersion", kube::kExecApiV1beta1},
       {"kind", "ExecCredential"},
       {"status",
        {{"clientCertificateData", pki.client_cert_pem}, {"clientKeyData", pki.client_key_pem}}}});
  FakeApiServer::Options options;
  options.tls_cert_file = pki.server_cert_file;
  options.tls_key_file = pki.server_key_file;
  options.tls_client_ca_file = pki.ca_file;
  options.tokens = {"not-this-one"};
  FakeApiServer api(options);
  std::string path =
      dir.write("config", exec_kubeconfig("https://127.0.0.1:" + std::to_string(api.port()),
                                          exec_block(plugin.script, kube::kExecApiV1beta1),
                                          "    certificate-authority: " + pki.ca_file + "\n"));
  webhook::Result<kube::ClusterConfig> config = kube::kubeconfig_config(path, exec_options());
  REQUIRE(config.has_value());
  auto client = kube::ApiClient::create(*config);
  REQUIRE(client.has_value());
  CHECK(list_pods(**client) == "200");
  CHECK(api.client_subjects_seen() == std::set<std::string>{"webhook"});
  CHECK(api.tokens_seen().empty());

  // A certificate that is not one: a clear error, no request.
  plugin.answer({{"apiVersion", kube::kExecApiV1beta1},
                 {"kind", "ExecCredential"},
                 {"status", {{"clientCertificateData", "junk"}, {"clientKeyData", "junk"}}}});
  auto again = kube::ApiClient::create(*config);
  REQUIRE(again.has_value());
  CHECK_THAT(list_pods(**again),
             Catch::Contains("the client certificate is not a PEM certificate"));
}
