#include "server/flags.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <utility>

#include "admission/config_flags.h"
#include "base/encoding/base64.h"
#include "base/flags/flags.h"
#include "base/text/numbers.h"
#include "base/text/quantity.h"
#include "base/text/text.h"

#ifndef WEBHOOK_VERSION
#define WEBHOOK_VERSION "0.0.0"
#endif

namespace server {
namespace {

using webhook::invalid_argument;
using namespace std::chrono_literals;

constexpr std::size_t kMinBodyBytes = std::size_t{4} * 1024;
constexpr std::size_t kMaxBodyBytes = std::size_t{256} * 1024 * 1024;
constexpr int kMaxThreads = 4096;
constexpr int kMaxConnections = 1 << 20;
constexpr std::int64_t kMaxHeaderBytes = 1 << 20;
constexpr std::uint64_t kMinMemoryLimit = std::uint64_t{32} << 20;
constexpr int kMaxVerbosity = 4;

using webhook::flags::Flag;
using webhook::flags::FlagTable;
using webhook::flags::Kind;

// A duration flag that must be positive and at most `max`.
Flag<Flags> duration_flag(std::string name, std::chrono::milliseconds Flags::*field,
                          std::chrono::milliseconds max, std::string help) {
  return {.name = std::move(name),
          .value_name = "DURATION",
          .help = std::move(help),
          .apply = [field, max](Flags& f, std::string_view v) -> webhook::Status {
            webhook::Result<std::chrono::nanoseconds> d = parse_duration(v);
            if (!d) {
              return d.error();
            }
            if (*d <= 0ns || *d > max) {
              return invalid_argument("must be more than 0 and at most " +
                                      std::to_string(max.count() / 1000) + "s");
            }
            f.*field = std::chrono::ceil<std::chrono::milliseconds>(*d);
            return {};
          }};
}

Flag<Flags> address_flag(std::string name, ListenAddress Flags::*field, std::string help) {
  return {.name = std::move(name),
          .value_name = "HOST:PORT",
          .help = std::move(help),
          .apply = [field](Flags& f, std::string_view v) -> webhook::Status {
            webhook::Result<ListenAddress> a = parse_listen_address(v);
            if (!a) {
              return a.error();
            }
            f.*field = *a;
            return {};
          }};
}

Flag<Flags> string_flag(std::string name, std::string value_name, std::string Flags::*field,
                        std::string help) {
  return {.name = std::move(name),
          .value_name = std::move(value_name),
          .help = std::move(help),
          .apply = [field](Flags& f, std::string_view v) -> webhook::Status {
            f.*field = std::string(v);
            return {};
          }};
}

Flag<Flags> int_flag(std::string name, std::string value_name, std::int64_t min, std::int64_t max,
                     std::function<void(Flags&, std::int64_t)> set, std::string help) {
  return {.name = std::move(name),
          .value_name = std::move(value_name),
          .help = std::move(help),
          .apply = [min, max, set](Flags& f, std::string_view v) -> webhook::Status {
            std::optional<std::int64_t> n = webhook::parse_non_negative(v);
            if (!n || *n < min || *n > max) {
              return invalid_argument("expected a whole number from " + std::to_string(min) +
                                      " to " + std::to_string(max));
            }
            set(f, *n);
            return {};
          }};
}

// The value is never echoed in an error: it may be a private key.
Flag<Flags> base64_pem_flag(std::string name, std::string Flags::*field, std::string help) {
  return {.name = std::move(name),
          .value_name = "BASE64",
          .help = std::move(help),
          .apply = [field](Flags& f, std::string_view v) -> webhook::Status {
            std::optional<std::string> pem = webhook::base64_decode(v);
            if (!pem || pem->find("-----BEGIN ") == std::string::npos) {
              return invalid_argument("expected base64 of a PEM file (base64 -w0 tls.crt)");
            }
            f.*field = std::move(*pem);
            return {};
          },
          .secret = true};
}

// A flag whose value is one of `choices` (word, enum value).
template <class E>
Flag<Flags> choice_flag(std::string name, std::string value_name, E Flags::*field,
                        std::vector<std::pair<std::string, E>> choices, std::string expected,
                        std::string help) {
  return {.name = std::move(name),
          .value_name = std::move(value_name),
          .help = std::move(help),
          .apply = [field, choices, expected](Flags& f, std::string_view v) -> webhook::Status {
            for (const auto& [word, value] : choices) {
              if (v == word) {
                f.*field = value;
                return {};
              }
            }
            return invalid_argument(expected);
          }};
}

Flag<Flags> stop_flag(std::string name, std::string alias, bool Flags::*field, std::string help) {
  return {.name = std::move(name),
          .alias = std::move(alias),
          .help = std::move(help),
          .kind = Kind::kBoolean,
          .apply = [field](Flags& f, std::string_view) -> webhook::Status {
            f.*field = true;
            return {};
          },
          .stops = true};
}

Flag<Flags> memory_flag() {
  return {.name = "memory-limit",
          .value_name = "BYTES",
          .help =
              "the container's memory limit, such as 256Mi; requests in flight hold at most "
              "three quarters of it (default: the cgroup's limit, else 256Mi)",
          .apply = [](Flags& f, std::string_view v) -> webhook::Status {
            std::optional<std::uint64_t> n = webhook::parse_byte_count(v);
            if (!n) {
              return invalid_argument("expected a byte count such as 268435456 or 256Mi");
            }
            if (*n < kMinMemoryLimit) {
              return invalid_argument("must be at least 32Mi");
            }
            f.memory_limit = *n;
            return {};
          }};
}

void add_serving_flags(FlagTable<Flags>& t) {
  t.section("Serving")
      .add(address_flag("bind-address", &Flags::bind_address,
                        "HTTPS address of POST /mutate and POST /validate (default :9443)"))
      .add(address_flag("health-address", &Flags::health_address,
                        "plain-HTTP address of /healthz, /readyz and /metrics (default :8081)"))
      .add(string_flag("tls-cert-file", "FILE", &Flags::tls_cert_file,
                       "serving certificate (PEM, chain allowed), reloaded when it changes "
                       "(default /etc/kuberay-tpu-webhook/tls/tls.crt)"))
      .add(string_flag("tls-private-key-file", "FILE", &Flags::tls_key_file,
                       "its private key (default /etc/kuberay-tpu-webhook/tls/tls.key)"))
      .add(base64_pem_flag("server-cert", &Flags::server_cert_pem,
                           "the certificate as base64 PEM instead of the files (no reload)"))
      .add(base64_pem_flag("server-key", &Flags::server_key_pem,
                           "the key as base64 PEM; goes with --server-cert"))
      .add(int_flag(
          "max-body-bytes", "N", kMinBodyBytes, kMaxBodyBytes,
          [](Flags& f, std::int64_t n) {
            f.max_body_bytes = static_cast<std::size_t>(n);
            f.max_body_bytes_given = true;
          },
          "largest request body; larger is answered 413 (default 7340032)"))
      .add(duration_flag("read-timeout", &Flags::read_timeout, 10min,
                         "time a client has to send one request, TLS handshake included "
                         "(at most 10m; default 10s)"))
      .add(duration_flag("shutdown-timeout", &Flags::shutdown_timeout, 10min,
                         "on SIGTERM/SIGINT, time to finish in-flight requests before exiting "
                         "(at most 10m; default 15s)"))
      .add(int_flag(
          "threads", "N", 1, kMaxThreads,
          [](Flags& f, std::int64_t n) { f.threads = static_cast<int>(n); },
          "requests handled at once (the handler pool) when legacy placement may be on, else at "
          "most one per core (a CPU the container's limit allows); also the most I/O threads (one "
          "per core); idle connections hold none (1 to 4096; default 64)"))
      .add(int_flag(
          "max-connections", "N", 16, kMaxConnections,
          [](Flags& f, std::int64_t n) {
            f.max_connections = static_cast<int>(n);
            f.max_connections_given = true;
          },
          "open connections per port, at most what an eighth of --memory-limit holds; at the cap "
          "the oldest idle one is closed (16 to 1048576; default 4096)"))
      .add(int_flag(
          "max-header-bytes", "N", 1024, kMaxHeaderBytes,
          [](Flags& f, std::int64_t n) { f.max_header_bytes = static_cast<std::size_t>(n); },
          "request line and headers; larger is answered 431 and closed (default 16384)"))
      .add(duration_flag("idle-timeout", &Flags::idle_timeout, 1h,
                         "a keep-alive connection closes after this long without a request "
                         "(default 60s)"))
      .add(memory_flag());
}

void add_cert_flags(FlagTable<Flags>& t) {
  constexpr auto kMaxLifetime = std::chrono::hours(24 * 365 * 100);
  t.section("Managed certificate")
      .add(choice_flag<CertMode>(
          "cert-mode", "files|managed", &Flags::cert_mode,
          {{"files", CertMode::kFiles}, {"managed", CertMode::kManaged}},
          "expected files or managed",
          "files: serve --tls-cert-file (or --server-cert); managed: keep a CA and a serving "
          "certificate in Secret --cert-secret-name of the webhook's namespace, rotate them and "
          "patch the webhook configurations' caBundle; needs API access (default files)"))
      .add(string_flag("cert-secret-name", "NAME", &Flags::cert_secret_name,
                       "managed: the Secret (default kuberay-tpu-webhook-certs)"))
      .add(string_flag("cert-service-name", "NAME", &Flags::cert_service_name,
                       "managed: the Service the certificate names as "
                       "NAME.<namespace>.svc[.cluster.local] (default kuberay-tpu-webhook)"))
      .add(string_flag("mutating-webhook-config-name", "NAME", &Flags::mutating_config_name,
                       "managed: the MutatingWebhookConfiguration whose caBundle it fills, \"\" "
                       "for none (default kuberay-tpu-mutating-webhook-cfg)"))
      .add(string_flag("validating-webhook-config-name", "NAME", &Flags::validating_config_name,
                       "managed: the ValidatingWebhookConfiguration, \"\" for none "
                       "(default kuberay-tpu-validating-webhook-cfg)"))
      .add(duration_flag("cert-validity", &Flags::cert_validity, kMaxLifetime,
                         "managed: lifetime of a serving certificate (default 8760h)"))
      .add(duration_flag("cert-ca-validity", &Flags::cert_ca_validity, kMaxLifetime,
                         "managed: lifetime of the CA, at least twice --cert-validity "
                         "(default 87600h)"))
      .add(duration_flag("cert-renew-before", &Flags::cert_renew_before, kMaxLifetime,
                         "managed: renew this long before expiry, less than --cert-validity "
                         "(default 720h)"));
}

// The managed-certificate flags agree with each other and with the serving ones.
webhook::Status check_cert_flags(const Flags& flags, bool files_given) {
  if (flags.cert_mode != CertMode::kManaged) {
    return {};
  }
  if (!flags.server_cert_pem.empty() || files_given) {
    return invalid_argument(
        "--cert-mode=managed makes its own certificate: drop --server-cert/--server-key and "
        "--tls-cert-file/--tls-private-key-file, or use --cert-mode=files");
  }
  if (flags.cert_secret_name.empty() || flags.cert_service_name.empty()) {
    return invalid_argument("--cert-secret-name and --cert-service-name must not be empty");
  }
  if (flags.cert_validity < 2s) {
    return invalid_argument("--cert-validity must be at least 2s");
  }
  if (flags.cert_renew_before >= flags.cert_validity) {
    return invalid_argument("--cert-renew-before must be less than --cert-validity");
  }
  if (flags.cert_ca_validity < 2 * flags.cert_validity) {
    return invalid_argument("--cert-ca-validity must be at least twice --cert-validity");
  }
  return {};
}

void add_placement_flags(FlagTable<Flags>& t) {
  t.section("Placement")
      .add(admission::legacy_indexing_flags(), &Flags::legacy_indexing)
      .add(string_flag("kube-config-path", "FILE", &Flags::kube_config_path,
                       "kubeconfig for API access (default: in-cluster config)"))
      .add(duration_flag("reservation-ttl", &Flags::reservation_ttl, 1h,
                         "how long a slot claim holds its slot for a Pod the Pod watch has not "
                         "shown yet (default 10s)"))
      .add(duration_flag("claim-timeout", &Flags::claim_timeout, 30s,
                         "budget for writing one slot claim, retries included; then the Pod is "
                         "denied as retryable (default 3s; keep it well under the webhook "
                         "configuration's timeoutSeconds)"))
      .add(string_flag("namespace", "NS", &Flags::namespace_name,
                       "namespace of the claim Leases when neither POD_NAMESPACE nor the service "
                       "account's namespace file "
                       "(/var/run/secrets/kubernetes.io/serviceaccount/namespace) is set; the "
                       "first of the three that is set wins\n"
                       "Env: POD_NAME names this replica in its claims (else the host name)."))
      .add(admission::config_flags(), &Flags::handler);
}

void add_logging_flags(FlagTable<Flags>& t) {
  t.section("Logging")
      .add(choice_flag<LogFormat>("log-format", "text|json", &Flags::log_format,
                                  {{"text", LogFormat::kText}, {"json", LogFormat::kJson}},
                                  "expected text or json",
                                  "one line per admission as text or JSON (default text)"))
      .add(int_flag(
          "v", "0..4", 0, kMaxVerbosity,
          [](Flags& f, std::int64_t n) { f.verbosity = static_cast<int>(n); },
          "verbosity: 0 admissions, reloads and errors; 1 connection and TLS events; 2 request "
          "details; 3-4 patches (default 0)"));
}

const FlagTable<Flags>& table() {
  static const FlagTable<Flags> kFlags = [] {
    FlagTable<Flags> t;
    add_serving_flags(t);
    add_cert_flags(t);
    add_placement_flags(t);
    add_logging_flags(t);
    t.section("")
        .add(stop_flag("help", "h", &Flags::help, "this text"))
        .add(stop_flag("version", "", &Flags::version, "print the version"));
    t.positional([](Flags&, std::string_view arg) -> webhook::Status {
      return invalid_argument("unexpected argument " + webhook::quote(arg) +
                              "; every setting is a flag such as --bind-address=:9443 "
                              "(see --help)");
    });
    return t;
  }();
  return kFlags;
}

}  // namespace

std::string ListenAddress::text() const {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

webhook::Result<ListenAddress> parse_listen_address(std::string_view text) {
  std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    return invalid_argument("expected host:port or :port, such as :9443");
  }
  std::string_view host = text.substr(0, colon);
  if (host.starts_with('[')) {
    if (!host.ends_with(']') || host.size() < 3) {
      return invalid_argument("an IPv6 host needs brackets, such as [::1]:9443");
    }
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return invalid_argument("an IPv6 host needs brackets, such as [::1]:9443");
  }
  std::optional<std::int64_t> port = webhook::parse_non_negative(text.substr(colon + 1), 65535);
  if (!port) {
    return invalid_argument("the port must be a number from 0 to 65535");
  }
  // Bound as given: a name such as localhost would stand for several addresses, or none.
  std::string ip(host.substr(0, host.find('%')));  // an IPv6 zone (fe80::1%eth0) is kept
  unsigned char bytes[sizeof(in6_addr)];
  if (!host.empty() && inet_pton(AF_INET, ip.c_str(), bytes) != 1 &&
      inet_pton(AF_INET6, ip.c_str(), bytes) != 1) {
    return invalid_argument(
        "the host must be an IP address, such as 127.0.0.1:9443 or [::1]:9443, "
        "or empty for every interface (:9443); names are not resolved");
  }
  return ListenAddress{std::string(host), static_cast<int>(*port)};
}

namespace {

bool is_number_char(char c) { return (c >= '0' && c <= '9') || c == '.'; }

// The value of a decimal number such as "1.5" (digits with at most one point).
long double decimal_value(std::string_view number) {
  long double value = 0;
  long double fraction = 0.1L;
  bool after_point = false;
  for (char c : number) {
    if (c == '.') {
      after_point = true;
    } else if (after_point) {
      value += (c - '0') * fraction;
      fraction /= 10;
    } else {
      value = value * 10 + (c - '0');
    }
  }
  return value;
}

// The nanoseconds of one unit of Go's duration grammar; nullptr when `unit` is none.
const double* unit_scale(std::string_view unit) {
  static const std::pair<std::string_view, double> kUnits[] = {
      {"ns", 1.0}, {"us", 1e3}, {"\xC2\xB5s", 1e3}, {"\xCE\xBCs", 1e3},
      {"ms", 1e6}, {"s", 1e9},  {"m", 60e9},        {"h", 3600e9},
  };
  const double* scale = nullptr;
  for (const auto& [name, factor] : kUnits) {
    if (name == unit) {
      scale = &factor;
    }
  }
  return scale;
}

// The nanoseconds of the number and unit at text[i...] ("1.5h"), moving i past them.
webhook::Result<long double> duration_term(std::string_view text, std::size_t& i) {
  std::size_t start = i;
  while (i < text.size() && is_number_char(text[i])) {
    ++i;
  }
  std::string_view number = text.substr(start, i - start);
  if (number.empty() || number == "." || number.find('.') != number.rfind('.')) {
    return invalid_argument(
        "expected a number followed by a unit (ns, us, ms, s, m, h), "
        "such as 15s or 1m30s");
  }
  std::size_t unit_start = i;
  while (i < text.size() && !is_number_char(text[i])) {
    ++i;
  }
  std::string_view unit = text.substr(unit_start, i - unit_start);
  if (unit.empty()) {
    return invalid_argument("missing unit; expected such as " + std::string(number) + "s");
  }
  const double* scale = unit_scale(unit);
  if (scale == nullptr) {
    return invalid_argument("unknown unit " + webhook::quote(unit) +
                            "; expected ns, us, ms, s, m or h");
  }
  return decimal_value(number) * static_cast<long double>(*scale);
}

}  // namespace

// Go's duration grammar: terms of a number and a unit, summed.
webhook::Result<std::chrono::nanoseconds> parse_duration(std::string_view text) {
  if (text == "0") {
    return std::chrono::nanoseconds(0);
  }
  if (text.empty()) {
    return invalid_argument("empty duration; expected a number with a unit, such as 15s");
  }
  if (text.front() == '-' || text.front() == '+') {
    return invalid_argument("a duration has no sign; expected such as 15s");
  }
  long double total = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    webhook::Result<long double> term = duration_term(text, i);
    if (!term) {
      return term.error();
    }
    total += *term;
    if (total > static_cast<long double>(std::numeric_limits<std::int64_t>::max())) {
      return invalid_argument("duration too long");
    }
  }
  return std::chrono::nanoseconds(static_cast<std::int64_t>(total));
}

