#pragma once
// An httplib::Server whose connections are server::Connection: cpp-httplib parses and routes
// requests and writes responses; this class owns everything about the socket (cpp-httplib 0.11's
// defaults would cost ~40 ms a request without TCP_NODELAY, close keep-alive connections every
// 5 requests, share the port silently with SO_REUSEPORT and accept a backlog of 5).
//
//   server::HttpServer https({.ssl_ctx = ctx.get(), .limits = limits, .max_threads = 64}, log);
//   https.Post(".*", handler);
//   auto port = https.bind({"127.0.0.1", 0});
//   std::thread t([&] { https.serve(); });   // returns after stop_serving(), once every
//   https.stop_serving();                     // connection has closed
//
// Connections: a TLS handshake and every request must arrive within limits.read_timeout; an idle
// keep-alive connection is closed after idle_timeout, at stop_serving(), or as soon as another
// connection waits for a worker (so idle clients cannot starve new ones); a worker serves one
// connection at a time and workers are started on demand up to max_threads.
//
// What httplib 0.11 offers publicly is used as such: set_tcp_nodelay (accepted sockets inherit it
// from the listener), set_socket_options (SO_REUSEADDR instead of the default SO_REUSEPORT; it
// also hands us the socket bind_to_port then listens on, whose backlog we raise to 1024 with a
// second listen()), new_task_queue (the worker pool), set_keep_alive_max_count and
// set_keep_alive_timeout (the Keep-Alive header), bind_to_port, listen_after_bind, is_running
// and stop.
//
// The transport seam, the one place that depends on httplib's internals: the private virtual
// process_and_close_socket, which httplib's accept loop calls on a worker for each accepted
// socket. httplib 0.11 has no public way to serve a socket through our own Stream, nor to wake
// its idle keep-alive connections. Our override only hands the socket to serve_connection(),
// which wraps it in a Connection (TLS or plain, with whole-request deadlines) and runs the
// keep-alive loop itself (idle connections wake at stop_serving() and under pressure), calling
// the protected process_request for each request. The static_assert below pins the version the
// seam was written against; test/unit/server/transport_test.cpp fails when the behaviour it
// relies on changes (docs/server.md "Transport seam").

#include <httplib.h>
#include <openssl/ssl.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "base/status/result.h"
#include "server/connection.h"
#include "server/flags.h"
#include "server/log.h"

// The seam below overrides a private virtual of cpp-httplib 0.11 and calls its protected
// process_request. Before accepting another version here, re-check that
// Server::process_and_close_socket(socket_t) is still virtual and called once per accepted socket
// on a task of new_task_queue(); that process_request(Stream&, bool, bool&, setup) still reads the
// request only through the Stream, routes it, writes the response through the Stream, and reports
// "Connection: close" in its bool&; that set_socket_options still sees the socket bind_to_port
// listens on; then run server_transport_tests.
static_assert(std::string_view(CPPHTTPLIB_VERSION).starts_with("0.11."),
              "server::HttpServer's transport seam was written against cpp-httplib 0.11: "
              "re-check the seam (lib/server/http_server.h) and run server_transport_tests");

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
  struct HandlerRequests;  // what a route handler asked of the connection it runs on

  // THE TRANSPORT SEAM (cpp-httplib 0.11, private virtual; see the top of this file): called by
  // httplib's accept loop, on a worker of new_task_queue(), once for each accepted socket, which
  // it must close. Only hands the socket to serve_connection().
  bool process_and_close_socket(socket_t sock) override;

  // Serves one accepted socket until its connection ends, then closes it.
  void serve_connection(socket_t sock);
  // Runs the keep-alive loop over `conn`; returns why the connection ends ("" when a response
  // ended it: "Connection: close", the request limit, stopping).
  std::string serve_requests(Connection& conn, HandlerRequests& requests, int& served);
  // Waits for the next request: the first within read_timeout, later ones within idle_timeout
  // or until stop_serving() or pressure wakes the connection.
  Connection::Ready await_request(Connection& conn, int served);
  void log_closed(const Connection& conn, int served, const std::string& why) const;

  static thread_local HandlerRequests* current_requests_;

  HttpServerOptions options_;
  const Log& log_;
  WakeFd stop_fd_;
  WakeFd pressure_fd_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> serving_{false};
  // The last socket set_socket_options saw: after a successful bind_to_port, the listener.
  socket_t bound_socket_ = INVALID_SOCKET;
};

}  // namespace server
