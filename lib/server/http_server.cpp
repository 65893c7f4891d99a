#include "server/http_server.h"

#include <algorithm>
#include <asio.hpp>
#include <ctime>
#include <list>
#include <mutex>
#include <optional>
#include <thread>

#include "base/thread/name.h"
#include "server/budget_wait.h"
#include "server/byte_stream.h"

namespace server {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using Tcp = asio::ip::tcp;

constexpr int kBacklog = 1024;
constexpr std::size_t kReadChunk = std::size_t{64} * 1024;
constexpr std::size_t kPrefixBytes = std::size_t{64} * 1024;  // enough body to read a uid
constexpr auto kLingerTime = 1s;
constexpr auto kAcceptRetry = 50ms;       // the pause after a failed accept, at most
constexpr auto kFirstRequestAtStop = 1s;  // for a connection accepted but silent at stop

// Where a connection's bytes are read: one buffer per I/O thread, filled by a read that never
// suspends in between (it waits for readiness first), and copied out at once.
char* scratch() {
  thread_local std::unique_ptr<char[]> buf(new char[kReadChunk]);
  return buf.get();
}

std::string endpoint_text(const Tcp::endpoint& e) {
  std::string host = e.address().to_string();
  return (e.address().is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(e.port());
}

HttpReply status_reply(int status, std::string message) {
  HttpReply r;
  r.status = status;
  r.body = status_json(status, message);
  return r;
}

}  // namespace

// The event loops, the handler pool, the listeners and the table of open connections.
struct HttpServer::Impl {
  Impl(HttpServer& s, int io_threads, int handler_threads) : server(s) {
    for (int i = 0; i < std::max(1, io_threads); ++i) {
      loops.push_back(std::make_unique<asio::io_context>(1));
      guards.emplace_back(loops.back()->get_executor());
    }
    room.emplace(*loops[0]);
    for (int i = 0; i < std::max(1, handler_threads); ++i) {
      handlers.push_back(webhook::named_thread(s.options_.name + "-handler" + std::to_string(i),
                                               [this] { pool.run(); }));
    }
  }
  // Lets the handler threads end: once the queued handlers have run (`finish_queued`), or at once.
  void stop_pool(bool finish_queued) {
    pool_work.reset();
    if (!finish_queued) {
      pool.stop();
    }
    for (std::thread& t : handlers) {
      if (t.joinable()) {
        t.join();
      }
    }
  }
  asio::io_context& next_loop() { return *loops[next++ % loops.size()]; }
  asio::awaitable<void> accept_loop(Tcp::acceptor& acceptor);
  void admit(Tcp::socket socket);
  bool evict_oldest_idle(bool unless_one_is_closing = false);
  int open_connections() const;

  HttpServer& server;
  std::vector<std::unique_ptr<asio::io_context>> loops;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
  asio::io_context pool;  // the handler pool, run by `handlers`
  asio::executor_work_guard<asio::io_context::executor_type> pool_work{pool.get_executor()};
  std::vector<std::thread> handlers;
  std::vector<Tcp::acceptor> acceptors;  // on loops[0]
  std::size_t next = 0;                  // on loops[0]
  // On loops[0]: out of descriptors, an accept waits here for the one it evicted to close
  // (finish() cancels the wait).
  std::optional<asio::steady_timer> room;
  std::atomic<bool> stop_requested{false};

  mutable std::mutex mu;
  std::list<Connection*> open;  // not closed or evicted, oldest first
  int closing = 0;              // evicted, their descriptors not closed yet
};

// One connection, read top to bottom in run(). Everything but try_evict(), idle() and
// idle_since() (the accept loop's, under the table's lock) runs on its own event loop; the
// handler runs on the pool.
class HttpServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum State : int { kIdle, kBusy, kEvicted };

  Connection(HttpServer& server, Tcp::socket socket)
      : server_(server),
        o_(server.options_),
        stream_(std::move(socket), o_.ssl_ctx),
        parser_(o_.limits) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  asio::awaitable<void> run(std::shared_ptr<Connection> self);
  // From the accept loop, under the table's lock: claims an idle connection for closing.
  bool try_evict();
  // On its loop: closes it when it is idle (evicted, or stopping between requests).
  void wake_if_idle();
  Clock::rep idle_since() const { return idle_since_.load(); }  // read by evictions
  bool idle() const { return state_ == kIdle; }
  // A byte of the current request (not an empty line before it) has arrived (begin_request),
  // and its answer is not written.
  bool in_request() const { return state_ == kBusy; }
  asio::any_io_executor executor() { return stream_.socket().get_executor(); }
  std::list<Connection*>::iterator place;

