#include "server/connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace server {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kLingerTime = std::chrono::milliseconds(1000);
constexpr std::size_t kLingerBytes = 8 << 20;

void address_of(const sockaddr_storage& addr, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    port = ntohs(a->sin6_port);
  }
  ip = buf;
}

int millis_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) {
    return 0;
  }
  return left.count() > 60'000 ? 60'000 : static_cast<int>(left.count());
}

std::string ssl_failure() {
  unsigned long e = ERR_peek_last_error();
  ERR_clear_error();
  const char* reason = e != 0 ? ERR_reason_error_string(e) : nullptr;
  return reason != nullptr ? reason : "connection closed";
}

}  // namespace

Connection::Connection(int fd, SSL* ssl, ConnectionLimits limits)
    : fd_(fd), ssl_(ssl), limits_(limits), in_(new char[kInBufferBytes]) {
  int flags = fcntl(fd_, F_GETFL, 0);
  fcntl(fd_, F_SETFL, flags | O_NONBLOCK);  // every wait below is a poll() with a deadline
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    address_of(addr, remote_ip_, remote_port_);
  }
  set_deadline(limits_.read_timeout);
}

Connection::~Connection() { close(false); }

void Connection::set_deadline(std::chrono::milliseconds from_now) {
  deadline_ = Clock::now() + from_now;
}

bool Connection::wait(short events) const {
  for (;;) {
    int ms = millis_until(deadline_);
    if (ms == 0) {
      return false;
    }
    pollfd p{fd_, events, 0};
    int r = ::poll(&p, 1, ms);
    if (r > 0) {
      return true;
    }
    if (r < 0 && errno != EINTR) {
      return false;
    }
  }
}

bool Connection::handshake() {
  if (ssl_ == nullptr) {
    return true;
  }
  SSL_set_fd(ssl_, fd_);
  for (;;) {
    ERR_clear_error();
    int r = SSL_accept(ssl_);
    if (r == 1) {
      return true;
    }
    int err = SSL_get_error(ssl_, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      if (!wait(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)) {
        error_ = "TLS handshake timed out";
        failed_ = true;
        return false;
      }
      continue;
    }
    error_ = "TLS handshake failed: " + ssl_failure();
    failed_ = true;
    return false;
  }
}

bool Connection::buffered() const {
  return in_pos_ < in_len_ || (ssl_ != nullptr && SSL_pending(ssl_) > 0);
}

Connection::Ready Connection::wait_for_request(std::span<const int> wake_fds,
                                               std::chrono::milliseconds timeout) {
  if (failed_) {
    return Ready::kClosed;
  }
  if (buffered()) {
    return Ready::kRequest;
  }
  if (!flush()) {
    return Ready::kClosed;
  }
  std::vector<pollfd> fds;
  fds.reserve(1 + wake_fds.size());
  fds.push_back({fd_, POLLIN, 0});
  for (int w : wake_fds) {
    fds.push_back({w, POLLIN, 0});
  }
  Clock::time_point until = Clock::now() + timeout;
  for (;;) {
    int ms = millis_until(until);
    if (ms == 0) {
      return Ready::kTimeout;
    }
    int r = ::poll(fds.data(), fds.size(), ms);
    if (r < 0) {
      if (errno == EINTR) {
        continue;
      }
      return Ready::kClosed;
    }
    if (r == 0) {
      continue;
    }
    if (fds[0].revents != 0) {
      return Ready::kRequest;  // data, or the peer's close that the parser will read as such
    }
    return Ready::kInterrupted;
  }
}

void Connection::start_request() {
  set_deadline(limits_.read_timeout);
  request_bytes_ = 0;
  over_budget_ = false;
}

ssize_t Connection::raw_read(char* buf, std::size_t len) {
  for (;;) {
    if (ssl_ != nullptr) {
      ERR_clear_error();
      int r = SSL_read(ssl_, buf, static_cast<int>(len));
      if (r > 0) {
        return r;
      }
      int err = SSL_get_error(ssl_, r);
      if (err == SSL_ERROR_ZERO_RETURN) {
        return 0;
      }
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        if (!wait(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)) {
          error_ = "read timed out";
          timed_out_ = true;
          return -1;
        }
        continue;
      }
      error_ = "TLS read failed: " + ssl_failure();
      failed_ = true;
      return -1;
    }
    ssize_t r = ::recv(fd_, buf, len, 0);
    if (r >= 0) {
      return r;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait(POLLIN)) {
        error_ = "read timed out";
        timed_out_ = true;
        return -1;
      }
      continue;
    }
    error_ = std::string("read failed: ") + std::strerror(errno);
    failed_ = true;
    return -1;
  }
}

