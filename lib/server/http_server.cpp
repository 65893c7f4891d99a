#include "server/http_server.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "base/memory/reserve.h"
#include "base/thread/blocking.h"

namespace server {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int kBacklog = 1024;
constexpr int kEventsPerWait = 16;
constexpr std::uint64_t kWakeId = 8;  // epoll ids: listeners 0..7, the wake fd, connections
constexpr std::size_t kReadChunk = std::size_t{64} * 1024;
constexpr std::size_t kPrefixBytes = std::size_t{64} * 1024;  // enough body to read a uid
constexpr std::uint64_t kGrantOverhead = std::uint64_t{64} * 1024;
constexpr std::uint64_t kLargeGrant = std::uint64_t{8} << 20;
constexpr auto kLingerTime = 1s;
constexpr auto kReapInterval = 50ms;
constexpr int kAcceptBurst = 64;

enum class Phase : int { kHandshake, kIdle, kReading, kParked, kWriting, kLinger };
enum Owner : int { kArmed, kParkedOwner, kBusy, kClosed };
enum class Io { kOk, kWantRead, kWantWrite, kEof, kError };
enum class Step { kNeedMore, kContinue, kStop };

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

std::int64_t ns_from_now(std::chrono::milliseconds d) {
  return now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

std::string address_text(const sockaddr_storage& addr) {
  char buf[INET6_ADDRSTRLEN] = {};
  std::uint16_t port = 0;
  std::string out;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    port = ntohs(a->sin_port);
    out.append(buf);
  } else {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    port = ntohs(a->sin6_port);
    out.append("[").append(buf).append("]");
  }
  out.append(":").append(std::to_string(port));
  return out;
}

// "Date: ..." for this second, formatted once a second per thread.
const std::string& date_header() {
  thread_local std::time_t cached = 0;
  thread_local std::string header;
  std::time_t now = std::time(nullptr);
  if (now != cached) {
    cached = now;
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[64];
    std::strftime(buf, sizeof(buf), "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
    header = buf;
  }
  return header;
}

Io ssl_result(SSL* ssl, int r) {
  int e = SSL_get_error(ssl, r);
  Io out = Io::kError;
  if (e == SSL_ERROR_WANT_READ) {
    out = Io::kWantRead;
  } else if (e == SSL_ERROR_WANT_WRITE) {
    out = Io::kWantWrite;
  } else if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0)) {
    out = Io::kEof;
  }
  ERR_clear_error();
  return out;
}

Io errno_result() {
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? Io::kWantRead : Io::kError;
}

}  // namespace

std::uint64_t MemoryBudget::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

bool MemoryBudget::try_acquire(std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > capacity_ - used_) {
    return false;
  }
  used_ += bytes;
  peak_since_idle_ = std::max(peak_since_idle_, used_);
  return true;
}

bool MemoryBudget::acquire_until(std::uint64_t bytes, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!freed_.wait_until(lock, deadline, [&] { return bytes <= capacity_ - used_; })) {
    return false;
  }
  used_ += bytes;
  peak_since_idle_ = std::max(peak_since_idle_, used_);
  return true;
}

bool MemoryBudget::release(std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  used_ -= std::min(used_, bytes);
  freed_.notify_all();
  if (used_ == 0 && peak_since_idle_ >= kLargeGrant) {
    peak_since_idle_ = 0;
    return true;
  }
  return false;
}

void release_free_memory() {
  // jemalloc when the binary links it (purge every arena: MALLCTL_ARENAS_ALL is 4096), else
  // glibc's malloc.
  using Mallctl = int (*)(const char*, void*, std::size_t*, void*, std::size_t);
  static auto* mallctl = reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"));
  if (mallctl != nullptr) {
    mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);
  } else {
    malloc_trim(0);
  }
}

