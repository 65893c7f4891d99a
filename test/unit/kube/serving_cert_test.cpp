// The managed serving certificate: what kube/serving_cert.h generates, read back with OpenSSL's
// own parsers and chain verifier (not the code under test), and the keep/renew decisions.
#include "kube/serving_cert.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <catch2/catch.hpp>
#include <ctime>
#include <memory>
#include <set>

using kube::CertAction;
using kube::CertPolicy;
using kube::ServingSecret;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t kT0 = 1'800'000'000;  // 2027-01-15

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;

X509Ptr read_cert(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return X509Ptr(x);
}

std::int64_t seconds_of(const ASN1_TIME* t) {
  std::tm tm{};
  REQUIRE(ASN1_TIME_to_tm(t, &tm) == 1);
  return static_cast<std::int64_t>(timegm(&tm));
}

std::set<std::string> sans_of(X509* x) {
  std::set<std::string> out;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(x, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
    if (n->type == GEN_DNS) {
      out.insert(reinterpret_cast<const char*>(ASN1_STRING_get0_data(n->d.dNSName)));
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

// Whether `leaf` chains to one of the certificates of `bundle` at time `at`, for TLS server use
// with host name `host`, as OpenSSL's verifier (what a TLS client runs) decides.
bool verifies(const std::string& leaf_pem, const std::string& bundle, std::int64_t at,
              const std::string& host) {
  X509Ptr leaf = read_cert(leaf_pem);
  X509_STORE* store = X509_STORE_new();
  BIO* bio = BIO_new_mem_buf(bundle.data(), static_cast<int>(bundle.size()));
  while (X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store, ca);
    X509_free(ca);
  }
  ERR_clear_error();
  BIO_free(bio);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf.get(), nullptr);
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx);
  X509_VERIFY_PARAM_set_time(param, static_cast<time_t>(at));
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
  X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
  bool ok = X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  ERR_clear_error();
  return ok;
}

CertPolicy policy(std::string ns = "ray-system") {
  CertPolicy p;
  p.dns_names = kube::service_dns_names("kuberay-tpu-webhook", ns);
  p.validity = 1000s;
  p.ca_validity = 3000s;
  p.renew_before = 100s;
  return p;
}

ServingSecret fresh(const CertPolicy& p = policy(), std::int64_t at = kT0) {
  return kube::issue({CertAction::kNewCaAndLeaf, "test"}, std::nullopt, "", p, at).value();
}

}  // namespace

TEST_CASE("service_dns_names: the two names kube-apiserver may dial for the Service") {
  CHECK(kube::service_dns_names("kuberay-tpu-webhook", "team-a") ==
        std::vector<std::string>{"kuberay-tpu-webhook.team-a.svc",
                                 "kuberay-tpu-webhook.team-a.svc.cluster.local"});
}

TEST_CASE("issue: a CA and a leaf as a TLS client and kube-apiserver check them") {
  ServingSecret s = fresh();
  X509Ptr ca = read_cert(s.ca_crt);
  X509Ptr leaf = read_cert(s.tls_crt);
  REQUIRE(ca);
  REQUIRE(leaf);

  SECTION("the leaf names the Service, serves TLS and is no CA") {
    CHECK(sans_of(leaf.get()) ==
          std::set<std::string>{"kuberay-tpu-webhook.ray-system.svc",
                                "kuberay-tpu-webhook.ray-system.svc.cluster.local"});
    CHECK(X509_check_ca(leaf.get()) == 0);
    CHECK((X509_get_extension_flags(leaf.get()) & EXFLAG_KUSAGE) != 0);
    CHECK(X509_get_key_usage(leaf.get()) == KU_DIGITAL_SIGNATURE);
    CHECK(X509_get_extended_key_usage(leaf.get()) == XKU_SSL_SERVER);
    CHECK(EVP_PKEY_get_base_id(X509_get0_pubkey(leaf.get())) == EVP_PKEY_EC);
    CHECK(EVP_PKEY_get_bits(X509_get0_pubkey(leaf.get())) == 256);
  }
  SECTION("validity: the leaf's and the CA's lifetimes from now, backdated 5 minutes") {
    CHECK(seconds_of(X509_get0_notBefore(leaf.get())) == kT0 - 300);
    CHECK(seconds_of(X509_get0_notAfter(leaf.get())) == kT0 + 1000);
    CHECK(seconds_of(X509_get0_notAfter(ca.get())) == kT0 + 3000);
  }
  SECTION("the CA signs certificates and nothing else") {
    CHECK(X509_check_ca(ca.get()) != 0);
    CHECK(X509_get_key_usage(ca.get()) == (KU_KEY_CERT_SIGN | KU_CRL_SIGN));
  }
  SECTION("the leaf verifies against the bundle for both names, not for another") {
    CHECK(s.ca_bundle == s.ca_crt);
    CHECK(verifies(s.tls_crt, s.ca_bundle, kT0 + 10, "kuberay-tpu-webhook.ray-system.svc"));
    CHECK(verifies(s.tls_crt, s.ca_bundle, kT0 + 10,
                   "kuberay-tpu-webhook.ray-system.svc.cluster.local"));
    CHECK_FALSE(verifies(s.tls_crt, s.ca_bundle, kT0 + 10, "kuberay-tpu-webhook.other.svc"));
    CHECK_FALSE(verifies(s.tls_crt, s.ca_bundle, kT0 + 1001, "kuberay-tpu-webhook.ray-system.svc"));
  }
  SECTION("the keys are PEM private keys that load") {
    CHECK(s.tls_key.starts_with("-----BEGIN PRIVATE KEY-----"));
    CHECK(s.ca_key.starts_with("-----BEGIN PRIVATE KEY-----"));
  }
}

