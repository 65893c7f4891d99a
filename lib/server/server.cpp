#include "server/server.h"

#include <sys/resource.h>

#include <algorithm>

#include "admission/review.h"
#include "server/cgroup.h"

namespace server {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t kDefaultMemoryLimit = std::uint64_t{256} << 20;

std::string iso_time(std::int64_t unix_seconds) {
  auto t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Up to --max-connections on each port: raise the soft descriptor limit to the hard one.
void raise_descriptor_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

// The largest body whose grant fits the whole budget (http_server.h "budget").
std::uint64_t largest_granted_body(std::uint64_t budget) {
  constexpr std::uint64_t kOverhead = grant_bytes(0, admission::kAdmissionMemoryPerBodyByte);
  return budget <= kOverhead ? 0
                             : (budget - kOverhead) / (1 + admission::kAdmissionMemoryPerBodyByte);
}

// The most an open connection holds while it waits (docs/security.md "What a connection holds";
// the idle_memory attack test fails over them): a TLS one on the HTTPS port, a plain one on the
// health port.
constexpr std::uint64_t kHttpsConnectionBytes = std::uint64_t{32} << 10;
constexpr std::uint64_t kHealthConnectionBytes = std::uint64_t{8} << 10;

// Connections per port: `wanted`, or fewer when an eighth of `memory_limit` (half the quarter
// beside the in-flight budget) would not hold that many on each port.
int connections_held(std::uint64_t memory_limit, int wanted) {
  std::uint64_t fit = memory_limit / 8 / (kHttpsConnectionBytes + kHealthConnectionBytes);
  return static_cast<int>(std::min<std::uint64_t>(static_cast<std::uint64_t>(wanted), fit));
}

// The CPUs the process may use: the node's online ones, or fewer under the container's CPU limit.
int cores() {
  static const int kCores = [] {
    int online = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
    int limit = cgroup_cpu_limit();
    return limit > 0 ? std::min(online, limit) : online;
  }();
  return kCores;
}

Webhook webhook_of(std::string_view path) {
  return path == "/mutate"     ? Webhook::kMutate
         : path == "/validate" ? Webhook::kValidate
                               : Webhook::kOther;
}

HttpReply text_reply(int status, std::string body, std::string content_type = "text/plain") {
  HttpReply r;
  r.status = status;
  r.body = std::move(body);
  r.content_type = std::move(content_type);
  return r;
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
  c.max_body_bytes_given = flags.max_body_bytes_given;
  c.read_timeout = flags.read_timeout;
  c.idle_timeout = flags.idle_timeout;
  c.max_connections = flags.max_connections;
  c.max_connections_given = flags.max_connections_given;
  c.max_header_bytes = flags.max_header_bytes;
  c.memory_limit = flags.memory_limit;
  c.shutdown_timeout = flags.shutdown_timeout;
  c.threads = flags.threads;
  c.handler_may_block = flags.legacy_indexing != LegacyIndexing::kOff;
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

// Startup, once per process: the serving identity, the two ports, then serving.
webhook::Status WebhookServer::init() {
  webhook::Result<std::shared_ptr<const Identity>> id = load_serving_identity();
  if (!id) {
    return id.error();
  }
  std::uint64_t memory_limit =
      config_.memory_limit != 0 ? config_.memory_limit : cgroup_memory_limit();
  if (memory_limit == 0) {
    memory_limit = kDefaultMemoryLimit;
  }
  RETURN_IF_ERROR(open_ports(memory_limit));
  start_serving();
  log_.info("serving", {{"https", ListenAddress{config_.https_address.host, https_port_}.text()},
                        {"health", ListenAddress{config_.health_address.host, health_port_}.text()},
                        {"certificate_subject", (*id)->subject()},
                        {"certificate_serial", (*id)->serial()},
                        {"certificate_not_after", iso_time((*id)->not_after())},
                        {"certificate_reload", config_.cert_pem.empty()},
                        {"memory_limit", memory_limit},
                        {"in_flight_budget", budget_->capacity()},
                        {"max_body_bytes", service_.max_body_bytes()},
                        {"max_connections", max_connections_}});
  // Under the default --max-body-bytes a smaller limit is expected (kube-apiserver sends no body
  // over 3 MiB); one asked for and not granted is worth a warning.
  if (service_.max_body_bytes() < config_.max_body_bytes && config_.max_body_bytes_given) {
    log_.warn("the in-flight memory budget grants no body over " +
                  std::to_string(service_.max_body_bytes()) +
                  " bytes; larger ones up to --max-body-bytes are refused (413)",
              {{"memory_limit", memory_limit}, {"fix", "raise --memory-limit"}});
  }
  if (max_connections_ < config_.max_connections && config_.max_connections_given) {
    log_.warn("--memory-limit holds no more than " + std::to_string(max_connections_) +
                  " open connections per port; at that many the oldest idle one is closed",
              {{"memory_limit", memory_limit}, {"fix", "raise --memory-limit"}});
  }
  return {};
}

// The serving identity, from flags or files, and the TLS context over it; a broken one at start
// is fatal.
webhook::Result<std::shared_ptr<const Identity>> WebhookServer::load_serving_identity() {
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
  return id;
}

// The HTTPS port, its requests in flight sharing three quarters of `memory_limit`, and the health
// port, bound; each holds as many open connections as an eighth of it does.
webhook::Status WebhookServer::open_ports(std::uint64_t memory_limit) {
  raise_descriptor_limit();
  budget_ = std::make_unique<MemoryBudget>(memory_limit / 4 * 3);
  max_connections_ = connections_held(memory_limit, config_.max_connections);
  HttpServerOptions https;
  https.ssl_ctx = ssl_ctx_.get();
  https.limits.max_head_bytes = config_.max_header_bytes;
  // A body whose grant could never fit the budget is over the limit, refused at once (413) as
  // one over --max-body-bytes is; chunked bodies are charged this limit until they are whole.
  std::uint64_t accepted =
      std::min<std::uint64_t>(config_.max_body_bytes, largest_granted_body(budget_->capacity()));
  if (accepted < config_.max_body_bytes) {
    service_.limit_body(accepted,
                        "the most the in-flight memory budget, three quarters of --memory-limit, "
                        "can hold; raise --memory-limit");
  }
  https.limits.max_body_bytes = accepted;
  https.read_timeout = config_.read_timeout;
  https.idle_timeout = config_.idle_timeout;
  https.name = "https";
  https.io_threads = std::min(config_.threads, cores());
  https.handler_threads =
      config_.handler_may_block ? config_.threads : std::min(config_.threads, cores());
  https.max_connections = max_connections_;
  https.budget = budget_.get();
  https.parse_bytes_per_body_byte = admission::kAdmissionMemoryPerBodyByte;
  https.handler = [this](const HttpRequestView& r) { return route(r); };
  https.refuse = https.handler;
  https.on_connection_open = [this] { metrics_.connection_opened(); };
  https.on_connection_close = [this] { metrics_.connection_closed(); };
  https.on_request = [this](std::string_view path) { metrics_.request_started(webhook_of(path)); };
  https.on_response = [this](std::string_view path, int code, std::chrono::nanoseconds latency) {
    metrics_.request_finished(webhook_of(path), code, latency);
  };
  https_ = std::make_unique<HttpServer>(std::move(https), log_);
  HttpServerOptions health;
  health.limits.max_head_bytes = config_.max_header_bytes;
  health.limits.max_body_bytes = 64 << 10;
  health.read_timeout = std::min<std::chrono::milliseconds>(config_.read_timeout, 5s);
  health.idle_timeout = config_.idle_timeout;
  health.name = "health";
  health.io_threads = 1;
  health.handler_threads = 1;
  health.max_connections = max_connections_;
  health.handler = [this](const HttpRequestView& r) { return route_health(r); };
  // No `refuse`: a 413 or 408 found on the health port is the transport's own Status.
  health_ = std::make_unique<HttpServer>(std::move(health), log_);

  ASSIGN_OR_RETURN(https_port_, https_->bind(config_.https_address));
  ASSIGN_OR_RETURN(health_port_, health_->bind(config_.health_address));
  return {};
}

// The certificate watcher (when the identity comes from files) and the ports' threads.
void WebhookServer::start_serving() {
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
}

HttpReply WebhookServer::route(const HttpRequestView& request) const {
  Webhook w = webhook_of(request.path);
  return w == Webhook::kOther ? service_.other(request) : service_.admit(w, request);
}

HttpReply WebhookServer::route_health(const HttpRequestView& request) {
  if (request.method != "GET" && request.method != "HEAD") {
    HttpReply r = text_reply(
        405,
        status_json(405, "method " + std::string(request.method) + " is not allowed; send GET"),
        "application/json");
    return r;
  }
  if (request.path == "/healthz") {
    return text_reply(200, "ok\n");
  }
  if (request.path == "/readyz") {
    std::string why = not_ready_reason();
    metrics_.set_ready(why.empty());
    return why.empty() ? text_reply(200, "ok\n") : text_reply(503, "not ready: " + why + "\n");
  }
  if (request.path == "/metrics") {
    metrics_.set_ready(not_ready_reason().empty());
    std::string text = metrics_.render();
    if (extensions_.metrics) {
      text += extensions_.metrics();
    }
    return text_reply(200, std::move(text), "text/plain; version=0.0.4; charset=utf-8");
  }
  return text_reply(404,
                    status_json(404, "no such path " + std::string(request.path) +
                                         "; the health port serves /healthz, /readyz, /metrics"),
                    "application/json");
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

bool WebhookServer::publish_certificate(const std::string& cert_pem, const std::string& key_pem) {
  std::shared_ptr<const Identity> current = identities_->current();
  if (current && current->same_source(cert_pem, key_pem)) {
    return true;
  }
  webhook::Result<std::shared_ptr<const Identity>> next = load_identity(cert_pem, key_pem);
  if (!next) {
    on_reload(false, "managed certificate: " + next.error().message, nullptr);
    return false;
  }
  identities_->publish(*next);
  on_reload(true, "", *next);
  return true;
}

bool WebhookServer::reload_certificates() {
  if (!watcher_) {
    return false;
  }
  watcher_->poll_once(/*force=*/true);
  return true;
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