 private:
  bool begin_request();
  asio::awaitable<bool> read_while(http1::State phase);
  asio::awaitable<bool> exchange();
  asio::awaitable<bool> take_budget();
  asio::awaitable<bool> read_body();
  asio::awaitable<bool> ended_early(Io io);
  asio::awaitable<HttpReply> handle();
  // A refusal the connection answers before it closes. One a route words (`route` set) is
  // worded by `refuse` once the head names the route. (Passed to refuse() as a named value:
  // GCC 12 destroys a temporary argument of a coroutine twice.)
  struct Refusal {
    int status = 400;
    std::string message;
    Refused route = Refused::kNo;
  };
  asio::awaitable<bool> refuse(Refusal r);
  // Closes after the answer when why_ names a reason to.
  asio::awaitable<bool> answer(const HttpReply& reply, bool head_only);
  asio::awaitable<void> linger();
  void feed(std::string_view data);
  HttpRequestView view() const;
  void settle_budget();
  void release_budget();
  void finish();

  HttpServer& server_;
  const HttpServerOptions& o_;
  ByteStream stream_;  // the socket, its TLS session and the connection's deadline
  std::atomic<int> state_{kIdle};
  std::atomic<Clock::rep> idle_since_{Clock::now().time_since_epoch().count()};
  int served_ = 0;
  http1::RequestParser parser_;
  std::string in_;  // read, not yet parsed
  std::string out_;
  std::uint64_t charged_ = 0;
  Clock::time_point whole_at_;  // the request was read whole, or its refusal was found
  std::string_view why_;        // why it closed, for the debug log
};

asio::awaitable<void> HttpServer::Connection::run(std::shared_ptr<Connection> self) {
  stream_.expires_at(Clock::now() + o_.read_timeout);  // the handshake and the first byte
  try {
    if (o_.on_connection_open) {
      o_.on_connection_open();
    }
    // (No co_await in an operand of && or ||: GCC 12 runs it even when the left one decides.)
    bool open = stream_.ok();
    if (open) {
      open = co_await stream_.handshake();
      if (!open && why_.empty()) {
        why_ = stream_.expired() ? "no request within --read-timeout" : "TLS handshake failed";
      }
    }
    while (open) {
      open = co_await exchange();
    }
  } catch (...) {  // a callback or an allocation threw: the connection still closes whole
    why_ = "an internal error";
  }
  finish();
  self.reset();
}

// accept -> handshake -> { head -> budget -> body -> handler -> answer } -> close.
asio::awaitable<bool> HttpServer::Connection::exchange() {
  if (!co_await read_while(http1::State::kHead)) {
    co_return false;
  }
  if (!co_await take_budget()) {
    co_return false;
  }
  if (!co_await read_body()) {
    co_return false;
  }
  settle_budget();
  whole_at_ = Clock::now();
  const http1::Head& h = parser_.head();
  if (o_.on_request) {
    o_.on_request(h.path);
  }
  HttpReply reply = co_await handle();
  // Why the connection closes after this answer, if it does (the debug log's reason).
  why_ = !h.keep_alive       ? "the client asked to close (Connection: close)"
         : reply.close       ? "the route's answer closes it"
         : server_.stopping_ ? "stopping"
         : served_ + 1 >= o_.max_requests_per_connection
             ? "its most requests served, closed so load rebalances"
             : "";
  co_return co_await answer(reply, h.method == "HEAD");
}

void HttpServer::Connection::wake_if_idle() {
  bool evicted = state_ == kEvicted;
  bool idle = server_.stopping_ && state_ == kIdle && in_.empty();
  if (evicted || (idle && served_ > 0)) {
    why_ = evicted ? "idle, closed for a new connection (--max-connections)" : "stopping";
    stream_.interrupt();
  } else if (idle) {  // not served yet: its first request may be on its way, briefly
    stream_.expires_at(std::min(stream_.expiry(), Clock::now() + kFirstRequestAtStop));
  }
}

