// kuberay-tpu-webhook: flags -> config -> server. Everything it calls lives in lib/, where the
// tests link it (legacy placement: kube::LegacyPlacement; --cert-mode=managed:
// kube::ManagedCertificate); this file only parses the command line, starts them and owns the
// process: signals, the default logger, exit codes (0 clean shutdown, 1 startup failure or
// forced exit, 2 bad command line).
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "admission/handler.h"
#include "base/thread/name.h"
#include "kube/legacy_placement.h"
#include "kube/managed_certificate.h"
#include "server/flags.h"
#include "server/log.h"
#include "server/server.h"

namespace {

constexpr int kExitStartup = 1;
constexpr int kExitUsage = 2;

// What the process does with each signal (docs/server.md "Signals and certificate files").
// Every signal whose default action would end the process is either handled or ignored with a
// log line, except:
//  - the faults a bug raises in the thread that hit it (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT,
//    SIGSYS, SIGTRAP): they keep their default action, so a crash still crashes (and dumps core
//    where that is enabled) instead of looping on the faulting instruction;
//  - SIGKILL and SIGSTOP, which no process can catch, block or ignore.
// Signals whose default is to be ignored (SIGCHLD, SIGURG, SIGWINCH), to stop (SIGTSTP, SIGTTIN,
// SIGTTOU) or to continue (SIGCONT) keep it.
enum class SignalAction {
  kShutdown,         // graceful shutdown with the drain delay (SIGTERM, SIGQUIT)
  kShutdownNoDrain,  // graceful shutdown without it (SIGINT, Ctrl-C)
  kReload,           // re-read the certificate files now (SIGHUP)
  kIgnore,           // logged, then nothing
};

struct SignalRule {
  int sig;
  const char* name;
  SignalAction action;
};

// The real-time signals SIGRTMIN..SIGRTMAX are ignored too (their bounds are not constants).
const SignalRule kSignalRules[] = {
    {SIGTERM, "SIGTERM", SignalAction::kShutdown},
    {SIGQUIT, "SIGQUIT", SignalAction::kShutdown},
    {SIGINT, "SIGINT", SignalAction::kShutdownNoDrain},
    {SIGHUP, "SIGHUP", SignalAction::kReload},
    {SIGUSR1, "SIGUSR1", SignalAction::kIgnore},
    {SIGUSR2, "SIGUSR2", SignalAction::kIgnore},
    {SIGALRM, "SIGALRM", SignalAction::kIgnore},
    {SIGVTALRM, "SIGVTALRM", SignalAction::kIgnore},
    {SIGPROF, "SIGPROF", SignalAction::kIgnore},
    {SIGIO, "SIGIO", SignalAction::kIgnore},  // also named SIGPOLL
    {SIGXCPU, "SIGXCPU", SignalAction::kIgnore},
    {SIGXFSZ, "SIGXFSZ", SignalAction::kIgnore},
    {SIGPIPE, "SIGPIPE", SignalAction::kIgnore},
#ifdef SIGPWR
    {SIGPWR, "SIGPWR", SignalAction::kIgnore},
#endif
#ifdef SIGSTKFLT
    {SIGSTKFLT, "SIGSTKFLT", SignalAction::kIgnore},
#endif
};

bool is_realtime(int sig) { return sig >= SIGRTMIN && sig <= SIGRTMAX; }

SignalAction action_of(int sig) {
  for (const SignalRule& r : kSignalRules) {
    if (r.sig == sig) {
      return r.action;
    }
  }
  return SignalAction::kIgnore;  // a real-time signal: the only others in the set
}

std::string signal_name(int sig) {
  for (const SignalRule& r : kSignalRules) {
    if (r.sig == sig) {
      return r.name;
    }
  }
  if (is_realtime(sig)) {
    return sig == SIGRTMIN ? "SIGRTMIN" : "SIGRTMIN+" + std::to_string(sig - SIGRTMIN);
  }
  return "signal " + std::to_string(sig);
}

// Every signal of kSignalRules and the real-time ones.
sigset_t watched_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (const SignalRule& r : kSignalRules) {
    sigaddset(&set, r.sig);
  }
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) {
    sigaddset(&set, sig);
  }
  return set;
}

