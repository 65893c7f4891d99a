#pragma once
// kubeconfig `exec` credential plugins run as kubectl runs them (client.authentication.k8s.io v1
// and v1beta1; docs/kubectl-plugin.md cites the rules): the command with its args, the
// kubeconfig's env added to this process's environment, KUBERNETES_EXEC_INFO holding the
// ExecCredential input (spec.interactive, and spec.cluster when provideClusterInfo), stdin passed
// only when the plugin runs interactively, stderr passed through and stdout read as an
// ExecCredential whose status holds a token or a client certificate and key.
//
//   kube::ExecCredentialSource source(exec_config);       // parsed by kube/config.cpp
//   webhook::Result<kube::ExecCredential> c = source.get();       // runs the plugin once
//   c = source.get();                          // cached until status.expirationTimestamp
//   c = source.get(/*force=*/true);            // after a 401: runs it again
//
// Errors (InvalidArgument, one line, naming the kubeconfig user and the command): the command not
// found (with the kubeconfig's installHint), a non-zero exit, no answer within the timeout (the
// plugin is killed), output that is not an ExecCredential of the configured apiVersion, a status
// without a token or a certificate and key pair, interactiveMode Always without a terminal.

#include <chrono>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status/result.h"
#include "kube/rfc3339.h"  // parse_rfc3339: a credential's expirationTimestamp

namespace kube {

inline constexpr const char* kExecApiV1 = "client.authentication.k8s.io/v1";
inline constexpr const char* kExecApiV1beta1 = "client.authentication.k8s.io/v1beta1";

// A kubeconfig user's `exec` section, checked and resolved.
struct ExecConfig {
  std::string api_version;  // kExecApiV1 or kExecApiV1beta1
  // As in the kubeconfig: a bare name is looked up on `search_path` when run; a name with a slash
  // has already been resolved against the kubeconfig file's directory.
  std::string command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // added to the process environment
  std::string install_hint;
  bool provide_cluster_info = false;
  std::string interactive_mode = "IfAvailable";  // Never, IfAvailable or Always
  // spec.cluster of KUBERNETES_EXEC_INFO (server, certificate-authority-data, ...; the cluster's
  // extension client.authentication.k8s.io/exec as `config`). Sent when provide_cluster_info.
  nlohmann::json cluster = nlohmann::json::object();
  std::string search_path;         // $PATH for a bare command name
  bool stdin_is_terminal = false;  // whether this process's stdin is a terminal
  // Then the plugin is killed; at least 5 minutes when it runs interactively.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  std::string where;  // "kubeconfig FILE: user "NAME"", for messages
};

// What a plugin answered.
struct ExecCredential {
  std::string token;
  std::string client_cert_pem;
  std::string client_key_pem;
  // status.expirationTimestamp; none: valid until the API server answers 401.
  std::optional<std::chrono::system_clock::time_point> expiry;
};

// The ExecCredential the plugin gets in KUBERNETES_EXEC_INFO.
nlohmann::json exec_input(const ExecConfig& config, bool interactive);

// Whether the plugin runs interactively (Never: no; IfAvailable: when stdin is a terminal;
// Always: yes, or an error when stdin is not a terminal).
webhook::Result<bool> exec_interactive(const ExecConfig& config);

// The plugin's stdout read as an ExecCredential of config.api_version.
webhook::Result<ExecCredential> parse_exec_output(const ExecConfig& config, std::string_view out);

// Runs the plugin once (fork and exec; its stdout captured, at most 1 MiB) and reads its answer.
webhook::Result<ExecCredential> run_exec_plugin(const ExecConfig& config);

// A plugin's credential, run on first use and again once it has expired or after a 401.
// Thread-safe: one run at a time.
class ExecCredentialSource {
 public:
  using Clock = std::function<std::chrono::system_clock::time_point()>;
  explicit ExecCredentialSource(ExecConfig config, Clock now = {});
  webhook::Result<ExecCredential> get(bool force = false);
  int runs() const;  // how many times the plugin ran; for tests
  const ExecConfig& config() const { return config_; }

 private:
  ExecConfig config_;
  Clock now_;
  mutable std::mutex mu_;
  std::optional<ExecCredential> cached_;
  int runs_ = 0;
};

}  // namespace kube