bool HttpServer::Connection::try_evict() {
  int idle = kIdle;
  return state_.compare_exchange_strong(idle, kEvicted);
}

// --- Reading: bytes go to the parser as they arrive; what it does not take waits in in_.

void HttpServer::Connection::feed(std::string_view data) {
  if (in_.empty()) {
    std::size_t used = parser_.feed(data);
    in_.append(data.substr(used));
  } else {
    in_.append(data);
    in_.erase(0, parser_.feed(in_));
  }
}

// A request's first byte (not an empty line before it) has arrived: the connection is busy (no
// longer evictable) and the request's deadline starts. False when it was evicted just before.
bool HttpServer::Connection::begin_request() {
  int idle = kIdle;
  if (!state_.compare_exchange_strong(idle, kBusy)) {
    wake_if_idle();
    return false;
  }
  stream_.expires_at(Clock::now() + o_.read_timeout);
  return true;
}

// The socket ended, failed or timed out before the request was whole: an answer when the
// deadline cut a request short, else a quiet close.
asio::awaitable<bool> HttpServer::Connection::ended_early(Io io) {
  if (stream_.expired() && in_request()) {
    Refusal late{
        .status = 408, .message = std::string(kReadTimeoutMessage), .route = Refused::kTimedOut};
    co_return co_await refuse(std::move(late));
  }
  if (!why_.empty()) {
    co_return false;  // woken to close
  }
  if (stream_.expired()) {
    why_ = served_ > 0         ? "idle"
           : server_.stopping_ ? "stopping, no request begun"
                               : "no request within --read-timeout";
  } else if (in_request()) {
    why_ = "the client closed mid-request";
  } else {
    why_ = io == Io::kEof ? "closed by the client" : "the connection failed";
  }
  co_return false;
}

// The head is known: the request's share of the in-flight budget, waited for within its
// deadline (503 after), or 413 when it could never fit.
asio::awaitable<bool> HttpServer::Connection::take_budget() {
  MemoryBudget* budget = o_.budget;
  if (budget == nullptr) {
    co_return true;
  }
  const http1::Head& h = parser_.head();
  std::uint64_t body = h.chunked ? o_.limits.max_body_bytes : h.content_length.value_or(0);
  std::uint64_t charge = grant_bytes(body, o_.parse_bytes_per_body_byte);
  if (charge > budget->capacity()) {
    Refusal never{.status = 413,
                  .message = "this request would hold " + std::to_string(charge >> 20) +
                             " MiB in memory, more than the in-flight budget of " +
                             std::to_string(budget->capacity() >> 20) +
                             " MiB (three quarters of --memory-limit); send a smaller body or "
                             "raise --memory-limit",
                  .route = Refused::kTooLarge};
    co_return co_await refuse(std::move(never));
  }
  bool counted = budget->try_acquire(charge);
  if (!counted) {
    counted = co_await wait_for_budget(*budget, charge, stream_.expiry());
  }
  if (!counted) {
    Refusal busy{.status = 503,
                 .message =
                     "the in-flight memory budget stayed full until --read-timeout "
                     "passed; retry",
                 .route = Refused::kBusy};
    co_return co_await refuse(std::move(busy));
  }
  charged_ = charge;
  co_return true;
}

// A chunked body, charged as the largest allowed until now, is whole: the rest is given back.
void HttpServer::Connection::settle_budget() {
  std::uint64_t charge = grant_bytes(parser_.body().size(), o_.parse_bytes_per_body_byte);
  if (charged_ > charge) {
    o_.budget->release(charged_ - charge);
    charged_ = charge;
  }
}

asio::awaitable<bool> HttpServer::Connection::read_body() {
  if (parser_.head().expect_continue && parser_.state() == http1::State::kBody && in_.empty()) {
    bool sent = co_await stream_.write_all("HTTP/1.1 100 Continue\r\n\r\n");
    if (!sent) {
      co_return false;
    }
  }
  parser_.reserve_body();
  co_return co_await read_while(http1::State::kBody);
}

