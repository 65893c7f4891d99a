#pragma once
// The webhook's HTTP/1.1 server: one epoll set per listening port, served by a pool of worker
// threads, so that a connection holds a worker only while one of its requests is being read,
// handled or written. Idle, half-open, handshaking and slowly-sending connections wait in the
// epoll set with their own deadlines and cost no thread (docs/server.md "Connections and
// limits", docs/security.md).
//
//   server::HttpServer https({.ssl_ctx = ctx, .limits = limits, .workers = 64,
//                             .handler = [&](const HttpRequestView& r) { return route(r); }},
//                            log);
//   webhook::Result<int> port = https.bind({"127.0.0.1", 0});
//   std::thread t([&] { https.serve(); });   // returns after stop_serving(), once every
//   https.stop_serving();                     // connection has closed
//
// How a connection lives (each step bounded; none renewed by a trickle):
//   accept      at --max-connections the oldest idle connection is closed to make room
//   handshake   TLS, non-blocking; it and the first byte of the first request within
//               read_timeout of the accept
//   idle        between keep-alive requests, up to idle_timeout; silent close after
//   request     from its first byte, head and body within read_timeout (else 408 and close);
//               the head is parsed by http1::RequestParser (malformed: answered, then closed,
//               nothing after it parsed); a body over max_body_bytes is refused from its
//               declared length, before it is read
//   budget      before its body is read, a request is granted Content-Length × (1 +
//               parse_bytes_per_body_byte) + 64 KiB of the in-flight memory budget; without
//               room it waits, unread, until room frees or its deadline passes (503)
//   handle      the handler runs on the worker that read the request's last byte; what it
//               needs beyond the grant it reserves (webhook::memory::reserve), waiting
//               within the request's deadline
//   write       the response within read_timeout, then the next request, or a lingering
//               close (half-close, discard what the client still sends for up to a second)
//
// Every response the server writes, its own refusals included, is reported to on_response
// after its last byte is written (latency from the end of the request to then).

#include <openssl/ssl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status/result.h"
#include "server/flags.h"
#include "server/http1.h"
#include "server/http_message.h"
#include "server/log.h"

namespace server {

// Requests in flight share this many bytes (bodies and their parse); thread-safe.
class MemoryBudget {
 public:
  explicit MemoryBudget(std::uint64_t capacity) : capacity_(capacity) {}
  std::uint64_t capacity() const { return capacity_; }
  std::uint64_t in_use() const;
  // True and counted when `bytes` fit now.
  bool try_acquire(std::uint64_t bytes);
  // Waits until `bytes` fit (true, counted) or `deadline` passes (false).
  bool acquire_until(std::uint64_t bytes, std::chrono::steady_clock::time_point deadline);
  // Returns `bytes`; true when nothing is held any more after a large grant (time to give
  // freed memory back to the system).
  bool release(std::uint64_t bytes);

 private:
  const std::uint64_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  std::uint64_t used_ = 0;
  std::uint64_t peak_since_idle_ = 0;
};

// Gives memory freed by a burst back to the system (the allocator's purge).
void release_free_memory();

struct HttpServerOptions {
  SSL_CTX* ssl_ctx = nullptr;  // null: plain HTTP
  http1::Limits limits;
  std::chrono::milliseconds read_timeout{10'000};
  std::chrono::milliseconds idle_timeout{60'000};
  int workers = 64;
  int max_connections = 4096;
  int max_requests_per_connection = 1000;  // then "Connection: close", so load rebalances
  MemoryBudget* budget = nullptr;          // null: no in-flight budget
  std::size_t parse_bytes_per_body_byte = 0;
  std::function<HttpReply(const HttpRequestView&)> handler;
  std::function<void()> on_connection_open;
  std::function<void()> on_connection_close;
  // A request (or a refusal of one) begins being answered / its answer was written.
  std::function<void(std::string_view path)> on_request;
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

  // Stops accepting, closes idle keep-alive connections and lets requests in progress finish;
  // a connection accepted but not yet served still gets one request. Thread-safe, idempotent.
  void stop_serving();

  bool stopping() const { return stopping_.load(); }
  int open_connections() const;

 private:
  struct Conn;
  using ConnPtr = std::shared_ptr<Conn>;

  struct Worker;
  void work();
  void give_back(Worker& w);
  void reap();
  void accept_some();
  void admit(int fd, const std::string& remote);
  bool evict_oldest_idle();
  void on_event(std::uint64_t id, std::uint32_t events);
  ConnPtr find(std::uint64_t id) const;
  // Makes this thread the connection's owner: a worker after an event (it was armed), the reaper
  // or an eviction (armed or parked). False when someone else owns it.
  bool take(Conn& c, bool from_reaper);
  void arm(Conn& c, std::uint32_t events);
  void drive(Conn& c);
  bool handshake(Conn& c);
  bool read_request(Conn& c);
  bool advance(Conn& c, bool& need_more);
  bool start_body(Conn& c);
  void park(Conn& c, std::uint64_t charge);
  void resume_parked();
  void release_budget(Conn& c);
  HttpRequestView view_of(const Conn& c) const;
  // Runs the route with a webhook::memory reserver that grows `c`'s grant (base/memory).
  HttpReply call_handler(Conn& c, const HttpRequestView& view);
  bool grow_grant(Conn& c, std::size_t bytes);
  void respond(Conn& c);
  void refuse(Conn& c, int status, const std::string& message, bool route);
  void queue_reply(Conn& c, const HttpReply& reply, bool close, bool head_only);
  bool write_out(Conn& c);
  void report(Conn& c);
  void after_response(Conn& c);
  void begin_linger(Conn& c);
  void linger(Conn& c);
  void expire(Conn& c);
  void close(Conn& c, std::string_view why);
  void maybe_finish();

  HttpServerOptions options_;
  const Log& log_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::vector<int> listen_fds_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> finished_{false};
  std::atomic<std::uint64_t> next_id_{16};

  mutable std::mutex table_mu_;
  std::unordered_map<std::uint64_t, ConnPtr> conns_;

  std::mutex parked_mu_;
  std::deque<std::pair<std::uint64_t, std::uint64_t>> parked_;  // id, charge

  std::mutex reaper_mu_;
  std::condition_variable reaper_cv_;
};

}  // namespace server
