#pragma once
// The serving certificate the webhook manages itself (--cert-mode=managed): a private CA and a
// leaf it signs, generated with OpenSSL (ECDSA P-256, SHA-256 signatures), the checks that say
// whether a stored pair is still good, and the CA bundle the webhook configurations trust.
//
//   kube::CertPolicy policy{
//       .dns_names = kube::service_dns_names("kuberay-tpu-webhook", "ray-system")};
//   kube::CertDecision d = kube::decide(stored, policy, now);  // kKeep, kNewLeaf, kNewCaAndLeaf
//   webhook::Result<kube::ServingSecret> next =
//       kube::issue(d, stored, previous_cas, policy, now);
//
// Nothing here touches the API; kube/cert_manager.h stores the result in a Secret. No function
// returns or logs key material in an error.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status/result.h"

namespace kube {

// The PEM texts a managed Secret holds (its data keys in parentheses).
struct ServingSecret {
  std::string ca_crt;     // the CA that signs the leaf (ca.crt)
  std::string ca_key;     // its key (ca.key)
  std::string tls_crt;    // the leaf (tls.crt)
  std::string tls_key;    // its key (tls.key)
  std::string ca_bundle;  // what the webhook configurations trust: ca.crt, then the previous CA
                          // while it is unexpired (ca-bundle.crt)
  friend bool operator==(const ServingSecret&, const ServingSecret&) = default;
};

struct CertPolicy {
  std::vector<std::string> dns_names;  // the leaf's subjectAltName, the first also its CN
  std::chrono::seconds validity{std::chrono::hours(24 * 365)};      // of the leaf
  std::chrono::seconds ca_validity{std::chrono::hours(24 * 3650)};  // of the CA
  std::chrono::seconds renew_before{std::chrono::hours(24 * 30)};
};

// <service>.<ns>.svc and <service>.<ns>.svc.cluster.local: the names kube-apiserver dials for a
// webhook's clientConfig.service.
std::vector<std::string> service_dns_names(std::string_view service, std::string_view ns);

enum class CertAction {
  kKeep,          // the stored pair is good
  kNewLeaf,       // keep the CA, issue a new leaf
  kNewCaAndLeaf,  // a new CA and a new leaf
};

struct CertDecision {
  CertAction action = CertAction::kKeep;
  std::string reason;  // why not kKeep, for the log ("the Secret does not exist", ...)
};

// What to do with `stored` (nullopt: there is no Secret) at `now` (Unix seconds):
//  - kNewCaAndLeaf when there is no Secret, the CA or its key does not parse or does not match,
//    the CA is not a CA, or it has less than validity + renew_before left (it could not sign a
//    whole leaf before it is itself renewed);
//  - kNewLeaf when the leaf or its key does not parse or does not match, the CA did not sign it,
//    it misses one of policy.dns_names, it is not valid yet, or it has renew_before or less left;
//  - kKeep otherwise.
CertDecision decide(const std::optional<ServingSecret>& stored, const CertPolicy& policy,
                    std::int64_t now);

// The Secret after `decision`: a new leaf signed by the stored CA (kNewLeaf) or by a new CA
// (kNewCaAndLeaf). The bundle is the signing CA followed by the CAs that must stay trusted while
// leaves they signed may still be served: those of the stored bundle (kNewLeaf), the stored CA
// (kNewCaAndLeaf), and `previous_cas` (PEM, e.g. what the webhook configurations trust today),
// each only while unexpired. kKeep returns `stored` unchanged. Internal when OpenSSL fails.
webhook::Result<ServingSecret> issue(const CertDecision& decision,
                                     const std::optional<ServingSecret>& stored,
                                     std::string_view previous_cas, const CertPolicy& policy,
                                     std::int64_t now);

// The CERTIFICATE blocks of a PEM text, each as "-----BEGIN ... END CERTIFICATE-----\n".
std::vector<std::string> pem_certificates(std::string_view pem);

// The certificates of `first`, then those of `more` not already in it, dropping every one that
// does not parse or has expired at `now`; concatenated PEM.
std::string merge_bundle(std::string_view first, std::string_view more, std::int64_t now);

// Whether every certificate of `wanted` is in `bundle`.
bool bundle_contains(std::string_view bundle, std::string_view wanted);

// notAfter (Unix seconds) of the first certificate of `pem`; nullopt when it does not parse.
std::optional<std::int64_t> certificate_not_after(std::string_view pem);

}  // namespace kube
