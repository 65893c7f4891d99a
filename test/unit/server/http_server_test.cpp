// server::HttpServer over plain-HTTP sockets on 127.0.0.1: keep-alive and pipelining, idle and
// slow connections that hold no thread, deadlines, the connection cap, strict framing (nothing
// after a refused head is read), 413 and 100 Continue, the in-flight memory budget, a blocking
// route on the handler pool, and the response hook. The cases wait for the server's progress on
// latches (its hooks), not on sleeps; every socket has a receive timeout, so no case can hang.
#include "server/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <initializer_list>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "server/log.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class Socket {
 public:
  explicit Socket(int port, std::chrono::milliseconds timeout = 5000ms) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{};
    tv.tv_sec = static_cast<long>(timeout.count() / 1000);
    tv.tv_usec = static_cast<long>((timeout.count() % 1000) * 1000);
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~Socket() { ::close(fd_); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  bool connected() const { return connected_; }
  // False when the connection failed before every byte was sent.
  bool send(const std::string& bytes) const {
    std::size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) {
        return false;
      }
      off += static_cast<std::size_t>(n);
    }
    return true;
  }
  void shutdown_send() const { ::shutdown(fd_, SHUT_WR); }
  // Everything until the server closes (or the receive timeout passes).
  std::string read_all() const {
    std::string out;
    char buf[8192];
    for (;;) {
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        return out;
      }
      out.append(buf, static_cast<std::size_t>(n));
    }
  }
  // One response: head and a Content-Length body.
  std::string read_response() const {
    std::string out;
    char buf[8192];
    for (;;) {
      std::size_t end = out.find("\r\n\r\n");
      if (end != std::string::npos) {
        std::size_t cl = out.find("Content-Length: ");
        std::size_t len = cl < end ? std::stoul(out.substr(cl + 16)) : 0;
        if (out.size() >= end + 4 + len) {
          return out;
        }
      }
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        return out;
      }
      out.append(buf, static_cast<std::size_t>(n));
    }
  }
  // True when the server closed the connection (EOF) within the receive timeout.
  bool closed_by_server() const {
    char c = 0;
    return ::recv(fd_, &c, 1, 0) == 0;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

// How the test handler names a refusal in its answer.
std::string refusal_name(server::Refused r) {
  switch (r) {
    case server::Refused::kTooLarge:
      return " too_large";
    case server::Refused::kTimedOut:
      return " timed_out";
    case server::Refused::kBusy:
      return " busy";
    case server::Refused::kNo:
      break;
  }
  return "";
}

std::string post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A plain-text answer.
server::HttpReply text(std::string body) {
  server::HttpReply reply;
  reply.content_type = "text/plain";
  reply.body = std::move(body);
  return reply;
}

// An HttpServer on 127.0.0.1 answering "<method> <path> <body size> <flags>" as text.
struct TestServer {
  // `route_refusals` false: no `refuse`, so the transport words every refusal itself.
  explicit TestServer(server::HttpServerOptions options, bool route_refusals = true) {
    if (!options.handler) {
      options.handler = [this](const server::HttpRequestView& r) {
        ++handled;
        server::HttpReply reply = text(std::string(r.method) + " " + std::string(r.path) + " " +
                                       std::to_string(r.body.size()) + refusal_name(r.refused));
        if (r.refused != server::Refused::kNo) {
          reply.close = true;
        }
        return reply;
      };
    }
    if (!options.refuse && route_refusals) {
      options.refuse = options.handler;  // refusals are worded as the route's answers are
    }
    options.on_response = [this](std::string_view, int code, std::chrono::nanoseconds latency) {
      std::lock_guard<std::mutex> lock(mu);
      codes.push_back(code);
      latencies.push_back(latency);
      changed.notify_all();
    };
    options.on_connection_open = [this, then = std::move(options.on_connection_open)] {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++opened;
        loop_of.push_back(std::this_thread::get_id());
        changed.notify_all();
      }
      if (then) {
        then();  // the case's own hook, on the connection's loop
      }
    };
    options.on_connection_close = [this, then = std::move(options.on_connection_close)] {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++closed;
        changed.notify_all();
      }
      if (then) {
        then();  // the case's own hook, on the connection's loop
      }
    };
    http = std::make_unique<server::HttpServer>(std::move(options), log);
    port = *http->bind({"127.0.0.1", 0});
    thread = std::thread([this] { http->serve(); });
  }
  ~TestServer() {
    http->stop_serving();
    thread.join();
  }
  std::vector<int> response_codes() {
    std::lock_guard<std::mutex> lock(mu);
    return codes;
  }
  // Waits (at most 5 s) until `n` connections were accepted / `n` answers were written.
  bool wait_opened(int n) {
    std::unique_lock<std::mutex> lock(mu);
    return changed.wait_for(lock, 5s, [&] { return opened >= n; });
  }
  bool wait_closed(int n) {
    std::unique_lock<std::mutex> lock(mu);
    return changed.wait_for(lock, 5s, [&] { return closed >= n; });
  }
  bool wait_answered(std::size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return changed.wait_for(lock, 5s, [&] { return codes.size() >= n; });
  }

  // Read what the connections logged once they have closed (wait_closed).
  std::string logged() {
    std::lock_guard<std::mutex> lock(mu);
    return log_text.str();
  }

  std::ostringstream log_text;
  std::shared_ptr<spdlog::logger> logger = [this] {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log_text);
    sink->set_formatter(server::make_log_formatter(server::LogFormat::kJson));
    auto l = std::make_shared<spdlog::logger>("t", sink);
    l->set_level(spdlog::level::debug);
    return l;
  }();
  server::Log log{logger, server::LogFormat::kJson, 1};  // --v=1: a line per closed connection
  std::unique_ptr<server::HttpServer> http;
  int port = 0;
  std::thread thread;
  std::atomic<int> handled{0};
  std::mutex mu;
  std::condition_variable changed;
  std::vector<int> codes;
  std::vector<std::chrono::nanoseconds> latencies;  // as on_response reported them
  int opened = 0;
  int closed = 0;
  std::vector<std::thread::id> loop_of;  // each accepted connection's event loop, in order
};

