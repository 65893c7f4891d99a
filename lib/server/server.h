#pragma once
// The webhook process's two listeners: HTTPS admission (POST /mutate, POST /validate) and plain
// HTTP health (/healthz, /readyz, /metrics), with certificate reload and graceful shutdown.
//
//   auto server = server::WebhookServer::start(config, handler, log, {});
//   if (!server) { log.error(server.error().message); return 1; }
//   ...                                          // on SIGTERM, from another thread:
//   (*server)->shutdown(server::drain_delay(config.shutdown_timeout));
//   bool drained = (*server)->wait();            // false: in-flight work outlived the timeout
//
// Readiness (/readyz): a certificate is loaded, every ReadinessCheck passes (e.g. "the first Pod
// list has synced" once the API sources exist), and shutdown has not begun. Liveness (/healthz)
// is always 200 while the process serves.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "admission/handler.h"
#include "base/status/result.h"
#include "server/admission_service.h"
#include "server/flags.h"
#include "server/http_server.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/tls.h"

namespace server {

struct ServerConfig {
  ListenAddress https_address{"", 9443};
  ListenAddress health_address{"", 8081};
  // The serving identity: PEM texts when given (no reload), else these files (watched).
  std::string cert_pem;
  std::string key_pem;
  std::string cert_file;
  std::string key_file;
  std::chrono::milliseconds cert_poll_interval{2'000};
  std::size_t max_body_bytes = 7 << 20;
  // Given by the operator, not the default: start warns when the memory budget grants less.
  bool max_body_bytes_given = false;
  std::chrono::milliseconds read_timeout{10'000};
  std::chrono::milliseconds idle_timeout{60'000};
  std::chrono::milliseconds shutdown_timeout{15'000};
  int threads = 64;
  // Whether the Handler may wait on the Kubernetes API (legacy placement possible): then the
  // handler pool has `threads` threads, else one per core (more would only queue for the CPU).
  bool handler_may_block = true;
  int max_connections = 4096;
  bool max_connections_given = false;  // start warns when the memory limit holds fewer
  std::size_t max_header_bytes = 16384;
  std::uint64_t memory_limit = 0;  // 0: from the cgroup, else 256 MiB
};

// The server part of the command line.
ServerConfig server_config(const Flags& flags);

// A named readiness condition, e.g. {"pods-synced", [&] { return live->pods_synced(); }}.
struct ReadinessCheck {
  std::string name;
  std::function<bool()> ready;
};

// What other parts of the process add to the server: readiness conditions, and Prometheus text
// appended to /metrics (e.g. [&] { return live->metrics_text(); }: HELP and TYPE included).
struct ServerExtensions {
  std::vector<ReadinessCheck> readiness;
  std::function<std::string()> metrics;
};

// How long SIGTERM keeps the HTTPS port accepting after /readyz turned 503, so Service
// endpoints drop the Pod before it stops listening: a third of the shutdown timeout, at most 5s.
std::chrono::milliseconds drain_delay(std::chrono::milliseconds shutdown_timeout);

class WebhookServer {
 public:
  // Loads the certificate, binds both ports and starts serving. InvalidArgument for a
  // certificate or key that does not load (naming the file and the reason), Unavailable for a
  // port that cannot be bound. `handler` and `log` must outlive the server.
  static webhook::Result<std::unique_ptr<WebhookServer>> start(const ServerConfig& config,
                                                               const admission::Handler& handler,
                                                               const Log& log,
                                                               ServerExtensions extensions = {});

  ~WebhookServer();  // an immediate shutdown, then joins (unless wait() returned false)
  WebhookServer(const WebhookServer&) = delete;
  WebhookServer& operator=(const WebhookServer&) = delete;

  int https_port() const { return https_port_; }
  int health_port() const { return health_port_; }
  Metrics& metrics() { return metrics_; }

  // Re-reads the certificate files now (SIGHUP), even when their stat data did not change; a
  // new pair is logged and counted as any reload, a pair that does not load as a failed one.
  // False when serving --server-cert (no files to re-read).
  bool reload_certificates();

  // Serves this pair from the next handshake on (--cert-mode=managed, kube/cert_manager.h):
  // logged and counted as a reload, with the certificate-expiry gauge updated; connections
  // already open keep theirs. A pair that does not load is logged as a failed reload and the
  // previous one stays. Thread-safe.
  bool publish_certificate(const std::string& cert_pem, const std::string& key_pem);

  // Why /readyz fails, "" when ready.
  std::string not_ready_reason() const;

  // Begins a graceful shutdown: /readyz answers 503 at once; after `drain` the HTTPS port stops
  // accepting, idle connections close and requests in progress finish. Thread-safe; only the
  // first call counts.
  void shutdown(std::chrono::milliseconds drain);

  // Blocks until shutdown() was called and every HTTPS connection closed, then stops the health
  // port. False when shutdown_timeout (counted from shutdown()) passed first: the caller should
  // then exit the process without destroying the server.
  bool wait();

 private:
  WebhookServer(const ServerConfig& config, const admission::Handler& handler, const Log& log,
                ServerExtensions extensions);
  webhook::Status init();
  webhook::Result<std::shared_ptr<const Identity>> load_serving_identity();
  webhook::Status open_ports(std::uint64_t memory_limit);
  void start_serving();
  HttpReply route(const HttpRequestView& request) const;   // /mutate, /validate, the rest
  HttpReply route_health(const HttpRequestView& request);  // /healthz, /readyz, /metrics
  void on_reload(bool ok, const std::string& detail, const std::shared_ptr<const Identity>& id);

  ServerConfig config_;
  const Log& log_;
  ServerExtensions extensions_;
  Metrics metrics_;
  AdmissionService service_;
  std::unique_ptr<IdentityStore> identities_;
  SslCtxPtr ssl_ctx_;
  std::unique_ptr<MemoryBudget> budget_;
  std::unique_ptr<CertificateWatcher> watcher_;
  std::unique_ptr<HttpServer> https_;
  std::unique_ptr<HttpServer> health_;
  int https_port_ = 0;
  int health_port_ = 0;
  int max_connections_ = 0;  // per port: --max-connections, or fewer (open_ports)
  std::thread https_thread_;
  std::thread health_thread_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool shutdown_requested_ = false;
  bool https_done_ = false;
  bool abandoned_ = false;
  std::chrono::milliseconds drain_{0};
  std::chrono::steady_clock::time_point shutdown_started_;
  std::atomic<bool> shutting_down_{false};
};

}  // namespace server