webhook::Result<Flags> parse_flags(const std::vector<std::string>& args) {
  Flags flags;
  std::vector<std::string> given;
  if (webhook::Status st = table().parse(args, flags, &given); !st) {
    return st.error();
  }
  if (flags.help || flags.version) {
    return flags;
  }
  bool cert_files_given = std::any_of(given.begin(), given.end(), [](const std::string& name) {
    return name == "tls-cert-file" || name == "tls-private-key-file";
  });
  bool inline_cert = !flags.server_cert_pem.empty();
  bool inline_key = !flags.server_key_pem.empty();
  if (inline_cert != inline_key) {
    return invalid_argument(
        "--server-cert and --server-key go together: give both (base64 PEM) or neither");
  }
  if (inline_cert && cert_files_given) {
    return invalid_argument(
        "both the base64 flags (--server-cert, --server-key) and the file flags "
        "(--tls-cert-file, --tls-private-key-file) are set; use one pair");
  }
  if (flags.tls_cert_file.empty() || flags.tls_key_file.empty()) {
    return invalid_argument("--tls-cert-file and --tls-private-key-file must not be empty");
  }
  if (webhook::Status st = check_cert_flags(flags, cert_files_given); !st) {
    return st.error();
  }
  return flags;
}

std::vector<std::string> flag_spellings() { return table().spellings(); }

std::string version_text() { return std::string("kuberay-tpu-webhook ") + WEBHOOK_VERSION; }

std::string usage() {
  return "kuberay-tpu-webhook: the admission webhook that wires KubeRay TPU worker Pods into "
         "slices.\n\n"
         "Usage: kuberay-tpu-webhook [flags]       (flags as --name=value or --name value)\n\n" +
         webhook::flags::render_help(table().docs(), {.column = 34, .equals = true}) +
         "\nDurations are Go durations: 15s, 500ms, 1m30s. A bad flag or value exits with "
         "status 2.\n";
}

}  // namespace server
