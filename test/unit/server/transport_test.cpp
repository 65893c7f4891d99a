// lib/server/http_server + connection: the transport seam on cpp-httplib 0.11 (docs/server.md
// "Transport seam"). Each case fails when the library stops doing what the seam relies on:
// process_request over our own Stream (parse, route, write, "Connection: close", Keep-Alive,
// 100-continue, error pages for a request cut short), the accept loop handing every socket to the
// overridden virtual, set_socket_options seeing the listener (backlog, no SO_REUSEPORT), accepted
// sockets inheriting TCP_NODELAY, and the keep-alive loop's wake-ups (stop, pressure).
#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <spdlog/sinks/null_sink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <utility>

#include "server/http_server.h"
#include "server/tls.h"

namespace {

using namespace std::chrono_literals;

// ---- httplib's request parser over an in-memory Stream -------------------------------------

// httplib's protected request parser, reachable from a test.
struct Parser : httplib::Server {
  using httplib::Server::process_request;
};

// Reads `input`, then returns `at_end` (0: the peer closed; -1: a read failed, as Connection's
// reads do past their deadline). Collects what is written. socket() is a descriptor above
// FD_SETSIZE that is not open: httplib must not use it.
class MemoryStream final : public httplib::Stream {
 public:
  explicit MemoryStream(std::string input, ssize_t at_end = 0)
      : in_(std::move(input)), at_end_(at_end) {}

  // Remembers how much had been written when the byte at `offset` was first read.
  void mark(std::size_t offset) { mark_ = offset; }
  std::size_t written_at_mark() const { return written_at_mark_; }
  std::string take_output() { return std::exchange(out_, {}); }

  bool is_readable() const override { return pos_ < in_.size(); }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    if (pos_ >= in_.size()) {
      return at_end_;
    }
    std::size_t n = std::min(size, in_.size() - pos_);
    if (pos_ <= mark_ && mark_ < pos_ + n) {
      written_at_mark_ = out_.size();
    }
    in_.copy(ptr, n, pos_);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    out_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "192.0.2.7";
    port = 4242;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "192.0.2.1";
    port = 9443;
  }
  socket_t socket() const override { return 4096; }

 private:
  std::string in_;
  ssize_t at_end_;
  std::size_t pos_ = 0;
  std::string out_;
  std::size_t mark_ = std::string::npos;
  std::size_t written_at_mark_ = std::string::npos;
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---- HttpServer on 127.0.0.1 and a raw client ---------------------------------------------

std::shared_ptr<spdlog::logger> quiet_logger() {
  return std::make_shared<spdlog::logger>("transport-test",
                                          std::make_shared<spdlog::sinks::null_sink_mt>());
}

// An HttpServer on 127.0.0.1 (any port) serving in its own thread. GET <path> answers
// "hi <path>"; GET /bye also asks to close the connection after the response.
class Running {
 public:
  explicit Running(server::HttpServerOptions options) : log_(quiet_logger(), kText, 1) {
    options.on_connection_open = [this] { ++opens; };
    options.on_connection_close = [this] { ++closes; };
    http_ = std::make_unique<server::HttpServer>(std::move(options), log_);
    http_->Get(".*", [](const httplib::Request& req, httplib::Response& res) {
      if (req.path == "/bye") {
        server::HttpServer::close_after_response(false);
      }
      res.set_content("hi " + req.path, "text/plain");
    });
    webhook::Result<int> port = http_->bind({"127.0.0.1", 0});
    REQUIRE(port.has_value());
    port_ = *port;
    std::promise<void> served;
    done_ = served.get_future();
    thread_ = std::thread([this, p = std::move(served)]() mutable {
      http_->serve();
      p.set_value();
    });
  }
  ~Running() {
    http_->stop_serving();
    thread_.join();
  }
  Running(const Running&) = delete;
  Running& operator=(const Running&) = delete;

