#pragma once
// Self-signed certificates for the server's TLS tests.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <string>

namespace server_test {

struct Pem {
  std::string cert;
  std::string key;
};

inline std::string bio_text(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<std::size_t>(len));
  BIO_free(bio);
  return out;
}

// A self-signed P-256 certificate for `cn`, valid for `days`.
inline Pem make_pem(const std::string& cn, long days = 1) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 42);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), days * 86400);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509_sign(cert, key, EVP_sha256());
  BIO* cb = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(cb, cert);
  BIO* kb = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(kb, key, nullptr, nullptr, 0, nullptr, nullptr);
  X509_free(cert);
  EVP_PKEY_free(key);
  return {bio_text(cb), bio_text(kb)};
}

}  // namespace server_test
