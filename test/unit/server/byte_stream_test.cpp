// server::ByteStream over sockets on 127.0.0.1: reads and the peer's end, a write larger than the
// socket's buffers, the deadline (what it fails, and that a later one replaces a sooner one),
// interrupt(), and TLS: a handshake, data both ways, close_notify, and a client that does not
// speak TLS. Each case runs its event loop for at most 20 s, so none can hang.
#include "server/byte_stream.h"

#include <openssl/err.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>

#include "server/tls.h"
#include "test_pem.h"

namespace {

using namespace std::chrono_literals;
using server::ByteStream;
using server::Io;
using Clock = ByteStream::Clock;
using Tcp = asio::ip::tcp;

// A connected pair on one event loop: the client's socket and the server's ByteStream.
struct Pair {
  explicit Pair(SSL_CTX* ctx = nullptr) : client(io) {
    Tcp::acceptor acceptor(io, Tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    client.connect(acceptor.local_endpoint());
    stream = std::make_unique<ByteStream>(acceptor.accept(), ctx);
  }
  // Runs the coroutine `server_side` returns (and `client_side`'s) to their ends. The lambdas
  // are kept here meanwhile: their coroutines read the captures through them.
  template <class Server, class Client = std::nullptr_t>
  void run(Server server_side, Client client_side = nullptr) {
    asio::co_spawn(io, server_side(), [this](const std::exception_ptr&) {
      done = true;
      stream->close();  // as a connection ends: the deadline's timer stops
    });
    if constexpr (!std::is_same_v<Client, std::nullptr_t>) {
      asio::co_spawn(io, client_side(), asio::detached);
    }
    io.run_for(20s);
  }
  asio::io_context io;
  Tcp::socket client;
  std::unique_ptr<ByteStream> stream;
  bool done = false;
};

asio::awaitable<void> pause(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

TEST_CASE("a read takes what arrived, then the peer's end", "[byte_stream]") {
  Pair p;
  REQUIRE(p.stream->ok());
  asio::write(p.client, asio::buffer(std::string("hello")));
  p.client.shutdown(Tcp::socket::shutdown_send);
  std::string got;
  Io first = Io::kError;
  Io second = Io::kOk;
  p.run([&]() -> asio::awaitable<void> {
    CHECK(co_await p.stream->handshake());  // plain TCP: nothing to do
    char buf[64];
    std::size_t n = 0;
    first = co_await p.stream->read_some(buf, sizeof(buf), n);
    got.assign(buf, n);
    second = co_await p.stream->read_some(buf, sizeof(buf), n);
  });
  REQUIRE(p.done);
  CHECK(first == Io::kOk);
  CHECK(got == "hello");
  CHECK(second == Io::kEof);
}

TEST_CASE("write_all sends more than the socket holds, waiting for the reader", "[byte_stream]") {
  Pair p;
  std::string data(std::size_t{8} << 20, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<char>('a' + i % 26);
  }
  bool written = false;
  std::string received;
  p.run(
      [&]() -> asio::awaitable<void> {
        written = co_await p.stream->write_all(data);
        p.stream->shutdown_send();
      },
      [&]() -> asio::awaitable<void> {
        char buf[65536];
        for (;;) {
          std::error_code ec;
          std::size_t n = co_await p.client.async_read_some(
              asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
          received.append(buf, n);
          if (ec) {
            co_return;
          }
        }
      });
  REQUIRE(p.done);
  CHECK(written);
  CHECK(received.size() == data.size());
  CHECK(received == data);
}

TEST_CASE("a deadline fails the wait in progress and says so until the next one", "[byte_stream]") {
  Pair p;
  Io late = Io::kOk;
  bool expired = false;
  bool expired_after_next = true;
  Io next = Io::kError;
  Clock::duration waited{};
  p.run([&]() -> asio::awaitable<void> {
    char buf[16];
    std::size_t n = 0;
    Clock::time_point start = Clock::now();
    p.stream->expires_at(start + 50ms);
    late = co_await p.stream->read_some(buf, sizeof(buf), n);
    waited = Clock::now() - start;
    expired = p.stream->expired();
    p.stream->expires_at(Clock::now() + 10s);
    expired_after_next = p.stream->expired();
    asio::write(p.client, asio::buffer(std::string("x")));
    next = co_await p.stream->read_some(buf, sizeof(buf), n);
  });
  REQUIRE(p.done);
  CHECK(late == Io::kError);
  CHECK(expired);
  CHECK(waited >= 50ms);
  CHECK_FALSE(expired_after_next);
  CHECK(next == Io::kOk);
}

TEST_CASE("a later deadline replaces a sooner one", "[byte_stream]") {
  Pair p;
  Io io = Io::kError;
  std::string got;
  p.run(
      [&]() -> asio::awaitable<void> {
        p.stream->expires_at(Clock::now() + 30ms);
        p.stream->expires_at(Clock::now() + 10s);  // the timer still watches 30 ms
        char buf[16];
        std::size_t n = 0;
        io = co_await p.stream->read_some(buf, sizeof(buf), n);
        got.assign(buf, n);
      },
      [&]() -> asio::awaitable<void> {
        co_await pause(200ms);  // past the first deadline
        co_await asio::async_write(p.client, asio::buffer(std::string("late")),
                                   asio::use_awaitable);
      });
  REQUIRE(p.done);
  CHECK(io == Io::kOk);
  CHECK(got == "late");
  CHECK_FALSE(p.stream->expired());
}

TEST_CASE("a deadline set after close() watches nothing", "[byte_stream]") {
  // A connection's stop handler can run after the connection ended: the deadline it sets must
  // not arm a timer that reaches back for the closed socket.
  Pair p;
  p.stream->close();
  p.stream->expires_at(Clock::now() + 5ms);
  p.io.run_for(200ms);  // a timer armed above would fire here
  CHECK_FALSE(p.stream->expired());
  CHECK(p.io.stopped());  // nothing was left waiting
}

TEST_CASE("interrupt() fails the wait in progress and every later wait", "[byte_stream]") {
  Pair p;
  Io io = Io::kOk;
  bool wrote = true;
  p.run(
      [&]() -> asio::awaitable<void> {
        char buf[16];
        std::size_t n = 0;
        io = co_await p.stream->read_some(buf, sizeof(buf), n);
        Io again = co_await p.stream->read_some(buf, sizeof(buf), n);  // no deadline, no wait
        CHECK(again == Io::kError);
        std::string big(std::size_t{16} << 20, 'x');  // more than the socket takes at once
        wrote = co_await p.stream->write_all(big);
      },
      [&]() -> asio::awaitable<void> {
        co_await pause(20ms);
        p.stream->interrupt();
      });
  REQUIRE(p.done);
  CHECK(io == Io::kError);
  CHECK_FALSE(p.stream->expired());
  CHECK_FALSE(wrote);
}

// A TLS server context whose identity is a fresh self-signed certificate.
struct TlsServer {
  TlsServer()
      : pem(server_test::make_pem("webhook")), store(*server::load_identity(pem.cert, pem.key)) {
    auto made = server::make_server_context(store);
    REQUIRE(made.has_value());
    ctx = std::move(*made);
  }
  server_test::Pem pem;
  server::IdentityStore store;
  server::SslCtxPtr ctx;
};

TEST_CASE("TLS: handshake, data both ways, close_notify, then the peer's close", "[byte_stream]") {
  TlsServer tls;
  Pair p(tls.ctx.get());
  REQUIRE(p.stream->ok());
  // The client: blocking OpenSSL on its own thread, on a duplicate of the client's descriptor.
  int fd = ::dup(p.client.native_handle());
  std::string client_got;
  int client_end = 0;
  std::thread client([&] {
    SSL_CTX* cctx = SSL_CTX_new(TLS_client_method());
    SSL* ssl = SSL_new(cctx);
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) == 1) {
      SSL_write(ssl, "ping", 4);
      char buf[16];
      int n = SSL_read(ssl, buf, sizeof(buf));
      client_got.assign(buf, static_cast<std::size_t>(std::max(n, 0)));
      n = SSL_read(ssl, buf, sizeof(buf));
      client_end = SSL_get_error(ssl, n);  // the server's close_notify
    }
    SSL_free(ssl);
    SSL_CTX_free(cctx);
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
  });
  bool shaken = false;
  std::string got;
  bool wrote = false;
  bool drained = false;
  p.run([&]() -> asio::awaitable<void> {
    p.stream->expires_at(Clock::now() + 10s);
    shaken = co_await p.stream->handshake();
    char buf[16];
    std::size_t n = 0;
    Io io = co_await p.stream->read_some(buf, sizeof(buf), n);
    got.assign(buf, io == Io::kOk ? n : 0);
    wrote = co_await p.stream->write_all("pong");
    p.stream->shutdown_send();
    co_await p.stream->discard_until_closed(buf, sizeof(buf));
    drained = !p.stream->expired();
  });
  client.join();
  REQUIRE(p.done);
  CHECK(shaken);
  CHECK(got == "ping");
  CHECK(wrote);
  CHECK(client_got == "pong");
  CHECK(client_end == SSL_ERROR_ZERO_RETURN);
  CHECK(drained);
}

TEST_CASE("TLS: a client that sends plain HTTP fails the handshake at once", "[byte_stream]") {
  TlsServer tls;
  Pair p(tls.ctx.get());
  asio::write(p.client, asio::buffer(std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n")));
  bool shaken = true;
  p.run([&]() -> asio::awaitable<void> {
    p.stream->expires_at(Clock::now() + 10s);
    shaken = co_await p.stream->handshake();
  });
  ERR_clear_error();
  REQUIRE(p.done);
  CHECK_FALSE(shaken);
  CHECK_FALSE(p.stream->expired());
}

}  // namespace