  int port() const { return port_; }
  server::HttpServer& http() { return *http_; }
  // Stops the server; true when serve() returned within `limit`.
  bool stop_within(std::chrono::milliseconds limit) {
    http_->stop_serving();
    return done_.wait_for(limit) == std::future_status::ready;
  }
  // Waits (up to 10 s) until `closes` reaches `n`.
  bool closed(int n) const {
    for (int i = 0; i < 1000 && closes.load() < n; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    return closes.load() == n;
  }

  std::atomic<int> opens{0};
  std::atomic<int> closes{0};

 private:
  static constexpr server::LogFormat kText = server::LogFormat::kText;
  server::Log log_;
  std::unique_ptr<server::HttpServer> http_;
  int port_ = 0;
  std::future<void> done_;
  std::thread thread_;
};

sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

int port_of(const sockaddr_in& a) { return ntohs(a.sin_port); }

// A blocking client socket whose reads give up after 10 s.
int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in a = loopback(port);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  return fd;
}

void send_all(int fd, const std::string& text) {
  std::size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::send(fd, text.data() + off, text.size() - off, MSG_NOSIGNAL);
    REQUIRE(n > 0);
    off += static_cast<std::size_t>(n);
  }
}

// One response: its head and a Content-Length body. "" when the peer closed (or went silent
// for 10 s) first.
std::string read_response(int fd) {
  std::string in;
  char buf[4096];
  std::size_t head_end = std::string::npos;
  std::size_t want = std::string::npos;
  while (want == std::string::npos || in.size() < want) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      return "";
    }
    in.append(buf, static_cast<std::size_t>(n));
    if (head_end == std::string::npos && (head_end = in.find("\r\n\r\n")) != std::string::npos) {
      std::size_t at = in.find("Content-Length: ");
      REQUIRE(at < head_end);
      want = head_end + 4 + std::stoul(in.substr(at + 16));
    }
  }
  return in;
}

std::string get(int fd, const std::string& path, const std::string& headers = "") {
  send_all(fd, "GET " + path + " HTTP/1.1\r\nHost: test\r\n" + headers + "\r\n");
  return read_response(fd);
}

// True when the peer closes the connection (recv returns 0) within 10 s, sending nothing more.
bool peer_closes(int fd) {
  char c;
  return ::recv(fd, &c, 1, 0) == 0;
}

int int_option(int fd, int level, int name) {
  int value = -1;
  socklen_t len = sizeof(value);
  REQUIRE(getsockopt(fd, level, name, &value, &len) == 0);
  return value;
}

// The descriptor of this process whose IPv4 local port is `local` and, when `peer` > 0, whose
// peer's port is `peer`; with `peer` == 0, a listening socket. -1 when there is none.
int find_socket(int local, int peer) {
  for (int fd = 0; fd < 4096; ++fd) {
    sockaddr_in a{};
    socklen_t len = sizeof(a);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sin_family != AF_INET ||
        port_of(a) != local) {
      continue;
    }
    int listening = 0;
    socklen_t ll = sizeof(listening);
    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ll);
    sockaddr_in b{};
    len = sizeof(b);
    bool peer_matches =
        getpeername(fd, reinterpret_cast<sockaddr*>(&b), &len) == 0 && port_of(b) == peer;
    if (peer == 0 ? listening == 1 : peer_matches) {
      return fd;
    }
  }
  return -1;
}

int local_port(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  return port_of(a);
}

server::HttpServerOptions plain(std::chrono::milliseconds idle = 60s) {
  server::HttpServerOptions o;
  o.idle_timeout = idle;
  o.max_threads = 4;
  return o;
}

