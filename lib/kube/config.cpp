#include "kube/config.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/encoding/base64.h"
#include "base/text/text.h"

namespace kube {
namespace {

using webhook::Error;
using webhook::ErrorCode;

bool is_loopback(std::string_view host) {
  if (host == "localhost") {
    return true;
  }
  std::string h(host);
  in_addr a4{};
  if (inet_pton(AF_INET, h.c_str(), &a4) == 1) {
    return (ntohl(a4.s_addr) >> 24) == 127;
  }
  in6_addr a6{};
  return inet_pton(AF_INET6, h.c_str(), &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

std::optional<int> parse_port(std::string_view text) {
  int port = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || end != text.data() + text.size() || port <= 0 || port > 65535) {
    return std::nullopt;
  }
  return port;
}

std::string strip_space(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c)) == 0) {
      out.push_back(c);
    }
  }
  return out;
}

// A scalar member of a YAML map as a string; "" when absent or null.
std::string scalar(const YAML::Node& map, const char* key) {
  YAML::Node v = map[key];
  if (!v || v.IsNull() || !v.IsScalar()) {
    return "";
  }
  return v.as<std::string>();
}

// The `field` object of the entry of `list` whose name is `name`.
std::optional<YAML::Node> named(const YAML::Node& list, const std::string& name,
                                const char* field) {
  if (!list || !list.IsSequence()) {
    return std::nullopt;
  }
  for (const YAML::Node& entry : list) {
    if (entry.IsMap() && scalar(entry, "name") == name) {
      YAML::Node v = entry[field];
      return v && v.IsMap() ? v : YAML::Node(YAML::NodeType::Map);
    }
  }
  return std::nullopt;
}

// Inline data (base64) wins over a file, as in client-go.
webhook::Result<std::string> data_or_file(const YAML::Node& map, const char* data_key,
                                          const char* file_key, const std::filesystem::path& dir,
                                          const std::string& where) {
  std::string data = scalar(map, data_key);
  if (!data.empty()) {
    std::optional<std::string> decoded = webhook::base64_decode(strip_space(data));
    if (!decoded) {
      return webhook::invalid_argument(where + ": " + data_key + " is not valid base64");
    }
    return *decoded;
  }
  std::string file = scalar(map, file_key);
  if (file.empty()) {
    return std::string();
  }
  std::filesystem::path p(file);
  if (p.is_relative()) {
    p = dir / p;
  }
  webhook::Result<std::string> text = read_file(p.string());
  if (!text) {
    return webhook::invalid_argument(where + ": " + file_key + ": " + text.error().message);
  }
  return text;
}

// The cluster entry's server, TLS verification and CA.
webhook::Status read_cluster(const YAML::Node& cluster, const std::filesystem::path& dir,
                             const std::string& cluster_where, bool allow_insecure,
                             ClusterConfig& config) {
  std::string server = scalar(cluster, "server");
  if (server.empty()) {
    return webhook::invalid_argument(cluster_where + ": server is not set");
  }
  if (webhook::Status s = parse_server_url(server, config); !s) {
    return webhook::invalid_argument(cluster_where + ": " + s.error().message);
  }
  std::string insecure = scalar(cluster, "insecure-skip-tls-verify");
  config.insecure_skip_verify = insecure == "true" || insecure == "True" || insecure == "yes";
  if (config.insecure_skip_verify && !allow_insecure) {
    return webhook::invalid_argument(
        cluster_where +
        ": insecure-skip-tls-verify is not supported: the webhook places TPU workers from what "
        "the API server tells it, so it verifies the server; set certificate-authority or "
        "certificate-authority-data instead");
  }
  webhook::Result<std::string> ca = data_or_file(cluster, "certificate-authority-data",
                                                 "certificate-authority", dir, cluster_where);
  if (!ca) {
    return ca.error();
  }
  config.ca_pem = std::move(*ca);
  if (config.https && config.ca_pem.empty() && !config.insecure_skip_verify) {
    return webhook::invalid_argument(
        cluster_where +
        ": neither certificate-authority nor certificate-authority-data is set; the API "
        "server's certificate is verified against it");
  }
  return {};
}