// Feeds the parser what is already read, then reads (waiting within the deadline) until it
// leaves `phase`: false when the connection ended early or the request was malformed (each
// answered as it must be), true when the phase is complete. A request's first byte (not an
// empty line before it) starts its deadline and makes the connection busy (no longer evictable).
asio::awaitable<bool> HttpServer::Connection::read_while(http1::State phase) {
  if (parser_.state() == phase && !in_.empty()) {
    in_.erase(0, parser_.feed(in_));
  }
  while (parser_.state() == phase) {
    std::size_t got = 0;
    Io io = co_await stream_.read_some(scratch(), kReadChunk, got);
    if (io != Io::kOk) {
      co_return co_await ended_early(io);
    }
    feed(std::string_view(scratch(), got));  // nothing ran on this thread since the read
    if (!in_request() && parser_.begun() && !begin_request()) {
      co_return false;  // evicted just before: why_ says so
    }
  }
  if (parser_.state() == http1::State::kError) {  // a body over the limit names its route
    const http1::ParseError& e = parser_.error();
    Refusal malformed{.status = e.status,
                      .message = e.message,
                      .route = parser_.head().body_too_large ? Refused::kTooLarge : Refused::kNo};
    co_return co_await refuse(std::move(malformed));
  }
  co_return true;
}

// --- Answering.

HttpRequestView HttpServer::Connection::view() const {
  const http1::Head& h = parser_.head();
  return {
      .method = h.method, .path = h.path, .content_type = h.content_type, .body = parser_.body()};
}

// The handler, on the pool; the connection resumes on its own loop with the answer.
asio::awaitable<HttpReply> HttpServer::Connection::handle() {
  stream_.expires_at(Clock::time_point::max());
  auto run = [&handler = o_.handler, request = view()]() {
    try {
      return handler(request);
    } catch (...) {
      HttpReply r = status_reply(500, "internal error");
      r.close = true;
      return r;
    }
  };
  co_return co_await asio::async_initiate<decltype(asio::use_awaitable), void(HttpReply)>(
      [&pool = server_.impl_->pool, run](auto done) {
        asio::post(pool, [run, done = std::move(done)]() mutable {
          HttpReply reply = run();
          auto ex = asio::get_associated_executor(done);
          asio::post(ex, [done = std::move(done), reply = std::move(reply)]() mutable {
            std::move(done)(std::move(reply));
          });
        });
      },
      asio::use_awaitable);
}

// A refusal, answered, then the connection closes. One that names a route once the head does is
// worded by `refuse`, with the body's first bytes, so it can be an AdmissionReview denial naming
// the request's uid; any other, and one whose wording throws, is a metav1 Status of its own.
asio::awaitable<bool> HttpServer::Connection::refuse(Refusal r) {
  whole_at_ = Clock::now();
  why_ = "refused (the answer says why)";
  const http1::Head& h = parser_.head();
  if (o_.on_request) {
    o_.on_request(h.path);
  }
  bool routed = r.route != Refused::kNo && !h.path.empty() &&
                parser_.state() != http1::State::kHead && o_.refuse;
  std::optional<HttpReply> worded;
  if (routed) {
    HttpRequestView v = view();
    std::string prefix = in_.substr(0, kPrefixBytes);
    if (v.body.empty()) {
      v.body = prefix;
    }
    v.refused = r.route;
    try {
      worded = o_.refuse(v);
    } catch (...) {
      // left unworded: the transport's own Status below
    }
  }
  HttpReply reply = worded ? std::move(*worded) : status_reply(r.status, std::move(r.message));
  co_return co_await answer(reply, false);
}

// Writes the answer within read_timeout and reports it; true when the connection goes on to
// the next request. It says "Connection: close" when why_ holds the reason it closes.
asio::awaitable<bool> HttpServer::Connection::answer(const HttpReply& reply, bool head_only) {
  Clock::time_point ready = Clock::now();
  const bool close = !why_.empty();
  out_.clear();
  out_.reserve(reply.body.size() + 256);
  http1::write_response_head(out_,
                             {.status = reply.status,
                              .content_type = reply.content_type,
                              .content_length = reply.body.size(),
                              .allow_post = reply.allow_post_header,
                              .close = close},
                             std::time(nullptr));
  if (!head_only) {
    out_ += reply.body;
  }
  stream_.expires_at(ready + o_.read_timeout);
  bool written = co_await stream_.write_all(out_);
  release_budget();
  if (o_.on_response) {
    o_.on_response(parser_.head().path, reply.metric_code != 0 ? reply.metric_code : reply.status,
                   ready - whole_at_);
  }
  ++served_;
  out_.clear();
  out_.shrink_to_fit();
  if (!written) {
    why_ = stream_.expired() ? "the client did not read the response in time"
                             : "the client went away before the response was written";
    co_return false;
  }
  if (close || server_.stopping_) {
    if (why_.empty()) {
      why_ = "stopping";
    }
    co_await linger();
    co_return false;
  }
  parser_.reset();                  // an idle connection keeps nothing of the request it answered
  in_.erase(0, parser_.feed(in_));  // empty lines after a request begin none
  Clock::time_point now = Clock::now();
  if (parser_.begun()) {  // pipelined: the next request has begun, so the connection stays busy
    stream_.expires_at(now + o_.read_timeout);
    co_return true;
  }
  in_.shrink_to_fit();
  idle_since_ = now.time_since_epoch().count();
  state_ = kIdle;
  stream_.expires_at(now + o_.idle_timeout);
  co_return true;
}

