// kuberay-tpu-webhook: flags -> config -> server. Everything it calls lives in lib/, where the
// tests link it; this file only wires them and owns the process: signals, the default logger,
// exit codes (0 clean shutdown, 1 startup failure or forced exit, 2 bad command line).
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "admission/handler.h"
#include "kube/config.h"
#include "kube/live_cluster.h"
#include "kube/slot_allocators.h"
#include "server/flags.h"
#include "server/log.h"
#include "server/server.h"

namespace {

constexpr int kExitStartup = 1;
constexpr int kExitUsage = 2;

// Waits for SIGTERM/SIGINT on its own thread: the first begins a graceful shutdown (SIGTERM keeps
// the port open for the drain delay, SIGINT does not), a second one exits at once.
class SignalWatcher {
 public:
  SignalWatcher(server::WebhookServer& srv, const server::Log& log, std::chrono::milliseconds drain)
      : thread_([this, &srv, &log, drain] { run(srv, log, drain); }) {}
  ~SignalWatcher() {
    done_ = true;
    thread_.join();
  }
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  void run(server::WebhookServer& srv, const server::Log& log, std::chrono::milliseconds drain) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    int received = 0;
    while (!done_) {
      timespec tick{0, 200'000'000};
      int sig = sigtimedwait(&set, nullptr, &tick);
      if (sig < 0) {
        continue;
      }
      if (++received > 1) {
        log.error("second signal: exiting without waiting", {{"signal", strsignal(sig)}});
        log.flush();
        std::_Exit(kExitStartup);
      }
      log.info("signal received", {{"signal", strsignal(sig)}});
      srv.shutdown(sig == SIGTERM ? drain : std::chrono::milliseconds(0));
    }
  }

  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  // Signals are taken by SignalWatcher only: block them before any thread starts.
  sigset_t blocked;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGTERM);
  sigaddset(&blocked, SIGINT);
  pthread_sigmask(SIG_BLOCK, &blocked, nullptr);
  signal(SIGPIPE, SIG_IGN);

  webhook::Result<server::Flags> flags =
      server::parse_flags(std::vector<std::string>(argv + 1, argv + argc));
  if (!flags) {
    std::cerr << "kuberay-tpu-webhook: " << flags.error().message << "\n";
    return kExitUsage;
  }
  if (flags->help) {
    std::cout << server::usage();
    return 0;
  }
  if (flags->version) {
    std::cout << server::version_text() << "\n";
    return 0;
  }

  std::shared_ptr<spdlog::logger> logger = server::make_stderr_logger(flags->log_format);
  spdlog::set_default_logger(logger);
  server::Log log(logger, flags->log_format, flags->verbosity);
  log.info("starting", {{"version", server::version_text()},
                        {"kuberay_version", flags->handler.kuberay.text()}});

  // Legacy placement watches the cluster through the API and shares slot claims with the other
  // replicas in Leases of the webhook's namespace: --legacy-indexing=on requires API access,
  // auto uses it when an API configuration is found (in a Pod, always).
  std::unique_ptr<kube::LiveCluster> live;
  if (flags->legacy_indexing != server::LegacyIndexing::kOff) {
    webhook::Result<kube::ClusterConfig> api = kube::load_config(flags->kube_config_path);
    if (!api && flags->legacy_indexing == server::LegacyIndexing::kOn) {
      log.error("cannot start: --legacy-indexing=on needs Kubernetes API access",
                {{"error", api.error().message}});
      log.flush();
      return kExitStartup;
    }
    webhook::Result<kube::NamespaceSource> ns = kube::webhook_namespace(
        kube::process_env(), kube::kServiceAccountDir, flags->namespace_name);
    if (api && !ns) {
      log.error("cannot start: legacy placement needs the webhook's namespace",
                {{"error", ns.error().message}});
      log.flush();
      return kExitStartup;
    }
    if (api) {
      kube::LiveClusterOptions options;
      options.claims.ns = ns->ns;
      options.claims.holder = kube::replica_identity(kube::process_env());
      options.claims.ttl = flags->reservation_ttl;
      options.claims.budget = flags->claim_timeout;
      log.info("slot claims", {{"namespace", ns->ns},
                               {"namespace_from", ns->origin},
                               {"replica", options.claims.holder}});
      options.log = [&log](kube::LogLevel level, const std::string& line) {
        switch (level) {
          case kube::LogLevel::kDebug:
            log.debug(1, "kube", {{"event", line}});
            break;
          case kube::LogLevel::kInfo:
            log.info("kube", {{"event", line}});
            break;
          case kube::LogLevel::kWarning:
            log.warn("kube", {{"event", line}});
            break;
          case kube::LogLevel::kError:
            log.error("kube", {{"event", line}});
            break;
        }
      };
      webhook::Result<std::unique_ptr<kube::LiveCluster>> created =
          kube::LiveCluster::create(*api, std::move(options));
      if (!created) {
        log.error("cannot start: Kubernetes API configuration",
                  {{"error", created.error().message}});
        log.flush();
        return kExitStartup;
      }
      live = std::move(*created);
    } else {
      log.info("legacy placement off: no Kubernetes API configuration",
               {{"reason", api.error().message}});
    }
  }
  log.info("legacy placement",
           {{"enabled", live != nullptr}, {"api", live ? live->server() : std::string()}});

  // Without legacy placement: Pods lacking KubeRay's index labels are denied with a message
  // saying how to fix it, Nodes cannot be listed and headless Service names follow
  // --kuberay-version.
  kube::DisabledSlotAllocator no_pods;
  kube::LiveNodeSource no_nodes;        // never listed: nodes_matching answers "cannot list"
  kube::LiveServiceSource no_services;  // never listed: no Service name
  admission::Handler handler(flags->handler, live ? live->pods() : no_pods,
                             live ? live->nodes() : no_nodes,
                             live ? live->services() : no_services);
  server::ServerExtensions extensions;
  if (live) {
    extensions.readiness.push_back({"pods-synced", [&live] { return live->pods_synced(); }});
    extensions.metrics = [&live] { return live->metrics_text(); };
    live->start();
  }

  webhook::Result<std::unique_ptr<server::WebhookServer>> srv = server::WebhookServer::start(
      server::server_config(*flags), handler, log, std::move(extensions));
  if (!srv) {
    log.error("cannot start", {{"error", srv.error().message}});
    log.flush();
    return kExitStartup;
  }
  bool drained = false;
  {
    SignalWatcher signals(**srv, log, server::drain_delay(flags->shutdown_timeout));
    drained = (*srv)->wait();
  }
  if (drained && live) {
    live->stop();
  }
  log.flush();
  if (!drained) {
    std::_Exit(kExitStartup);  // requests still run on server threads: do not unwind them
  }
  return 0;
}
