#include "server/server.h"

#include <algorithm>

namespace server {
namespace {

using namespace std::chrono_literals;

constexpr int kHealthThreads = 8;

std::string iso_time(std::int64_t unix_seconds) {
  auto t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Reads a request body through httplib's content reader, keeping at most max_body_bytes (a
// prefix of 64 KiB when the declared length is already too large: enough for the uid).
struct BodyRead {
  std::string body;
  bool too_large = false;
  bool incomplete = false;
  bool timed_out = false;
};

BodyRead read_body(const httplib::Request& req, const httplib::ContentReader& reader,
                   std::size_t max) {
  BodyRead out;
  std::size_t cap = max;
  if (req.has_header("Content-Length")) {
    std::string text = req.get_header_value("Content-Length");
    std::size_t declared = 0;
    bool digits = !text.empty() && text.size() < 19;
    for (char c : text) {
      digits = digits && c >= '0' && c <= '9';
      declared = declared * 10 + static_cast<std::size_t>(c - '0');
    }
    if (!digits || declared > max) {
      out.too_large = digits;
      cap = std::min<std::size_t>(max, std::size_t{64} * 1024);
    } else {
      out.body.reserve(declared);
    }
  }
  bool complete = reader([&](const char* data, std::size_t len) {
    std::size_t room = cap - out.body.size();
    if (len > room) {
      out.body.append(data, room);
      out.too_large = true;
      return false;
    }
    out.body.append(data, len);
    return true;
  });
  if (!complete && !out.too_large) {
    out.incomplete = true;
    out.timed_out = HttpServer::request_timed_out();
  }
  return out;
}

// `stopping`: the server is shutting down, so this response ends its connection too.
void write_reply(const HttpReply& reply, bool stopping, httplib::Response& res) {
  res.status = reply.status;
  res.set_content(reply.body, reply.content_type);
  if (reply.allow_post_header) {
    res.set_header("Allow", "POST");
  }
  if (reply.close || stopping) {
    res.set_header("Connection", "close");
    HttpServer::close_after_response(reply.close);
  }
}

// A GET or OPTIONS with a body httplib did not read: do not parse it as the next request.
void finish_without_body(const httplib::Request& req, HttpReply reply, bool stopping,
                         httplib::Response& res) {
  reply.close = reply.close || req.has_header("Transfer-Encoding") ||
                (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
  write_reply(reply, stopping, res);
}

std::string_view http_problem(int status) {
  switch (status) {
    case 400:
      return "malformed HTTP request";
    case 404:
      return "no such path; the webhook serves POST /mutate and POST /validate";
    case 408:
      return kReadTimeoutMessage;
    case 413:
      return "request too large";
    case 414:
      return "request URI too long";
    case 416:
      return "range not satisfiable";
    default:
      return status >= 500 ? "internal error" : "request refused";
  }
}

// Error pages httplib makes itself (a malformed request line, 414...) as one-line JSON.
void json_errors(httplib::Server& server) {
  httplib::Server::HandlerWithResponse errors = [](const httplib::Request&,
                                                   httplib::Response& res) {
    if (!res.body.empty()) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (HttpServer::request_timed_out()) {
      res.status = 408;
      res.set_header("Connection", "close");
    }
    res.set_content(status_json(res.status, http_problem(res.status)), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  };
  server.set_error_handler(std::move(errors));
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        res.set_content(status_json(500, "internal error"), "application/json");
      });
}

}  // namespace

ServerConfig server_config(const Flags& flags) {
  ServerConfig c;
  c.https_address = flags.bind_address;
  c.health_address = flags.health_address;
  c.cert_pem = flags.server_cert_pem;
  c.key_pem = flags.server_key_pem;
  c.cert_file = flags.tls_cert_file;
  c.key_file = flags.tls_key_file;
  c.max_body_bytes = flags.max_body_bytes;
  c.read_timeout = flags.read_timeout;
  c.shutdown_timeout = flags.shutdown_timeout;
  c.threads = flags.threads;
  return c;
}

std::chrono::milliseconds drain_delay(std::chrono::milliseconds shutdown_timeout) {
  return std::min<std::chrono::milliseconds>(shutdown_timeout / 3, 5s);
}

WebhookServer::WebhookServer(const ServerConfig& config, const admission::Handler& handler,
                             const Log& log, ServerExtensions extensions)
    : config_(config),
      log_(log),
      extensions_(std::move(extensions)),
      service_(handler, metrics_, log, config.max_body_bytes) {}

webhook::Result<std::unique_ptr<WebhookServer>> WebhookServer::start(
    const ServerConfig& config, const admission::Handler& handler, const Log& log,
    ServerExtensions extensions) {
  std::unique_ptr<WebhookServer> s(new WebhookServer(config, handler, log, std::move(extensions)));
  if (webhook::Status st = s->init(); !st) {
    return st.error();
  }
  return s;
}

// Startup wiring, once per process; off the request path, so longer than 60 lines.
// NOLINTNEXTLINE(readability-function-size)
webhook::Status WebhookServer::init() {
  // The serving identity, from flags or files; a broken one at start is fatal.
  std::string cert_pem = config_.cert_pem;
  std::string key_pem = config_.key_pem;
  std::string source = "--server-cert/--server-key";
  if (cert_pem.empty()) {
    source = config_.cert_file + ", " + config_.key_file;
    webhook::Result<std::string> c = read_small_file(config_.cert_file);
    if (!c) {
      return c.error();
    }
    webhook::Result<std::string> k = read_small_file(config_.key_file);
    if (!k) {
      return k.error();
    }
    cert_pem = std::move(*c);
    key_pem = std::move(*k);
  }
  webhook::Result<std::shared_ptr<const Identity>> id = load_identity(cert_pem, key_pem);
  if (!id) {
    return webhook::invalid_argument(source + ": " + id.error().message);
  }
  identities_ = std::make_unique<IdentityStore>(*id);
  metrics_.set_certificate_expiry((*id)->not_after());
  webhook::Result<SslCtxPtr> ctx = make_server_context(*identities_);
  if (!ctx) {
    return ctx.error();
  }
  ssl_ctx_ = std::move(*ctx);

  ConnectionLimits limits;
  limits.read_timeout = config_.read_timeout;
  limits.max_request_bytes = config_.max_body_bytes + (64 << 10);
  HttpServerOptions https;
  https.ssl_ctx = ssl_ctx_.get();
  https.limits = limits;
  https.idle_timeout = config_.idle_timeout;
  https.max_threads = config_.threads;
  https.on_connection_open = [this] { metrics_.connection_opened(); };
  https.on_connection_close = [this] { metrics_.connection_closed(); };
  https_ = std::make_unique<HttpServer>(std::move(https), log_);
  HttpServerOptions health;
  health.limits.read_timeout = std::min<std::chrono::milliseconds>(config_.read_timeout, 5s);
  health.limits.max_request_bytes = 64 << 10;
  health.idle_timeout = config_.idle_timeout;
  health.max_threads = kHealthThreads;
  health_ = std::make_unique<HttpServer>(std::move(health), log_);
  install_routes();
  install_health_routes();

  webhook::Result<int> hp = https_->bind(config_.https_address);
  if (!hp) {
    return hp.error();
  }
  https_port_ = *hp;
  webhook::Result<int> lp = health_->bind(config_.health_address);
  if (!lp) {
    return lp.error();
  }
  health_port_ = *lp;

  if (config_.cert_pem.empty()) {
    watcher_ = std::make_unique<CertificateWatcher>(
        *identities_, config_.cert_file, config_.key_file, config_.cert_poll_interval,
        [this](bool ok, const std::string& detail, const std::shared_ptr<const Identity>& next) {
          on_reload(ok, detail, next);
        });
  }
  https_thread_ = std::thread([this] {
    https_->serve();
    std::lock_guard<std::mutex> lock(mu_);
    https_done_ = true;
    cv_.notify_all();
  });
  health_thread_ = std::thread([this] { health_->serve(); });
  metrics_.set_ready(not_ready_reason().empty());

  ListenAddress https_at{config_.https_address.host, https_port_};
  ListenAddress health_at{config_.health_address.host, health_port_};
  log_.info("serving", {{"https", https_at.text()},
                        {"health", health_at.text()},
                        {"certificate_subject", (*id)->subject()},
                        {"certificate_serial", (*id)->serial()},
                        {"certificate_not_after", iso_time((*id)->not_after())},
                        {"certificate_reload", config_.cert_pem.empty()}});
  return {};
}

void WebhookServer::install_routes() {
  // POST /mutate and /validate go to the admission stages; any other method on them is answered
  // there too (405), and every other path by AdmissionService::other.
  auto admit = [this](Webhook webhook) {
    return [this, webhook](const httplib::Request& req, httplib::Response& res,
                           const httplib::ContentReader& reader) {
      BodyRead body = read_body(req, reader, service_.max_body_bytes());
      std::string content_type = req.get_header_value("Content-Type");
      write_reply(service_.admit(webhook, {req.method, req.path, content_type, body.body,
                                           body.too_large, body.incomplete, body.timed_out}),
                  https_->stopping(), res);
    };
  };
  auto admit_without_body = [this](Webhook webhook) {
    return [this, webhook](const httplib::Request& req, httplib::Response& res) {
      std::string content_type = req.get_header_value("Content-Type");
      finish_without_body(req, service_.admit(webhook, {req.method, req.path, content_type, ""}),
                          https_->stopping(), res);
    };
  };
  auto other = [this](const httplib::Request& req, httplib::Response& res,
                      const httplib::ContentReader& reader) {
    BodyRead body = read_body(req, reader, service_.max_body_bytes());
    std::string content_type = req.get_header_value("Content-Type");
    write_reply(service_.other({req.method, req.path, content_type, body.body, body.too_large,
                                body.incomplete, body.timed_out}),
                https_->stopping(), res);
  };
  auto other_without_body = [this](const httplib::Request& req, httplib::Response& res) {
    std::string content_type = req.get_header_value("Content-Type");
    finish_without_body(req, service_.other({req.method, req.path, content_type, ""}),
                        https_->stopping(), res);
  };
  for (auto [path, webhook] :
       {std::pair{"/mutate", Webhook::kMutate}, std::pair{"/validate", Webhook::kValidate}}) {
    https_->Post(path, admit(webhook));
    https_->Put(path, admit(webhook));
    https_->Patch(path, admit(webhook));
    https_->Delete(path, admit(webhook));
    https_->Get(path, admit_without_body(webhook));
    https_->Options(path, admit_without_body(webhook));
  }
  https_->Post(".*", other);
  https_->Put(".*", other);
  https_->Patch(".*", other);
  https_->Delete(".*", other);
  https_->Get(".*", other_without_body);
  https_->Options(".*", other_without_body);
  json_errors(*https_);
}

void WebhookServer::install_health_routes() {
  health_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  health_->Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    std::string why = not_ready_reason();
    metrics_.set_ready(why.empty());
    if (why.empty()) {
      res.set_content("ok\n", "text/plain");
    } else {
      res.status = 503;
      res.set_content("not ready: " + why + "\n", "text/plain");
    }
  });
  health_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    metrics_.set_ready(not_ready_reason().empty());
    std::string text = metrics_.render();
    if (extensions_.metrics) {
      text += extensions_.metrics();
    }
    res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
  });
  json_errors(*health_);
}

