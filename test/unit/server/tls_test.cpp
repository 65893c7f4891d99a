// lib/server/tls: identities (chain, key match, no material in errors) and the watcher's reload
// rules: kubelet's ..data symlink swap, a rename, a broken pair keeps the old identity
// (docs/server.md "TLS").
#include "server/tls.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

namespace {

namespace fs = std::filesystem;

struct Pem {
  std::string cert;
  std::string key;
};

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<std::size_t>(len));
  BIO_free(bio);
  return out;
}

// A self-signed P-256 certificate for `cn`, valid for `days`.
Pem make_pem(const std::string& cn, long days = 1) {
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

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/tls-test.XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  fs::path path;
};

}  // namespace

TEST_CASE("an identity loads with its chain and facts", "[tls]") {
  Pem leaf = make_pem("webhook");
  Pem ca = make_pem("ca");
  auto id = server::load_identity(leaf.cert + ca.cert, leaf.key);
  REQUIRE(id.has_value());
  CHECK((*id)->subject() == "CN=webhook");
  CHECK((*id)->serial() == "2A");
  CHECK(sk_X509_num((*id)->chain()) == 1);
  CHECK((*id)->not_after() > std::time(nullptr));
  CHECK((*id)->same_source(leaf.cert + ca.cert, leaf.key));
  CHECK_FALSE((*id)->same_source(leaf.cert, leaf.key));
}

TEST_CASE("broken identities are refused without echoing them", "[tls]") {
  Pem a = make_pem("a");
  Pem b = make_pem("b");
  auto [cert, key, expected] = GENERATE_COPY(table<std::string, std::string, std::string>({
      {a.cert, b.key, "does not belong to the certificate"},
      {"not pem", a.key, "no PEM CERTIFICATE block"},
      {a.cert, "not pem", "no PEM PRIVATE KEY block"},
      {"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", a.key, "cannot be parsed"},
      {a.cert, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
       "cannot be parsed"},
  }));
  auto id = server::load_identity(cert, key);
  REQUIRE_FALSE(id.has_value());
  CHECK_THAT(id.error().message, Catch::Contains(expected));
  CHECK(id.error().message.find("BEGIN") == std::string::npos);
}

TEST_CASE("the server context refuses nothing it needs", "[tls]") {
  Pem a = make_pem("a");
  server::IdentityStore store(*server::load_identity(a.cert, a.key));
  auto ctx = server::make_server_context(store);
  REQUIRE(ctx.has_value());
  CHECK(SSL_CTX_get_min_proto_version(ctx->get()) == TLS1_2_VERSION);
}

TEST_CASE(
    "the watcher follows kubelet's ..data swap and renames, and keeps the old pair when the "
    "new one is broken",
    "[tls]") {
  TempDir dir;
  // A Secret volume as kubelet lays it out: tls.crt -> ..data/tls.crt, ..data -> ..<timestamp>.
  Pem first = make_pem("first");
  fs::create_directory(dir.path / "..v1");
  write_file(dir.path / "..v1" / "tls.crt", first.cert);
  write_file(dir.path / "..v1" / "tls.key", first.key);
  fs::create_directory_symlink("..v1", dir.path / "..data");
  fs::create_symlink("..data/tls.crt", dir.path / "tls.crt");
  fs::create_symlink("..data/tls.key", dir.path / "tls.key");

  server::IdentityStore store(*server::load_identity(first.cert, first.key));
  int ok = 0;
  int failed = 0;
  std::string last_error;
  server::CertificateWatcher watcher(
      store, (dir.path / "tls.crt").string(), (dir.path / "tls.key").string(),
      std::chrono::milliseconds(0),
      [&](bool success, const std::string& detail, const std::shared_ptr<const server::Identity>&) {
        success ? ++ok : ++failed;
        last_error = detail;
      });
  CHECK_FALSE(watcher.poll_once());  // same contents as served: no reload
  CHECK(store.current()->subject() == "CN=first");

  SECTION("kubelet swaps ..data atomically") {
    Pem second = make_pem("second");
    fs::create_directory(dir.path / "..v2");
    write_file(dir.path / "..v2" / "tls.crt", second.cert);
    write_file(dir.path / "..v2" / "tls.key", second.key);
    fs::create_directory_symlink("..v2", dir.path / "..data_tmp");
    fs::rename(dir.path / "..data_tmp", dir.path / "..data");
    CHECK(watcher.poll_once());
    CHECK(store.current()->subject() == "CN=second");
    CHECK(ok == 1);
    CHECK_FALSE(watcher.poll_once());  // nothing changed since
  }

  SECTION("a broken pair keeps the old identity; the fixed pair is taken later") {
    Pem other = make_pem("other");
    fs::create_directory(dir.path / "..v3");
    write_file(dir.path / "..v3" / "tls.crt", other.cert);
    write_file(dir.path / "..v3" / "tls.key", first.key);  // the wrong key
    fs::create_directory_symlink("..v3", dir.path / "..data_tmp");
    fs::rename(dir.path / "..data_tmp", dir.path / "..data");
    CHECK_FALSE(watcher.poll_once());
    CHECK(store.current()->subject() == "CN=first");
    CHECK(failed == 1);
    CHECK_THAT(last_error, Catch::Contains("does not belong"));
    CHECK(last_error.find("BEGIN") == std::string::npos);

    write_file(dir.path / "..v3" / "tls.key.new", other.key);
    fs::rename(dir.path / "..v3" / "tls.key.new", dir.path / "..v3" / "tls.key");
    CHECK(watcher.poll_once());
    CHECK(store.current()->subject() == "CN=other");
  }

  SECTION("plain files renamed over the old ones") {
    fs::remove(dir.path / "tls.crt");
    fs::remove(dir.path / "tls.key");
    write_file(dir.path / "tls.crt", first.cert);
    write_file(dir.path / "tls.key", first.key);
    CHECK_FALSE(watcher.poll_once());  // same contents
    Pem fourth = make_pem("fourth");
    write_file(dir.path / "new.key", fourth.key);
    write_file(dir.path / "new.crt", fourth.cert);
    fs::rename(dir.path / "new.key", dir.path / "tls.key");
    fs::rename(dir.path / "new.crt", dir.path / "tls.crt");
    CHECK(watcher.poll_once());
    CHECK(store.current()->subject() == "CN=fourth");
  }

  SECTION("a missing file keeps the old identity") {
    fs::remove(dir.path / "tls.key");
    CHECK_FALSE(watcher.poll_once());
    CHECK(failed == 1);
    CHECK_THAT(last_error, Catch::Contains("cannot open"));
    CHECK(store.current()->subject() == "CN=first");
  }
}
