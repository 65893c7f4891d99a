#pragma once
// Where the Kubernetes API is and how to authenticate to it: in-cluster (the Pod's service
// account) or a kubeconfig file (--kube-config-path).
//
//   webhook::Result<kube::ClusterConfig> config = kube::load_config(flags.kube_config_path);
//   if (!config) { log(config.error().message); return 1; }   // says which field is wrong
//   kube::TokenSource token(config->token, config->token_file);
//   webhook::Result<std::string> bearer = token.get();          // re-read after a rotation
//
// Decisions (docs/legacy-placement.md): https needs a CA (certificate-authority or -data, or the
// service account's ca.crt) and the server's name or IP is verified against its certificate;
// `insecure-skip-tls-verify: true` is refused, since the webhook hands out TPU slots from what
// the API tells it. `http://` is accepted only for loopback hosts (kubectl proxy, tests).
// exec credential plugins (kube/exec_credential.h) are read for kubectl-tpu_slice only
// (KubeconfigOptions::allow_exec); auth-provider users are refused with a message naming what
// replaces them: with allow_exec the exec plugin or token (kubectl 1.26 removed the gcp and azure
// providers), without it, as an exec user is, a token, tokenFile or client certificate.

#include <chrono>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status/result.h"

namespace kube {

struct ExecConfig;  // kube/exec_credential.h

struct ClusterConfig {
  bool https = true;
  std::string host;  // DNS name or IP, IPv6 without brackets
  int port = 443;
  std::string base_path;   // a path prefix of the server URL ("" or e.g. "/k8s/clusters/c-1")
  std::string ca_pem;      // the CAs trusted for the server; required for https
  std::string token;       // a static bearer token
  std::string token_file;  // re-read when it changes; wins over `token` (as client-go)
  std::string client_cert_pem;
  std::string client_key_pem;
  // kubeconfig insecure-skip-tls-verify, honoured only when the caller allows it
  // (KubeconfigOptions::allow_insecure: a read-only client such as kubectl-tpu_slice): the
  // server's certificate is then not verified and no CA is needed.
  bool insecure_skip_verify = false;
  std::string context_namespace;  // the context's namespace ("" when it sets none)
  // The user's exec credential plugin (only with KubeconfigOptions::allow_exec): ApiClient runs
  // it for a token or client certificate instead of using the fields above.
  std::shared_ptr<const ExecConfig> exec;
  std::string origin;  // for messages: "in-cluster service account" or "kubeconfig <path> ..."
};

inline constexpr std::string_view kServiceAccountDir =
    "/var/run/secrets/kubernetes.io/serviceaccount";

// Reads an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env();

// In-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (an IPv6 host may come with or
// without brackets), `<sa_dir>/token` (read on use, so rotation is seen) and `<sa_dir>/ca.crt`.
// FailedPrecondition naming what is missing when not running in a Pod.
webhook::Result<ClusterConfig> in_cluster_config(const EnvLookup& env = process_env(),
                                                 std::string_view sa_dir = kServiceAccountDir);

// A kubeconfig file: the current-context's cluster (server, certificate-authority or
// certificate-authority-data) and user (token or tokenFile, client-certificate(-data) and
// client-key(-data)). Relative file paths are resolved against the kubeconfig's directory.
// InvalidArgument naming the file and field for a malformed file, an unknown context, a missing
// CA, insecure-skip-tls-verify, or an exec/auth-provider user.
webhook::Result<ClusterConfig> kubeconfig_config(const std::string& path);

// How a client other than the webhook reads a kubeconfig, as kubectl does.
struct KubeconfigOptions {
  std::string context{};        // instead of current-context ("" keeps it)
  bool allow_insecure = false;  // accept insecure-skip-tls-verify: true
  bool allow_exec = false;      // accept an exec credential plugin (ClusterConfig::exec)
  // For an exec plugin: where a bare command name is looked up ($PATH), whether stdin is a
  // terminal (interactiveMode), and how long it may run.
  std::string search_path{};
  bool stdin_is_terminal = false;
  std::chrono::milliseconds exec_timeout{std::chrono::seconds(60)};
};
webhook::Result<ClusterConfig> kubeconfig_config(const std::string& path,
                                                 const KubeconfigOptions& options);

// Several kubeconfig files merged by kubectl's rules (client-go's clientcmd loading rules): for
// contexts, clusters and users, the first file that names an entry wins it whole; current-context
// comes from the first file that sets it; relative paths (files, an exec command with a slash)
// are resolved against the directory of the file the entry came from. With more than one path,
// files that do not exist are skipped; InvalidArgument when none exists or one does not parse.
webhook::Result<ClusterConfig> kubeconfig_config(const std::vector<std::string>& paths,
                                                 const KubeconfigOptions& options);

// The kubeconfig files kubectl would read: `flag` alone when set, else every file of $KUBECONFIG
// (colon-separated; empty entries and repeats dropped, as client-go does), else
// $HOME/.kube/config. Empty when none of those is known.
std::vector<std::string> kubeconfig_paths(const std::string& flag,
                                          const EnvLookup& env = process_env());

// kubeconfig_config(path) when `kube_config_path` is set, else in_cluster_config().
webhook::Result<ClusterConfig> load_config(const std::string& kube_config_path);

// Splits a server URL "https://host[:port][/prefix]" (IPv6 hosts in brackets) into `config`'s
// https/host/port/base_path. InvalidArgument for another scheme, a bad port, or http:// to a host
// that is not loopback.
webhook::Status parse_server_url(std::string_view url, ClusterConfig& config);

// The bearer token, from a file re-read whenever it changes (projected service-account tokens
// rotate about hourly), else a fixed string. Thread-safe.
class TokenSource {
 public:
  TokenSource(std::string token, std::string file)
      : token_(std::move(token)), file_(std::move(file)) {}
  // The current token ("" when there is none). With `force`, re-reads the file even if it looks
  // unchanged (after a 401). Unavailable naming the file when it cannot be read.
  webhook::Result<std::string> get(bool force = false);
  // How many times the file was (re)read; for tests and metrics.
  int reads() const;

 private:
  mutable std::mutex mu_;
  std::string token_;
  std::string file_;
  struct Stamp {
    std::timespec mtime{};
    long long size = -1;
    unsigned long long inode = 0;
    friend bool operator==(const Stamp& a, const Stamp& b) {
      return a.mtime.tv_sec == b.mtime.tv_sec && a.mtime.tv_nsec == b.mtime.tv_nsec &&
             a.size == b.size && a.inode == b.inode;
    }
  };
  std::optional<Stamp> stamp_;
  int reads_ = 0;
};

// The whole file, or Unavailable naming it (and the reason) when it cannot be read. Files over
// `max_bytes` are refused.
webhook::Result<std::string> read_file(const std::string& path, std::size_t max_bytes = 1 << 20);

}  // namespace kube