// Called first in main, before any thread starts, so every thread inherits the mask: the watched
// signals are then only ever taken by SignalWatcher's sigtimedwait. The ignored ones are also set
// to SIG_IGN, so that a thread which unblocked one could not die of it; Linux still queues a
// blocked signal whose action is SIG_IGN, so sigtimedwait sees and logs it. A SIGPIPE raised by a
// write to a closed socket stays pending on the writing thread (writes use MSG_NOSIGNAL anyway).
void take_over_signals() {
  sigset_t set = watched_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sigismember(&set, sig) == 1 && action_of(sig) == SignalAction::kIgnore) {
      signal(sig, SIG_IGN);
    }
  }
}

// Takes the watched signals on its own thread. The first SIGTERM, SIGQUIT or SIGINT begins a
// graceful shutdown (SIGTERM and SIGQUIT keep the port open for the drain delay, SIGINT does
// not); a second one exits at once. SIGHUP re-reads the certificate files; the others are logged
// and ignored.
class SignalWatcher {
 public:
  SignalWatcher(server::WebhookServer& srv, const server::Log& log, std::chrono::milliseconds drain)
      : thread_(webhook::named_thread("signals",
                                      [this, &srv, &log, drain] { run(srv, log, drain); })) {}
  ~SignalWatcher() {
    done_ = true;
    thread_.join();
  }
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  void run(server::WebhookServer& srv, const server::Log& log, std::chrono::milliseconds drain) {
    const sigset_t set = watched_signals();
    int shutdowns = 0;
    while (!done_) {
      timespec tick{0, 200'000'000};
      siginfo_t info{};
      int sig = sigtimedwait(&set, &info, &tick);
      if (sig < 0) {
        continue;
      }
      const std::string name = signal_name(sig);
      // Sent by a process (kill, sigqueue, tgkill), not by the kernel: say which.
      const bool sent =
          info.si_code == SI_USER || info.si_code == SI_QUEUE || info.si_code == SI_TKILL;
      const std::int64_t pid = sent ? info.si_pid : 0;
      const std::int64_t uid = sent ? info.si_uid : 0;
      SignalAction action = action_of(sig);
      if (action == SignalAction::kIgnore) {
        log.warn("signal ignored", {{"signal", name}, {"sender_pid", pid}, {"sender_uid", uid}});
        continue;
      }
      if (action == SignalAction::kReload) {
        log.info(
            "signal received",
            {{"signal", name}, {"action", "re-read the certificate files"}, {"sender_pid", pid}});
        if (!srv.reload_certificates()) {
          log.info(
              "nothing to re-read: the certificate came from --server-cert/--server-key or "
              "--cert-mode=managed");
        }
        continue;
      }
      if (++shutdowns > 1) {
        log.error("second signal: exiting without waiting", {{"signal", name}});
        log.flush();
        std::_Exit(kExitStartup);
      }
      const bool with_drain = action == SignalAction::kShutdown;
      log.info("signal received",
               {{"signal", name},
                {"action", with_drain ? "graceful shutdown" : "graceful shutdown, no drain delay"},
                {"sender_pid", pid}});
      srv.shutdown(with_drain ? drain : std::chrono::milliseconds(0));
    }
  }

  std::atomic<bool> done_{false};
  std::thread thread_;
};

// --cert-mode=managed and the flags of its certificate, as lib/kube reads them.
kube::ManagedCertificateOptions certificate_options(const server::Flags& flags) {
  auto seconds = [](std::chrono::milliseconds d) {
    return std::chrono::duration_cast<std::chrono::seconds>(d);
  };
  return {.kube_config_path = flags.kube_config_path,
          .namespace_flag = flags.namespace_name,
          .secret = flags.cert_secret_name,
          .service = flags.cert_service_name,
          .mutating_config = flags.mutating_config_name,
          .validating_config = flags.validating_config_name,
          .validity = seconds(flags.cert_validity),
          .ca_validity = seconds(flags.cert_ca_validity),
          .renew_before = seconds(flags.cert_renew_before)};
}

