// tls-memory: what a connection's stream keeps while its client is silent, for the transport's
// server::ByteStream and for Asio's asio::ssl::stream<tcp::socket>, both on the server's own
// SSL_CTX (server::make_server_context, SSL_MODE_RELEASE_BUFFERS set). For each kind, N
// connections on 127.0.0.1 are accepted and left silent (measured), then each makes a TLS
// handshake and its server side waits for a request (measured again). Each kind runs in a process
// of its own, whose clients run in a child process of theirs: the resident memory it reports
// grew only by what the server side keeps (its stream, its socket, a coroutine frame).
//
//   tls-memory CERT KEY [N]     N connections per kind (default 1000, at most 20000)
//
// Prints, per kind, the growth of the process's VmRSS (/proc/self/status) divided by N. Exit 0
// when both kinds were measured; 1 when one could not be (one line on stderr); 2 on bad arguments.
// bench/tls_memory.sh makes the certificate and runs it.
#include <openssl/ssl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <asio.hpp>
#include <asio/ssl.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "server/byte_stream.h"
#include "server/tls.h"

namespace {

using Tcp = asio::ip::tcp;
constexpr int kMaxConnections = 20000;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "tls-memory: %s\n", what.c_str());
  std::_Exit(1);
}

long rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::stol(line.substr(6));
    }
  }
  fail("no VmRSS in /proc/self/status");
}

std::string read_file(const char* path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    fail(std::string("cannot read ") + path);
  }
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// One byte over a pipe: the client and the server step through the phases together.
void send_byte(int fd, char c) {
  if (write(fd, &c, 1) != 1) {
    fail("the pipe between server and clients broke");
  }
}
char receive_byte(int fd) {
  char c = 0;
  if (read(fd, &c, 1) != 1) {
    fail("the clients ended early (see above)");
  }
  return c;
}

// The clients, in a process of their own: N blocking connections, then on 'h' a TLS handshake on
// each (no certificate check: the server's memory is what is measured), then held until 's'.
[[noreturn]] void run_clients(int port, int n, int to_server, int from_server) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(static_cast<std::uint16_t>(port));
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0) {
      fail("connection " + std::to_string(i) + " to 127.0.0.1 failed");
    }
    fds.push_back(fd);
  }
  send_byte(to_server, 'c');
  receive_byte(from_server);
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  std::vector<SSL*> sessions;  // held open until the process ends
  for (int fd : fds) {
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) != 1) {
      fail("a client's TLS handshake failed");
    }
    sessions.push_back(ssl);
  }
  send_byte(to_server, 'h');
  receive_byte(from_server);
  std::_Exit(0);
}

// What differs between the two kinds: the stream made of an accepted socket, its handshake, and
// a read that waits (into a buffer shared by every connection, as the transport's reads share one
// per thread).
struct OwnStream {
  using Stream = server::ByteStream;
  static constexpr std::string_view kName = "server::ByteStream";
  explicit OwnStream(SSL_CTX* server_ctx) : ctx(server_ctx) {}
  std::unique_ptr<Stream> make(Tcp::socket socket) {
    return std::make_unique<Stream>(std::move(socket), ctx);
  }
  static asio::awaitable<bool> handshake(Stream& s) { return s.handshake(); }
  static asio::awaitable<void> wait_to_read(Stream& s, std::span<char> buffer) {
    std::size_t got = 0;
    co_await s.read_some(buffer.data(), buffer.size(), got);
  }
  SSL_CTX* ctx;
};

// `ctx` with a reference taken for an owner that frees it (asio::ssl::context does).
SSL_CTX* with_reference(SSL_CTX* ctx) {
  SSL_CTX_up_ref(ctx);
  return ctx;
}

struct AsioStream {
  using Stream = asio::ssl::stream<Tcp::socket>;
  static constexpr std::string_view kName = "asio::ssl::stream";
  explicit AsioStream(SSL_CTX* server_ctx) : ctx(with_reference(server_ctx)) {}
  std::unique_ptr<Stream> make(Tcp::socket socket) {
    return std::make_unique<Stream>(std::move(socket), ctx);
  }
  static asio::awaitable<bool> handshake(Stream& s) {
    std::error_code ec;
    co_await s.async_handshake(asio::ssl::stream_base::server,
                               asio::redirect_error(asio::use_awaitable, ec));
    co_return !ec;
  }
  static asio::awaitable<void> wait_to_read(Stream& s, std::span<char> buffer) {
    std::error_code ec;
    co_await s.async_read_some(asio::buffer(buffer.data(), buffer.size()),
                               asio::redirect_error(asio::use_awaitable, ec));
  }
  asio::ssl::context ctx;  // frees its reference
};

