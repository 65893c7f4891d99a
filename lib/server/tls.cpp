#include "server/tls.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <system_error>

#include "base/thread/name.h"

namespace server {
namespace {

using webhook::invalid_argument;

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

// The reason of OpenSSL's last error, without any of the input.
std::string openssl_reason() {
  unsigned long e = ERR_peek_last_error();
  ERR_clear_error();
  const char* reason = e != 0 ? ERR_reason_error_string(e) : nullptr;
  return reason != nullptr ? reason : "unknown error";
}

BioPtr memory_bio(std::string_view text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// Closes the descriptor it holds.
struct Descriptor {
  explicit Descriptor(int d) : fd(d) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
  int fd;
};

std::string errno_text(int err) { return std::system_category().message(err); }

// What a file that is not a regular one is, for the refusal.
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) {
    return "a directory";
  }
  if (S_ISFIFO(mode)) {
    return "a FIFO";
  }
  if (S_ISCHR(mode)) {
    return "a character device";
  }
  if (S_ISBLK(mode)) {
    return "a block device";
  }
  if (S_ISSOCK(mode)) {
    return "a socket";
  }
  return "an unknown kind of file";
}

std::string size_limit_text(std::size_t max_bytes) {
  return std::to_string(max_bytes) + "-byte limit" +
         (max_bytes == kMaxPemBytes ? " (1 MiB) for a certificate or key" : "");
}

// A regular file no larger than max_bytes, from what stat or fstat said of `path`.
webhook::Status check_regular(const std::string& path, const struct stat& st,
                              std::size_t max_bytes) {
  if (!S_ISREG(st.st_mode)) {
    return invalid_argument(path + ": is " + kind_of(st.st_mode) +
                            ", not a regular file (give the path of a PEM file; a symlink to "
                            "one is fine)");
  }
  if (st.st_size < 0 || static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    return invalid_argument(path + ": is " + std::to_string(st.st_size) + " bytes, over the " +
                            size_limit_text(max_bytes));
  }
  return {};
}

// Reads `fd` to its end, at most max_bytes + 1 bytes: one more than allowed means the file grew
// past the limit while it was read (or its size said less than it holds), and is refused.
webhook::Result<std::string> read_at_most(const std::string& path, int fd, std::size_t size_hint,
                                          std::size_t max_bytes) {
  std::string text(std::min(size_hint, max_bytes) + 1, '\0');
  std::size_t got = 0;
  while (true) {
    if (got == text.size()) {
      if (text.size() > max_bytes) {
        return invalid_argument(path + ": grew past the " + size_limit_text(max_bytes) +
                                " while it was read");
      }
      text.resize(std::min(text.size() * 2, max_bytes + 1));
    }
    ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return invalid_argument(path + ": cannot read the file: " + errno_text(errno));
    }
    if (n == 0) {
      break;
    }
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return text;
}

// Refuses to prompt for a passphrase: an encrypted key simply fails to load.
int no_passphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*u*/) { return 0; }

std::string digest_of(std::string_view a, std::string_view b) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx, a.data(), a.size());
  EVP_DigestUpdate(ctx, "\0", 1);
  EVP_DigestUpdate(ctx, b.data(), b.size());
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  return {reinterpret_cast<char*>(md), len};
}

std::string subject_of(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  X509_NAME_print_ex(bio.get(), X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio.get(), &data);
  return {data, static_cast<std::size_t>(len)};
}

std::string serial_of(X509* cert) {
  BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr);
  if (bn == nullptr) {
    return "";
  }
  char* hex = BN_bn2hex(bn);
  std::string out = hex != nullptr ? hex : "";
  OPENSSL_free(hex);
  BN_free(bn);
  return out;
}

std::int64_t not_after_of(X509* cert) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) != 1) {
    return 0;
  }
  return static_cast<std::int64_t>(timegm(&tm));
}

// The certificate callback: every handshake serves the identity published at that moment. The
// SSL takes its own references, so a later publish() cannot free what it uses.
int select_certificate(SSL* ssl, void* arg) {
  auto* store = static_cast<IdentityStore*>(arg);
  std::shared_ptr<const Identity> id = store->current();
  if (!id) {
    return 0;
  }
  return SSL_use_cert_and_key(ssl, id->certificate(), id->key(), id->chain(), 1) == 1 ? 1 : 0;
}