// A latch a route waits on, opened by the test (or after 5 s, so no case can hang).
struct Gate {
  void open() {
    std::lock_guard<std::mutex> lock(mu);
    opened = true;
    cv.notify_all();
  }
  void pass() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, 5s, [&] { return opened; });
  }
  // Counts a route that reached it, and lets waiters for `n` of them go on.
  void arrive() {
    std::lock_guard<std::mutex> lock(mu);
    ++arrived;
    cv.notify_all();
  }
  bool wait_arrived(int n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, 5s, [&] { return arrived >= n; });
  }
  std::mutex mu;
  std::condition_variable cv;
  bool opened = false;
  int arrived = 0;
};

// Polls `done` until it holds (true) or 5 s pass (false): for a state no hook reports.
template <typename F>
bool eventually(F done) {
  for (Clock::time_point end = Clock::now() + 5s; !done();) {
    if (Clock::now() > end) {
      return false;
    }
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// `n` connections to `s`, each accepted before the next is opened: their ages, and the event
// loops they take in turn, follow this order.
std::vector<std::unique_ptr<Socket>> open_in_order(TestServer& s, int n) {
  std::vector<std::unique_ptr<Socket>> c;
  for (int i = 0; i < n; ++i) {
    c.push_back(std::make_unique<Socket>(s.port));
    REQUIRE(s.wait_opened(i + 1));
  }
  return c;
}

// `threads` I/O threads and as many handler threads.
server::HttpServerOptions small(int threads = 2) {
  server::HttpServerOptions o;
  o.io_threads = threads;
  o.handler_threads = threads;
  o.read_timeout = 1500ms;
  o.idle_timeout = 1500ms;
  o.limits.max_body_bytes = 1 << 20;
  return o;
}

// small(), its requests sharing `budget`, charged 1 byte of parse per body byte.
server::HttpServerOptions budgeted(server::MemoryBudget& budget) {
  server::HttpServerOptions o = small();
  o.budget = &budget;
  o.parse_bytes_per_body_byte = 1;
  return o;
}

}  // namespace

TEST_CASE("keep-alive and pipelined requests are answered in order on one connection",
          "[transport]") {
  TestServer s(small());
  Socket c(s.port);
  REQUIRE(c.connected());
  c.send(post("/a", "12345"));
  std::string first = c.read_response();
  CHECK_THAT(first, Catch::StartsWith("HTTP/1.1 200 OK\r\n") && Catch::EndsWith("POST /a 5"));
  CHECK_THAT(first, !Catch::Contains("Connection: close"));
  c.send(post("/b", "xy") + post("/c", "") + "GET /d HTTP/1.1\r\nHost: t\r\n\r\n");
  std::string rest = c.read_response();
  rest += c.read_response();
  rest += c.read_response();
  CHECK(count(rest, "HTTP/1.1 200 OK") == 3);
  CHECK(rest.find("POST /b 2") < rest.find("POST /c 0"));
  CHECK(rest.find("POST /c 0") < rest.find("GET /d 0"));
}

TEST_CASE("idle and half-sent connections hold no thread", "[transport]") {
  TestServer s(small(1));  // one I/O thread and one handler thread for everything
  std::vector<std::unique_ptr<Socket>> idle;
  for (int i = 0; i < 100; ++i) {
    idle.push_back(std::make_unique<Socket>(s.port));
    if (i % 2 == 1) {
      idle.back()->send("POST /slow HTTP/1.1\r\nHost: t\r\nContent-Le");  // a head, never ended
    }
  }
  Socket c(s.port, 1000ms);  // well inside the 1.5 s deadlines the idle ones have
  c.send(post("/now", "ok"));
  CHECK_THAT(c.read_response(), Catch::EndsWith("POST /now 2"));
}

TEST_CASE("a request that stops arriving gets 408 and its connection is closed", "[transport]") {
  TestServer s(small());
  Socket c(s.port);
  auto start = Clock::now();
  c.send("POST /t HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n12345");
  std::string answer = c.read_all();
  CHECK(Clock::now() - start < 4s);
  CHECK_THAT(answer,
             Catch::Contains("POST /t 5 timed_out") && Catch::Contains("Connection: close"));
  Socket head_only(s.port);
  head_only.send("POST /t HTTP/1.1\r\nHo");
  answer = head_only.read_all();
  CHECK_THAT(answer, Catch::StartsWith("HTTP/1.1 408 ") && Catch::Contains("--read-timeout"));
  Socket silent(s.port);  // never sends: closed without an answer
  CHECK(silent.read_all().empty());
}

TEST_CASE("at --v=1 every closed connection is logged with its reason", "[transport]") {
  server::HttpServerOptions o = small();
  o.max_requests_per_connection = 2;
  TestServer s(std::move(o));
  {
    Socket asked(s.port);
    asked.send("GET /a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    CHECK_THAT(asked.read_all(), Catch::Contains("Connection: close"));
  }
  {
    Socket refused(s.port);
    refused.send("GET /a HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n");
    CHECK_THAT(refused.read_all(), Catch::StartsWith("HTTP/1.1 400 "));
  }
  {
    Socket twice(s.port);
    twice.send(post("/a", "") + post("/b", ""));
    CHECK(count(twice.read_all(), "HTTP/1.1 200 OK") == 2);
  }
  {
    Socket gone(s.port);
    gone.send(post("/a", ""));
    CHECK_THAT(gone.read_response(), Catch::StartsWith("HTTP/1.1 200"));
  }  // the client closes
  REQUIRE(s.wait_closed(4));
  std::string log = s.logged();
  CAPTURE(log);
  CHECK(count(log, "\"msg\":\"connection closed\"") == 4);
  CHECK(count(log, "\"reason\":\"the client asked to close (Connection: close)\"") == 1);
  CHECK(count(log, "\"reason\":\"refused (the answer says why)\"") == 1);
  CHECK(count(log, "\"reason\":\"its most requests served, closed so load rebalances\"") == 1);
  CHECK(count(log, "\"reason\":\"closed by the client\"") == 1);
}

TEST_CASE("a keep-alive connection is closed after the idle timeout", "[transport]") {
  TestServer s(small());
  Socket c(s.port);
  c.send(post("/a", ""));
  CHECK_THAT(c.read_response(), Catch::StartsWith("HTTP/1.1 200"));
  auto start = Clock::now();
  CHECK(c.closed_by_server());
  CHECK(Clock::now() - start >= 1s);
}

// docs/server.md "Framing": empty lines before a request line are ignored, so they begin no
// request.
TEST_CASE("an empty line after a request begins none: the connection idles, never answered 408",
          "[transport]") {
  server::HttpServerOptions o = small();
  o.read_timeout = 300ms;
  o.idle_timeout = 1500ms;
  TestServer s(std::move(o));
  Socket c(s.port);
  c.send("\r\n" + post("/a", "12345") + "\r\n");
  CHECK_THAT(c.read_response(), Catch::EndsWith("POST /a 5"));
  auto answered = Clock::now();
  CHECK(c.read_all().empty());               // closed with nothing more said
  CHECK(Clock::now() - answered >= 1000ms);  // by the idle timeout, not the read timeout
  REQUIRE(s.wait_closed(1));
  CHECK_THAT(s.logged(), Catch::Contains("\"reason\":\"idle\""));
  CHECK(s.response_codes() == std::vector<int>{200});
}

TEST_CASE("a connection that sent only an empty line since its answer is idle: the cap evicts it",
          "[transport]") {
  server::HttpServerOptions o = small();
  o.max_connections = 1;
  o.read_timeout = 5000ms;
  o.idle_timeout = 5000ms;
  TestServer s(std::move(o));
  Socket idle(s.port);
  idle.send(post("/a", "") + "\r\n");  // one segment: read with the request
  CHECK_THAT(idle.read_response(), Catch::EndsWith("POST /a 0"));
  Socket c(s.port);
  c.send(post("/new", ""));
  CHECK_THAT(c.read_response(), Catch::EndsWith("POST /new 0"));
  CHECK(idle.closed_by_server());
}

TEST_CASE("at the connection cap the oldest idle connection makes room", "[transport]") {
  server::HttpServerOptions o = small();
  o.max_connections = 8;
  o.read_timeout = 5000ms;
  TestServer s(std::move(o));
  std::vector<std::unique_ptr<Socket>> idle = open_in_order(s, 8);  // distinct ages
  REQUIRE(s.http->open_connections() == 8);
  Socket c(s.port);
  c.send(post("/new", ""));
  CHECK_THAT(c.read_response(), Catch::EndsWith("POST /new 0"));
  CHECK(idle.front()->closed_by_server());
  CHECK(s.http->open_connections() <= 8);
}

// The lowest `n` descriptor numbers free in this process (open(2) takes the lowest free one).
std::vector<int> lowest_free_descriptors(int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    fds.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  }
  for (int fd : fds) {
    ::close(fd);
  }
  return fds;
}

// Holds an event loop: once armed, the next connection to open or close (whichever hook it is
// given to) waits in that hook, on its loop, until the test opens `held`; whatever else that
// loop has to do waits too.
struct LoopHold {
  std::function<void()> hook() {
    return [this] {
      if (armed.exchange(false)) {
        held.arrive();
        held.pass();
      }
    };
  }
  std::atomic<bool> armed{false};
  Gate held;
};

// For each connection `s` accepted, in order: whether it runs on an event loop other than the
// listener's (the thread that called serve()).
std::vector<bool> off_listener_loop(TestServer& s) {
  std::lock_guard<std::mutex> lock(s.mu);
  std::vector<bool> off;
  for (const std::thread::id& id : s.loop_of) {
    off.push_back(id != s.thread.get_id());
  }
  return off;
}

// Sends a request on `c` and requires its answer.
void roundtrip(Socket& c, const std::string& path) {
  c.send(post(path, ""));
  REQUIRE_THAT(c.read_response(), Catch::EndsWith("POST " + path + " 0"));
}

// `n` connections to a server with two event loops, accepted in order, so they take the loops in
// turn: the listener's, the other, the listener's, ...
std::vector<std::unique_ptr<Socket>> open_on_alternate_loops(TestServer& s, int n) {
  std::vector<std::unique_ptr<Socket>> c = open_in_order(s, n);
  std::vector<bool> expected;
  for (int i = 0; i < n; ++i) {
    expected.push_back(i % 2 == 1);
  }
  REQUIRE(off_listener_loop(s) == expected);
  return c;
}

// Answers `victim`, then `same_loop` (on the victim's loop), then `others`, so that the victim is
// the oldest idle connection: an answer is reported (and read by the client) before its connection
// is marked idle, and only the next request on the same loop is sure to come after that.
void make_oldest_idle(Socket& victim, Socket& same_loop, std::initializer_list<Socket*> others) {
  roundtrip(victim, "/first");
  roundtrip(same_loop, "/idle");
  for (Socket* other : others) {
    roundtrip(*other, "/idle");
  }
}

// docs/server.md "Connections and limits": out of descriptors, the oldest idle connection is
// closed to make room, and the listener waits for its descriptor, however long that
// connection's loop takes to close it, rather than closing more. Here that loop is held for
// several of the listener's 50 ms retry pauses.
TEST_CASE("out of descriptors, a new connection closes one idle connection, not more",
          "[transport]") {
  LoopHold hold;
  server::HttpServerOptions o = small();
  o.io_threads = 2;
  o.on_connection_close = hold.hook();
  TestServer s(std::move(o));
  constexpr int kOpen = 10;
  std::vector<std::unique_ptr<Socket>> c = open_in_order(s, kOpen);
  std::vector<bool> on_held = off_listener_loop(s);
  std::size_t blocker = on_held.size();
  for (std::size_t i = 0; i < on_held.size(); ++i) {
    blocker = on_held[i] ? i : blocker;
  }
  REQUIRE(blocker < on_held.size());
  std::vector<std::size_t> order;  // answered in this order: the oldest idle on the held loop
  for (bool held_first : {true, false}) {
    for (std::size_t i = 0; i < on_held.size(); ++i) {
      if (i != blocker && on_held[i] == held_first) {
        order.push_back(i);
      }
    }
  }
  REQUIRE(on_held[order[0]]);
  REQUIRE(on_held[order[1]]);  // a second victim on the held loop, were one taken
  for (std::size_t i : order) {
    roundtrip(*c[i], "/idle");
  }
  // The blocker closes (logged first, with descriptors free: UBSan checks an object's type
  // through a pipe the first time it meets that type), then its loop waits on the hold.
  roundtrip(*c[blocker], "/blocker");
  hold.armed = true;
  c[blocker].reset();
  REQUIRE(hold.held.wait_arrived(1));
  // Linux allots a new descriptor the lowest free number below the soft limit, and accept(2)
  // fails with EMFILE when there is none, whether or not a connection waits. Two numbers stay
  // free: the new client's socket and its accepted end. The server's next accept then finds
  // none and closes the oldest idle connection, on the held loop; the limit stays tight until
  // that one has closed.
  std::vector<int> spare = lowest_free_descriptors(2);
  REQUIRE(spare[0] >= 0);
  REQUIRE(spare[1] > spare[0]);
  rlimit was{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &was) == 0);
  rlimit tight = was;
  tight.rlim_cur = static_cast<rlim_t>(spare[1] + 1);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &tight) == 0);
  std::string answer;
  {
    Socket fresh(s.port);
    bool sent = fresh.connected() && fresh.send(post("/new", ""));
    answer = fresh.read_response();      // on the listener's loop, not held
    std::this_thread::sleep_for(300ms);  // the listener retries; none of its tries closes more
    hold.held.open();
    bool evicted_closed = s.wait_closed(2);  // the blocker, then the evicted one
    REQUIRE(setrlimit(RLIMIT_NOFILE, &was) == 0);
    REQUIRE(sent);
    REQUIRE(evicted_closed);
    CHECK(s.http->open_connections() == kOpen - 1);  // the blocker gone, one evicted, one new
  }
  CHECK_THAT(answer, Catch::EndsWith("POST /new 0"));
  int answered = 0;  // an evicted connection is never answered again
  for (std::size_t rank = 0; rank < order.size(); ++rank) {
    Socket& idle = *c[order[rank]];
    idle.send(post("/again", ""));
    bool again = !idle.read_response().empty();
    CAPTURE(rank);
    CHECK(again == (rank != 0));  // only the oldest idle one was closed
    answered += again ? 1 : 0;
  }
  CHECK(answered == kOpen - 2);
}

