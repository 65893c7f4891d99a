#pragma once
// TLS for the HTTPS port: the serving identity (certificate chain + key), an SSL_CTX that allows
// only TLS 1.2 and 1.3 with AEAD ciphers, and hot reload of the identity from files.
//
//   auto id = server::load_identity(cert_pem, key_pem);        // checks the key matches
//   server::IdentityStore store(*id);
//   auto ctx = server::make_server_context(store);             // handshakes read store.current()
//   store.publish(*server::load_identity(new_cert, new_key));  // next handshake serves the new one
//
// Each handshake takes the identity published at that moment (SSL_CTX_set_cert_cb), so a swap
// never fails or mixes a handshake; connections already open keep the certificate they began
// with. Nothing here logs or returns certificate or key material: errors name files and reasons.

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "base/status/result.h"

namespace server {

struct SslCtxFree {
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;

// A certificate chain and its private key, immutable once loaded.
class Identity {
 public:
  ~Identity();
  Identity(const Identity&) = delete;
  Identity& operator=(const Identity&) = delete;

  X509* certificate() const { return cert_; }
  EVP_PKEY* key() const { return key_; }
  STACK_OF(X509) * chain() const { return chain_; }
  // notAfter of the leaf certificate, seconds since the Unix epoch.
  std::int64_t not_after() const { return not_after_; }
  // The leaf's subject (RFC 2253) and hex serial, for logs.
  const std::string& subject() const { return subject_; }
  const std::string& serial() const { return serial_; }
  // The PEM texts it was loaded from, to tell a real change from a rewrite of the same files.
  bool same_source(std::string_view cert_pem, std::string_view key_pem) const;

 private:
  friend webhook::Result<std::shared_ptr<const Identity>> load_identity(std::string_view,
                                                                        std::string_view);
  Identity() = default;

  X509* cert_ = nullptr;
  EVP_PKEY* key_ = nullptr;
  STACK_OF(X509) * chain_ = nullptr;
  std::int64_t not_after_ = 0;
  std::string subject_;
  std::string serial_;
  std::string source_digest_;
};

// Parses a PEM certificate chain (leaf first) and a PEM private key. InvalidArgument naming the
// problem when either holds no PEM block, cannot be parsed, or the key does not belong to the
// leaf certificate.
webhook::Result<std::shared_ptr<const Identity>> load_identity(std::string_view cert_pem,
                                                               std::string_view key_pem);

// The identity handshakes serve now; publish() swaps it atomically. Thread-safe.
// (A mutex, not std::atomic<std::shared_ptr>: libstdc++ 12's load() releases its lock with relaxed
// ordering, so a publish() right after it is not ordered after its read of the pointer. TSan
// reports that race, and on a weakly ordered CPU such as arm64 a handshake could pair the new
// pointer with the old control block.)
class IdentityStore {
 public:
  explicit IdentityStore(std::shared_ptr<const Identity> initial) : current_(std::move(initial)) {}
  std::shared_ptr<const Identity> current() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }
  void publish(std::shared_ptr<const Identity> next) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      current_.swap(next);
    }
    // `next` now holds the old identity, released outside the lock.
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const Identity> current_;
};

// A server SSL_CTX: TLS 1.2 minimum, ECDHE with AES-GCM or ChaCha20-Poly1305 on TLS 1.2, the
// TLS 1.3 AEAD suites, no compression or renegotiation, ALPN http/1.1, and the certificate of
// `store` chosen per handshake. `store` must outlive the context. Internal error when OpenSSL
// refuses the settings.
webhook::Result<SslCtxPtr> make_server_context(IdentityStore& store);

// Watches a certificate and key file pair and publishes a new identity when they change:
// a kubelet Secret volume's atomic ..data symlink swap, a rename over the file, or an in-place
// rewrite (device, inode, size, mtime or ctime of either file). A pair that does not load keeps
// the current identity and is reported through `on_reload(false, reason)`; it is retried when
// the files change again.
class CertificateWatcher {
 public:
  using Callback = std::function<void(bool ok, const std::string& detail,
                                      const std::shared_ptr<const Identity>& identity)>;

  // Starts polling every `interval` (0: no thread, the owner calls poll_once). `on_reload` runs
  // on the polling thread.
  CertificateWatcher(IdentityStore& store, std::string cert_file, std::string key_file,
                     std::chrono::milliseconds interval, Callback on_reload);
  ~CertificateWatcher();  // stops and joins the thread
  CertificateWatcher(const CertificateWatcher&) = delete;
  CertificateWatcher& operator=(const CertificateWatcher&) = delete;

  // One poll, as the thread does it; returns true when a new identity was published. With
  // `force` (SIGHUP) the files are re-read even when their stat data did not change.
  // Thread-safe (tests call it next to the thread).
  bool poll_once(bool force = false);

 private:
  struct FileState {
    std::uint64_t dev = 0, ino = 0, size = 0;
    std::int64_t mtime_ns = 0, ctime_ns = 0;
    bool exists = false;
    friend bool operator==(const FileState&, const FileState&) = default;
  };
  static FileState stat_file(const std::string& path);
  void run();

  IdentityStore& store_;
  std::string cert_file_;
  std::string key_file_;
  std::chrono::milliseconds interval_;
  Callback on_reload_;
  std::mutex poll_mu_;
  FileState cert_state_;
  FileState key_state_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// The largest certificate or key file read_small_file accepts.
inline constexpr std::size_t kMaxPemBytes = 1 << 20;

// Reads a whole certificate or key file of at most `max_bytes`, without ever blocking on what
// the path names: only a regular file (or a symlink to one) is opened, O_NONBLOCK; a size over
// the limit is refused before reading, and no more than max_bytes + 1 bytes are ever read (a
// file growing past the limit is refused too). InvalidArgument naming the path and what is
// wrong: missing or unreadable, "is a FIFO, not a regular file" (a directory, a device, a
// socket), its size against the limit.
webhook::Result<std::string> read_small_file(const std::string& path,
                                             std::size_t max_bytes = kMaxPemBytes);

}  // namespace server