TEST_CASE("decide: keep a good Secret, renew what is missing, broken, misnamed or expiring") {
  CertPolicy p = policy();
  ServingSecret good = fresh(p);

  SECTION("no Secret: a new CA and leaf") {
    kube::CertDecision d = kube::decide(std::nullopt, p, kT0);
    CHECK(d.action == CertAction::kNewCaAndLeaf);
    CHECK(d.reason == "the Secret does not exist");
  }
  SECTION("a good Secret is kept until the renewal window") {
    CHECK(kube::decide(good, p, kT0).action == CertAction::kKeep);
    CHECK(kube::decide(good, p, kT0 + 899).action == CertAction::kKeep);
  }
  SECTION("within renew_before of the leaf's expiry: a new leaf, the CA kept") {
    kube::CertDecision d = kube::decide(good, p, kT0 + 900);
    CHECK(d.action == CertAction::kNewLeaf);
    CHECK(d.reason == "tls.crt expires in 100s, within the renewal window");
    CHECK(kube::decide(good, p, kT0 + 1000).reason == "tls.crt has expired");
  }
  SECTION("a CA with less than validity + renew_before left: both renewed") {
    // 3000 - 1901 = 1099 < 1100
    kube::CertDecision d = kube::decide(good, p, kT0 + 1901);
    CHECK(d.action == CertAction::kNewCaAndLeaf);
    CHECK(d.reason == "the CA expires in 1099s, too soon to sign a whole leaf");
  }
  SECTION("a leaf for another namespace's Service: a new leaf") {
    ServingSecret other = fresh(policy("other"));
    kube::CertDecision d = kube::decide(other, p, kT0);
    CHECK(d.action == CertAction::kNewLeaf);
    CHECK(d.reason == "tls.crt does not name kuberay-tpu-webhook.ray-system.svc");
  }
  SECTION("corrupt data") {
    ServingSecret s = good;
    s.tls_crt = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n";
    CHECK(kube::decide(s, p, kT0).reason == "tls.crt is missing or does not parse");
    s = good;
    s.tls_key = "";
    CHECK(kube::decide(s, p, kT0).reason == "tls.key is missing or does not parse");
    s = good;
    s.ca_crt = "garbage";
    CHECK(kube::decide(s, p, kT0).action == CertAction::kNewCaAndLeaf);
    CHECK(kube::decide(s, p, kT0).reason == "ca.crt is missing or does not parse");
  }
  SECTION("mismatched keys and foreign signatures") {
    ServingSecret other = fresh(p);
    ServingSecret s = good;
    s.tls_key = other.tls_key;
    CHECK(kube::decide(s, p, kT0).reason == "tls.key does not belong to tls.crt");
    s = good;
    s.ca_key = other.ca_key;
    CHECK(kube::decide(s, p, kT0).reason == "ca.key does not belong to ca.crt");
    s = good;
    s.tls_crt = other.tls_crt;
    s.tls_key = other.tls_key;
    CHECK(kube::decide(s, p, kT0).reason == "tls.crt is not signed by ca.crt");
    s = good;
    s.ca_crt = good.tls_crt;  // a leaf where the CA belongs
    s.ca_key = good.tls_key;
    CHECK(kube::decide(s, p, kT0).reason == "ca.crt is not a CA certificate");
  }
  SECTION("a bundle without the CA: the leaf is reissued so the bundle is rewritten") {
    ServingSecret s = good;
    s.ca_bundle = "";
    CHECK(kube::decide(s, p, kT0).reason == "ca-bundle.crt does not hold ca.crt");
  }
}