void WebhookServer::on_reload(bool ok, const std::string& detail,
                              const std::shared_ptr<const Identity>& id) {
  metrics_.tls_reload(ok);
  if (!ok) {
    log_.error("certificate reload failed; still serving the previous certificate",
               {{"error", detail}});
    return;
  }
  metrics_.set_certificate_expiry(id->not_after());
  log_.info("certificate reloaded", {{"certificate_subject", id->subject()},
                                     {"certificate_serial", id->serial()},
                                     {"certificate_not_after", iso_time(id->not_after())}});
}

std::string WebhookServer::not_ready_reason() const {
  if (shutting_down_) {
    return "shutting down";
  }
  if (!identities_ || !identities_->current()) {
    return "no serving certificate";
  }
  std::string failing;
  for (const ReadinessCheck& c : extensions_.readiness) {
    if (!c.ready()) {
      failing += (failing.empty() ? "" : ", ") + c.name;
    }
  }
  return failing;
}

void WebhookServer::shutdown(std::chrono::milliseconds drain) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutdown_requested_) {
    return;
  }
  shutdown_requested_ = true;
  shutting_down_ = true;
  metrics_.set_ready(false);
  drain_ = drain;
  shutdown_started_ = std::chrono::steady_clock::now();
  cv_.notify_all();
}