// --cert-mode=managed: the certificate's manager, its first pair already in `config`; nullptr
// when the mode is another; an error (logged) when the process cannot start.
webhook::Result<std::unique_ptr<kube::ManagedCertificate>> managed_certificate(
    const server::Flags& flags, const server::Log& log, server::ServerConfig& config) {
  if (flags.cert_mode != server::CertMode::kManaged) {
    return std::unique_ptr<kube::ManagedCertificate>();
  }
  webhook::Result<std::unique_ptr<kube::ManagedCertificate>> m =
      kube::ManagedCertificate::open(certificate_options(flags), log);
  if (!m) {
    log.error("cannot start: --cert-mode=managed", {{"error", m.error().message}});
    log.flush();
    return m.error();
  }
  config.cert_pem = (*m)->first().cert_pem;
  config.key_pem = (*m)->first().key_pem;
  return m;
}

// --legacy-indexing and the flags of its slot claims, as lib/kube reads them.
kube::LegacyPlacementOptions placement_options(const server::Flags& flags) {
  return {.enabled = flags.legacy_indexing != server::LegacyIndexing::kOff,
          .required = flags.legacy_indexing == server::LegacyIndexing::kOn,
          .kube_config_path = flags.kube_config_path,
          .namespace_flag = flags.namespace_name,
          .reservation_ttl = flags.reservation_ttl,
          .claim_timeout = flags.claim_timeout};
}

// /readyz waits for the first Pod list, and /metrics adds the watches' and claims' figures.
server::ServerExtensions extensions_of(kube::LegacyPlacement& placement) {
  server::ServerExtensions extensions;
  if (placement.enabled()) {
    extensions.readiness.push_back(
        {"pods-synced", [&placement] { return placement.pods_synced(); }});
    extensions.metrics = [&placement] { return placement.metrics_text(); };
  }
  return extensions;
}

// Serves until a signal ends it; the exit status.
int serve(const server::Flags& flags, const server::Log& log) {
  webhook::Result<std::unique_ptr<kube::LegacyPlacement>> placement =
      kube::LegacyPlacement::open(placement_options(flags), log);
  if (!placement) {
    log.flush();  // the error is logged
    return kExitStartup;
  }
  kube::LegacyPlacement& legacy = **placement;
  admission::Handler handler(flags.handler, legacy.pods(), legacy.nodes(), legacy.services());
  server::ServerExtensions extensions = extensions_of(legacy);
  legacy.start();

  server::ServerConfig config = server::server_config(flags);
  webhook::Result<std::unique_ptr<kube::ManagedCertificate>> managed =
      managed_certificate(flags, log, config);
  if (!managed) {
    return kExitStartup;
  }
  webhook::Result<std::unique_ptr<server::WebhookServer>> srv =
      server::WebhookServer::start(config, handler, log, std::move(extensions));
  if (!srv) {
    log.error("cannot start", {{"error", srv.error().message}});
    log.flush();
    return kExitStartup;
  }
  if (*managed) {
    server::WebhookServer& serving = **srv;  // outlives the manager's thread: stopped below
    (*managed)->start([&serving](const kube::ServingPair& p) {
      serving.publish_certificate(p.cert_pem, p.key_pem);
    });
  }
  bool drained = false;
  {
    SignalWatcher signals(**srv, log, server::drain_delay(flags.shutdown_timeout));
    drained = (*srv)->wait();
  }
  if (drained && *managed) {
    (*managed)->stop();
  }
  if (drained) {
    legacy.stop();
  }
  log.flush();
  if (!drained) {
    std::_Exit(kExitStartup);  // requests still run on server threads: do not unwind them
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  take_over_signals();  // before any thread starts: SignalWatcher alone takes signals

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
  return serve(*flags, log);
}
