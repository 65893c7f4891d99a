#include "kube/config.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "base/encoding/base64.h"
#include "base/text/text.h"
#include "kube/exec_credential.h"

namespace kube {
namespace {

using nlohmann::json;
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

// What replaces an auth-provider user (docs/kubectl-plugin.md cites each).
std::string auth_provider_advice(const std::string& name) {
  if (name == "gcp") {
    return "kubectl 1.26 removed the gcp auth-provider; install gke-gcloud-auth-plugin and run "
           "`gcloud container clusters get-credentials CLUSTER`, which writes an exec user";
  }
  if (name == "azure") {
    return "kubectl 1.26 removed the azure auth-provider; install kubelogin and run `kubelogin "
           "convert-kubeconfig`, which writes an exec user";
  }
  if (name == "oidc") {
    return "use an exec plugin such as kubelogin (int128/kubelogin: `kubectl oidc-login "
           "setup`), or a token";
  }
  return "use an exec credential plugin or a token instead";
}

// The user entry's token or token file, or client certificate and key.
webhook::Status read_static_user(const YAML::Node& user, const std::filesystem::path& dir,
                                 const std::string& user_where, ClusterConfig& config) {
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

// A YAML value as JSON: plain scalars that read as null, booleans or numbers become those;
// quoted scalars stay strings.
json yaml_to_json(const YAML::Node& node) {
  if (!node || node.IsNull()) {
    return nullptr;
  }
  if (node.IsSequence()) {
    json out = json::array();
    for (const YAML::Node& item : node) {
      out.push_back(yaml_to_json(item));
    }
    return out;
  }
  if (node.IsMap()) {
    json out = json::object();
    for (const auto& kv : node) {
      out[kv.first.as<std::string>()] = yaml_to_json(kv.second);
    }
    return out;
  }
  auto text = node.as<std::string>();
  if (node.Tag() == "?") {  // a plain scalar
    if (text == "true" || text == "false") {
      return text == "true";
    }
    json number = json::parse(text, nullptr, false);
    if (!number.is_discarded() && number.is_number()) {
      return number;
    }
  }
  return text;
}

// spec.cluster of KUBERNETES_EXEC_INFO, as client-go fills it from the cluster entry.
json exec_cluster_info(const YAML::Node& cluster, const ClusterConfig& config) {
  json out = {{"server", scalar(cluster, "server")}};
  if (std::string name = scalar(cluster, "tls-server-name"); !name.empty()) {
    out["tls-server-name"] = name;
  }
  if (config.insecure_skip_verify) {
    out["insecure-skip-tls-verify"] = true;
  }
  if (!config.ca_pem.empty()) {
    out["certificate-authority-data"] = webhook::base64_encode(config.ca_pem);
  }
  if (std::string proxy = scalar(cluster, "proxy-url"); !proxy.empty()) {
    out["proxy-url"] = proxy;
  }
  YAML::Node extensions = cluster["extensions"];
  if (extensions && extensions.IsSequence()) {
    for (const YAML::Node& ext : extensions) {
      if (ext.IsMap() && scalar(ext, "name") == "client.authentication.k8s.io/exec") {
        out["config"] = yaml_to_json(ext["extension"]);
        break;
      }
    }
  }
  return out;
}

webhook::Status read_exec_args(const YAML::Node& exec, const std::string& where, ExecConfig& out) {
  if (YAML::Node args = exec["args"]; args && !args.IsNull()) {
    if (!args.IsSequence()) {
      return webhook::invalid_argument(where + ": exec.args is not a list of strings");
    }
    for (const YAML::Node& a : args) {
      out.args.push_back(a.IsScalar() ? a.as<std::string>() : std::string());
    }
  }
  if (YAML::Node env = exec["env"]; env && !env.IsNull()) {
    if (!env.IsSequence()) {
      return webhook::invalid_argument(where + ": exec.env is not a list of {name, value}");
    }
    for (const YAML::Node& e : env) {
      if (!e.IsMap() || scalar(e, "name").empty()) {
        return webhook::invalid_argument(where + ": an exec.env entry has no name");
      }
      out.env.emplace_back(scalar(e, "name"), scalar(e, "value"));
    }
  }
  return {};
}

// The user's exec section (client-go's ExecConfig and its defaults).
webhook::Result<ExecConfig> read_exec(const YAML::Node& exec, const std::filesystem::path& dir,
                                      const std::string& where, const KubeconfigOptions& options) {
  ExecConfig out;
  out.where = where;
  out.api_version = scalar(exec, "apiVersion");
  if (out.api_version.empty()) {
    return webhook::invalid_argument(where + ": exec.apiVersion is not set; set " +
                                     std::string(kExecApiV1) +
                                     " (or v1beta1, as the plugin's "
                                     "docs say)");
  }
  if (out.api_version != kExecApiV1 && out.api_version != kExecApiV1beta1) {
    return webhook::invalid_argument(where + ": exec.apiVersion " +
                                     webhook::quote(out.api_version) + " is not supported; use " +
                                     kExecApiV1 + " or " + kExecApiV1beta1);
  }
  out.command = scalar(exec, "command");
  if (out.command.empty()) {
    return webhook::invalid_argument(where + ": exec.command is not set");
  }
  if (out.command.find('/') != std::string::npos && out.command.front() != '/') {
    out.command = (dir / out.command).string();  // client-go: relative to the kubeconfig
  }
  RETURN_IF_ERROR(read_exec_args(exec, where, out));
  out.install_hint = scalar(exec, "installHint");
  std::string provide = scalar(exec, "provideClusterInfo");
  out.provide_cluster_info = provide == "true" || provide == "True";
  std::string mode = scalar(exec, "interactiveMode");
  if (mode.empty() && out.api_version == kExecApiV1) {
    return webhook::invalid_argument(where + ": exec.interactiveMode must be set with " +
                                     std::string(kExecApiV1) + " (Never, IfAvailable or Always)");
  }
  out.interactive_mode = mode.empty() ? "IfAvailable" : mode;
  if (out.interactive_mode != "Never" && out.interactive_mode != "IfAvailable" &&
      out.interactive_mode != "Always") {
    return webhook::invalid_argument(where + ": exec.interactiveMode " + webhook::quote(mode) +
                                     " is not Never, IfAvailable or Always");
  }
  out.search_path = options.search_path;
  out.stdin_is_terminal = options.stdin_is_terminal;
  out.timeout = options.exec_timeout;
  return out;
}

// The user entry's credentials: a token or token file, a client certificate and key, or (when
// allowed) an exec plugin.
webhook::Status read_user(const YAML::Node& user, const YAML::Node& cluster,
                          const std::filesystem::path& dir, const std::string& user_where,
                          const KubeconfigOptions& options, ClusterConfig& config) {
  // What a caller that runs no plugin (the webhook server) can use instead of one.
  constexpr std::string_view kStaticCredentials =
      "use a token (for example one from `kubectl create token SERVICE-ACCOUNT`, or a service "
      "account's), tokenFile or client certificate, or run in the cluster";
  if (YAML::Node provider = user["auth-provider"]; provider) {
    std::string name = provider.IsMap() ? scalar(provider, "name") : "";
    return webhook::invalid_argument(
        user_where + ": auth-provider " + webhook::quote(name.empty() ? "(unnamed)" : name) +
        " is not supported; " +
        (options.allow_exec ? auth_provider_advice(name) : std::string(kStaticCredentials)));
  }
  if (YAML::Node exec = user["exec"]; exec) {
    if (!options.allow_exec) {
      return webhook::invalid_argument(user_where +
                                       ": exec credential plugins are not supported; " +
                                       std::string(kStaticCredentials));
    }
    if (!exec.IsMap()) {
      return webhook::invalid_argument(user_where + ": exec is not a mapping");
    }
    ASSIGN_OR_RETURN(ExecConfig e, read_exec(exec, dir, user_where, options));
    e.cluster = exec_cluster_info(cluster, config);
    config.exec = std::make_shared<const ExecConfig>(std::move(e));
    return {};
  }
  return read_static_user(user, dir, user_where, config);
}

// Entries of the merged kubeconfig, each with the file it came from.
struct Entry {
  YAML::Node node;
  std::string file;
};
struct Merged {
  std::string files;  // "a" or "a:b", for messages
  std::string current_context;
  std::map<std::string, Entry> contexts, clusters, users;
};

void merge_named(const YAML::Node& list, const char* field, const std::string& file,
                 std::map<std::string, Entry>& into) {
  if (!list || !list.IsSequence()) {
    return;
  }
  for (const YAML::Node& entry : list) {
    if (!entry.IsMap()) {
      continue;
    }
    std::string name = scalar(entry, "name");
    YAML::Node v = entry[field];
    into.try_emplace(name, Entry{v && v.IsMap() ? v : YAML::Node(YAML::NodeType::Map), file});
  }
}

webhook::Status merge_file(const YAML::Node& root, const std::string& path, Merged& merged) {
  if (!root.IsMap()) {
    return webhook::invalid_argument("kubeconfig " + path +
                                     ": not a kubeconfig (expected a YAML mapping)");
  }
  if (merged.current_context.empty()) {
    merged.current_context = scalar(root, "current-context");
  }
  merge_named(root["contexts"], "context", path, merged.contexts);
  merge_named(root["clusters"], "cluster", path, merged.clusters);
  merge_named(root["users"], "user", path, merged.users);
  return {};
}

std::string dir_of(const std::string& file) {
  return std::filesystem::path(file).parent_path().string();
}

webhook::Result<ClusterConfig> resolve_context(const Merged& m, const KubeconfigOptions& options) {
  std::string where = "kubeconfig " + m.files;
  std::string context_name = options.context.empty() ? m.current_context : options.context;
  if (context_name.empty()) {
    return webhook::invalid_argument(where +
                                     ": current-context is not set; run kubectl config "
                                     "use-context NAME on it");
  }
  auto context = m.contexts.find(context_name);
  if (context == m.contexts.end()) {
    return webhook::invalid_argument(where + ": " +
                                     (options.context.empty() ? "current-context " : "context ") +
                                     webhook::quote(context_name) + " is not among its contexts");
  }
  std::string cluster_name = scalar(context->second.node, "cluster");
  std::string user_name = scalar(context->second.node, "user");
  auto cluster = m.clusters.find(cluster_name);
  if (cluster == m.clusters.end()) {
    return webhook::invalid_argument(where + ": context " + webhook::quote(context_name) +
                                     " names cluster " + webhook::quote(cluster_name) +
                                     ", which is not among its clusters");
  }
  ClusterConfig config;
  config.origin = where + " (context " + webhook::quote(context_name) + ")";
  config.context_namespace = scalar(context->second.node, "namespace");
  RETURN_IF_ERROR(read_cluster(
      cluster->second.node, dir_of(cluster->second.file),
      "kubeconfig " + cluster->second.file + ": cluster " + webhook::quote(cluster_name),
      options.allow_insecure, config));
  if (user_name.empty()) {
    return config;  // no credentials: anonymous (or kubectl proxy)
  }
  auto user = m.users.find(user_name);
  if (user == m.users.end()) {
    return webhook::invalid_argument(where + ": context " + webhook::quote(context_name) +
                                     " names user " + webhook::quote(user_name) +
                                     ", which is not among its users");
  }
  RETURN_IF_ERROR(read_user(
      user->second.node, cluster->second.node, dir_of(user->second.file),
      "kubeconfig " + user->second.file + ": user " + webhook::quote(user_name), options, config));
  return config;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
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
  return kubeconfig_config(std::vector<std::string>{path}, options);
}

webhook::Result<ClusterConfig> kubeconfig_config(const std::vector<std::string>& paths,
                                                 const KubeconfigOptions& options) {
  Merged merged;
  std::vector<std::string> missing;
  for (const std::string& path : paths) {
    if (paths.size() > 1 && !file_exists(path)) {
      missing.push_back(path);  // kubectl skips a file of $KUBECONFIG that does not exist
      continue;
    }
    webhook::Result<std::string> text = read_file(path, 16 << 20);
    if (!text) {
      return webhook::invalid_argument("kubeconfig: " + text.error().message);
    }
    try {
      RETURN_IF_ERROR(merge_file(YAML::Load(*text), path, merged));
    } catch (const YAML::Exception& e) {
      return webhook::invalid_argument("kubeconfig " + path + ": not valid YAML: " + e.what());
    }
    merged.files += (merged.files.empty() ? "" : ":") + path;
  }
  if (merged.files.empty()) {
    std::string list;
    for (const std::string& m : missing) {
      list += (list.empty() ? "" : ", ") + m;
    }
    return webhook::invalid_argument("kubeconfig: none of the files of KUBECONFIG exists (" + list +
                                     ")");
  }
  return resolve_context(merged, options);
}

std::vector<std::string> kubeconfig_paths(const std::string& flag, const EnvLookup& env) {
  if (!flag.empty()) {
    return {flag};
  }
  std::vector<std::string> out;
  if (std::optional<std::string> list = env("KUBECONFIG"); list) {
    std::string_view rest = *list;
    while (!rest.empty()) {
      std::size_t colon = rest.find(':');
      std::string entry(rest.substr(0, colon));
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
      if (!entry.empty() && std::find(out.begin(), out.end(), entry) == out.end()) {
        out.push_back(std::move(entry));
      }
    }
  }
  if (!out.empty()) {
    return out;
  }
  std::optional<std::string> home = env("HOME");
  if (home && !home->empty()) {
    out.push_back(*home + "/.kube/config");
  }
  return out;
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
