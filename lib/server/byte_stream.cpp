#include "server/byte_stream.h"

#include <openssl/err.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

namespace server {

ByteStream::ByteStream(Tcp::socket socket, SSL_CTX* ctx)
    : socket_(std::move(socket)),
      ctx_(ctx),
      watch_(std::make_shared<Watch>(socket_.get_executor())) {
  watch_->socket = &socket_;
  std::error_code ec;
  socket_.set_option(Tcp::no_delay(true), ec);
  socket_.native_non_blocking(true, ec);
  ok_ = !ec;
}

ByteStream::~ByteStream() {
  if (watch_->socket != nullptr) {  // close() has not run: the timer's wait must not reach back
    close();
  }
  if (ssl_ != nullptr) {
    SSL_free(ssl_);
  }
}

// --- The deadline: one timer, moved only when a deadline comes sooner.

void ByteStream::expires_at(Clock::time_point t) {
  watch_->deadline = t;
  watch_->expired = false;
  if (watch_->socket == nullptr) {
    return;  // closed: no timer may reach back for the socket
  }
  if (!watch_->armed || t < watch_->timer.expiry()) {
    arm();
  }
}

void ByteStream::arm() {
  watch_->armed = true;
  watch_->timer.expires_at(watch_->deadline);  // a wait for a later expiry completes as cancelled
  watch_->timer.async_wait([w = watch_](const std::error_code& ec) { on_timer(w, ec); });
}

void ByteStream::on_timer(const std::shared_ptr<Watch>& w, const std::error_code& ec) {
  if (ec == asio::error::operation_aborted || !w->armed || w->timer.expiry() > Clock::now()) {
    return;  // superseded by a sooner deadline, or the stream is gone
  }
  if (w->deadline > Clock::now()) {  // the deadline moved later meanwhile
    w->timer.expires_at(w->deadline);
    w->timer.async_wait([w](const std::error_code& e) { on_timer(w, e); });
    return;
  }
  w->armed = false;
  w->expired = true;
  std::error_code ignored;
  w->socket->cancel(ignored);
}

void ByteStream::interrupt() {
  interrupted_ = true;
  std::error_code ec;
  socket_.cancel(ec);
}

// --- Non-blocking steps, and the loop that waits between them.

ByteStream::Step ByteStream::ssl_step(int r) {
  int e = SSL_get_error(ssl_, r);
  Step out = Step::kError;
  if (e == SSL_ERROR_WANT_READ) {
    out = Step::kWantRead;
  } else if (e == SSL_ERROR_WANT_WRITE) {
    out = Step::kWantWrite;
  } else if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0)) {
    out = Step::kEof;
  }
  ERR_clear_error();
  return out;
}

namespace {
bool would_block() { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR; }
}  // namespace

ByteStream::Step ByteStream::read_step(bool raw, char* buf, std::size_t len, std::size_t& got,
                                       int recv_flags) {
  got = 0;
  if (ssl_ != nullptr && !raw) {
    int r = SSL_read(ssl_, buf, static_cast<int>(std::min<std::size_t>(len, 1 << 30)));
    got = r > 0 ? static_cast<std::size_t>(r) : 0;
    return r > 0 ? Step::kOk : ssl_step(r);
  }
  ssize_t r = ::recv(socket_.native_handle(), buf, len, recv_flags);
  got = r > 0 ? static_cast<std::size_t>(r) : 0;
  if (r >= 0) {
    return r > 0 ? Step::kOk : Step::kEof;
  }
  return would_block() ? Step::kWantRead : Step::kError;
}

