#include "server/http_server.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

namespace server {
namespace {

constexpr int kBacklog = 1024;

// httplib's task queue, one task per connection: threads start on demand up to `max`; when all
// are busy a task waits and `pressure` is raised (idle keep-alive connections watch it and give
// their worker up) until the queue is empty again.
class WorkerPool final : public httplib::TaskQueue {
 public:
  WorkerPool(int max_threads, const WakeFd& pressure)
      : max_(static_cast<std::size_t>(max_threads)), pressure_(pressure) {}

  void enqueue(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(fn));
    if (idle_ >= jobs_.size()) {
      cv_.notify_one();
    } else if (threads_.size() < max_) {
      threads_.emplace_back([this] { work(); });
    } else if (!pressured_) {
      pressured_ = true;
      pressure_.raise();
    }
  }

  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutdown_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) {
      t.join();
    }
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [this] { return !jobs_.empty() || shutdown_; });
      --idle_;
      if (jobs_.empty()) {
        return;  // shutting down
      }
      std::function<void()> fn = std::move(jobs_.front());
      jobs_.pop_front();
      if (jobs_.empty() && pressured_) {
        pressured_ = false;
        pressure_.clear();
      }
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  const std::size_t max_;
  const WakeFd& pressure_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  std::size_t idle_ = 0;
  bool shutdown_ = false;
  bool pressured_ = false;
};

void reuse_address(socket_t sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

}  // namespace

WakeFd::WakeFd() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
WakeFd::~WakeFd() { ::close(fd_); }
void WakeFd::raise() const {
  std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(fd_, &one, sizeof(one));
}
void WakeFd::clear() const {
  std::uint64_t value = 0;
  [[maybe_unused]] ssize_t n = ::read(fd_, &value, sizeof(value));
}

// What a route handler on this thread asked of the connection it runs on.
struct HttpServer::HandlerRequests {
  bool close = false;
  bool linger = false;
  const Connection* conn = nullptr;
};

thread_local HttpServer::HandlerRequests* HttpServer::current_requests_ = nullptr;

HttpServer::HttpServer(HttpServerOptions options, const Log& log)
    : options_(std::move(options)), log_(log) {
  new_task_queue = [this] { return new WorkerPool(options_.max_threads, pressure_fd_); };
  // Accepted sockets inherit TCP_NODELAY from the listener.
  set_tcp_nodelay(true);
  // Instead of httplib's default (SO_REUSEPORT). httplib calls this on each socket it is about
  // to bind; bind() raises the backlog of the one it listens on.
  set_socket_options([this](socket_t sock) {
    reuse_address(sock);
    bound_socket_ = sock;
  });
  // Only for the Keep-Alive header httplib writes; the loop below enforces both limits.
  set_keep_alive_max_count(static_cast<std::size_t>(options_.max_requests_per_connection));
  set_keep_alive_timeout(
      std::chrono::duration_cast<std::chrono::seconds>(options_.idle_timeout).count());
}

HttpServer::~HttpServer() = default;

webhook::Result<int> HttpServer::bind(const ListenAddress& address) {
  std::vector<std::string> hosts = {address.host};
  if (address.host.empty()) {
    hosts = {"::", "0.0.0.0"};  // dual stack when the host has IPv6
  }
  int port = -1;
  int saved_errno = 0;
  for (const std::string& host : hosts) {
    errno = 0;
    bound_socket_ = INVALID_SOCKET;
    port = address.port == 0 ? bind_to_any_port(host)
                             : (bind_to_port(host, address.port) ? address.port : -1);
    saved_errno = errno;
    if (port > 0) {
      break;
    }
  }
  if (port <= 0) {
    return webhook::Error{
        webhook::ErrorCode::kUnavailable,
        "cannot listen on " + address.text() + ": " +
            (saved_errno != 0 ? std::strerror(saved_errno) : "the address is not usable") +
            " (is another process using the port?)"};
  }
  // httplib 0.11 listens with a backlog of 5; listen() again on the listening socket raises it.
  ::listen(bound_socket_, kBacklog);
  return port;
}