TEST_CASE("issue: rotation keeps the previous CA trusted while its leaves may be served") {
  CertPolicy p = policy();
  ServingSecret first = fresh(p);

  SECTION("a new leaf: same CA, same bundle, a different leaf") {
    ServingSecret next = kube::issue({CertAction::kNewLeaf, "t"}, first, "", p, kT0 + 900).value();
    CHECK(next.ca_crt == first.ca_crt);
    CHECK(next.ca_key == first.ca_key);
    CHECK(next.ca_bundle == first.ca_crt);
    CHECK(next.tls_crt != first.tls_crt);
    CHECK(verifies(next.tls_crt, next.ca_bundle, kT0 + 950, "kuberay-tpu-webhook.ray-system.svc"));
  }
  SECTION("a new CA: the bundle is the new CA, then the old one; both leaves verify") {
    ServingSecret next =
        kube::issue({CertAction::kNewCaAndLeaf, "t"}, first, "", p, kT0 + 900).value();
    CHECK(next.ca_crt != first.ca_crt);
    CHECK(next.ca_bundle == next.ca_crt + first.ca_crt);
    CHECK(verifies(next.tls_crt, next.ca_bundle, kT0 + 950, "kuberay-tpu-webhook.ray-system.svc"));
    CHECK(verifies(first.tls_crt, next.ca_bundle, kT0 + 950, "kuberay-tpu-webhook.ray-system.svc"));
    CHECK_FALSE(
        verifies(first.tls_crt, next.ca_crt, kT0 + 950, "kuberay-tpu-webhook.ray-system.svc"));
  }
  SECTION("an expired previous CA leaves the bundle") {
    ServingSecret next =
        kube::issue({CertAction::kNewCaAndLeaf, "t"}, first, "", p, kT0 + 3001).value();
    CHECK(next.ca_bundle == next.ca_crt);
  }
}

TEST_CASE("merge_bundle and bundle_contains: sets of certificates, expired ones dropped") {
  ServingSecret a = fresh();
  ServingSecret b = fresh(policy(), kT0 + 2000);  // its CA expires at kT0 + 5000
  CHECK(kube::merge_bundle(a.ca_crt, b.ca_crt + a.ca_crt, kT0) == a.ca_crt + b.ca_crt);
  CHECK(kube::merge_bundle(b.ca_crt, a.ca_crt, kT0 + 3000) == b.ca_crt);  // a's CA expired
  CHECK(kube::merge_bundle("junk", "", kT0).empty());
  CHECK(kube::bundle_contains(a.ca_crt + b.ca_crt, b.ca_crt));
  CHECK_FALSE(kube::bundle_contains(a.ca_crt, b.ca_crt));
  CHECK_FALSE(kube::bundle_contains(a.ca_crt, ""));
  CHECK(kube::pem_certificates(a.ca_crt + "junk" + b.ca_crt).size() == 2);
  CHECK(kube::certificate_not_after(a.tls_crt) == kT0 + 1000);
  CHECK_FALSE(kube::certificate_not_after("junk").has_value());
}

TEST_CASE("issue: CAs trusted today stay in the new bundle while unexpired") {
  ServingSecret elsewhere = fresh(policy(), kT0 - 2500);  // its CA expires at kT0 + 500
  ServingSecret s =
      kube::issue({CertAction::kNewCaAndLeaf, "t"}, std::nullopt, elsewhere.ca_crt, policy(), kT0)
          .value();
  CHECK(s.ca_bundle == s.ca_crt + elsewhere.ca_crt);
  ServingSecret later = kube::issue({CertAction::kNewCaAndLeaf, "t"}, std::nullopt,
                                    elsewhere.ca_crt, policy(), kT0 + 501)
                            .value();
  CHECK(later.ca_bundle == later.ca_crt);
}