// A self-signed P-256 certificate for 127.0.0.1, PEM.
std::pair<std::string, std::string> self_signed() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 7);
  X509_gmtime_adj(X509_getm_notBefore(cert), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509_sign(cert, key, EVP_sha256());
  auto pem = [](auto write) {
    BIO* bio = BIO_new(BIO_s_mem());
    write(bio);
    char* data = nullptr;
    long len = BIO_get_mem_data(bio, &data);
    std::string out(data, static_cast<std::size_t>(len));
    BIO_free(bio);
    return out;
  };
  std::string c = pem([&](BIO* b) { PEM_write_bio_X509(b, cert); });
  std::string k =
      pem([&](BIO* b) { PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr); });
  X509_free(cert);
  EVP_PKEY_free(key);
  return {c, k};
}

}  // namespace

// ---- process_request over our own Stream ----------------------------------------------------

TEST_CASE("process_request parses, routes and writes through the Stream alone", "[transport]") {
  Parser p;
  p.set_keep_alive_timeout(7);
  p.set_keep_alive_max_count(9);
  std::string body;
  std::string remote;
  p.Post("/mutate", [&](const httplib::Request& req, httplib::Response& res,
                        const httplib::ContentReader& reader) {
    body.clear();
    reader([&](const char* d, std::size_t n) {
      body.append(d, n);
      return true;
    });
    remote = req.remote_addr + ":" + std::to_string(req.remote_port);
    res.set_content("{\"ok\":true}", "application/json");
  });
  MemoryStream s(
      "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
      "POST /mutate HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi");

  bool closed = false;
  REQUIRE(p.process_request(s, false, closed, nullptr));
  std::string first = s.take_output();
  CAPTURE(first);
  CHECK(body == "hello");
  CHECK(remote == "192.0.2.7:4242");
  CHECK_FALSE(closed);
  CHECK(first.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(contains(first, "\r\nKeep-Alive: timeout=7, max=9\r\n"));
  CHECK_FALSE(contains(first, "Connection: close"));
  CHECK(contains(first, "\r\nContent-Length: 11\r\n"));
  CHECK(first.ends_with("\r\n\r\n{\"ok\":true}"));

  // The second request, pipelined behind the first, says "Connection: close".
  REQUIRE(p.process_request(s, false, closed, nullptr));
  std::string second = s.take_output();
  CAPTURE(second);
  CHECK(body == "hi");
  CHECK(closed);
  CHECK(contains(second, "\r\nConnection: close\r\n"));
  CHECK_FALSE(contains(second, "Keep-Alive"));

  // Nothing more: the peer closed before a request.
  closed = false;
  CHECK_FALSE(p.process_request(s, false, closed, nullptr));
  CHECK(s.take_output().empty());
}

TEST_CASE("process_request: close_connection and HTTP/1.0", "[transport]") {
  Parser p;
  p.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_content("x", "a/b"); });

  MemoryStream last("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  bool closed = false;
  REQUIRE(p.process_request(last, true, closed, nullptr));
  std::string out = last.take_output();
  CAPTURE(out);
  CHECK(contains(out, "\r\nConnection: close\r\n"));
  CHECK_FALSE(closed);  // the request did not ask for it

  MemoryStream old("GET / HTTP/1.0\r\n\r\n");
  REQUIRE(p.process_request(old, false, closed, nullptr));
  CHECK(closed);

  MemoryStream old_keep("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
  closed = false;
  REQUIRE(p.process_request(old_keep, false, closed, nullptr));
  CHECK_FALSE(closed);
}

TEST_CASE("process_request: a head cut short is a 400 through the error handler", "[transport]") {
  Parser p;
  int error_status = 0;
  p.set_error_handler([&](const httplib::Request&, httplib::Response& res) {
    error_status = res.status;
    res.set_content("cut", "text/plain");
  });
  MemoryStream s("POST /mutate HTTP/1.1\r\nHost: x\r\n", -1);
  bool closed = false;
  p.process_request(s, false, closed, nullptr);
  std::string out = s.take_output();
  CAPTURE(out);
  CHECK(error_status == 400);
  CHECK(out.rfind("HTTP/1.1 400 Bad Request\r\n", 0) == 0);
  CHECK(out.ends_with("\r\n\r\ncut"));
}

TEST_CASE("process_request: a body cut short fails the handler's content reader", "[transport]") {
  Parser p;
  bool complete = true;
  std::string body;
  p.Post("/mutate", [&](const httplib::Request&, httplib::Response& res,
                        const httplib::ContentReader& reader) {
    complete = reader([&](const char* d, std::size_t n) {
      body.append(d, n);
      return true;
    });
    res.status = 408;
    res.set_content("late", "text/plain");
  });
  MemoryStream s("POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc", -1);
  bool closed = false;
  p.process_request(s, false, closed, nullptr);
  std::string out = s.take_output();
  CAPTURE(out);
  CHECK_FALSE(complete);
  CHECK(body == "abc");
  CHECK(out.rfind("HTTP/1.1 408 Request Timeout\r\n", 0) == 0);
}

TEST_CASE("process_request: 100 Continue is written before the body is read", "[transport]") {
  Parser p;
  p.Post("/mutate", [&](const httplib::Request& req, httplib::Response& res) {
    res.set_content(req.body, "text/plain");
  });
  std::string head =
      "POST /mutate HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n";
  MemoryStream s(head + "body");
  s.mark(head.size());
  bool closed = false;
  REQUIRE(p.process_request(s, false, closed, nullptr));
  std::string out = s.take_output();
  CAPTURE(out);
  const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  CHECK(s.written_at_mark() == kContinue.size());
  CHECK(out.rfind(kContinue + "HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(out.ends_with("\r\n\r\nbody"));
}

// ---- HttpServer over sockets ------------------------------------------------------------------

TEST_CASE("the accept loop hands every accepted socket to the seam", "[transport]") {
  Running r(plain());
  for (int i = 0; i < 3; ++i) {
    int fd = connect_to(r.port());
    std::string res = get(fd, "/n", "Connection: close\r\n");
    CAPTURE(res);
    CHECK(res.ends_with("\r\n\r\nhi /n"));
    CHECK(peer_closes(fd));
    ::close(fd);
  }
  CHECK(r.closed(3));
  CHECK(r.opens.load() == 3);
}

TEST_CASE("the listener: backlog 1024, SO_REUSEADDR, no SO_REUSEPORT", "[transport]") {
  Running r(plain());
  int listener = find_socket(r.port(), 0);
  REQUIRE(listener >= 0);
  int somaxconn = 0;
  std::ifstream("/proc/sys/net/core/somaxconn") >> somaxconn;
  REQUIRE(somaxconn > 0);
  tcp_info info{};
  socklen_t len = sizeof(info);
  REQUIRE(getsockopt(listener, IPPROTO_TCP, TCP_INFO, &info, &len) == 0);
  CHECK(info.tcpi_sacked == static_cast<unsigned>(std::min(1024, somaxconn)));  // the backlog
  CHECK(int_option(listener, SOL_SOCKET, SO_REUSEADDR) == 1);
  CHECK(int_option(listener, SOL_SOCKET, SO_REUSEPORT) == 0);

  // So a second server cannot share the port unnoticed.
  server::Log log(quiet_logger(), server::LogFormat::kText, 0);
  server::HttpServer second(plain(), log);
  webhook::Result<int> again = second.bind({"127.0.0.1", r.port()});
  REQUIRE_FALSE(again.has_value());
  CHECK(contains(again.error().message,
                 "cannot listen on 127.0.0.1:" + std::to_string(r.port()) + ": "));
}

TEST_CASE("accepted sockets are non-blocking with TCP_NODELAY", "[transport]") {
  Running r(plain());
  int fd = connect_to(r.port());
  REQUIRE(get(fd, "/a").ends_with("hi /a"));
  int accepted = find_socket(r.port(), local_port(fd));  // idle on its keep-alive wait
  REQUIRE(accepted >= 0);
  CHECK((fcntl(accepted, F_GETFL, 0) & O_NONBLOCK) != 0);
  CHECK(int_option(accepted, IPPROTO_TCP, TCP_NODELAY) == 1);
  ::close(fd);
}

TEST_CASE("keep-alive: one connection until max_requests_per_connection", "[transport]") {
  server::HttpServerOptions o = plain(5s);
  o.max_requests_per_connection = 3;
  Running r(std::move(o));
  int fd = connect_to(r.port());
  for (int i = 1; i <= 2; ++i) {
    std::string res = get(fd, "/k");
    CAPTURE(i, res);
    CHECK(contains(res, "\r\nKeep-Alive: timeout=5, max=3\r\n"));
    CHECK_FALSE(contains(res, "Connection: close"));
  }
  std::string third = get(fd, "/k");
  CAPTURE(third);
  CHECK(contains(third, "\r\nConnection: close\r\n"));
  CHECK(third.ends_with("hi /k"));
  CHECK(peer_closes(fd));
  ::close(fd);
  CHECK(r.closed(1));
  CHECK(r.opens.load() == 1);
}

TEST_CASE("a request saying Connection: close, or close_after_response, ends the connection",
          "[transport]") {
  Running r(plain());
  int asked = connect_to(r.port());
  std::string res = get(asked, "/c", "Connection: close\r\n");
  CAPTURE(res);
  CHECK(contains(res, "\r\nConnection: close\r\n"));
  CHECK(peer_closes(asked));
  ::close(asked);

  int handler = connect_to(r.port());
  CHECK(get(handler, "/bye").ends_with("hi /bye"));
  CHECK(peer_closes(handler));
  ::close(handler);
}

TEST_CASE("a new connection must send its first request within read_timeout", "[transport]") {
  server::HttpServerOptions o = plain();
  o.limits.read_timeout = 200ms;
  Running r(std::move(o));
  int fd = connect_to(r.port());
  CHECK(peer_closes(fd));
  ::close(fd);
}

TEST_CASE("stop_serving wakes idle keep-alive connections", "[transport]") {
  Running r(plain(60s));
  int fd = connect_to(r.port());
  REQUIRE(get(fd, "/s").ends_with("hi /s"));
  CHECK(r.stop_within(10s));  // not after the 60 s idle timeout
  CHECK(peer_closes(fd));
  ::close(fd);
  int late = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = loopback(r.port());
  CHECK(::connect(late, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0);
  ::close(late);
}

TEST_CASE("with every worker busy, an idle keep-alive connection yields", "[transport]") {
  server::HttpServerOptions o = plain(60s);
  o.max_threads = 1;
  Running r(std::move(o));
  int idle = connect_to(r.port());
  REQUIRE(get(idle, "/1").ends_with("hi /1"));
  int fresh = connect_to(r.port());
  CHECK(get(fresh, "/2").ends_with("hi /2"));  // within 10 s, not after the 60 s idle timeout
  CHECK(peer_closes(idle));
  ::close(idle);
  ::close(fresh);
}

TEST_CASE("TLS connections go through the seam, keep-alive included", "[transport]") {
  auto [cert, key] = self_signed();
  webhook::Result<std::shared_ptr<const server::Identity>> id = server::load_identity(cert, key);
  REQUIRE(id.has_value());
  server::IdentityStore store(*id);
  webhook::Result<server::SslCtxPtr> ctx = server::make_server_context(store);
  REQUIRE(ctx.has_value());
  server::HttpServerOptions o = plain();
  o.ssl_ctx = ctx->get();
  Running r(std::move(o));

  httplib::SSLClient client("127.0.0.1", r.port());
  client.enable_server_certificate_verification(false);
  client.set_keep_alive(true);
  for (const char* path : {"/t1", "/t2"}) {
    httplib::Result res = client.Get(path);
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(res->body == std::string("hi ") + path);
  }
  CHECK(r.opens.load() == 1);
  client.stop();
  CHECK(r.closed(1));
}