ByteStream::Step ByteStream::write_step(std::string_view data, std::size_t& put) {
  put = 0;
  if (ssl_ != nullptr) {
    int r =
        SSL_write(ssl_, data.data(), static_cast<int>(std::min<std::size_t>(data.size(), 1 << 30)));
    put = r > 0 ? static_cast<std::size_t>(r) : 0;
    return r > 0 ? Step::kOk : ssl_step(r);
  }
  ssize_t r = ::send(socket_.native_handle(), data.data(), data.size(), MSG_NOSIGNAL);
  put = r > 0 ? static_cast<std::size_t>(r) : 0;
  if (r >= 0) {
    return Step::kOk;
  }
  return would_block() ? Step::kWantWrite : Step::kError;
}

// kOk, kEof or kError (also when the socket failed, the deadline passed or the stream was
// interrupted).
template <class F>
asio::awaitable<Io> ByteStream::until_done(F step) {
  for (;;) {
    Step s = ok_ ? step() : Step::kError;
    if (s == Step::kOk || s == Step::kEof) {
      co_return s == Step::kOk ? Io::kOk : Io::kEof;
    }
    if (s == Step::kError || watch_->expired || interrupted_) {
      co_return Io::kError;
    }
    std::error_code ec;
    auto what = s == Step::kWantRead ? Tcp::socket::wait_read : Tcp::socket::wait_write;
    co_await socket_.async_wait(what, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || watch_->expired || interrupted_) {
      co_return Io::kError;
    }
  }
}

// The TLS session is made once the client's first bytes are there: until then a connection
// holds no OpenSSL state (about 8 KiB) nor the read buffer a handshake waits with (17 KiB).
asio::awaitable<bool> ByteStream::handshake() {
  if (ctx_ == nullptr) {
    co_return ok_;
  }
  Io io = co_await until_done([this] {  // tried before waiting: a readiness edge may be past
    char first = 0;
    std::size_t got = 0;
    return read_step(true, &first, 1, got, MSG_PEEK);
  });
  if (io != Io::kOk) {
    co_return false;
  }
  ssl_ = SSL_new(ctx_);
  bool made = ssl_ != nullptr && SSL_set_fd(ssl_, socket_.native_handle()) == 1;
  ERR_clear_error();
  if (!made) {
    co_return false;
  }
  SSL_set_accept_state(ssl_);
  io = co_await until_done([this] {
    int r = SSL_do_handshake(ssl_);
    return r == 1 ? Step::kOk : ssl_step(r);
  });
  co_return io == Io::kOk;
}

// Not a coroutine itself: the read's one frame is until_done's.
asio::awaitable<Io> ByteStream::read_some(char* buf, std::size_t len, std::size_t& got) {
  return until_done([this, buf, len, &got] { return read_step(false, buf, len, got); });
}

asio::awaitable<bool> ByteStream::write_all(std::string_view data) {
  while (!data.empty()) {
    std::size_t put = 0;
    Io io = co_await until_done([&] { return write_step(data, put); });
    if (io != Io::kOk) {
      co_return false;
    }
    data.remove_prefix(put);
  }
  co_return true;
}

void ByteStream::shutdown_send() {
  if (ssl_ != nullptr) {
    SSL_shutdown(ssl_);  // close_notify, best effort
    ERR_clear_error();
  }
  std::error_code ec;
  socket_.shutdown(Tcp::socket::shutdown_send, ec);
}

// A read that finds bytes does not wait, so the timer cannot end this loop while the client keeps
// the socket readable: the loop reads the clock itself, and lets the loop's other connections run
// between reads.
asio::awaitable<void> ByteStream::discard_until_closed(char* buf, std::size_t len) {
  Io io = Io::kOk;
  while (io == Io::kOk && !interrupted_ && Clock::now() < watch_->deadline) {
    std::size_t got = 0;
    io = co_await until_done([&] { return read_step(true, buf, len, got); });
    co_await asio::post(socket_.get_executor(), asio::use_awaitable);
  }
}

void ByteStream::close() {
  watch_->armed = false;
  watch_->socket = nullptr;
  watch_->timer.cancel();
  std::error_code ec;
  socket_.close(ec);
}

}  // namespace server
