#include "kube/cert_manager.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/encoding/base64.h"
#include "base/thread/name.h"

namespace kube {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr int kAttempts = 5;
constexpr const char* kWebhookApi = "/apis/admissionregistration.k8s.io/v1/";

// The message of a Status body, shortened, for errors and logs.
std::string status_message(const ApiClient::Reply& r) {
  json j = json::parse(r.body, nullptr, false);
  std::string message;
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    message = j["message"].get<std::string>();
  }
  if (message.size() > 200) {
    message = message.substr(0, 200) + "...";
  }
  return "HTTP " + std::to_string(r.status) + (message.empty() ? "" : ": " + message);
}

std::string reason_of(const ApiClient::Reply& r) {
  json j = json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("reason") && j["reason"].is_string()
             ? j["reason"].get<std::string>()
             : "";
}

// data.<key> of a Secret, decoded; "" when missing or not base64.
std::string data_of(const json& secret, const char* key) {
  auto data = secret.find("data");
  if (data == secret.end() || !data->is_object()) {
    return "";
  }
  auto it = data->find(key);
  if (it == data->end() || !it->is_string()) {
    return "";
  }
  return webhook::base64_decode(it->get<std::string>()).value_or("");
}

json data_json(const ServingSecret& s) {
  return {{"ca.crt", webhook::base64_encode(s.ca_crt)},
          {"ca.key", webhook::base64_encode(s.ca_key)},
          {"tls.crt", webhook::base64_encode(s.tls_crt)},
          {"tls.key", webhook::base64_encode(s.tls_key)},
          {"ca-bundle.crt", webhook::base64_encode(s.ca_bundle)}};
}

std::string action_text(CertAction a) {
  return a == CertAction::kNewLeaf ? "new serving certificate" : "new CA and serving certificate";
}

}  // namespace

struct CertManager::SecretState {
  bool exists = false;
  json object;
  ServingSecret data;
  std::string resource_version;
};

std::chrono::milliseconds cert_check_interval(std::chrono::seconds renew_before) {
  auto eighth = std::chrono::duration_cast<std::chrono::milliseconds>(renew_before) / 8;
  return std::clamp<std::chrono::milliseconds>(eighth, 200ms, 60s);
}

CertManager::CertManager(ApiClient& api, CertManagerOptions options)
    : api_(api), options_(std::move(options)) {
  if (options_.policy.dns_names.empty()) {
    options_.policy.dns_names = service_dns_names(options_.service, options_.ns);
  }
  secret_path_ = "/api/v1/namespaces/" + options_.ns + "/secrets/" + options_.secret;
}

CertManager::~CertManager() { stop(); }

