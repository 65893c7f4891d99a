#pragma once
// The webhook's HTTP/1.1 server: one coroutine per connection on standalone Asio, a few I/O
// threads (each running its own event loop), and a fixed pool of handler threads on which the
// route runs, never on an I/O thread. Idle, half-open, handshaking and slowly-sending
// connections cost a few coroutine frames and, once their client has sent a byte, their OpenSSL
// state, never a thread (docs/server.md "Connections and limits", docs/security.md).
//
//   server::HttpServer https({.ssl_ctx = ctx, .limits = limits, .io_threads = 2,
//                             .handler_threads = 2,
//                             .handler = [&](const HttpRequestView& r) { return route(r); },
//                             .refuse = [&](const HttpRequestView& r) { return route(r); }},
//                            log);
//   webhook::Result<int> port = https.bind({"127.0.0.1", 0});
//   std::thread t([&] { https.serve(); });   // returns after stop_serving(), once every
//   https.stop_serving();                     // connection has closed
//
// A connection, read top to bottom in HttpServer::Connection::run (each step bounded; none
// renewed by a trickle):
//   accept      at --max-connections the oldest idle connection is closed to make room
//   handshake   TLS; it and the first byte of the first request within read_timeout of the
//               accept
//   idle        between keep-alive requests, up to idle_timeout; silent close after
//   head        from a request's first byte, head and body within read_timeout (else 408 and
//               close); parsed by http1::RequestParser (malformed: answered, then closed,
//               nothing after it parsed)
//   budget      a body's declared length is known: over max_body_bytes, 413 at once; else the
//               request takes grant_bytes(Content-Length, parse_bytes_per_body_byte) of the
//               in-flight memory budget (a chunked body: of max_body_bytes, the excess given
//               back once it is whole), waiting (its body unread) until room frees or its
//               deadline passes (503), and gives it back once its answer is written; one that
//               could never fit is refused at once as too large (413)
//   body        read within the request's deadline
//   handle      the handler runs on the handler pool; the connection awaits its answer
//   write       the answer within read_timeout, then the next request, or a lingering close
//               (half-close, discard what the client still sends for up to a second)
//
// Refusals (413, 408, 503 and the parser's) are answered by the connection where they are found:
// `refuse` words those that belong to a route (a body too large, cut by the deadline, or left
// without budget: the view's `refused` says which, and its body is the first bytes read), the
// transport the rest (a metav1 Status, status_json). Every response the server writes is
// reported to on_response after its last byte is written, with the time from the request being
// read whole (or its refusal being found) to its answer being ready: the wait for the
// handler pool and the handler, not the network.

#include <openssl/ssl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status/result.h"
#include "server/flags.h"
#include "server/http1.h"
#include "server/http_message.h"
#include "server/log.h"
#include "server/memory_budget.h"

namespace server {

// What a request with a body of `body_bytes` takes of the in-flight budget.
constexpr std::uint64_t grant_bytes(std::uint64_t body_bytes, std::uint64_t per_body_byte) {
  return body_bytes * (1 + per_body_byte) + (std::uint64_t{64} << 10);
}

struct HttpServerOptions {
  // Names the server's threads as `top -H` shows them: NAME-io0.. (the event loops; serve()
  // names its calling thread NAME-io0) and NAME-handler0.. (the handler pool).
  std::string name = "http";
  SSL_CTX* ssl_ctx = nullptr;  // null: plain HTTP
  http1::Limits limits;
  std::chrono::milliseconds read_timeout{10'000};
  std::chrono::milliseconds idle_timeout{60'000};
  int io_threads = 1;       // event loops; accepted connections take them in turn
  int handler_threads = 4;  // the handler pool: requests handled at once
  int max_connections = 4096;
  int max_requests_per_connection = 1000;  // then "Connection: close", so load rebalances
  MemoryBudget* budget = nullptr;          // null: no in-flight budget
  std::size_t parse_bytes_per_body_byte = 0;
  // Answers a complete request, on the handler pool.
  std::function<HttpReply(const HttpRequestView&)> handler;
  // Words a refusal that names a route (the view's `refused` set; see above), on the
  // connection's I/O thread: it must not block. Null: a metav1 Status of the refusal's code.
  std::function<HttpReply(const HttpRequestView&)> refuse;
  std::function<void()> on_connection_open;
  std::function<void()> on_connection_close;
  // A request (or a refusal of one) begins being answered / its answer was written.
  std::function<void(std::string_view path)> on_request;
  // `latency`: from the request read whole (or its refusal found) to its answer ready.
  std::function<void(std::string_view path, int code, std::chrono::nanoseconds latency)>
      on_response;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, const Log& log);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds with SO_REUSEADDR and a backlog of 1024. An empty host binds every interface (IPv6
  // and IPv4, or IPv4 alone when the host has no IPv6). Returns the bound port (useful with
  // port 0). Unavailable naming the address and the system's reason on failure.
  webhook::Result<int> bind(const ListenAddress& address);

  // Serves until stop_serving(); returns once every connection has closed.
  void serve();

  // Stops accepting, then closes idle keep-alive connections and lets requests in progress
  // finish; no connection is closed for the stop before the listeners are. A connection
  // accepted but not yet served still gets one request if it begins (its TLS handshake
  // included) within a second. Thread-safe, idempotent.
  void stop_serving();

  int open_connections() const;

 private:
  struct Impl;
  class Connection;
  friend class Connection;

  HttpServerOptions options_;
  const Log& log_;
  std::atomic<bool> stopping_{false};  // set once the listeners are closed
  std::unique_ptr<Impl> impl_;
};

}  // namespace server