struct HttpServer::Conn {
  Conn(std::uint64_t i, int f, SSL* s, std::string r, http1::Limits limits)
      : id(i), fd(f), ssl(s), remote(std::move(r)), parser(limits) {}
  ~Conn() {
    if (ssl != nullptr) {
      SSL_free(ssl);
    }
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  const std::uint64_t id;
  const int fd;
  SSL* ssl;
  const std::string remote;
  std::mutex mu;  // arming against the reaper and eviction taking the connection
  std::atomic<int> owner{kBusy};
  std::uint32_t armed_events = EPOLLIN;  // under mu: what arm() last asked of epoll
  std::atomic<Phase> phase{Phase::kHandshake};
  std::atomic<std::int64_t> deadline_ns{0};
  std::atomic<std::int64_t> idle_since_ns{0};
  std::atomic<int> served{0};
  http1::RequestParser parser;
  std::string in;  // read, not yet parsed
  std::string out;
  std::size_t out_pos = 0;
  bool close_after = false;
  bool head_seen = false;
  std::uint64_t charged = 0;
  bool pending_report = false;  // a response was queued and not yet reported
  std::string report_path;
  int report_code = 0;
  Clock::time_point answered_at;
  std::size_t lingered = 0;
};

HttpServer::HttpServer(HttpServerOptions options, const Log& log)
    : options_(std::move(options)), log_(log) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeId;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
}

HttpServer::~HttpServer() {
  for (int fd : listen_fds_) {
    ::close(fd);
  }
  std::lock_guard<std::mutex> lock(table_mu_);
  for (auto& [id, c] : conns_) {
    ::close(c->fd);
  }
  conns_.clear();
  ::close(wake_fd_);
  ::close(epoll_fd_);
}

webhook::Result<int> HttpServer::bind(const ListenAddress& address) {
  std::vector<std::string> hosts = {address.host};
  if (address.host.empty()) {
    hosts = {"::", "0.0.0.0"};  // dual stack when the host has IPv6
  }
  int saved_errno = 0;
  for (const std::string& host : hosts) {
    sockaddr_storage ss{};
    socklen_t len = 0;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
    if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(static_cast<std::uint16_t>(address.port));
      len = sizeof(sockaddr_in);
    } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(static_cast<std::uint16_t>(address.port));
      len = sizeof(sockaddr_in6);
    } else {
      saved_errno = EINVAL;
      continue;
    }
    int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int yes = 1;
    int no = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));  // accepted sockets inherit it
    if (ss.ss_family == AF_INET6) {
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
    }
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
        ::listen(fd, kBacklog) != 0) {
      saved_errno = errno;
      ::close(fd);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t blen = sizeof(bound);
    getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &blen);
    int port =
        ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                         : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLONESHOT;
    ev.data.u64 = listen_fds_.size();
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    listen_fds_.push_back(fd);
    return port;
  }
  return webhook::Error{webhook::ErrorCode::kUnavailable,
                        "cannot listen on " + address.text() + ": " + std::strerror(saved_errno) +
                            " (is another process using the port?)"};
}

int HttpServer::open_connections() const {
  std::lock_guard<std::mutex> lock(table_mu_);
  return static_cast<int>(conns_.size());
}

void HttpServer::serve() {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(options_.workers));
  for (int i = 1; i < options_.workers; ++i) {
    threads.emplace_back([this] { work(); });
  }
  std::thread reaper([this] { reap(); });
  work();
  for (std::thread& t : threads) {
    t.join();
  }
  reaper.join();
}

void HttpServer::stop_serving() {
  if (stopping_.exchange(true)) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(reaper_mu_);
    for (int fd : listen_fds_) {
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
      ::shutdown(fd, SHUT_RDWR);  // a worker inside accept() sees it fail, not a reused fd
    }
  }
  reaper_cv_.notify_all();
  maybe_finish();
}

void HttpServer::maybe_finish() {
  if (!stopping_) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(table_mu_);
    if (!conns_.empty()) {
      return;
    }
  }
  finished_ = true;
  std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));  // stays readable: all wake
  reaper_cv_.notify_all();
}

