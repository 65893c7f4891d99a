#pragma once
// One client connection as cpp-httplib's request parser sees it: an httplib::Stream over a
// non-blocking socket, optionally TLS, where every wait has a deadline.
//
//   server::Connection conn(fd, ssl, limits);     // ssl may be null (plain HTTP)
//   if (!conn.handshake()) return;                 // TLS within limits.read_timeout
//   while (conn.wait_for_request(wake_fds, idle) == server::Connection::Ready::kRequest) {
//     conn.start_request();                        // deadline: now + read_timeout
//     server.process_request(conn, ...);           // httplib parses, routes, writes
//     if (!conn.flush()) break;                    // one write per response
//   }
//   conn.close(/*linger=*/false);
//
// Why not httplib's own SSL stream: it waits per read (a client trickling one byte at a time
// holds a worker for ever), reads TLS one byte at a time while parsing headers, and writes the
// head and body of a response in two TLS records. Here a request must arrive whole within
// read_timeout, reads are buffered, and responses are flushed once.
//
// httplib reads a request and writes its response only through this Stream (read, write,
// get_*_ip_and_port), never through the descriptor socket() returns; server::HttpServer's
// transport seam relies on that (http_server.h).

#include <httplib.h>
#include <openssl/ssl.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace server {

struct ConnectionLimits {
  std::chrono::milliseconds read_timeout{10'000};  // TLS handshake; one request, head and body
  std::size_t max_request_bytes = 8 << 20;         // head + body of one request
};

class Connection final : public httplib::Stream {
 public:
  enum class Ready {
    kRequest,      // bytes (or the peer's close) are waiting: parse a request
    kTimeout,      // nothing arrived within the wait
    kInterrupted,  // one of the wake descriptors became readable
    kClosed,       // the connection failed
  };

  // Takes ownership of `ssl` (may be null) and of `fd`, which must be a connected socket; makes
  // it non-blocking.
  Connection(int fd, SSL* ssl, ConnectionLimits limits);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Completes the TLS handshake within read_timeout; true at once for plain HTTP. On failure
  // error() says why (e.g. "unsupported protocol", "timed out").
  bool handshake();

  // Waits up to `timeout` for the next request, or until a descriptor of `wake_fds` is readable.
  // Flushes pending output first.
  Ready wait_for_request(std::span<const int> wake_fds, std::chrono::milliseconds timeout);

  // Starts the clock and the byte budget of one request.
  void start_request();

  // Writes buffered output within the deadline. False when the peer is gone or too slow.
  bool flush();

  // Sends a TLS close_notify (best effort) and closes the socket. With `linger`, first stops
  // writing and discards what the client still sends for a moment, so a response sent before
  // its request was read whole (413) reaches the client instead of being lost to a reset.
  void close(bool linger);

  const std::string& error() const { return error_; }
  bool over_budget() const { return over_budget_; }
  // A read outlived the request's deadline (--read-timeout). The connection must close: what the
  // client sends next would be the rest of a request already given up on.
  bool timed_out() const { return timed_out_; }

  // httplib::Stream
  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

 private:
  static constexpr std::size_t kInBufferBytes = std::size_t{16} * 1024;
  static constexpr std::size_t kFlushBytes = std::size_t{64} * 1024;

  bool buffered() const;
  // Waits for `events` on the socket until the deadline. False on timeout or error.
  bool wait(short events) const;
  ssize_t raw_read(char* buf, std::size_t len);
  ssize_t raw_write(const char* buf, std::size_t len);
  void set_deadline(std::chrono::milliseconds from_now);

  int fd_;
  SSL* ssl_;
  ConnectionLimits limits_;
  std::chrono::steady_clock::time_point deadline_;
  std::unique_ptr<char[]> in_;
  std::size_t in_pos_ = 0;
  std::size_t in_len_ = 0;
  std::string out_;
  std::size_t request_bytes_ = 0;
  bool over_budget_ = false;
  bool timed_out_ = false;
  bool failed_ = false;
  std::string error_;
  std::string remote_ip_;
  int remote_port_ = -1;
  bool closed_ = false;
};

}  // namespace server