// Half-closes, then discards what the client still sends for a moment, so that a response
// sent before its request was read whole is read by the client instead of lost to a reset.
asio::awaitable<void> HttpServer::Connection::linger() {
  stream_.shutdown_send();
  stream_.expires_at(Clock::now() + kLingerTime);
  co_await stream_.discard_until_closed(scratch(), kReadChunk);
}

void HttpServer::Connection::release_budget() {
  if (charged_ == 0 || o_.budget == nullptr) {
    return;
  }
  bool idle = o_.budget->release(charged_);
  charged_ = 0;
  if (idle) {
    release_free_memory();
  }
}

void HttpServer::Connection::finish() {
  release_budget();
  if (!why_.empty() && server_.log_.enabled(1)) {
    std::error_code ec;
    Tcp::endpoint remote = stream_.socket().remote_endpoint(ec);
    server_.log_.debug(1, "connection closed",
                       {{"remote", ec ? std::string("?") : endpoint_text(remote)},
                        {"requests", served_},
                        {"reason", why_}});
  }
  stream_.close();
  Impl& impl = *server_.impl_;
  bool evicted = false;  // read under the table's lock: an eviction claims a connection there
  {
    std::lock_guard<std::mutex> lock(impl.mu);
    evicted = state_ == kEvicted;
    if (evicted) {
      --impl.closing;
    } else {
      impl.open.erase(place);
    }
  }
  if (evicted) {  // its descriptor is free: an accept may be waiting for it
    asio::post(*impl.loops[0], [&impl] { impl.room->cancel(); });
  }
  if (o_.on_connection_close) {
    o_.on_connection_close();
  }
}

// --- The server.

HttpServer::HttpServer(HttpServerOptions options, const Log& log)
    : options_(std::move(options)),
      log_(log),
      impl_(std::make_unique<Impl>(*this, options_.io_threads, options_.handler_threads)) {}

HttpServer::~HttpServer() { impl_->stop_pool(false); }

webhook::Result<int> HttpServer::bind(const ListenAddress& address) {
  std::vector<std::string> hosts = {address.host};
  if (address.host.empty()) {
    hosts = {"::", "0.0.0.0"};  // dual stack when the host has IPv6
  }
  std::error_code ec;
  for (const std::string& host : hosts) {
    asio::ip::address ip = asio::ip::make_address(host, ec);
    if (ec) {
      ec = std::make_error_code(std::errc::invalid_argument);
      continue;
    }
    Tcp::endpoint at(ip, static_cast<std::uint16_t>(address.port));
    Tcp::acceptor a(*impl_->loops[0]);
    a.open(at.protocol(), ec);
    if (!ec) {
      a.set_option(Tcp::acceptor::reuse_address(true), ec);
      a.set_option(Tcp::no_delay(true), ec);  // accepted sockets inherit it
      if (ip.is_v6()) {
        a.set_option(asio::ip::v6_only(false), ec);
      }
      a.bind(at, ec);
    }
    if (!ec) {
      a.listen(kBacklog, ec);
    }
    if (!ec) {
      int port = a.local_endpoint(ec).port();
      impl_->acceptors.push_back(std::move(a));
      return port;
    }
  }
  return webhook::Error{webhook::ErrorCode::kUnavailable,
                        "cannot listen on " + address.text() + ": " + ec.message() +
                            " (is another process using the port?)"};
}