// The events a worker took from epoll in one wait, answered in turn.
struct HttpServer::Worker {
  HttpServer* server = nullptr;
  epoll_event events[kEventsPerWait]{};
  int next = 0;  // the first event not started
  int count = 0;
};

void HttpServer::work() {
  // Several events per wait: at load a worker answers what is ready without sleeping in between.
  // An event taken from the set is this worker's alone, so before a request may wait (legacy
  // placement writes to the API server; a large answer waits for memory) the events not started
  // are given back (webhook::blocking::about_to_block) for idle workers to take.
  Worker w;
  w.server = this;
  webhook::blocking::ScopedHook hook(
      [](void* context) {
        auto* worker = static_cast<Worker*>(context);
        worker->server->give_back(*worker);
      },
      &w);
  while (!finished_) {
    w.count = epoll_wait(epoll_fd_, w.events, kEventsPerWait, -1);
    for (w.next = 0; w.next < w.count;) {
      const epoll_event event = w.events[w.next++];
      std::uint64_t id = event.data.u64;
      if (id < kWakeId) {
        accept_some();
      } else if (id > kWakeId) {
        on_event(id, event.events);
      }
    }
  }
}

// Re-arms what the worker took but has not started: epoll reports each again, to any worker,
// while it is still ready (a listener with connections to accept, a connection with bytes).
void HttpServer::give_back(Worker& w) {
  for (; w.next < w.count; ++w.next) {
    std::uint64_t id = w.events[w.next].data.u64;
    if (id < kWakeId) {
      std::lock_guard<std::mutex> lock(reaper_mu_);
      if (!stopping_) {
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLONESHOT;
        ev.data.u64 = id;
        epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fds_[static_cast<std::size_t>(id)], &ev);
      }
    } else if (id > kWakeId) {
      ConnPtr c = find(id);
      if (!c) {
        continue;
      }
      std::lock_guard<std::mutex> lock(c->mu);
      if (c->owner == kArmed) {  // else the reaper took it meanwhile
        epoll_event ev{};
        ev.events = c->armed_events | EPOLLRDHUP | EPOLLONESHOT;
        ev.data.u64 = c->id;
        epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
      }
    }
  }
}

void HttpServer::accept_some() {
  for (int i = 0; i < kAcceptBurst && !stopping_; ++i) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int fd = -1;
    for (int lfd : listen_fds_) {
      fd = accept4(lfd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) {
        break;
      }
    }
    if (fd < 0) {
      if ((errno == EMFILE || errno == ENFILE) && evict_oldest_idle()) {
        continue;
      }
      break;  // EAGAIN, or out of descriptors with nothing to evict: the reaper re-arms
    }
    if (open_connections() >= options_.max_connections && !evict_oldest_idle()) {
      ::close(fd);  // every connection is mid-request: refuse the newest
      continue;
    }
    admit(fd, address_text(addr));
  }
  if (!stopping_) {
    std::lock_guard<std::mutex> lock(reaper_mu_);
    for (std::size_t i = 0; i < listen_fds_.size(); ++i) {
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLONESHOT;
      ev.data.u64 = i;
      epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fds_[i], &ev);
    }
  }
}

