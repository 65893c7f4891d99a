#include "kube/serving_cert.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <ctime>
#include <memory>
#include <set>

#include "kube/openssl_handles.h"

namespace kube {
namespace {

// A certificate's notBefore is set this far back, for API servers whose clock runs behind.
constexpr std::int64_t kBackdateSeconds = 300;
constexpr int kSerialBits = 127;

int no_passphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*u*/) { return 0; }

X509Ptr parse_cert(std::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr x(PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr));
  ERR_clear_error();
  return x;
}

KeyPtr parse_key(std::string_view pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  KeyPtr k(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr));
  ERR_clear_error();
  return k;
}

std::int64_t unix_of(const ASN1_TIME* t) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(t, &tm) != 1) {
    return 0;
  }
  return static_cast<std::int64_t>(timegm(&tm));
}

std::set<std::string> dns_names_of(X509* cert) {
  std::set<std::string> names;
  auto* sans =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (sans == nullptr) {
    return names;
  }
  for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(sans, i);
    if (name->type == GEN_DNS) {
      const ASN1_IA5STRING* s = name->d.dNSName;
      names.emplace(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                    static_cast<std::size_t>(ASN1_STRING_length(s)));
    }
  }
  GENERAL_NAMES_free(sans);
  return names;
}

std::string pem_of(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return {data, static_cast<std::size_t>(len)};
}

std::string pem_of(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return {data, static_cast<std::size_t>(len)};
}

webhook::Error openssl_error(const std::string& what) {
  unsigned long e = ERR_peek_last_error();
  ERR_clear_error();
  const char* reason = e != 0 ? ERR_reason_error_string(e) : nullptr;
  return {webhook::ErrorCode::kInternal,
          what + ": " + (reason != nullptr ? reason : "unknown OpenSSL error")};
}

bool add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) {
    return false;
  }
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

bool set_random_serial(X509* cert) {
  BIGNUM* bn = BN_new();
  bool ok = bn != nullptr && BN_rand(bn, kSerialBits, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
            BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) != nullptr;
  BN_free(bn);
  return ok;
}

struct Subject {
  std::string common_name;
  std::int64_t not_before;
  std::int64_t not_after;
};

// A v3 certificate for `key`'s public half with `subject`, issued by `issuer` (itself when
// null), with the extensions (nid, value) given, signed by `issuer_key`.
webhook::Result<X509Ptr> make_certificate(EVP_PKEY* key, const Subject& subject, X509* issuer,
                                          EVP_PKEY* issuer_key,
                                          const std::vector<std::pair<int, std::string>>& exts) {
  X509Ptr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), X509_VERSION_3) != 1 ||
      !set_random_serial(cert.get())) {
    return openssl_error("cannot create a certificate");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("kuberay-tpu-webhook"), -1, -1,
                             0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(subject.common_name.c_str()),
                             -1, -1, 0);
  X509_set_issuer_name(cert.get(), issuer != nullptr ? X509_get_subject_name(issuer) : name);
  if (ASN1_TIME_set(X509_getm_notBefore(cert.get()), static_cast<time_t>(subject.not_before)) ==
          nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(cert.get()), static_cast<time_t>(subject.not_after)) ==
          nullptr ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return openssl_error("cannot fill in a certificate");
  }
  for (const auto& [nid, value] : exts) {
    if (!add_extension(cert.get(), issuer != nullptr ? issuer : cert.get(), nid, value)) {
      return openssl_error("cannot add extension " + std::string(OBJ_nid2sn(nid)));
    }
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) {
    return openssl_error("cannot sign a certificate");
  }
  return cert;
}

webhook::Result<KeyPtr> new_key() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) {
    return openssl_error("cannot generate an ECDSA P-256 key");
  }
  return key;
}

// Why the CA cannot sign the next leaf, "" when it can.
std::string ca_problem(X509* ca, EVP_PKEY* ca_key, const CertPolicy& policy, std::int64_t now) {
  if (ca == nullptr) {
    return "ca.crt is missing or does not parse";
  }
  if (ca_key == nullptr) {
    return "ca.key is missing or does not parse";
  }
  if (X509_check_private_key(ca, ca_key) != 1) {
    ERR_clear_error();
    return "ca.key does not belong to ca.crt";
  }
  if (X509_check_ca(ca) == 0) {
    return "ca.crt is not a CA certificate";
  }
  std::int64_t left = unix_of(X509_get0_notAfter(ca)) - now;
  if (left < (policy.validity + policy.renew_before).count()) {
    return "the CA expires in " + std::to_string(left) + "s, too soon to sign a whole leaf";
  }
  return "";
}