bool WebhookServer::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return shutdown_requested_; });
  auto deadline = shutdown_started_ + config_.shutdown_timeout;
  log_.info("shutting down",
            {{"drain_ms", static_cast<std::int64_t>(drain_.count())},
             {"timeout_ms", static_cast<std::int64_t>(config_.shutdown_timeout.count())}});
  // Keep accepting while Service endpoints catch up with /readyz.
  cv_.wait_until(lock, shutdown_started_ + drain_, [] { return false; });
  lock.unlock();
  https_->stop_serving();
  lock.lock();
  if (!cv_.wait_until(lock, deadline, [this] { return https_done_; })) {
    abandoned_ = true;
    log_.error("shutdown timed out with requests still in progress",
               {{"timeout_ms", static_cast<std::int64_t>(config_.shutdown_timeout.count())}});
    return false;
  }
  lock.unlock();
  https_thread_.join();
  health_->stop_serving();
  health_thread_.join();
  watcher_.reset();
  log_.info("stopped", {});
  return true;
}

WebhookServer::~WebhookServer() {
  if (abandoned_) {
    return;  // threads still run; the caller exits the process
  }
  if (https_thread_.joinable() || health_thread_.joinable()) {
    shutdown(0ms);
    if (https_) {
      https_->stop_serving();
    }
    if (health_) {
      health_->stop_serving();
    }
    if (https_thread_.joinable()) {
      https_thread_.join();
    }
    if (health_thread_.joinable()) {
      health_thread_.join();
    }
  }
}

}  // namespace server