// Measures one kind in this process and prints its line.
template <class Kind>
void measure(SSL_CTX* ctx, int n) {
  asio::io_context io(1);
  Tcp::acceptor acceptor(io, Tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  acceptor.listen(4096);
  int to_server[2];
  int from_server[2];
  if (pipe(to_server) != 0 || pipe(from_server) != 0) {
    fail("cannot make a pipe");
  }
  pid_t clients = fork();
  if (clients < 0) {
    fail("cannot fork the clients");
  }
  if (clients == 0) {
    run_clients(acceptor.local_endpoint().port(), n, to_server[1], from_server[0]);
  }
  Kind kind(ctx);
  std::vector<std::unique_ptr<typename Kind::Stream>> streams;
  streams.reserve(static_cast<std::size_t>(n));
  std::array<char, 4096> buffer{};
  long base = rss_kib();
  for (int i = 0; i < n; ++i) {
    streams.push_back(kind.make(acceptor.accept()));
  }
  receive_byte(to_server[0]);
  long silent = rss_kib();
  int handshaken = 0;
  int failed = 0;
  for (int i = 0; i < n; ++i) {
    asio::co_spawn(
        io,
        [&, i]() -> asio::awaitable<void> {
          auto& stream = *streams[static_cast<std::size_t>(i)];
          if (!co_await Kind::handshake(stream)) {
            ++failed;
            co_return;
          }
          ++handshaken;
          co_await Kind::wait_to_read(stream, buffer);  // idle: the state measured
        },
        asio::detached);
  }
  send_byte(from_server[1], 'h');
  while (handshaken + failed < n && io.run_one() > 0) {
  }
  if (failed > 0) {
    fail(std::string(Kind::kName) + ": " + std::to_string(failed) + " handshakes failed");
  }
  receive_byte(to_server[0]);
  long idle = rss_kib();
  std::printf("%-20s %10.1f %14.1f   (%d connections)\n", std::string(Kind::kName).c_str(),
              static_cast<double>(silent - base) / n, static_cast<double>(idle - base) / n, n);
  std::fflush(stdout);
  send_byte(from_server[1], 's');
  int status = 0;
  waitpid(clients, &status, 0);
  std::_Exit(WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1);
}

// Runs `measure<Kind>` in a child process; false when it failed.
template <class Kind>
bool measured_apart(SSL_CTX* ctx, int n) {
  pid_t child = fork();
  if (child == 0) {
    measure<Kind>(ctx, n);
  }
  int status = 0;
  return child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 1000;
  if (argc < 3 || argc > 4 ||
      (argc == 4 && (std::atoi(argv[3]) < 1 || std::atoi(argv[3]) > kMaxConnections))) {
    std::fprintf(stderr, "usage: tls-memory CERT KEY [N]   (N connections per kind, 1 to %d)\n",
                 kMaxConnections);
    return 2;
  }
  if (argc == 4) {
    n = std::atoi(argv[3]);
  }
  // Each process holds N sockets (the server its accepted ones, the clients theirs).
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur < static_cast<rlim_t>(n) + 64) {
    fail("N=" + std::to_string(n) + " needs " + std::to_string(n + 64) +
         " open files per process; ulimit -n allows " + std::to_string(files.rlim_cur));
  }
  auto identity = server::load_identity(read_file(argv[1]), read_file(argv[2]));
  if (!identity) {
    fail(identity.error().message);
  }
  server::IdentityStore store(*identity);
  auto ctx = server::make_server_context(store);
  if (!ctx) {
    fail(ctx.error().message);
  }
  std::printf("what each connection adds to the server's resident memory, KiB (Asio %d.%d.%d):\n",
              ASIO_VERSION / 100000, ASIO_VERSION / 100 % 1000, ASIO_VERSION % 100);
  std::printf("%-20s %10s %14s\n", "stream", "silent", "idle after TLS");
  std::fflush(stdout);
  bool ok = measured_apart<OwnStream>(ctx->get(), n) && measured_apart<AsioStream>(ctx->get(), n);
  return ok ? 0 : 1;
}
