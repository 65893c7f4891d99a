#pragma once
// --cert-mode=managed as the server starts it (docs/server.md "Managed certificates"): the API
// client and the CertManager of the serving certificate, and the first pair to serve, read or
// written before the HTTPS port opens. The first sync is retried for a while, as the Secret or
// the RBAC that grants it may still be on its way.
//
//   webhook::Result<std::unique_ptr<kube::ManagedCertificate>> cert =
//       kube::ManagedCertificate::open({.secret = "...", .service = "...", ...}, log);
//   if (!cert) { /* cannot start: exit 1 */ }
//   config.cert_pem = (*cert)->first().cert_pem;          // the server starts with it
//   (*cert)->start([&](const kube::ServingPair& p) { srv.publish_certificate(...); });
//   ...
//   (*cert)->stop();                                       // after the server drained

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "base/log/log.h"
#include "base/status/result.h"
#include "kube/api_client.h"
#include "kube/cert_manager.h"
#include "kube/clock.h"

namespace kube {

struct ManagedCertificateOptions {
  std::string kube_config_path;   // --kube-config-path
  std::string namespace_flag;     // --namespace
  std::string secret;             // --cert-secret-name
  std::string service;            // --cert-service-name
  std::string mutating_config;    // --mutating-config-name ("" = none)
  std::string validating_config;  // --validating-config-name ("" = none)
  std::chrono::seconds validity{0};
  std::chrono::seconds ca_validity{0};
  std::chrono::seconds renew_before{0};
  Duration startup_timeout = std::chrono::minutes(1);  // for the first pair
  Duration retry = std::chrono::seconds(2);            // between two first syncs
};

class ManagedCertificate {
 public:
  // Reads the API configuration and the webhook's namespace, then syncs until it has a pair (or
  // the startup timeout passes: the last error). Logs to `log` what it found ("managed
  // certificate") and each failed sync it retries; `log` must outlive the object.
  static webhook::Result<std::unique_ptr<ManagedCertificate>> open(
      const ManagedCertificateOptions& options, const webhook::Logger& log);
  ManagedCertificate(const ManagedCertificate&) = delete;
  ManagedCertificate& operator=(const ManagedCertificate&) = delete;
  ~ManagedCertificate();  // stop()

  // The pair the server starts with.
  const ServingPair& first() const { return first_; }
  // Renewals from now on go to `publish` (whatever it captures must outlive stop()).
  void start(std::function<void(const ServingPair&)> publish);
  void stop();

 private:
  ManagedCertificate() = default;

  std::unique_ptr<ApiClient> api_;
  std::unique_ptr<CertManager> manager_;
  ServingPair first_;
};

}  // namespace kube
