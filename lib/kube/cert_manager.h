#pragma once
// Keeps the webhook's own serving certificate (--cert-mode=managed) in one Secret and the
// caBundle of its two webhook configurations in step with it, rotating before expiry; every
// replica runs one, and they agree through the Secret's resourceVersion.
//
//   kube::CertManager manager(api, options);
//   webhook::Result<kube::ServingPair> first = manager.sync();    // before serving
//   manager.start([&](const kube::ServingPair& p) { server.publish_certificate(p); });
//   ...
//   manager.stop();
//
// One sync():
//  1. GET the Secret; kube/serving_cert.h's decide() says keep it, issue a new leaf or a new CA
//     and leaf. A missing Secret is created (POST): 409 AlreadyExists means another replica
//     created it first, and it is read again and used. A stale or broken one is replaced by a
//     PUT carrying the resourceVersion read: 409 Conflict means another replica replaced it
//     first, and theirs is read again and used.
//  2. Each webhook configuration's webhooks[].clientConfig.caBundle becomes the Secret's bundle
//     plus the unexpired CAs it trusts already (so a replica that read an older Secret never
//     takes a CA away that another replica's leaf needs): GET, then PUT with its
//     resourceVersion, re-read on 409. A configuration that does not exist is skipped.
//  3. The pair to serve is returned with `bundles_current`: whether every configuration that
//     exists now trusts its CA. The loop started by start() publishes a new leaf only when two
//     syncs in a row found it so, so no replica serves a certificate before kube-apiserver had an
//     interval to learn the caBundle that verifies it.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status/result.h"
#include "kube/api_client.h"
#include "kube/log.h"
#include "kube/serving_cert.h"

namespace kube {

struct CertManagerOptions {
  std::string ns;  // of the Secret and the Service
  std::string secret = "kuberay-tpu-webhook-certs";
  std::string service = "kuberay-tpu-webhook";
  std::vector<std::string> mutating_configs = {"kuberay-tpu-mutating-webhook-cfg"};
  std::vector<std::string> validating_configs = {"kuberay-tpu-validating-webhook-cfg"};
  CertPolicy policy;                           // dns_names filled from service and ns when empty
  std::chrono::milliseconds interval{60'000};  // between two syncs of the loop
  std::chrono::milliseconds request_timeout{5'000};
  Logger log;
  std::function<std::int64_t()> now;  // Unix seconds; empty: the system clock
};

// What a replica serves after a sync.
struct ServingPair {
  std::string cert_pem;          // the leaf (tls.crt)
  std::string key_pem;           // tls.key
  std::string ca_bundle;         // the Secret's ca-bundle.crt
  std::string resource_version;  // of the Secret read or written
  bool bundles_current = false;  // every existing configuration trusts the bundle's CAs
};

// The check interval of the loop for a renewal window: an eighth of it, from 200ms to 60s.
std::chrono::milliseconds cert_check_interval(std::chrono::seconds renew_before);

class CertManager {
 public:
  CertManager(ApiClient& api, CertManagerOptions options);
  ~CertManager();  // stop()
  CertManager(const CertManager&) = delete;
  CertManager& operator=(const CertManager&) = delete;

  // One round as described above. Unavailable (naming the object and the status) when the API
  // cannot be reached or refuses a request (403 when RBAC does not grant it); a configuration's
  // failure leaves bundles_current false instead.
  webhook::Result<ServingPair> sync();

  // Syncs every interval on a thread and calls `publish` with a leaf other than the last one
  // published, at the second sync in a row that finds it bundles_current (at once when `last`
  // has expired). `last`: what is served.
  void start(std::function<void(const ServingPair&)> publish, ServingPair last);
  void stop();

  const std::string& secret_path() const { return secret_path_; }

 private:
  struct SecretState;
  webhook::Result<SecretState> read_secret();
  webhook::Result<ServingPair> settle_secret();
  webhook::Result<std::optional<ServingPair>> write_secret(const SecretState& state,
                                                           const CertDecision& decision,
                                                           const ServingSecret& next);
  bool update_bundle(const std::string& collection, const std::string& name,
                     const std::string& bundle);
  std::int64_t now() const;
  void log(LogLevel level, const std::string& line) const;
  void run(const std::function<void(const ServingPair&)>& publish, ServingPair last);

  ApiClient& api_;
  CertManagerOptions options_;
  std::string secret_path_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace kube
