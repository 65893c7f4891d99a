#pragma once
// A connection's bytes: a TCP socket, with a TLS session over it or not, and a deadline, read and
// written by one coroutine on the socket's event loop. What Beast's tcp_stream (with its expiry)
// and asio::ssl::stream do together, over OpenSSL directly: OpenSSL reads and writes the socket
// itself (SSL_set_fd) and, with SSL_MODE_RELEASE_BUFFERS, an idle stream holds no record
// buffers; one whose client has sent nothing yet holds no TLS session at all
// (docs/architecture.md "The transport" says why not asio::ssl::stream).
//
//   server::ByteStream s(std::move(socket), ssl_ctx);    // ssl_ctx null: plain TCP
//   s.expires_at(ByteStream::Clock::now() + 10s);        // every wait fails after this
//   bool ok = s.ok();
//   if (ok) {
//     ok = co_await s.handshake();
//   }
//   std::size_t got = 0;
//   server::Io io = co_await s.read_some(buf, sizeof buf, got);  // kOk, kEof or kError
//   if (io == server::Io::kError && s.expired()) { /* it was the deadline */ }
//   ok = co_await s.write_all("HTTP/1.1 200 OK\r\n...");
//   s.interrupt();   // from the loop: the wait in progress and every later wait fail

#include <openssl/ssl.h>

#include <asio.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string_view>

namespace server {

// What a read came to: bytes, the peer's orderly end (TLS close_notify or TCP FIN), or a failure
// (the socket's, the TLS session's, the deadline's or an interruption's).
enum class Io { kOk, kEof, kError };

class ByteStream {
 public:
  using Clock = std::chrono::steady_clock;
  using Tcp = asio::ip::tcp;

  // `ctx` null: plain TCP. The socket is made non-blocking.
  ByteStream(Tcp::socket socket, SSL_CTX* ctx);
  ~ByteStream();
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  // False when the socket or the TLS session could not be set up: every operation then fails.
  bool ok() const { return ok_; }
  Tcp::socket& socket() { return socket_; }

  // Every wait fails once `t` passes (Clock::time_point::max(): never), and expired() says so
  // until the next call. The timer moves only when a deadline comes sooner than the one it
  // watches: a later one is taken up when it fires. After close(), nothing is watched.
  void expires_at(Clock::time_point t);
  Clock::time_point expiry() const { return watch_->deadline; }
  bool expired() const { return watch_->expired; }
  // The wait in progress fails, and every later one at once, whatever the deadline (a step that
  // need not wait, bytes already there or room to write them, still runs).
  void interrupt();

  // The TLS handshake (plain TCP: nothing to do), its session made once the client's first bytes
  // are there. False when it failed, expired or was interrupted.
  asio::awaitable<bool> handshake();
  // Up to `len` bytes into `buf` (`got` of them), waiting for the first.
  asio::awaitable<Io> read_some(char* buf, std::size_t len, std::size_t& got);
  // All of `data`, waiting for room as needed. False when the stream failed first.
  asio::awaitable<bool> write_all(std::string_view data);
  // Ends the sending side: TLS close_notify (best effort), then a TCP half-close.
  void shutdown_send();
  // Reads and discards the socket's raw bytes (past any TLS session), using `buf`, until the
  // peer closes, the socket fails, the deadline passes or the stream is interrupted, even while
  // the peer keeps sending; other coroutines on the loop run between its reads.
  asio::awaitable<void> discard_until_closed(char* buf, std::size_t len);
  void close();

 private:
  // The deadline's timer and what it cancels, shared with its pending wait, which may complete
  // after the stream is gone (`socket` is then null).
  struct Watch {
    explicit Watch(const asio::any_io_executor& ex) : timer(ex) {}
    asio::steady_timer timer;
    Clock::time_point deadline = Clock::time_point::max();
    bool armed = false;    // a wait on `timer` is pending
    bool expired = false;  // `deadline` passed: what was waiting was cancelled
    Tcp::socket* socket = nullptr;
  };
  static void on_timer(const std::shared_ptr<Watch>& w, const std::error_code& ec);
  void arm();

  // What one non-blocking step came to: done, or the socket must become readable or writable.
  enum class Step { kOk, kWantRead, kWantWrite, kEof, kError };
  Step ssl_step(int r);
  // `raw`: the socket's bytes, past any TLS session; `recv_flags` then go to recv (MSG_PEEK).
  Step read_step(bool raw, char* buf, std::size_t len, std::size_t& got, int recv_flags = 0);
  Step write_step(std::string_view data, std::size_t& put);
  // Runs a non-blocking step until it no longer asks to wait, waiting for the socket in between.
  template <class F>
  asio::awaitable<Io> until_done(F step);

  Tcp::socket socket_;
  SSL_CTX* ctx_;        // null: plain TCP
  SSL* ssl_ = nullptr;  // made by handshake()
  bool ok_ = true;
  bool interrupted_ = false;
  std::shared_ptr<Watch> watch_;
};

}  // namespace server