void HttpServer::serve() {
  serving_ = true;
  if (!stopping_) {
    listen_after_bind();
  }
}

void HttpServer::stop_serving() {
  if (stopping_.exchange(true)) {
    return;
  }
  stop_fd_.raise();
  // httplib's stop() only acts once its accept loop runs.
  for (int i = 0; i < 2000 && serving_ && !is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop();
}

void HttpServer::close_after_response(bool unread_body) {
  if (current_requests_ != nullptr) {
    current_requests_->close = true;
    current_requests_->linger = current_requests_->linger || unread_body;
  }
}

bool HttpServer::request_timed_out() {
  return current_requests_ != nullptr && current_requests_->conn != nullptr &&
         current_requests_->conn->timed_out();
}

// The transport seam (see http_server.h): the only override of httplib internals.
bool HttpServer::process_and_close_socket(socket_t sock) {
  serve_connection(sock);
  return true;  // httplib's accept loop ignores it
}

void HttpServer::serve_connection(socket_t sock) {
  if (options_.on_connection_open) {
    options_.on_connection_open();
  }
  SSL* ssl = options_.ssl_ctx != nullptr ? SSL_new(options_.ssl_ctx) : nullptr;
  Connection conn(sock, ssl, options_.limits);
  HandlerRequests requests;
  struct Scope {  // route handlers on this thread reach `requests` through current_requests_
    explicit Scope(HandlerRequests& r) { current_requests_ = &r; }
    ~Scope() { current_requests_ = nullptr; }
  } scope(requests);
  std::string why;
  int served = 0;
  if ((options_.ssl_ctx == nullptr || ssl != nullptr) && conn.handshake()) {
    why = serve_requests(conn, requests, served);
  } else {
    why = conn.error();
  }
  log_closed(conn, served, why);
  conn.close(requests.linger);
  if (options_.on_connection_close) {
    options_.on_connection_close();
  }
}

std::string HttpServer::serve_requests(Connection& conn, HandlerRequests& requests, int& served) {
  for (;;) {
    Connection::Ready ready = await_request(conn, served);
    if (ready != Connection::Ready::kRequest) {
      return ready == Connection::Ready::kTimeout       ? "idle"
             : ready == Connection::Ready::kInterrupted ? (stopping_ ? "stopping" : "yielded")
                                                        : conn.error();
    }
    conn.start_request();
    bool last = stopping_ || served + 1 >= options_.max_requests_per_connection;
    bool connection_closed = false;  // the request said "Connection: close" (or was HTTP/1.0)
    requests = {};
    requests.conn = &conn;
    bool ok = process_request(conn, last, connection_closed, nullptr);
    ok = conn.flush() && ok;
    served += ok ? 1 : 0;
    // A timed-out request was answered (408) but ends its connection.
    if (!ok || conn.timed_out()) {
      return conn.over_budget() ? "request over the size limit" : conn.error();
    }
    if (connection_closed || last || requests.close) {
      return "";
    }
  }
}

Connection::Ready HttpServer::await_request(Connection& conn, int served) {
  // A new connection must send its first request within read_timeout (even while stopping: it
  // was accepted, so it is answered once); later, an idle connection waits up to idle_timeout
  // and gives way to stop_serving() and to connections waiting for a worker.
  if (served == 0) {
    return conn.wait_for_request({}, options_.limits.read_timeout);
  }
  const int wake[] = {stop_fd_.fd(), pressure_fd_.fd()};
  return conn.wait_for_request(wake, options_.idle_timeout);
}

void HttpServer::log_closed(const Connection& conn, int served, const std::string& why) const {
  if (!log_.enabled(1)) {
    return;
  }
  std::string ip;
  int port = 0;
  conn.get_remote_ip_and_port(ip, port);
  log_.debug(1, "connection closed",
             {{"remote", ip + ":" + std::to_string(port)},
              {"requests", served},
              {"reason", why.empty() ? std::string("done") : why}});
}

}  // namespace server