// docs/server.md "Connections and limits": a request whose bytes arrive as its idle connection
// is chosen for closing is neither handled nor answered; the connection closes without a byte.
// Here the chosen connection's loop is held (a new connection's open hook waits on it) while the
// request waits unread in its socket, and a connection over the cap chooses it.
TEST_CASE("a request that crosses its connection's eviction is closed unanswered, not handled",
          "[transport]") {
  LoopHold hold;
  server::HttpServerOptions o = small();
  o.io_threads = 2;  // accepted connections take the loops in turn: 0, 1, 0, 1, ...
  o.max_connections = 6;
  o.read_timeout = 5000ms;
  o.idle_timeout = 5000ms;
  o.on_connection_open = hold.hook();
  TestServer s(std::move(o));
  std::vector<std::unique_ptr<Socket>> c = open_on_alternate_loops(s, 5);
  Socket& victim = *c[1];
  make_oldest_idle(victim, *c[3], {c[0].get(), c[2].get(), c[4].get()});
  hold.armed = true;
  Socket blocker(s.port);  // sixth, on the victim's loop: at the cap, and that loop held
  REQUIRE(hold.held.wait_arrived(1));
  const int handled = s.handled;
  REQUIRE(victim.send(post("/crossed", "")));  // unread while its loop is held
  Socket fresh(s.port);                        // seventh, on the listener's loop: over the cap
  REQUIRE(s.wait_opened(7));                   // admitted once the victim was chosen
  roundtrip(fresh, "/new");
  hold.held.open();
  CHECK(victim.read_all().empty());  // closed, not a byte of an answer
  REQUIRE(s.wait_closed(1));
  CHECK(s.handled == handled + 1);  // /new only
  CHECK_THAT(s.logged(), Catch::Contains("\"reason\":\"idle, closed for a new connection"));
  roundtrip(blocker, "/blocker");  // the others are served as before
  for (std::size_t i : {0U, 2U, 3U, 4U}) {
    roundtrip(*c[i], "/again");
  }
}