void HttpServer::admit(int fd, const std::string& remote) {
  SSL* ssl = nullptr;
  if (options_.ssl_ctx != nullptr) {
    ssl = SSL_new(options_.ssl_ctx);
    if (ssl == nullptr || SSL_set_fd(ssl, fd) != 1) {
      ::close(fd);
      ERR_clear_error();
      if (ssl != nullptr) {
        SSL_free(ssl);
      }
      return;
    }
    SSL_set_accept_state(ssl);
  }
  auto c = std::make_shared<Conn>(next_id_++, fd, ssl, remote, options_.limits);
  c->phase = ssl != nullptr ? Phase::kHandshake : Phase::kIdle;
  c->deadline_ns = ns_from_now(options_.read_timeout);
  c->idle_since_ns = now_ns();
  {
    std::lock_guard<std::mutex> lock(table_mu_);
    conns_.emplace(c->id, c);
  }
  if (options_.on_connection_open) {
    options_.on_connection_open();
  }
  std::lock_guard<std::mutex> lock(c->mu);
  c->owner = kArmed;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
  ev.data.u64 = c->id;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

// The oldest connection without a request in progress, closed to make room.
bool HttpServer::evict_oldest_idle() {
  ConnPtr oldest;
  {
    std::lock_guard<std::mutex> lock(table_mu_);
    std::int64_t best = 0;
    for (const auto& [id, c] : conns_) {
      Phase p = c->phase;
      bool idle = p == Phase::kHandshake || p == Phase::kIdle;
      if (idle && c->owner == kArmed && (!oldest || c->idle_since_ns < best)) {
        oldest = c;
        best = c->idle_since_ns;
      }
    }
  }
  if (!oldest || !take(*oldest, true)) {
    return false;
  }
  close(*oldest, "idle, closed for a new connection (--max-connections)");
  return true;
}

HttpServer::ConnPtr HttpServer::find(std::uint64_t id) const {
  std::lock_guard<std::mutex> lock(table_mu_);
  auto it = conns_.find(id);
  return it == conns_.end() ? nullptr : it->second;
}

bool HttpServer::take(Conn& c, bool from_reaper) {
  if (!from_reaper) {
    int armed = kArmed;
    return c.owner.compare_exchange_strong(armed, kBusy);
  }
  std::lock_guard<std::mutex> lock(c.mu);
  int o = c.owner;
  if (o == kArmed || o == kParkedOwner) {
    c.owner = kBusy;
    return true;
  }
  return false;
}

void HttpServer::arm(Conn& c, std::uint32_t events) {
  std::lock_guard<std::mutex> lock(c.mu);
  c.owner = kArmed;
  c.armed_events = events;
  epoll_event ev{};
  ev.events = events | EPOLLRDHUP | EPOLLONESHOT;
  ev.data.u64 = c.id;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
}

void HttpServer::on_event(std::uint64_t id, std::uint32_t /*events*/) {
  ConnPtr c = find(id);
  if (c && take(*c, false)) {
    drive(*c);
  }
}

// Runs a connection this thread owns until it waits (armed or parked) or closes.
void HttpServer::drive(Conn& c) {
  for (;;) {
    bool more = false;
    switch (c.phase.load()) {
      case Phase::kHandshake:
        more = handshake(c);
        break;
      case Phase::kIdle:
      case Phase::kReading:
        more = read_request(c);
        break;
      case Phase::kParked:  // resumed: the budget was granted
        c.phase = Phase::kReading;
        more = start_body(c);
        break;
      case Phase::kWriting:
        more = write_out(c);
        if (more) {
          after_response(c);
          more = c.phase != Phase::kLinger && c.owner == kBusy;
        }
        break;
      case Phase::kLinger:
        linger(c);
        break;
    }
    if (!more) {
      return;
    }
  }
}

bool HttpServer::handshake(Conn& c) {
  int r = SSL_do_handshake(c.ssl);
  if (r == 1) {
    c.phase = Phase::kIdle;  // the deadline stays: the first request's first byte is due
    return true;
  }
  Io io = ssl_result(c.ssl, r);
  if (io == Io::kWantRead || io == Io::kWantWrite) {
    arm(c, io == Io::kWantRead ? EPOLLIN : EPOLLOUT);
    return false;
  }
  close(c, "TLS handshake failed");
  return false;
}

namespace {

Io read_some(SSL* ssl, int fd, char* buf, std::size_t len, std::size_t& got) {
  if (ssl != nullptr) {
    int r = SSL_read(ssl, buf, static_cast<int>(len));
    if (r > 0) {
      got = static_cast<std::size_t>(r);
      return Io::kOk;
    }
    return ssl_result(ssl, r);
  }
  ssize_t r = ::recv(fd, buf, len, 0);
  if (r > 0) {
    got = static_cast<std::size_t>(r);
    return Io::kOk;
  }
  return r == 0 ? Io::kEof : errno_result();
}

Io write_some(SSL* ssl, int fd, const char* buf, std::size_t len, std::size_t& put) {
  if (ssl != nullptr) {
    int r = SSL_write(ssl, buf, static_cast<int>(std::min<std::size_t>(len, 1 << 30)));
    if (r > 0) {
      put = static_cast<std::size_t>(r);
      return Io::kOk;
    }
    return ssl_result(ssl, r);
  }
  ssize_t r = ::send(fd, buf, len, MSG_NOSIGNAL);
  if (r >= 0) {
    put = static_cast<std::size_t>(r);
    return Io::kOk;
  }
  Io io = errno_result();
  return io == Io::kWantRead ? Io::kWantWrite : io;
}

}  // namespace

// Reads and parses until the request is complete (then answered), refused, or the socket has
// nothing more for now.
bool HttpServer::read_request(Conn& c) {
  thread_local std::unique_ptr<char[]> buf(new char[kReadChunk]);
  for (;;) {
    if (c.out_pos < c.out.size()) {  // "100 Continue" still to send
      std::size_t put = 0;
      Io io = write_some(c.ssl, c.fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos, put);
      if (io == Io::kOk) {
        c.out_pos += put;
        continue;
      }
      if (io != Io::kWantWrite && io != Io::kWantRead) {
        close(c, "write failed");
        return false;
      }
      arm(c, EPOLLIN | EPOLLOUT);
      return false;
    }
    if (!c.in.empty()) {
      bool need_more = true;
      if (!advance(c, need_more)) {
        return false;
      }
      if (!need_more) {
        return true;  // answered or refused: phase kWriting
      }
      continue;  // "100 Continue" may be queued
    }
    std::size_t got = 0;
    std::size_t want = kReadChunk;
    Io io = read_some(c.ssl, c.fd, buf.get(), want, got);
    if (io == Io::kWantRead || io == Io::kWantWrite) {
      if (c.ssl != nullptr && SSL_pending(c.ssl) > 0) {
        continue;
      }
      arm(c, io == Io::kWantRead ? EPOLLIN : EPOLLOUT);
      return false;
    }
    if (io != Io::kOk) {
      close(c,
            c.phase == Phase::kReading ? "the client closed mid-request" : "closed by the client");
      return false;
    }
    if (c.phase == Phase::kIdle) {  // a request's first byte: its whole-request deadline starts
      c.phase = Phase::kReading;
      c.deadline_ns = ns_from_now(options_.read_timeout);
    }
    c.in.append(buf.get(), got);
  }
}

// Feeds what was read to the parser. False when the connection was parked or closed;
// need_more says whether the request still needs bytes.
bool HttpServer::advance(Conn& c, bool& need_more) {
  while (!c.in.empty()) {
    std::size_t used = c.parser.feed(c.in);
    c.in.erase(0, used);
    http1::State state = c.parser.state();
    if (state == http1::State::kHead) {
      continue;
    }
    if (state == http1::State::kError) {
      const http1::ParseError& e = c.parser.error();
      refuse(c, e.status, e.message,
             c.parser.head().body_too_large && !c.parser.head().path.empty());
      need_more = false;
      return true;
    }
    if (!c.head_seen) {
      c.head_seen = true;
      if (!start_body(c)) {
        return false;
      }
      if (c.phase == Phase::kWriting) {  // refused: it could never fit the budget
        need_more = false;
        return true;
      }
    }
    if (state == http1::State::kDone) {
      respond(c);
      need_more = false;
      return true;
    }
  }
  need_more = true;
  return true;
}

// The head is complete: grant the request its memory (or park it), then let its body come.
bool HttpServer::start_body(Conn& c) {
  const http1::Head& h = c.parser.head();
  if (options_.budget != nullptr && c.charged == 0) {
    std::uint64_t body = h.chunked ? options_.limits.max_body_bytes : h.content_length.value_or(0);
    std::uint64_t charge = body * (1 + options_.parse_bytes_per_body_byte) + kGrantOverhead;
    if (charge > options_.budget->capacity()) {
      refuse(c, 413,
             "this request would hold " + std::to_string(charge >> 20) +
                 " MiB in memory, more than the in-flight budget of " +
                 std::to_string(options_.budget->capacity() >> 20) +
                 " MiB (three quarters of --memory-limit); send a smaller body or raise "
                 "--memory-limit",
             false);
      return true;
    }
    if (!options_.budget->try_acquire(charge)) {
      park(c, charge);
      return false;
    }
    c.charged = charge;
  }
  if (h.expect_continue && c.parser.state() == http1::State::kBody && c.in.empty()) {
    c.out = "HTTP/1.1 100 Continue\r\n\r\n";
    c.out_pos = 0;
  }
  c.parser.reserve_body();
  return true;
}

void HttpServer::park(Conn& c, std::uint64_t charge) {
  {
    std::lock_guard<std::mutex> lock(parked_mu_);
    parked_.emplace_back(c.id, charge);
    c.phase = Phase::kParked;
    std::lock_guard<std::mutex> own(c.mu);
    c.owner = kParkedOwner;
  }
  resume_parked();  // room may have been freed since try_acquire failed
}

// Grants parked requests, oldest first, while the budget has room.
void HttpServer::resume_parked() {
  std::lock_guard<std::mutex> lock(parked_mu_);
  while (!parked_.empty()) {
    auto [id, charge] = parked_.front();
    ConnPtr c = find(id);
    if (!c || c->owner != kParkedOwner) {
      parked_.pop_front();  // closed, or taken by the reaper
      continue;
    }
    if (!options_.budget->try_acquire(charge)) {
      return;
    }
    parked_.pop_front();
    c->charged = charge;
    arm(*c, EPOLLIN | EPOLLOUT);  // writable at once: a worker picks it up
  }
}

void HttpServer::release_budget(Conn& c) {
  if (c.charged == 0 || options_.budget == nullptr) {
    return;
  }
  bool idle = options_.budget->release(c.charged);
  c.charged = 0;
  resume_parked();
  if (idle) {
    release_free_memory();
  }
}

HttpRequestView HttpServer::view_of(const Conn& c) const {
  const http1::Head& h = c.parser.head();
  return {
      .method = h.method, .path = h.path, .content_type = h.content_type, .body = c.parser.body()};
}

bool HttpServer::grow_grant(Conn& c, std::size_t bytes) {
  if (options_.budget == nullptr || bytes == 0) {
    return true;
  }
  auto deadline = Clock::time_point(std::chrono::nanoseconds(c.deadline_ns.load()));
  if (bytes > options_.budget->capacity()) {
    return false;
  }
  if (!options_.budget->try_acquire(bytes)) {
    webhook::blocking::about_to_block();  // the wait may be long: others take the rest
    if (!options_.budget->acquire_until(bytes, deadline)) {
      return false;
    }
  }
  c.charged += bytes;
  return true;
}

HttpReply HttpServer::call_handler(Conn& c, const HttpRequestView& view) {
  struct Grant {
    HttpServer* server;
    Conn* conn;
  } grant{this, &c};
  webhook::memory::ScopedReserver reserver(
      [](void* context, std::size_t bytes) {
        auto* g = static_cast<Grant*>(context);
        return g->server->grow_grant(*g->conn, bytes);
      },
      &grant);
  try {
    return options_.handler(view);
  } catch (const std::exception& e) {
    HttpReply r;
    r.status = 500;
    r.body = status_json(500, "internal error");
    r.close = true;
    return r;
  }
}

void HttpServer::respond(Conn& c) {
  const http1::Head& h = c.parser.head();
  if (options_.on_request) {
    options_.on_request(h.path);
  }
  HttpReply reply = call_handler(c, view_of(c));
  bool close = !h.keep_alive || reply.close || stopping_ ||
               c.served + 1 >= options_.max_requests_per_connection;
  queue_reply(c, reply, close, h.method == "HEAD");
}

// A request the parser refused (or one over budget): answered, then the connection closes. A
// refusal that knows its route (413 from the declared length) goes to the handler with the
// body's first bytes, so it can be an AdmissionReview denial naming the request's uid.
void HttpServer::refuse(Conn& c, int status, const std::string& message, bool route) {
  const http1::Head& h = c.parser.head();
  if (options_.on_request) {
    options_.on_request(h.path);
  }
  HttpReply reply;
  if (route) {
    HttpRequestView v = view_of(c);
    std::string prefix = c.in.substr(0, kPrefixBytes);
    if (v.body.empty()) {
      v.body = prefix;
    }
    v.too_large = true;
    reply = call_handler(c, v);
  } else {
    reply.status = status;
    reply.body = status_json(status, message);
  }
  queue_reply(c, reply, true, false);
}

void HttpServer::queue_reply(Conn& c, const HttpReply& reply, bool close, bool head_only) {
  std::string& o = c.out;
  o.clear();
  o.reserve(reply.body.size() + 256);
  o += "HTTP/1.1 ";
  o += std::to_string(reply.status);
  o += ' ';
  o += http1::reason_phrase(reply.status);
  o += "\r\nContent-Type: ";
  o += reply.content_type;
  o += "\r\nContent-Length: ";
  o += std::to_string(reply.body.size());
  o += "\r\n";
  o += date_header();
  if (reply.allow_post_header) {
    o += "Allow: POST\r\n";
  }
  if (close) {
    o += "Connection: close\r\n";
  }
  o += "\r\n";
  if (!head_only) {
    o += reply.body;
  }
  c.out_pos = 0;
  c.close_after = close;
  c.pending_report = true;
  c.report_path = c.parser.head().path;
  c.report_code = reply.metric_code != 0 ? reply.metric_code : reply.status;
  c.answered_at = Clock::now();
  c.phase = Phase::kWriting;
  c.deadline_ns = ns_from_now(options_.read_timeout);
}

bool HttpServer::write_out(Conn& c) {
  while (c.out_pos < c.out.size()) {
    std::size_t put = 0;
    Io io = write_some(c.ssl, c.fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos, put);
    if (io == Io::kOk) {
      c.out_pos += put;
    } else if (io == Io::kWantWrite || io == Io::kWantRead) {
      arm(c, io == Io::kWantRead ? EPOLLIN : EPOLLOUT);
      return false;
    } else {
      close(c, "the client went away before the response was written");
      return false;
    }
  }
  return true;
}

void HttpServer::report(Conn& c) {
  if (c.pending_report && options_.on_response) {
    options_.on_response(c.report_path, c.report_code, Clock::now() - c.answered_at);
  }
  c.pending_report = false;
}

// The response is written: the next request, or a lingering close.
void HttpServer::after_response(Conn& c) {
  report(c);
  ++c.served;
  release_budget(c);
  c.out.clear();
  c.out.shrink_to_fit();
  if (c.close_after) {
    begin_linger(c);
    return;
  }
  c.parser.reset();
  c.head_seen = false;
  c.phase = Phase::kIdle;
  c.deadline_ns = ns_from_now(options_.idle_timeout);
  c.idle_since_ns = now_ns();
  if (stopping_) {
    begin_linger(c);
  }
}

// Half-closes, then discards what the client still sends for a moment, so that a response
// sent before its request was read whole is read by the client instead of lost to a reset.
void HttpServer::begin_linger(Conn& c) {
  if (c.ssl != nullptr) {
    SSL_shutdown(c.ssl);  // close_notify, best effort
    ERR_clear_error();
  }
  ::shutdown(c.fd, SHUT_WR);
  c.phase = Phase::kLinger;
  c.deadline_ns = ns_from_now(std::chrono::duration_cast<std::chrono::milliseconds>(kLingerTime));
  linger(c);
}

void HttpServer::linger(Conn& c) {
  char buf[16384];
  for (;;) {
    ssize_t r = ::recv(c.fd, buf, sizeof(buf), 0);
    if (r > 0) {
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      arm(c, EPOLLIN);
      return;
    }
    close(c, "");
    return;
  }
}

// The reaper owns `c`, whose deadline passed.
void HttpServer::expire(Conn& c) {
  Phase p = c.phase;
  if (p == Phase::kHandshake || p == Phase::kIdle) {
    close(c, p == Phase::kIdle && c.served > 0 ? "idle" : "no request within --read-timeout");
    return;
  }
  if (p == Phase::kWriting || p == Phase::kLinger) {
    close(c, p == Phase::kWriting ? "the client did not read the response in time" : "");
    return;
  }
  const http1::Head& h = c.parser.head();
  bool busy = p == Phase::kParked;
  HttpReply reply;
  if (c.head_seen && !h.path.empty()) {
    HttpRequestView v = view_of(c);
    std::string prefix = c.in.substr(0, kPrefixBytes);
    if (v.body.empty()) {
      v.body = prefix;
    }
    v.timed_out = !busy;
    v.busy = busy;
    reply = call_handler(c, v);
  } else {
    reply.status = 408;
    reply.body = status_json(408, std::string(kReadTimeoutMessage));
  }
  if (options_.on_request) {
    options_.on_request(h.path);
  }
  c.phase = Phase::kReading;
  queue_reply(c, reply, true, false);
  arm(c, EPOLLOUT);
}

void HttpServer::close(Conn& c, std::string_view why) {
  report(c);
  release_budget(c);
  c.owner = kClosed;
  {
    std::lock_guard<std::mutex> lock(table_mu_);
    conns_.erase(c.id);
  }
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  ::close(c.fd);
  if (options_.on_connection_close) {
    options_.on_connection_close();
  }
  if (!why.empty() && log_.enabled(1)) {
    log_.debug(1, "connection closed",
               {{"remote", c.remote}, {"requests", c.served.load()}, {"reason", why}});
  }
  maybe_finish();
}

// Every kReapInterval: deadlines, and at shutdown the idle connections.
void HttpServer::reap() {
  std::unique_lock<std::mutex> lock(reaper_mu_);
  while (!finished_) {
    reaper_cv_.wait_for(lock, kReapInterval);
    lock.unlock();
    std::vector<ConnPtr> all;
    {
      std::lock_guard<std::mutex> table(table_mu_);
      all.reserve(conns_.size());
      for (const auto& [id, c] : conns_) {
        all.push_back(c);
      }
    }
    std::int64_t now = now_ns();
    for (const ConnPtr& c : all) {
      bool expired = c->deadline_ns <= now;
      bool idle_at_stop = stopping_ && c->phase == Phase::kIdle && c->served > 0;
      if ((expired || idle_at_stop) && take(*c, true)) {
        if (expired) {
          expire(*c);
        } else {
          close(*c, "stopping");
        }
      }
    }
    if (!stopping_) {  // accept may have paused for want of descriptors
      for (std::size_t i = 0; i < listen_fds_.size(); ++i) {
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLONESHOT;
        ev.data.u64 = i;
        epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fds_[i], &ev);
      }
    }
    lock.lock();
  }
}

}  // namespace server