std::int64_t CertManager::now() const {
  if (options_.now) {
    return options_.now();
  }
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void CertManager::log(LogLevel level, const std::string& line) const {
  if (options_.log) {
    options_.log(level, line);
  }
}

webhook::Result<CertManager::SecretState> CertManager::read_secret() {
  webhook::Result<ApiClient::Reply> r =
      api_.send("GET", secret_path_, "", "", options_.request_timeout);
  if (!r) {
    return r.error();
  }
  SecretState s;
  if (r->status == 404) {
    return s;
  }
  if (r->status != 200) {
    return webhook::Error{
        webhook::ErrorCode::kUnavailable,
        "GET Secret " + options_.ns + "/" + options_.secret + ": " + status_message(*r)};
  }
  s.object = json::parse(r->body, nullptr, false);
  if (!s.object.is_object()) {
    return webhook::Error{
        webhook::ErrorCode::kUnavailable,
        "GET Secret " + options_.ns + "/" + options_.secret + ": the answer is not a JSON object"};
  }
  s.exists = true;
  s.resource_version = s.object["metadata"].value("resourceVersion", "");
  s.data = {data_of(s.object, "ca.crt"), data_of(s.object, "ca.key"), data_of(s.object, "tls.crt"),
            data_of(s.object, "tls.key"), data_of(s.object, "ca-bundle.crt")};
  return s;
}

// Writes `next` over `state` (PUT with its resourceVersion) or as a new Secret (POST): the pair
// written, nullopt when another replica wrote first (409), or the error.
webhook::Result<std::optional<ServingPair>> CertManager::write_secret(const SecretState& state,
                                                                      const CertDecision& decision,
                                                                      const ServingSecret& next) {
  const std::string what = "Secret " + options_.ns + "/" + options_.secret;
  json body = state.exists ? state.object : json::object();
  body["apiVersion"] = "v1";
  body["kind"] = "Secret";
  body["metadata"]["name"] = options_.secret;
  body["metadata"]["namespace"] = options_.ns;
  body["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "kuberay-tpu-webhook";
  if (!state.exists) {
    body["type"] = "kubernetes.io/tls";
  }
  body["data"] = data_json(next);
  webhook::Result<ApiClient::Reply> r =
      state.exists ? api_.send("PUT", secret_path_, body.dump(), "application/json",
                               options_.request_timeout)
                   : api_.send("POST", "/api/v1/namespaces/" + options_.ns + "/secrets",
                               body.dump(), "application/json", options_.request_timeout);
  if (!r) {
    return r.error();
  }
  if (r->status == 409) {
    // AlreadyExists (another replica created it) or Conflict (another replica replaced it):
    // theirs won; the caller reads it again and uses it.
    log(LogLevel::kInfo,
        what + ": " + reason_of(*r) + "; another replica wrote it first, reading theirs");
    return std::optional<ServingPair>();
  }
  if (r->status != 200 && r->status != 201) {
    return webhook::Error{
        webhook::ErrorCode::kUnavailable,
        std::string(state.exists ? "PUT " : "POST ") + what + ": " + status_message(*r)};
  }
  json written = json::parse(r->body, nullptr, false);
  std::string rv = written.is_object() ? written["metadata"].value("resourceVersion", "") : "";
  log(LogLevel::kInfo, action_text(decision.action) + " written to " + what + " (resourceVersion " +
                           rv + "): " + decision.reason + "; the certificate expires at unix " +
                           std::to_string(certificate_not_after(next.tls_crt).value_or(0)));
  return std::optional<ServingPair>(
      ServingPair{next.tls_crt, next.tls_key, next.ca_bundle, rv, false});
}

// Step 1 of sync(): the Secret, read and, when it has to be, written.
webhook::Result<ServingPair> CertManager::settle_secret() {
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    webhook::Result<SecretState> state = read_secret();
    if (!state) {
      return state.error();
    }
    std::optional<ServingSecret> stored;
    if (state->exists) {
      stored = state->data;
    }
    std::int64_t t = now();
    CertDecision decision = decide(stored, options_.policy, t);
    if (decision.action == CertAction::kKeep) {
      return ServingPair{state->data.tls_crt, state->data.tls_key, state->data.ca_bundle,
                         state->resource_version, false};
    }
    webhook::Result<ServingSecret> next = issue(decision, stored, "", options_.policy, t);
    if (!next) {
      return next.error();
    }
    webhook::Result<std::optional<ServingPair>> written = write_secret(*state, decision, *next);
    if (!written) {
      return written.error();
    }
    if (*written) {
      return **written;
    }
  }
  return webhook::Error{webhook::ErrorCode::kUnavailable,
                        "Secret " + options_.ns + "/" + options_.secret +
                            ": still conflicting after " + std::to_string(kAttempts) + " attempts"};
}

// Step 2 of sync() for one configuration; true when it trusts `bundle` (or does not exist).
bool CertManager::update_bundle(const std::string& collection, const std::string& name,
                                const std::string& bundle) {
  const std::string path = kWebhookApi + collection + "/" + name;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    webhook::Result<ApiClient::Reply> r = api_.send("GET", path, "", "", options_.request_timeout);
    if (!r || (r->status != 200 && r->status != 404)) {
      log(LogLevel::kWarning,
          "GET " + collection + "/" + name + ": " + (r ? status_message(*r) : r.error().message));
      return false;
    }
    if (r->status == 404) {
      log(LogLevel::kDebug, collection + "/" + name + " does not exist; nothing to update");
      return true;
    }
    json config = json::parse(r->body, nullptr, false);
    if (!config.is_object() || !config.contains("webhooks") || !config["webhooks"].is_array()) {
      return true;  // no webhook: nothing trusts anything
    }
    bool changed = false;
    std::int64_t t = now();
    for (json& hook : config["webhooks"]) {
      if (!hook.is_object() || !hook.contains("clientConfig") ||
          !hook["clientConfig"].is_object()) {
        continue;
      }
      json& client = hook["clientConfig"];
      std::string current;
      if (client.contains("caBundle") && client["caBundle"].is_string()) {
        current = webhook::base64_decode(client["caBundle"].get<std::string>()).value_or("");
      }
      if (bundle_contains(current, bundle)) {
        continue;
      }
      client["caBundle"] = webhook::base64_encode(merge_bundle(bundle, current, t));
      changed = true;
    }
    if (!changed) {
      return true;
    }
    r = api_.send("PUT", path, config.dump(), "application/json", options_.request_timeout);
    if (r && r->status == 200) {
      log(LogLevel::kInfo, collection + "/" + name + ": caBundle updated to trust the CA of " +
                               "Secret " + options_.ns + "/" + options_.secret);
      return true;
    }
    if (!r || r->status != 409) {
      log(LogLevel::kWarning,
          "PUT " + collection + "/" + name + ": " + (r ? status_message(*r) : r.error().message));
      return false;
    }
  }
  return false;
}