// The user entry's credentials: a token or token file, or a client certificate and key.
webhook::Status read_user(const YAML::Node& user, const std::filesystem::path& dir,
                          const std::string& user_where, ClusterConfig& config) {
  for (const char* plugin : {"exec", "auth-provider"}) {
    if (user[plugin]) {
      return webhook::invalid_argument(
          user_where + ": " + plugin +
          " credential plugins are not supported; use a token (for example one from `kubectl "
          "create token SERVICE-ACCOUNT`, or a service account's), tokenFile or client "
          "certificate, or run in the cluster");
    }
  }
  config.token = scalar(user, "token");
  std::string token_file = scalar(user, "tokenFile");
  if (token_file.empty()) {
    token_file = scalar(user, "token-file");
  }
  if (!token_file.empty()) {
    std::filesystem::path p(token_file);
    config.token_file = p.is_relative() ? (dir / p).string() : p.string();
  }
  webhook::Result<std::string> cert =
      data_or_file(user, "client-certificate-data", "client-certificate", dir, user_where);
  if (!cert) {
    return cert.error();
  }
  webhook::Result<std::string> key =
      data_or_file(user, "client-key-data", "client-key", dir, user_where);
  if (!key) {
    return key.error();
  }
  if (cert->empty() != key->empty()) {
    return webhook::invalid_argument(user_where +
                                     ": client-certificate and client-key go "
                                     "together; one of them is missing");
  }
  config.client_cert_pem = std::move(*cert);
  config.client_key_pem = std::move(*key);
  return {};
}

webhook::Result<ClusterConfig> parse_kubeconfig(const YAML::Node& root, const std::string& path,
                                                const KubeconfigOptions& options) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::string where = "kubeconfig " + path;
  if (!root.IsMap()) {
    return webhook::invalid_argument(where + ": not a kubeconfig (expected a YAML mapping)");
  }
  std::string context_name =
      options.context.empty() ? scalar(root, "current-context") : options.context;
  if (context_name.empty()) {
    return webhook::invalid_argument(where +
                                     ": current-context is not set; run kubectl config "
                                     "use-context NAME on it");
  }
  std::optional<YAML::Node> context = named(root["contexts"], context_name, "context");
  if (!context) {
    return webhook::invalid_argument(where + ": " +
                                     (options.context.empty() ? "current-context " : "context ") +
                                     webhook::quote(context_name) + " is not among its contexts");
  }
  std::string cluster_name = scalar(*context, "cluster");
  std::string user_name = scalar(*context, "user");
  std::optional<YAML::Node> cluster = named(root["clusters"], cluster_name, "cluster");
  if (!cluster) {
    return webhook::invalid_argument(where + ": context " + webhook::quote(context_name) +
                                     " names cluster " + webhook::quote(cluster_name) +
                                     ", which is not among its clusters");
  }
  ClusterConfig config;
  config.origin = where + " (context " + webhook::quote(context_name) + ")";
  config.context_namespace = scalar(*context, "namespace");
  RETURN_IF_ERROR(read_cluster(*cluster, dir, where + ": cluster " + webhook::quote(cluster_name),
                               options.allow_insecure, config));
  if (user_name.empty()) {
    return config;  // no credentials: anonymous (or kubectl proxy)
  }
  std::optional<YAML::Node> user = named(root["users"], user_name, "user");
  if (!user) {
    return webhook::invalid_argument(where + ": context " + webhook::quote(context_name) +
                                     " names user " + webhook::quote(user_name) +
                                     ", which is not among its users");
  }
  RETURN_IF_ERROR(read_user(*user, dir, where + ": user " + webhook::quote(user_name), config));
  return config;
}

}  // namespace

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());  // NOLINT(concurrency-mt-unsafe): read-only use
    return v == nullptr ? std::nullopt : std::optional<std::string>(v);
  };
}

webhook::Result<std::string> read_file(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Error{
        ErrorCode::kUnavailable,
        "cannot read " + path + ": " + std::error_code(errno, std::generic_category()).message()};
  }
  std::string out;
  char buf[8192];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    out.append(buf, static_cast<std::size_t>(in.gcount()));
    if (out.size() > max_bytes) {
      return Error{ErrorCode::kResourceExhausted,
                   path + " is larger than " + std::to_string(max_bytes) + " bytes"};
    }
  }
  return out;
}

webhook::Status parse_server_url(std::string_view url, ClusterConfig& config) {
  std::string_view rest;
  if (url.starts_with("https://")) {
    config.https = true;
    rest = url.substr(8);
  } else if (url.starts_with("http://")) {
    config.https = false;
    rest = url.substr(7);
  } else {
    return webhook::invalid_argument("server " + webhook::quote(url) + " must start with https://");
  }
  std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string path = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  while (!path.empty() && path.back() == '/') {
    path.pop_back();
  }
  std::string_view host = authority;
  std::string_view port_text;
  if (authority.starts_with('[')) {
    std::size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return webhook::invalid_argument("server " + webhook::quote(url) +
                                       " has an unclosed [ in its IPv6 host");
    }
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return webhook::invalid_argument("server " + webhook::quote(url) + " has junk after ]");
      }
      port_text = after.substr(1);
    }
  } else if (std::size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port_text = authority.substr(colon + 1);
  }
  if (host.empty()) {
    return webhook::invalid_argument("server " + webhook::quote(url) + " has no host");
  }
  int port = config.https ? 443 : 80;
  if (!port_text.empty()) {
    std::optional<int> p = parse_port(port_text);
    if (!p) {
      return webhook::invalid_argument("server " + webhook::quote(url) + " has a bad port " +
                                       webhook::quote(port_text));
    }
    port = *p;
  }
  if (!config.https && !is_loopback(host)) {
    return webhook::invalid_argument(
        "server " + webhook::quote(url) +
        " is plain http to a host that is not loopback, which would send credentials in the "
        "clear; use https (http:// is for kubectl proxy on 127.0.0.1)");
  }
  config.host = std::string(host);
  config.port = port;
  config.base_path = std::move(path);
  return {};
}

