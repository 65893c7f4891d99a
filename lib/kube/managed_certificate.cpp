#include "kube/managed_certificate.h"

#include <thread>
#include <utility>

#include "kube/config.h"
#include "kube/webhook_namespace.h"

namespace kube {

namespace {

CertManagerOptions manager_options(const ManagedCertificateOptions& o, const std::string& ns,
                                   const webhook::Logger& log) {
  CertManagerOptions out;
  out.ns = ns;
  out.secret = o.secret;
  out.service = o.service;
  out.mutating_configs.clear();
  out.validating_configs.clear();
  if (!o.mutating_config.empty()) {
    out.mutating_configs.push_back(o.mutating_config);
  }
  if (!o.validating_config.empty()) {
    out.validating_configs.push_back(o.validating_config);
  }
  out.policy.validity = o.validity;
  out.policy.ca_validity = o.ca_validity;
  out.policy.renew_before = o.renew_before;
  out.interval = cert_check_interval(o.renew_before);
  out.log = webhook::line_logger(log, "certificate");
  return out;
}

}  // namespace

webhook::Result<std::unique_ptr<ManagedCertificate>> ManagedCertificate::open(
    const ManagedCertificateOptions& options, const webhook::Logger& log) {
  webhook::Result<ClusterConfig> api = load_config(options.kube_config_path);
  if (!api) {
    return api.error();
  }
  webhook::Result<NamespaceSource> ns =
      webhook_namespace(process_env(), kServiceAccountDir, options.namespace_flag);
  if (!ns) {
    return ns.error();
  }
  webhook::Result<std::unique_ptr<ApiClient>> client = ApiClient::create(*api);
  if (!client) {
    return client.error();
  }
  std::unique_ptr<ManagedCertificate> m(new ManagedCertificate());
  m->api_ = std::move(*client);
  CertManagerOptions o = manager_options(options, ns->ns, log);
  log.info("managed certificate", {{"secret", ns->ns + "/" + options.secret},
                                   {"namespace_from", ns->origin},
                                   {"check_interval_ms", o.interval.count()}});
  m->manager_ = std::make_unique<CertManager>(*m->api_, std::move(o));
  auto deadline = std::chrono::steady_clock::now() + options.startup_timeout;
  while (true) {
    webhook::Result<ServingPair> pair = m->manager_->sync();
    if (pair) {
      m->first_ = std::move(*pair);
      return m;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return pair.error();
    }
    log.warn("managed certificate: cannot sync yet, retrying in " + millis(options.retry),
             {{"error", pair.error().message}});
    std::this_thread::sleep_for(options.retry);
  }
}

ManagedCertificate::~ManagedCertificate() { stop(); }

void ManagedCertificate::start(std::function<void(const ServingPair&)> publish) {
  manager_->start(std::move(publish), first_);
}

void ManagedCertificate::stop() {
  if (manager_) {
    manager_->stop();
  }
}

}  // namespace kube