int select_alpn(SSL* /*ssl*/, const unsigned char** out, unsigned char* outlen,
                const unsigned char* in, unsigned int inlen, void* /*arg*/) {
  static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kHttp11, sizeof(kHttp11), in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;  // the client offers no http/1.1: carry on without ALPN
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

Identity::~Identity() {
  X509_free(cert_);
  EVP_PKEY_free(key_);
  sk_X509_pop_free(chain_, X509_free);
}

bool Identity::same_source(std::string_view cert_pem, std::string_view key_pem) const {
  return source_digest_ == digest_of(cert_pem, key_pem);
}

webhook::Result<std::shared_ptr<const Identity>> load_identity(std::string_view cert_pem,
                                                               std::string_view key_pem) {
  ERR_clear_error();
  if (cert_pem.find("-----BEGIN CERTIFICATE-----") == std::string_view::npos) {
    return invalid_argument("the certificate has no PEM CERTIFICATE block");
  }
  if (key_pem.find("PRIVATE KEY-----") == std::string_view::npos) {
    return invalid_argument("the key has no PEM PRIVATE KEY block");
  }
  std::shared_ptr<Identity> id(new Identity());
  BioPtr cert_bio = memory_bio(cert_pem);
  id->cert_ = PEM_read_bio_X509(cert_bio.get(), nullptr, no_passphrase, nullptr);
  if (id->cert_ == nullptr) {
    return invalid_argument("the certificate cannot be parsed: " + openssl_reason());
  }
  id->chain_ = sk_X509_new_null();
  while (X509* extra = PEM_read_bio_X509(cert_bio.get(), nullptr, no_passphrase, nullptr)) {
    sk_X509_push(id->chain_, extra);
  }
  ERR_clear_error();  // the loop ends on "no start line"
  BioPtr key_bio = memory_bio(key_pem);
  id->key_ = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, no_passphrase, nullptr);
  if (id->key_ == nullptr) {
    return invalid_argument(
        "the private key cannot be parsed (an encrypted key is not supported): " +
        openssl_reason());
  }
  if (X509_check_private_key(id->cert_, id->key_) != 1) {
    ERR_clear_error();
    return invalid_argument("the private key does not belong to the certificate");
  }
  id->not_after_ = not_after_of(id->cert_);
  id->subject_ = subject_of(id->cert_);
  id->serial_ = serial_of(id->cert_);
  id->source_digest_ = digest_of(cert_pem, key_pem);
  return std::shared_ptr<const Identity>(std::move(id));
}

webhook::Result<SslCtxPtr> make_server_context(IdentityStore& store) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  auto fail = [](std::string what) {
    return webhook::Error{webhook::ErrorCode::kInternal, what + ": " + openssl_reason()};
  };
  if (!ctx) {
    return fail("cannot create a TLS context");
  }
  if (SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION) != 1) {
    return fail("cannot require TLS 1.2");
  }
  // Mozilla's "intermediate" TLS 1.2 suites: forward secret AEAD only.
  if (SSL_CTX_set_cipher_list(ctx.get(),
                              "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                              "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                              "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305") != 1) {
    return fail("cannot set the TLS 1.2 ciphers");
  }
  if (SSL_CTX_set_ciphersuites(ctx.get(),
                               "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                               "TLS_CHACHA20_POLY1305_SHA256") != 1) {
    return fail("cannot set the TLS 1.3 suites");
  }
  if (SSL_CTX_set1_groups_list(ctx.get(), "X25519:P-256:P-384") != 1) {
    return fail("cannot set the key exchange groups");
  }
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                     SSL_OP_CIPHER_SERVER_PREFERENCE |
                                     SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                                  SSL_MODE_RELEASE_BUFFERS);
  // One read(2) fetches every record the socket holds, instead of a header read and a body read
  // per record; the transport reads until the library wants more, so nothing waits buffered.
  SSL_CTX_set_read_ahead(ctx.get(), 1);
  static const unsigned char kContext[] = "kuberay-tpu-webhook";
  SSL_CTX_set_session_id_context(ctx.get(), kContext, sizeof(kContext) - 1);
  SSL_CTX_set_cert_cb(ctx.get(), select_certificate, &store);
  SSL_CTX_set_alpn_select_cb(ctx.get(), select_alpn, nullptr);
  return ctx;
}