// Why the leaf must be replaced, "" when it is good.
std::string leaf_problem(X509* ca, X509* leaf, EVP_PKEY* key, const CertPolicy& policy,
                         std::int64_t now) {
  if (leaf == nullptr) {
    return "tls.crt is missing or does not parse";
  }
  if (key == nullptr) {
    return "tls.key is missing or does not parse";
  }
  if (X509_check_private_key(leaf, key) != 1) {
    ERR_clear_error();
    return "tls.key does not belong to tls.crt";
  }
  EVP_PKEY* ca_public = X509_get0_pubkey(ca);
  if (ca_public == nullptr || X509_verify(leaf, ca_public) != 1) {
    ERR_clear_error();
    return "tls.crt is not signed by ca.crt";
  }
  std::set<std::string> names = dns_names_of(leaf);
  for (const std::string& want : policy.dns_names) {
    if (!names.contains(want)) {
      return "tls.crt does not name " + want;
    }
  }
  if (unix_of(X509_get0_notBefore(leaf)) > now) {
    return "tls.crt is not valid yet";
  }
  std::int64_t left = unix_of(X509_get0_notAfter(leaf)) - now;
  if (left <= policy.renew_before.count()) {
    return left <= 0
               ? "tls.crt has expired"
               : "tls.crt expires in " + std::to_string(left) + "s, within the renewal window";
  }
  return "";
}

std::string join_dns(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    out += (out.empty() ? "DNS:" : ",DNS:") + n;
  }
  return out;
}

// A certificate and its key.
struct Signer {
  X509Ptr cert;
  KeyPtr key;
};

webhook::Result<Signer> new_ca(const CertPolicy& policy, std::int64_t now) {
  webhook::Result<KeyPtr> key = new_key();
  if (!key) {
    return key.error();
  }
  webhook::Result<X509Ptr> cert = make_certificate(
      key->get(),
      {"kuberay-tpu-webhook-ca", now - kBackdateSeconds, now + policy.ca_validity.count()}, nullptr,
      key->get(),
      {{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
       {NID_key_usage, "critical,keyCertSign,cRLSign"},
       {NID_subject_key_identifier, "hash"}});
  if (!cert) {
    return cert.error();
  }
  return Signer{std::move(*cert), std::move(*key)};
}

// A serving certificate for policy.dns_names signed by `ca`; it never outlives the CA.
webhook::Result<Signer> new_leaf(const Signer& ca, const CertPolicy& policy, std::int64_t now) {
  webhook::Result<KeyPtr> key = new_key();
  if (!key) {
    return key.error();
  }
  std::int64_t not_after = std::min<std::int64_t>(now + policy.validity.count(),
                                                  unix_of(X509_get0_notAfter(ca.cert.get())));
  webhook::Result<X509Ptr> cert =
      make_certificate(key->get(), {policy.dns_names.front(), now - kBackdateSeconds, not_after},
                       ca.cert.get(), ca.key.get(),
                       {{NID_basic_constraints, "critical,CA:FALSE"},
                        {NID_key_usage, "critical,digitalSignature"},
                        {NID_ext_key_usage, "serverAuth"},
                        {NID_subject_alt_name, join_dns(policy.dns_names)},
                        {NID_subject_key_identifier, "hash"},
                        {NID_authority_key_identifier, "keyid:always"}});
  if (!cert) {
    return cert.error();
  }
  return Signer{std::move(*cert), std::move(*key)};
}

}  // namespace

std::vector<std::string> service_dns_names(std::string_view service, std::string_view ns) {
  std::string base = std::string(service) + "." + std::string(ns) + ".svc";
  return {base, base + ".cluster.local"};
}