// docs/server.md "Connections and limits": the narrower crossing, where the chosen connection's
// loop has already read the request's first bytes when it learns of the choice. The victim's
// request and another connection's request become ready in one wake-up of the victim's loop, the
// other first; that one holds the loop (its on_request hook) while a connection over the cap
// chooses the victim. Released, the loop reads the victim's request before the choice's wake-up
// reaches it, and the request's first byte finds its connection taken: closed unanswered, not
// handled.
TEST_CASE("a request read just after its connection was chosen for closing is not handled",
          "[transport]") {
  LoopHold on_open;
  LoopHold on_read;
  server::HttpServerOptions o = small();
  o.io_threads = 2;
  o.max_connections = 6;
  o.read_timeout = 5000ms;
  o.idle_timeout = 5000ms;
  o.on_connection_open = on_open.hook();
  o.on_request = [hold = on_read.hook()](std::string_view) { hold(); };
  TestServer s(std::move(o));
  std::vector<std::unique_ptr<Socket>> c = open_on_alternate_loops(s, 5);
  Socket& victim = *c[1];
  Socket& first = *c[3];  // on the victim's loop
  make_oldest_idle(victim, first, {c[0].get(), c[2].get(), c[4].get()});
  on_open.armed = true;
  Socket holder(s.port);  // sixth, on the victim's loop, which waits in its open hook
  REQUIRE(on_open.held.wait_arrived(1));
  REQUIRE(first.send(post("/before", "")));  // both unread while the loop waits, in this order
  REQUIRE(victim.send(post("/crossed", "")));
  on_read.armed = true;
  on_open.held.open();
  REQUIRE(on_read.held.wait_arrived(1));  // the loop read /before first and waits in its hook
  Socket fresh(s.port);       // seventh, on the listener's loop: at the cap, it takes the victim
  REQUIRE(s.wait_opened(7));  // admitted once the victim was chosen
  roundtrip(fresh, "/new");
  on_read.held.open();
  CHECK(victim.read_all().empty());  // closed, not a byte of an answer
  REQUIRE(s.wait_closed(1));
  CHECK_THAT(s.logged(), Catch::Contains("\"reason\":\"idle, closed for a new connection"));
  CHECK_THAT(first.read_response(), Catch::EndsWith("POST /before 0"));
  roundtrip(holder, "/holder");  // the others are served as before
  for (Socket* other : {c[0].get(), c[2].get(), &first, c[4].get()}) {
    roundtrip(*other, "/again");
  }
  CHECK(s.handled == 12);  // /first, four /idle, /before, /new, /holder, four /again: no /crossed
}