webhook::Result<ClusterConfig> in_cluster_config(const EnvLookup& env, std::string_view sa_dir) {
  std::optional<std::string> host = env("KUBERNETES_SERVICE_HOST");
  std::optional<std::string> port = env("KUBERNETES_SERVICE_PORT");
  if (!host || host->empty() || !port || port->empty()) {
    return webhook::failed_precondition(
        "not running in a Kubernetes Pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are "
        "not set); pass --kube-config-path to reach the API from outside the cluster");
  }
  std::string h = *host;
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') {
    h = h.substr(1, h.size() - 2);
  }
  ClusterConfig config;
  config.origin = "in-cluster service account";
  std::string url =
      "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + *port;
  if (webhook::Status s = parse_server_url(url, config); !s) {
    return webhook::failed_precondition("KUBERNETES_SERVICE_HOST/PORT: " + s.error().message);
  }
  std::string dir(sa_dir);
  webhook::Result<std::string> ca = read_file(dir + "/ca.crt");
  if (!ca) {
    return webhook::failed_precondition("in-cluster CA: " + ca.error().message +
                                        "; is the service account token mounted "
                                        "(automountServiceAccountToken)?");
  }
  config.ca_pem = std::move(*ca);
  config.token_file = dir + "/token";
  webhook::Result<std::string> token = read_file(config.token_file);
  if (!token) {
    return webhook::failed_precondition("in-cluster token: " + token.error().message +
                                        "; is the service account token mounted "
                                        "(automountServiceAccountToken)?");
  }
  return config;
}

webhook::Result<ClusterConfig> kubeconfig_config(const std::string& path) {
  return kubeconfig_config(path, KubeconfigOptions{});
}

webhook::Result<ClusterConfig> kubeconfig_config(const std::string& path,
                                                 const KubeconfigOptions& options) {
  webhook::Result<std::string> text = read_file(path, 16 << 20);
  if (!text) {
    return webhook::invalid_argument("kubeconfig: " + text.error().message);
  }
  try {
    return parse_kubeconfig(YAML::Load(*text), path, options);
  } catch (const YAML::Exception& e) {
    return webhook::invalid_argument("kubeconfig " + path + ": not valid YAML: " + e.what());
  }
}

std::string kubeconfig_path(const std::string& flag, const EnvLookup& env) {
  if (!flag.empty()) {
    return flag;
  }
  if (std::optional<std::string> list = env("KUBECONFIG"); list && !list->empty()) {
    std::string first = list->substr(0, list->find(':'));
    if (!first.empty()) {
      return first;
    }
  }
  std::optional<std::string> home = env("HOME");
  return home && !home->empty() ? *home + "/.kube/config" : std::string();
}

webhook::Result<ClusterConfig> load_config(const std::string& kube_config_path) {
  return kube_config_path.empty() ? in_cluster_config() : kubeconfig_config(kube_config_path);
}

webhook::Result<std::string> TokenSource::get(bool force) {
  std::lock_guard lock(mu_);
  if (file_.empty()) {
    return token_;
  }
  struct stat st {};
  if (::stat(file_.c_str(), &st) != 0) {
    if (stamp_) {
      return token_;  // a rotation in progress swaps a symlink; keep the last token meanwhile
    }
    return Error{ErrorCode::kUnavailable,
                 "cannot read token file " + file_ + ": " +
                     std::error_code(errno, std::generic_category()).message()};
  }
  Stamp now{st.st_mtim, static_cast<long long>(st.st_size),
            static_cast<unsigned long long>(st.st_ino)};
  if (!force && stamp_ && *stamp_ == now) {
    return token_;
  }
  webhook::Result<std::string> text = read_file(file_);
  if (!text) {
    if (stamp_) {
      return token_;
    }
    return text.error();
  }
  std::string t = std::move(*text);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back())) != 0) {
    t.pop_back();
  }
  token_ = std::move(t);
  stamp_ = now;
  ++reads_;
  return token_;
}

int TokenSource::reads() const {
  std::lock_guard lock(mu_);
  return reads_;
}

}  // namespace kube