webhook::Result<ServingPair> CertManager::sync() {
  webhook::Result<ServingPair> pair = settle_secret();
  if (!pair) {
    return pair;
  }
  bool current = true;
  for (const std::string& name : options_.mutating_configs) {
    current = update_bundle("mutatingwebhookconfigurations", name, pair->ca_bundle) && current;
  }
  for (const std::string& name : options_.validating_configs) {
    current = update_bundle("validatingwebhookconfigurations", name, pair->ca_bundle) && current;
  }
  pair->bundles_current = current;
  return pair;
}

void CertManager::start(std::function<void(const ServingPair&)> publish, ServingPair last) {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) {
    return;
  }
  stop_ = false;
  thread_ = webhook::named_thread("cert-manager", [this, publish = std::move(publish),
                                                   last = std::move(last)] { run(publish, last); });
}

void CertManager::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void CertManager::run(const std::function<void(const ServingPair&)>& publish, ServingPair last) {
  // A new leaf is published at the second sync that finds its CA trusted, so kube-apiserver had
  // one whole interval to see the new caBundle (its informer lags the write) before any replica
  // serves a certificate only that bundle verifies.
  std::string trusted_once;
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, options_.interval, [this] { return stop_; })) {
    lock.unlock();
    webhook::Result<ServingPair> pair = sync();
    if (!pair) {
      log(LogLevel::kWarning, "certificate sync failed, retrying in " +
                                  std::to_string(options_.interval.count()) +
                                  "ms: " + pair.error().message);
    } else if (pair->cert_pem != last.cert_pem) {
      bool last_expired = certificate_not_after(last.cert_pem).value_or(0) <= now();
      if ((pair->bundles_current && trusted_once == pair->cert_pem) || last_expired) {
        publish(*pair);
        last = *pair;
      } else if (pair->bundles_current) {
        trusted_once = pair->cert_pem;
        log(LogLevel::kDebug, "a new certificate is trusted; serving it at the next check");
      } else {
        log(LogLevel::kWarning,
            "not serving the new certificate yet: a webhook configuration does not trust its "
            "CA");
      }
    }
    lock.lock();
  }
}

}  // namespace kube