ssize_t Connection::raw_write(const char* buf, std::size_t len) {
  for (;;) {
    if (ssl_ != nullptr) {
      ERR_clear_error();
      int r = SSL_write(ssl_, buf, static_cast<int>(len));
      if (r > 0) {
        return r;
      }
      int err = SSL_get_error(ssl_, r);
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        if (!wait(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)) {
          error_ = "write timed out";
          return -1;
        }
        continue;
      }
      error_ = "TLS write failed: " + ssl_failure();
      failed_ = true;
      return -1;
    }
    ssize_t r = ::send(fd_, buf, len, MSG_NOSIGNAL);
    if (r >= 0) {
      return r;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait(POLLOUT)) {
        error_ = "write timed out";
        return -1;
      }
      continue;
    }
    error_ = std::string("write failed: ") + std::strerror(errno);
    failed_ = true;
    return -1;
  }
}

bool Connection::is_readable() const { return buffered() || wait(POLLIN); }

bool Connection::is_writable() const { return !failed_; }

ssize_t Connection::read(char* ptr, size_t size) {
  if (size == 0) {
    return 0;
  }
  if (in_pos_ >= in_len_) {
    if (!out_.empty() && !flush()) {  // e.g. "100 Continue" must leave before the body arrives
      return -1;
    }
    in_pos_ = 0;
    ssize_t n = raw_read(in_.get(), kInBufferBytes);
    in_len_ = n > 0 ? static_cast<std::size_t>(n) : 0;
    if (n <= 0) {
      return n;
    }
  }
  std::size_t n = std::min(size, in_len_ - in_pos_);
  request_bytes_ += n;
  if (request_bytes_ > limits_.max_request_bytes) {
    over_budget_ = true;
    error_ = "request larger than the limit";
    return -1;
  }
  std::memcpy(ptr, in_.get() + in_pos_, n);
  in_pos_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t Connection::write(const char* ptr, size_t size) {
  if (failed_) {
    return -1;
  }
  out_.append(ptr, size);
  if (out_.size() >= kFlushBytes && !flush()) {
    return -1;
  }
  return static_cast<ssize_t>(size);
}

bool Connection::flush() {
  if (out_.empty()) {
    return !failed_;
  }
  if (failed_) {
    return false;
  }
  // A response may be written after the request's deadline passed (a slow handler); give the
  // client read_timeout to take it.
  if (Clock::now() >= deadline_) {
    set_deadline(limits_.read_timeout);
  }
  std::size_t off = 0;
  while (off < out_.size()) {
    ssize_t n = raw_write(out_.data() + off, out_.size() - off);
    if (n <= 0) {
      failed_ = true;
      out_.clear();
      return false;
    }
    off += static_cast<std::size_t>(n);
  }
  out_.clear();
  return true;
}

void Connection::get_remote_ip_and_port(std::string& ip, int& port) const {
  ip = remote_ip_;
  port = remote_port_;
}

void Connection::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    address_of(addr, ip, port);
  }
}

void Connection::close(bool linger) {
  if (closed_) {
    return;
  }
  closed_ = true;
  if (!failed_) {
    flush();
  }
  if (ssl_ != nullptr) {
    if (!failed_) {
      ERR_clear_error();
      SSL_shutdown(ssl_);  // one close_notify; the peer's answer is not awaited
    }
    ERR_clear_error();
    SSL_free(ssl_);
    ssl_ = nullptr;
  }
  if (linger && !failed_) {
    ::shutdown(fd_, SHUT_WR);
    deadline_ = Clock::now() + kLingerTime;
    char sink[16 * 1024];
    std::size_t drained = 0;
    while (drained < kLingerBytes && wait(POLLIN)) {
      ssize_t n = ::recv(fd_, sink, sizeof(sink), 0);
      if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN))) {
        break;
      }
      drained += n > 0 ? static_cast<std::size_t>(n) : 0;
    }
  }
  ::shutdown(fd_, SHUT_RDWR);
  ::close(fd_);
}

}  // namespace server