int HttpServer::open_connections() const { return impl_->open_connections(); }

int HttpServer::Impl::open_connections() const {
  std::lock_guard<std::mutex> lock(mu);
  return static_cast<int>(open.size());
}

void HttpServer::serve() {
  for (Tcp::acceptor& a : impl_->acceptors) {
    asio::co_spawn(*impl_->loops[0], impl_->accept_loop(a), asio::detached);
  }
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < impl_->loops.size(); ++i) {
    threads.push_back(webhook::named_thread(options_.name + "-io" + std::to_string(i),
                                            [loop = impl_->loops[i].get()] { loop->run(); }));
  }
  webhook::name_this_thread(options_.name + "-io0");
  impl_->loops[0]->run();
  for (std::thread& t : threads) {
    t.join();
  }
  impl_->stop_pool(true);
}

asio::awaitable<void> HttpServer::Impl::accept_loop(Tcp::acceptor& acceptor) {
  while (!server.stopping_) {
    std::error_code ec;
    Tcp::socket socket =
        co_await acceptor.async_accept(next_loop(), asio::redirect_error(asio::use_awaitable, ec));
    if (server.stopping_ || ec == asio::error::operation_aborted) {
      break;
    }
    if (ec) {
      // Out of descriptors, the oldest idle connection is closed and the accept waits for its
      // descriptor, however long its loop takes to close it: no other is closed while one is
      // on its way. With none to evict, or on another failure (out of kernel memory, say), the
      // next accept is shortly after.
      bool out_of_descriptors =
          ec == asio::error::no_descriptors || ec == std::errc::too_many_files_open_in_system;
      if (out_of_descriptors) {
        evict_oldest_idle(/*unless_one_is_closing=*/true);
      }
      room->expires_after(kAcceptRetry);
      co_await room->async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    try {
      admit(std::move(socket));
    } catch (...) {  // that connection is lost (its socket closes), not the listener
    }
  }
}

void HttpServer::Impl::admit(Tcp::socket socket) {
  if (open_connections() >= server.options_.max_connections && !evict_oldest_idle()) {
    return;  // every connection is mid-request: refuse the newest (the socket closes)
  }
  auto c = std::make_shared<Connection>(server, std::move(socket));
  asio::awaitable<void> served = c->run(c);  // once spawned, run() closes it whatever it meets
  {
    std::lock_guard<std::mutex> lock(mu);
    c->place = open.insert(open.end(), c.get());
  }
  asio::any_io_executor ex = c->executor();
  asio::co_spawn(ex, std::move(served), asio::detached);
}

// The oldest connection without a request in progress, closed to make room; none while one
// closed so is still closing, when `unless_one_is_closing` (out of descriptors, that one's
// descriptor is the room).
bool HttpServer::Impl::evict_oldest_idle(bool unless_one_is_closing) {
  std::shared_ptr<Connection> victim;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (unless_one_is_closing && closing > 0) {
      return false;
    }
    Connection* oldest = nullptr;
    for (Connection* c : open) {
      if (c->idle() && (oldest == nullptr || c->idle_since() < oldest->idle_since())) {
        oldest = c;
      }
    }
    if (oldest == nullptr || !oldest->try_evict()) {
      return false;
    }
    open.erase(oldest->place);
    ++closing;
    victim = oldest->shared_from_this();
  }
  asio::post(victim->executor(), [victim] { victim->wake_if_idle(); });
  return true;
}

void HttpServer::stop_serving() {
  if (impl_->stop_requested.exchange(true)) {
    return;
  }
  // On the accept loop, so that no connection is admitted after its loop was let go: each loop
  // returns once the coroutines on it (connections, accept loops) have ended. The listeners
  // close before any connection learns of the stop (stopping_): a client whose connection the
  // stop ends is refused when it connects again, not let into the listen backlog just before
  // the close resets everything waiting there.
  asio::post(*impl_->loops[0], [this] {
    for (Tcp::acceptor& a : impl_->acceptors) {
      std::error_code ec;
      a.close(ec);
    }
    stopping_ = true;
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (Connection* c : impl_->open) {
      asio::post(c->executor(), [keep = c->shared_from_this()] { keep->wake_if_idle(); });
    }
    for (auto& g : impl_->guards) {
      g.reset();
    }
  });
}

}  // namespace server
