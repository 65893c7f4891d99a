#pragma once
// An httplib::Server whose connections are server::Connection: cpp-httplib parses and routes
// requests and writes responses; this class owns everything about the socket (cpp-httplib 0.11's
// defaults would cost ~40 ms a request without TCP_NODELAY, close keep-alive connections every
// 5 requests, share the port silently with SO_REUSEPORT and accept a backlog of 5).
//
//   server::HttpServer https({.ssl_ctx = ctx.get(), .limits = limits, .max_threads = 64}, log);
//   https.Post(".*", handler);
//   auto port = https.bind({"127.0.0.1", 0});
//   std::thread t([&] { https.serve(); });   // returns after stop() once every connection closed
//   https.stop();
//
// Connections: a TLS handshake and every request must arrive within limits.read_timeout; an idle
// keep-alive connection is closed after idle_timeout, at stop(), or as soon as another connection
// waits for a worker (so idle clients cannot starve new ones); a worker serves one connection at
// a time and workers are started on demand up to max_threads.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>

#include <httplib.h>
#include <openssl/ssl.h>

#include "base/status/result.h"
#include "server/connection.h"
#include "server/flags.h"
#include "server/log.h"

namespace server {

// An eventfd that is readable once raised, until cleared.
class WakeFd {
 public:
  WakeFd();
  ~WakeFd();
  WakeFd(const WakeFd&) = delete;
  WakeFd& operator=(const WakeFd&) = delete;
  int fd() const { return fd_; }
  void raise() const;
  void clear() const;

 private:
  int fd_;
};

struct HttpServerOptions {
  SSL_CTX* ssl_ctx = nullptr;  // null: plain HTTP
  ConnectionLimits limits;
  std::chrono::milliseconds idle_timeout{60'000};
  int max_threads = 64;
  int max_requests_per_connection = 1000;  // then "Connection: close", so load rebalances
  std::function<void()> on_connection_open;
  std::function<void()> on_connection_close;
};

class HttpServer : public httplib::Server {
 public:
  HttpServer(HttpServerOptions options, const Log& log);
  ~HttpServer() override;

  // Binds with SO_REUSEADDR and a backlog of 1024. An empty host binds every interface (IPv6
  // and IPv4, or IPv4 alone when the host has no IPv6). Returns the bound port (useful with
  // port 0). Unavailable naming the address and the system's reason on failure.
  webhook::Result<int> bind(const ListenAddress& address);

  // Accepts and serves until stop(); returns once every connection has closed.
  void serve();

  // Stops accepting, closes idle keep-alive connections and lets requests in progress finish;
  // a connection accepted but not yet served still gets one request. Thread-safe, idempotent.
  void stop_serving();

  bool stopping() const { return stopping_.load(); }

  // Called by a route handler: close this connection once its response is written. With
  // `unread_body` (the request body was not read whole) the close lingers, discarding what the
  // client still sends, so it sees the response rather than a reset. Does nothing outside a
  // handler.
  static void close_after_response(bool unread_body);

  // Called while httplib writes an error page: true when the request failed because it did not
  // arrive within the read timeout (httplib reports that as a bare 400). The connection then
  // closes after the response.
  static bool request_timed_out();

 private:
  bool process_and_close_socket(socket_t sock) override;

  HttpServerOptions options_;
  const Log& log_;
  WakeFd stop_fd_;
  WakeFd pressure_fd_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> serving_{false};
};

}  // namespace server