TEST_CASE("a refused head closes the connection; what follows it is never answered",
          "[transport]") {
  TestServer s(small());
  const std::string hidden = post("/hidden", "x");
  for (const std::string& head :
       {std::string("POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\n"),
        std::string(
            "POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
        std::string("GARBAGE\r\n\r\n"), std::string("POST /a HTTP/1.1\nHost: t\n\n"),
        std::string("POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
                    "Content-Length: 3\r\n\r\n0\r\n\r\n")}) {
    CAPTURE(head);
    Socket c(s.port);
    c.send(head + hidden);
    std::string answer = c.read_all();
    CHECK_THAT(answer, Catch::StartsWith("HTTP/1.1 400 ") && Catch::Contains("Connection: close"));
    CHECK(count(answer, "HTTP/1.1 ") == 1);
    CHECK_THAT(answer, !Catch::Contains("/hidden"));
  }
  CHECK(s.handled == 0);
  std::vector<int> codes = s.response_codes();
  CHECK(codes == std::vector<int>{400, 400, 400, 400, 400});  // each counted once written
}

TEST_CASE("a body over the limit is refused from its length, without 100 Continue", "[transport]") {
  TestServer s(small());
  for (const char* length : {"9223372036854775808", "18446744073709551617", "2000000"}) {
    CAPTURE(length);
    Socket c(s.port);
    auto start = Clock::now();
    c.send("POST /big HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: " +
           std::string(length) + "\r\n\r\n");
    std::string answer = c.read_response();
    CHECK(Clock::now() - start < 1s);  // not after the read timeout
    CHECK_THAT(answer, Catch::Contains("POST /big 0 too_large") &&
                           !Catch::Contains("100 Continue") &&
                           Catch::Contains("Connection: close"));
  }
  Socket ok(s.port);
  ok.send("POST /small HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  CHECK(ok.read_response() == "HTTP/1.1 100 Continue\r\n\r\n");
  ok.send("abc");
  CHECK_THAT(ok.read_response(), Catch::EndsWith("POST /small 3"));
}

// docs/server.md "Connections and limits": the lingering close.
TEST_CASE("after refusing a body unread, the server reads what the client still sends, then closes",
          "[transport]") {
  TestServer s(small());
  Socket c(s.port);
  c.send("POST /big HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n");
  CHECK_THAT(c.read_response(),
             Catch::Contains("POST /big 0 too_large") && Catch::Contains("Connection: close"));
  // The client goes on sending the body it announced, as clients do that write before they read.
  // A server that closed at once would answer these bytes with a reset (the send or the read
  // below fails); one that lingers discards them and closes once the client has finished.
  const std::string chunk(16 << 10, 'x');
  bool sent = true;
  for (int i = 0; i < 16 && sent; ++i) {
    sent = c.send(chunk);
  }
  CHECK(sent);
  c.shutdown_send();
  CHECK(c.closed_by_server());
}

TEST_CASE("a refusal whose wording throws is still answered, and the connection ends cleanly",
          "[transport]") {
  server::HttpServerOptions o = small();
  o.refuse = [](const server::HttpRequestView&) -> server::HttpReply {
    throw std::runtime_error("wording failed");
  };
  TestServer s(std::move(o));
  {
    Socket c(s.port);
    c.send("POST /big HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n");
    CHECK_THAT(c.read_response(), Catch::StartsWith("HTTP/1.1 413") &&
                                      Catch::Contains("\"code\":413") &&
                                      Catch::Contains("Connection: close"));
  }
  REQUIRE(s.wait_answered(1));
  CHECK(s.response_codes() == std::vector<int>{413});
  CHECK(eventually([&] { return s.http->open_connections() == 0; }));
}

// docs/server.md "Connections and limits": a route that throws is answered 500.
TEST_CASE("a wording or a handler that throws what is not an exception is still answered",
          "[transport]") {
  server::HttpServerOptions o = small();
  o.refuse = [](const server::HttpRequestView&) -> server::HttpReply { throw 7; };
  o.handler = [](const server::HttpRequestView&) -> server::HttpReply { throw 8; };
  TestServer s(std::move(o));
  {
    Socket c(s.port);
    c.send("POST /big HTTP/1.1\r\nHost: t\r\nContent-Length: 2000000\r\n\r\n");
    CHECK_THAT(c.read_response(),
               Catch::StartsWith("HTTP/1.1 413") && Catch::Contains("\"code\":413"));
  }
  {
    Socket c(s.port);
    c.send(post("/small", "abc"));
    CHECK_THAT(c.read_response(), Catch::StartsWith("HTTP/1.1 500") &&
                                      Catch::Contains("internal error") &&
                                      Catch::Contains("Connection: close"));
  }
  REQUIRE(s.wait_answered(2));
  CHECK(s.response_codes() == std::vector<int>{413, 500});
  CHECK(eventually([&] { return s.http->open_connections() == 0; }));
}

// docs/server.md "Connections and limits": what a callback of the transport's throws ends that
// connection, and only it: it is closed and counted closed, its budget is given back, and the
// server goes on.
TEST_CASE("a connection whose callback throws closes whole, and the server goes on",
          "[transport]") {
  server::MemoryBudget budget(3 << 20);
  server::HttpServerOptions o = budgeted(budget);
  std::atomic<int> requests{0};
  o.on_request = [&](std::string_view) {
    if (requests++ == 0) {
      throw std::runtime_error("metrics failed");
    }
  };
  TestServer s(std::move(o));
  {
    Socket c(s.port);
    c.send(post("/first", "abc"));
    CHECK(c.read_all().empty());  // closed unanswered
  }
  REQUIRE(s.wait_closed(1));
  CHECK(eventually([&] { return s.http->open_connections() == 0; }));
  CHECK(budget.in_use() == 0);
  Socket next(s.port);
  next.send(post("/second", "abc"));
  CHECK_THAT(next.read_response(), Catch::EndsWith("POST /second 3"));
}

// docs/server.md "Connections and limits", the lingering close: a client that keeps sending
// after its refusal keeps the socket readable, so no read of the drain ever waits; it still ends
// after its second, and the loop it shares stays responsive meanwhile.
TEST_CASE("a lingering close ends on time while the client keeps sending", "[transport]") {
  TestServer s(small(1));  // one I/O thread: the lingering connection shares it with the next
  Socket c(s.port);
  c.send("NOT AN HTTP REQUEST\r\n\r\n");
  CHECK_THAT(c.read_response(), Catch::StartsWith("HTTP/1.1 400"));
  Clock::time_point refused = Clock::now();
  std::vector<std::thread> senders;
  std::atomic<std::int64_t> failed_after_ms{-1};
  for (int i = 0; i < 3; ++i) {
    senders.emplace_back([&] {
      const std::string chunk(1 << 20, 'x');
      while (Clock::now() - refused < 4s) {
        if (!c.send(chunk)) {
          auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - refused);
          std::int64_t unset = -1;
          failed_after_ms.compare_exchange_strong(unset, ms.count());
          return;
        }
      }
    });
  }
  Socket other(s.port);
  Clock::time_point asked = Clock::now();
  other.send(post("/other", "abc"));
  CHECK_THAT(other.read_response(), Catch::EndsWith("POST /other 3"));
  CHECK(Clock::now() - asked < 500ms);
  for (std::thread& t : senders) {
    t.join();
  }
  // The linger is a second; the sends fail once the server has closed (a reset).
  CHECK(failed_after_ms >= 0);
  CHECK(failed_after_ms < 2000);
}

TEST_CASE("requests over the in-flight budget wait for room, then are served", "[transport]") {
  server::MemoryBudget budget(3 << 20);
  Gate gate;
  std::atomic<int> inside{0};
  server::HttpServerOptions o = small(4);
  o.read_timeout = 4000ms;
  o.budget = &budget;
  o.parse_bytes_per_body_byte = 1;  // a 1 MiB body holds 2 MiB + 64 KiB
  o.handler = [&](const server::HttpRequestView& r) {
    ++inside;
    gate.arrive();
    gate.pass();
    server::HttpReply reply;
    reply.body =
        std::to_string(r.body.size()) + (r.refused == server::Refused::kBusy ? " busy" : "");
    return reply;
  };
  TestServer s(std::move(o));
  const std::string body(1 << 20, 'x');
  Socket first(s.port);
  first.send(post("/a", body));
  REQUIRE(gate.wait_arrived(1));
  REQUIRE(inside == 1);
  CHECK(budget.in_use() == (2 << 20) + (64 << 10));
  Socket second(s.port);
  second.send(post("/b", body));  // does not fit beside the first: it waits, its body unread
  REQUIRE(eventually([&] { return budget.waiting() == 1; }));
  CHECK(inside == 1);
  gate.open();
  CHECK_THAT(first.read_response(), Catch::EndsWith("1048576"));
  CHECK_THAT(second.read_response(), Catch::EndsWith("1048576"));
  REQUIRE(s.wait_answered(2));  // each request's budget is given back before it is reported
  CHECK(budget.in_use() == 0);
}

TEST_CASE("a request that cannot get budget before its deadline is answered busy", "[transport]") {
  server::MemoryBudget budget(3 << 20);
  REQUIRE(budget.try_acquire(2 << 20));  // held by someone else throughout
  server::HttpServerOptions o = budgeted(budget);
  TestServer s(std::move(o));
  Socket c(s.port);
  c.send(post("/late", std::string(1 << 20, 'x')));
  // Answered with the body's first bytes only (enough for a uid), never the whole body.
  std::string answer = c.read_all();
  CHECK_THAT(answer, Catch::Contains("POST /late ") && Catch::EndsWith(" busy"));
  CHECK(std::stoul(answer.substr(answer.find("/late ") + 6)) <= 65536);
  CHECK(budget.in_use() == (2 << 20));
}

TEST_CASE("without a route's wording, a request left without budget is a 503 Status",
          "[transport]") {
  server::MemoryBudget budget(3 << 20);
  REQUIRE(budget.try_acquire(2 << 20));  // held by someone else throughout
  server::HttpServerOptions o = budgeted(budget);
  TestServer s(std::move(o), /*route_refusals=*/false);
  Socket c(s.port);
  c.send(post("/late", std::string(1 << 20, 'x')));
  std::string answer = c.read_all();
  CHECK_THAT(answer, Catch::StartsWith("HTTP/1.1 503 ") && Catch::Contains("\"code\":503") &&
                         Catch::Contains("--read-timeout passed; retry"));
  CHECK(s.handled == 0);
  CHECK(budget.in_use() == (2 << 20));
}

TEST_CASE("a request that could never fit the budget is refused at once, as too large",
          "[transport]") {
  server::MemoryBudget budget(1 << 20);
  server::HttpServerOptions o = budgeted(budget);
  const std::string huge = "POST /huge HTTP/1.1\r\nHost: t\r\nContent-Length: 600000\r\n\r\n";
  SECTION("without a route's wording: the transport's 413 Status names --memory-limit") {
    TestServer s(std::move(o), /*route_refusals=*/false);
    Socket c(s.port);
    auto start = Clock::now();
    c.send(huge);
    std::string answer = c.read_response();
    CHECK(Clock::now() - start < 1s);
    CHECK_THAT(answer, Catch::StartsWith("HTTP/1.1 413 ") && Catch::Contains("--memory-limit"));
    CHECK(s.handled == 0);
  }
  SECTION("with one: worded by the route as a body too large, so it can name the uid") {
    TestServer s(std::move(o));
    Socket c(s.port);
    c.send(huge);
    CHECK_THAT(c.read_all(), Catch::EndsWith("POST /huge 0 too_large"));
    CHECK(s.handled == 1);  // the refusal's wording
    CHECK(budget.in_use() == 0);
  }
}

TEST_CASE("a chunked body is charged as the largest allowed, then as what it was", "[transport]") {
  // max_body_bytes 1 MiB, 1 byte of parse per body byte: a chunked request takes 2 MiB + 64 KiB
  // while its body arrives, and once it is whole, 2 x its 10 bytes + 64 KiB.
  server::MemoryBudget budget(3 << 20);
  server::HttpServerOptions o = budgeted(budget);
  std::atomic<std::uint64_t> held{0};
  o.handler = [&](const server::HttpRequestView& r) {
    held = budget.in_use();
    return text(std::string(r.body));
  };
  TestServer s(std::move(o));
  Socket c(s.port);
  c.send("POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n");
  REQUIRE(eventually([&] { return budget.in_use() == (2u << 20) + 65536; }));
  // A second chunked request does not fit beside the first: it waits for room.
  Socket waiting(s.port);
  waiting.send("POST /w HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
  REQUIRE(eventually([&] { return budget.waiting() == 1; }));
  c.send("6\r\nefghij\r\n0\r\n\r\n");
  CHECK_THAT(c.read_response(), Catch::EndsWith("abcdefghij"));
  // Once the first body was whole, its excess went to the waiting one before the handler ran.
  CHECK(held == (2 * 10 + 65536) + (2u << 20) + 65536);
  CHECK(budget.waiting() == 0);
  waiting.send("1\r\nz\r\n0\r\n\r\n");
  CHECK_THAT(waiting.read_response(), Catch::EndsWith("z"));
  REQUIRE(s.wait_answered(2));
  CHECK(budget.in_use() == 0);
}

TEST_CASE("a malformed chunk size is a 400 once the body is being read", "[transport]") {
  server::MemoryBudget budget(3 << 20);
  TestServer s(budgeted(budget));
  Socket c(s.port);
  c.send("POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n");
  CHECK_THAT(c.read_all(), Catch::StartsWith("HTTP/1.1 400 ") &&
                               Catch::Contains("chunk size is not hexadecimal"));
  REQUIRE(s.wait_answered(1));
  CHECK(budget.in_use() == 0);
  CHECK(s.handled == 0);
}

TEST_CASE("at stop, a connection not yet served gets one request if it begins at once",
          "[transport]") {
  server::HttpServerOptions o = small();
  o.read_timeout = 60s;  // a silent connection must not hold the stop this long
  TestServer s(std::move(o));
  Socket silent(s.port);
  Socket late(s.port);
  REQUIRE(s.wait_opened(2));
  auto start = Clock::now();
  s.http->stop_serving();
  // The stop reaches the connections on the accept loop's thread, once the listener is closed.
  REQUIRE(eventually([&] { return !Socket(s.port).connected(); }));
  late.send(post("/late", "x"));
  std::string answer = late.read_response();
  CHECK_THAT(answer, Catch::Contains("Connection: close") && Catch::EndsWith("POST /late 1"));
  s.thread.join();  // serve() returns once the silent one is closed too
  CHECK(Clock::now() - start < 10s);
  CHECK(silent.closed_by_server());
  s.thread = std::thread([] {});  // for the destructor's join
}

TEST_CASE("at stop, no connection is closed for it while the listener still accepts",
          "[transport]") {
  // docs/server.md "Graceful shutdown": a client whose connection the stop ends connects again
  // at once. It must be refused, not let into the listen backlog that the listener's close then
  // resets. Here the accept loop's thread is held (in a closing connection's hook) while
  // stop_serving() is called and a request on the other loop is answered: that answer keeps its
  // connection, which closes only once the listener has.
  Gate block;     // the /block route
  LoopHold hold;  // loop 0, held in the first closed connection's hook
  hold.armed = true;
  server::HttpServerOptions o = small(2);
  o.read_timeout = 5000ms;
  o.idle_timeout = 5000ms;
  o.handler = [&](const server::HttpRequestView& r) {
    block.arrive();
    block.pass();
    return text(std::string(r.path));
  };
  o.on_connection_close = hold.hook();
  TestServer s(std::move(o));
  auto first = std::make_unique<Socket>(s.port);  // accepted first: on loop 0, the accept loop's
  REQUIRE(s.wait_opened(1));
  Socket second(s.port);  // on loop 1
  REQUIRE(s.wait_opened(2));
  second.send(post("/block", ""));
  REQUIRE(block.wait_arrived(1));
  first.reset();
  REQUIRE(hold.held.wait_arrived(1));  // loop 0 is held: the listener cannot close yet
  s.http->stop_serving();
  block.open();
  CHECK_THAT(second.read_response(),
             Catch::EndsWith("/block") && !Catch::Contains("Connection: close"));
  hold.held.open();
  CHECK(second.closed_by_server());  // as an idle connection, once the listener is closed
  Socket again(s.port);
  CHECK_FALSE(again.connected());
}

TEST_CASE("HEAD answers carry no body; stop_serving closes idle connections", "[transport]") {
  auto s = std::make_unique<TestServer>(small());
  Socket c(s->port);
  c.send("HEAD /h HTTP/1.1\r\nHost: t\r\n\r\n");
  std::string head = c.read_response();
  CHECK_THAT(head, Catch::StartsWith("HTTP/1.1 200") && Catch::EndsWith("\r\n\r\n"));
  auto start = Clock::now();
  s.reset();  // stop_serving, then serve() returns once every connection closed
  CHECK(Clock::now() - start < 1s);
  CHECK(c.closed_by_server());
}

TEST_CASE("a response's reported latency spans the handler, from the request read whole",
          "[transport]") {
  // The handler takes at least 200 ms, and the reported latency must too (the request duration
  // histogram is made of it); the time to write the answer alone is microseconds.
  server::HttpServerOptions o = small(1);
  o.handler = [](const server::HttpRequestView&) {
    std::this_thread::sleep_for(200ms);
    return text("slow");
  };
  TestServer s(std::move(o));
  Socket c(s.port, 5000ms);
  c.send(post("/slow", "x"));
  CHECK_THAT(c.read_response(), Catch::EndsWith("slow"));
  REQUIRE(s.wait_answered(1));
  std::lock_guard<std::mutex> lock(s.mu);
  CHECK(s.latencies.at(0) >= 200ms);
}

TEST_CASE("a route that blocks holds a handler thread, never another connection's answer",
          "[transport]") {
  // Both handler threads are held first, then one request blocks a handler thread while quick
  // ones arrive on other connections: the other thread answers them.
  Gate hold;
  Gate block;
  server::HttpServerOptions o = small(2);
  o.read_timeout = 5000ms;
  o.handler = [&](const server::HttpRequestView& r) {
    if (r.path == "/hold") {
      hold.arrive();
      hold.pass();
    } else if (r.path == "/block") {
      block.arrive();
      block.pass();
    }
    return text(std::string(r.path));
  };
  TestServer s(std::move(o));
  Socket hold1(s.port, 5000ms);
  Socket hold2(s.port, 5000ms);
  Socket blocker(s.port, 5000ms);
  std::vector<std::unique_ptr<Socket>> quick;
  for (int i = 0; i < 6; ++i) {
    quick.push_back(std::make_unique<Socket>(s.port, 5000ms));
  }
  hold1.send(post("/hold", ""));
  hold2.send(post("/hold", ""));
  REQUIRE(hold.wait_arrived(2));  // both handler threads are in /hold now
  blocker.send(post("/block", ""));
  hold.open();
  REQUIRE(block.wait_arrived(1));  // one handler thread is held by /block until the end
  Clock::time_point sent = Clock::now();
  for (auto& q : quick) {
    q->send(post("/quick", ""));
  }
  for (auto& q : quick) {
    CHECK_THAT(q->read_response(), Catch::EndsWith("/quick"));
  }
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - sent);
  CAPTURE(waited.count());
  CHECK(waited < 900ms);  // not behind the blocked request
  block.open();
  CHECK_THAT(blocker.read_response(), Catch::EndsWith("/block"));
  CHECK_THAT(hold1.read_response(), Catch::EndsWith("/hold"));
  CHECK_THAT(hold2.read_response(), Catch::EndsWith("/hold"));
}