CertDecision decide(const std::optional<ServingSecret>& stored, const CertPolicy& policy,
                    std::int64_t now) {
  if (!stored) {
    return {CertAction::kNewCaAndLeaf, "the Secret does not exist"};
  }
  X509Ptr ca = parse_cert(stored->ca_crt);
  KeyPtr ca_key = parse_key(stored->ca_key);
  if (std::string why = ca_problem(ca.get(), ca_key.get(), policy, now); !why.empty()) {
    return {CertAction::kNewCaAndLeaf, why};
  }
  X509Ptr leaf = parse_cert(stored->tls_crt);
  KeyPtr key = parse_key(stored->tls_key);
  if (std::string why = leaf_problem(ca.get(), leaf.get(), key.get(), policy, now); !why.empty()) {
    return {CertAction::kNewLeaf, why};
  }
  if (!bundle_contains(stored->ca_bundle, stored->ca_crt)) {
    return {CertAction::kNewLeaf, "ca-bundle.crt does not hold ca.crt"};
  }
  return {CertAction::kKeep, ""};
}

webhook::Result<ServingSecret> issue(const CertDecision& decision,
                                     const std::optional<ServingSecret>& stored,
                                     std::string_view previous_cas, const CertPolicy& policy,
                                     std::int64_t now) {
  if (decision.action == CertAction::kKeep && stored) {
    return *stored;
  }
  if (policy.dns_names.empty()) {
    return webhook::invalid_argument("no DNS name to issue the serving certificate for");
  }
  ServingSecret out;
  Signer ca;
  std::string keep_trusting(previous_cas);
  if (decision.action == CertAction::kNewLeaf && stored) {
    ca = {parse_cert(stored->ca_crt), parse_key(stored->ca_key)};
    out.ca_crt = stored->ca_crt;
    out.ca_key = stored->ca_key;
    keep_trusting = stored->ca_bundle + keep_trusting;
  }
  if (!ca.cert || !ca.key) {
    webhook::Result<Signer> made = new_ca(policy, now);
    if (!made) {
      return made.error();
    }
    ca = std::move(*made);
    out.ca_crt = pem_of(ca.cert.get());
    out.ca_key = pem_of(ca.key.get());
    if (stored) {
      keep_trusting = stored->ca_crt + keep_trusting;
    }
  }
  webhook::Result<Signer> leaf = new_leaf(ca, policy, now);
  if (!leaf) {
    return leaf.error();
  }
  out.tls_crt = pem_of(leaf->cert.get());
  out.tls_key = pem_of(leaf->key.get());
  out.ca_bundle = merge_bundle(out.ca_crt, keep_trusting, now);
  return out;
}

std::vector<std::string> pem_certificates(std::string_view pem) {
  static constexpr std::string_view kBegin = "-----BEGIN CERTIFICATE-----";
  static constexpr std::string_view kEnd = "-----END CERTIFICATE-----";
  std::vector<std::string> out;
  std::size_t at = 0;
  while ((at = pem.find(kBegin, at)) != std::string_view::npos) {
    std::size_t end = pem.find(kEnd, at);
    if (end == std::string_view::npos) {
      break;
    }
    out.push_back(std::string(pem.substr(at, end + kEnd.size() - at)) + "\n");
    at = end + kEnd.size();
  }
  return out;
}

std::optional<std::int64_t> certificate_not_after(std::string_view pem) {
  X509Ptr cert = parse_cert(pem);
  if (!cert) {
    return std::nullopt;
  }
  return unix_of(X509_get0_notAfter(cert.get()));
}

std::string merge_bundle(std::string_view first, std::string_view more, std::int64_t now) {
  std::string out;
  std::set<std::string> seen;
  for (std::string_view part : {first, more}) {
    for (std::string& cert : pem_certificates(part)) {
      std::optional<std::int64_t> not_after = certificate_not_after(cert);
      if (not_after && *not_after > now && seen.insert(cert).second) {
        out += cert;
      }
    }
  }
  return out;
}

bool bundle_contains(std::string_view bundle, std::string_view wanted) {
  std::vector<std::string> have = pem_certificates(bundle);
  std::set<std::string> set(have.begin(), have.end());
  std::vector<std::string> want = pem_certificates(wanted);
  if (want.empty()) {
    return false;
  }
  for (const std::string& cert : want) {
    if (!set.contains(cert)) {
      return false;
    }
  }
  return true;
}

}  // namespace kube