webhook::Result<std::string> read_small_file(const std::string& path, std::size_t max_bytes) {
  // stat first, so that nothing but a regular file is ever opened (opening a FIFO without
  // O_NONBLOCK waits for a writer; opening a device may act on it); symlinks are followed, as a
  // Secret volume's files are symlinks. fstat of what was opened then closes the gap of a path
  // swapped between the two.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return invalid_argument(path + ": cannot open the file: " + errno_text(errno) +
                            " (does it exist and is it readable?)");
  }
  RETURN_IF_ERROR(check_regular(path, st, max_bytes));
  int fd = -1;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    return invalid_argument(path + ": cannot open the file: " + errno_text(errno) +
                            " (does it exist and is it readable?)");
  }
  Descriptor file{fd};
  if (::fstat(file.fd, &st) != 0) {
    return invalid_argument(path + ": cannot stat the opened file: " + errno_text(errno));
  }
  RETURN_IF_ERROR(check_regular(path, st, max_bytes));
  return read_at_most(path, file.fd, static_cast<std::size_t>(st.st_size), max_bytes);
}

CertificateWatcher::CertificateWatcher(IdentityStore& store, std::string cert_file,
                                       std::string key_file, std::chrono::milliseconds interval,
                                       Callback on_reload)
    : store_(store),
      cert_file_(std::move(cert_file)),
      key_file_(std::move(key_file)),
      interval_(interval),
      on_reload_(std::move(on_reload)),
      // The states start unknown, so the first poll compares contents with what is served: a
      // change between the initial load and this constructor is not missed.
      thread_(interval.count() > 0 ? webhook::named_thread("cert-watch", [this] { run(); })
                                   : std::thread()) {}

CertificateWatcher::~CertificateWatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) {
    thread_.join();
  }
}

CertificateWatcher::FileState CertificateWatcher::stat_file(const std::string& path) {
  struct stat st {};
  FileState s;
  if (::stat(path.c_str(), &st) != 0) {
    return s;
  }
  s.exists = true;
  s.dev = static_cast<std::uint64_t>(st.st_dev);
  s.ino = static_cast<std::uint64_t>(st.st_ino);
  s.size = static_cast<std::uint64_t>(st.st_size);
  s.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  s.ctime_ns = static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
  return s;
}

bool CertificateWatcher::poll_once(bool force) {
  std::lock_guard<std::mutex> lock(poll_mu_);
  FileState cert = stat_file(cert_file_);
  FileState key = stat_file(key_file_);
  if (!force && cert == cert_state_ && key == key_state_) {
    return false;
  }
  cert_state_ = cert;
  key_state_ = key;
  webhook::Result<std::string> cert_pem = read_small_file(cert_file_);
  webhook::Result<std::string> key_pem = read_small_file(key_file_);
  if (!cert_pem || !key_pem) {
    on_reload_(false, (!cert_pem ? cert_pem.error() : key_pem.error()).message, nullptr);
    return false;
  }
  std::shared_ptr<const Identity> current = store_.current();
  if (current && current->same_source(*cert_pem, *key_pem)) {
    return false;  // rewritten with the same contents
  }
  webhook::Result<std::shared_ptr<const Identity>> next = load_identity(*cert_pem, *key_pem);
  if (!next) {
    on_reload_(false, cert_file_ + ", " + key_file_ + ": " + next.error().message, nullptr);
    return false;
  }
  store_.publish(*next);
  on_reload_(true, "", *next);
  return true;
}

void CertificateWatcher::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    poll_once();
    lock.lock();
    cv_.wait_for(lock, interval_, [this] { return stop_; });
  }
}

}  // namespace server
