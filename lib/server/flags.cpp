#include "server/flags.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>

#include "base/encoding/base64.h"
#include "base/text/text.h"
#include "topology/names.h"
#include "base/text/numbers.h"

#ifndef WEBHOOK_VERSION
#define WEBHOOK_VERSION "0.0.0"
#endif

namespace server {
namespace {

using webhook::invalid_argument;
using namespace std::chrono_literals;

constexpr std::size_t kMinBodyBytes = 4 * 1024;
constexpr std::size_t kMaxBodyBytes = 256 * 1024 * 1024;
constexpr int kMaxThreads = 4096;
constexpr int kMaxVerbosity = 4;

// One flag: how to apply its value. Boolean flags take no value (or =true/=false).
struct FlagSpec {
  bool boolean = false;
  std::function<webhook::Status(Flags&, std::string_view value)> apply;
};

webhook::Status bad_value(std::string_view flag, std::string_view value, std::string_view want) {
  return invalid_argument("--" + std::string(flag) + "=" + std::string(value) + ": " +
                          std::string(want));
}

// A duration flag that must be positive and at most `max`.
FlagSpec duration_flag(std::chrono::milliseconds Flags::*field, std::string_view name,
                       std::chrono::milliseconds max) {
  return {false, [field, name, max](Flags& f, std::string_view v) -> webhook::Status {
            webhook::Result<std::chrono::nanoseconds> d = parse_duration(v);
            if (!d) {
              return bad_value(name, v, d.error().message);
            }
            if (*d <= 0ns || *d > max) {
              return bad_value(name, v,
                               "must be more than 0 and at most " +
                                   std::to_string(max.count() / 1000) + "s");
            }
            f.*field = std::chrono::ceil<std::chrono::milliseconds>(*d);
            return {};
          }};
}

FlagSpec port_flag(int topology::Ports::*field, std::string_view name) {
  return {false, [field, name](Flags& f, std::string_view v) -> webhook::Status {
            std::optional<std::int64_t> n = webhook::parse_non_negative(v, 65535);
            if (!n || *n == 0) {
              return bad_value(name, v, "expected a port number from 1 to 65535");
            }
            f.handler.ports.*field = static_cast<int>(*n);
            return {};
          }};
}

FlagSpec address_flag(ListenAddress Flags::*field, std::string_view name) {
  return {false, [field, name](Flags& f, std::string_view v) -> webhook::Status {
            webhook::Result<ListenAddress> a = parse_listen_address(v);
            if (!a) {
              return bad_value(name, v, a.error().message);
            }
            f.*field = *a;
            return {};
          }};
}

FlagSpec string_flag(std::string Flags::*field) {
  return {false, [field](Flags& f, std::string_view v) -> webhook::Status {
            f.*field = std::string(v);
            return {};
          }};
}

FlagSpec int_flag(std::string_view name, std::int64_t min, std::int64_t max,
                  std::function<void(Flags&, std::int64_t)> set) {
  return {false, [name, min, max, set](Flags& f, std::string_view v) -> webhook::Status {
            std::optional<std::int64_t> n = webhook::parse_non_negative(v);
            if (!n || *n < min || *n > max) {
              return bad_value(name, v,
                               "expected a whole number from " + std::to_string(min) + " to " +
                                   std::to_string(max));
            }
            set(f, *n);
            return {};
          }};
}

FlagSpec base64_pem_flag(std::string Flags::*field, std::string_view name) {
  return {false, [field, name](Flags& f, std::string_view v) -> webhook::Status {
            std::optional<std::string> pem = webhook::base64_decode(v);
            if (!pem || pem->find("-----BEGIN ") == std::string::npos) {
              // Never echo the value: it may be a private key.
              return invalid_argument("--" + std::string(name) +
                                      ": expected base64 of a PEM file (base64 -w0 tls.crt)");
            }
            f.*field = std::move(*pem);
            return {};
          }};
}

const std::map<std::string, FlagSpec, std::less<>>& specs() {
  static const std::map<std::string, FlagSpec, std::less<>> table = {
      {"bind-address", address_flag(&Flags::bind_address, "bind-address")},
      {"health-address", address_flag(&Flags::health_address, "health-address")},
      {"tls-cert-file", string_flag(&Flags::tls_cert_file)},
      {"tls-private-key-file", string_flag(&Flags::tls_key_file)},
      {"server-cert", base64_pem_flag(&Flags::server_cert_pem, "server-cert")},
      {"server-key", base64_pem_flag(&Flags::server_key_pem, "server-key")},
      {"kube-config-path", string_flag(&Flags::kube_config_path)},
      {"legacy-indexing",
       {false,
        [](Flags& f, std::string_view v) -> webhook::Status {
          if (v == "auto") {
            f.legacy_indexing = LegacyIndexing::kAuto;
          } else if (v == "on") {
            f.legacy_indexing = LegacyIndexing::kOn;
          } else if (v == "off") {
            f.legacy_indexing = LegacyIndexing::kOff;
          } else {
            return bad_value("legacy-indexing", v, "expected auto, on or off");
          }
          return {};
        }}},
      {"reservation-ttl", duration_flag(&Flags::reservation_ttl, "reservation-ttl", 1h)},
      {"claim-timeout", duration_flag(&Flags::claim_timeout, "claim-timeout", 30s)},
      {"namespace", string_flag(&Flags::namespace_name)},
      {"kuberay-version",
       {false,
        [](Flags& f, std::string_view v) -> webhook::Status {
          webhook::Result<topology::KubeRayVersion> version = topology::parse_kuberay_version(v);
          if (!version) {
            return bad_value("kuberay-version", v, version.error().message);
          }
          f.handler.kuberay = *version;
          return {};
        }}},
      {"tpu-process-port-base",
       port_flag(&topology::Ports::tpu_process_base, "tpu-process-port-base")},
      {"megascale-port-base", port_flag(&topology::Ports::megascale_base, "megascale-port-base")},
      {"device-plugin-port", port_flag(&topology::Ports::device_plugin, "device-plugin-port")},
      {"max-body-bytes",
       int_flag("max-body-bytes", kMinBodyBytes, kMaxBodyBytes,
                [](Flags& f, std::int64_t n) { f.max_body_bytes = static_cast<std::size_t>(n); })},
      {"read-timeout", duration_flag(&Flags::read_timeout, "read-timeout", 10min)},
      {"shutdown-timeout", duration_flag(&Flags::shutdown_timeout, "shutdown-timeout", 10min)},
      {"threads", int_flag("threads", 1, kMaxThreads,
                           [](Flags& f, std::int64_t n) { f.threads = static_cast<int>(n); })},
      {"log-format",
       {false,
        [](Flags& f, std::string_view v) -> webhook::Status {
          if (v == "text") {
            f.log_format = LogFormat::kText;
          } else if (v == "json") {
            f.log_format = LogFormat::kJson;
          } else {
            return bad_value("log-format", v, "expected text or json");
          }
          return {};
        }}},
      {"v", int_flag("v", 0, kMaxVerbosity,
                     [](Flags& f, std::int64_t n) { f.verbosity = static_cast<int>(n); })},
      {"help", {true, [](Flags& f, std::string_view) -> webhook::Status {
                  f.help = true;
                  return {};
                }}},
      {"h", {true, [](Flags& f, std::string_view) -> webhook::Status {
               f.help = true;
               return {};
             }}},
      {"version", {true, [](Flags& f, std::string_view) -> webhook::Status {
                     f.version = true;
                     return {};
                   }}},
  };
  return table;
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
  return ListenAddress{std::string(host), static_cast<int>(*port)};
}

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
  static const std::pair<std::string_view, double> kUnits[] = {
      {"ns", 1.0},  {"us", 1e3},         {"\xC2\xB5s", 1e3}, {"\xCE\xBCs", 1e3},
      {"ms", 1e6},  {"s", 1e9},          {"m", 60e9},        {"h", 3600e9},
  };
  long double total = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t start = i;
    while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) {
      ++i;
    }
    std::string_view number = text.substr(start, i - start);
    if (number.empty() || number == "." || number.find('.') != number.rfind('.')) {
      return invalid_argument("expected a number followed by a unit (ns, us, ms, s, m, h), "
                              "such as 15s or 1m30s");
    }
    std::size_t unit_start = i;
    while (i < text.size() && !((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) {
      ++i;
    }
    std::string_view unit = text.substr(unit_start, i - unit_start);
    if (unit.empty()) {
      return invalid_argument("missing unit; expected such as " + std::string(number) + "s");
    }
    const double* scale = nullptr;
    for (const auto& [name, factor] : kUnits) {
      if (name == unit) {
        scale = &factor;
      }
    }
    if (scale == nullptr) {
      return invalid_argument("unknown unit " + webhook::quote(unit) +
                              "; expected ns, us, ms, s, m or h");
    }
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
    total += value * static_cast<long double>(*scale);
    if (total > static_cast<long double>(std::numeric_limits<std::int64_t>::max())) {
      return invalid_argument("duration too long");
    }
  }
  return std::chrono::nanoseconds(static_cast<std::int64_t>(total));
}

webhook::Result<Flags> parse_flags(const std::vector<std::string>& args) {
  Flags flags;
  bool cert_files_given = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (!arg.starts_with('-') || arg == "-" || arg == "--") {
      return invalid_argument("unexpected argument " + webhook::quote(arg) +
                              "; every setting is a flag such as --bind-address=:9443 "
                              "(see --help)");
    }
    std::string_view body = arg.substr(arg.starts_with("--") ? 2 : 1);
    std::optional<std::string_view> value;
    if (std::size_t eq = body.find('='); eq != std::string_view::npos) {
      value = body.substr(eq + 1);
      body = body.substr(0, eq);
    }
    auto spec = specs().find(body);
    if (spec == specs().end()) {
      return invalid_argument("unknown flag --" + std::string(body) + " (see --help)");
    }
    const FlagSpec& s = spec->second;
    if (s.boolean) {
      if (value && *value != "true" && *value != "false") {
        return bad_value(body, *value, "expected true or false").error();
      }
      if (!value || *value == "true") {
        if (webhook::Status st = s.apply(flags, "true"); !st) {
          return st.error();
        }
      }
      if (flags.help || flags.version) {
        return flags;
      }
      continue;
    }
    if (!value) {
      if (i + 1 >= args.size()) {
        return invalid_argument("flag --" + std::string(body) + " needs a value (see --help)");
      }
      value = args[++i];
    }
    if (webhook::Status st = s.apply(flags, *value); !st) {
      return st.error();
    }
    if (body == "tls-cert-file" || body == "tls-private-key-file") {
      cert_files_given = true;
    }
  }
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
  return flags;
}

std::string version_text() { return std::string("kuberay-tpu-webhook ") + WEBHOOK_VERSION; }

std::string usage() {
  return R"(kuberay-tpu-webhook: the admission webhook that wires KubeRay TPU worker Pods into slices.

Usage: kuberay-tpu-webhook [flags]       (flags as --name=value or --name value)

Serving:
  --bind-address=HOST:PORT        HTTPS address of POST /mutate and POST /validate (default :9443)
  --health-address=HOST:PORT      plain-HTTP address of /healthz, /readyz and /metrics
                                  (default :8081)
  --tls-cert-file=FILE            serving certificate (PEM, chain allowed), reloaded when it
                                  changes (default /etc/kuberay-tpu-webhook/tls/tls.crt)
  --tls-private-key-file=FILE     its private key (default /etc/kuberay-tpu-webhook/tls/tls.key)
  --server-cert=BASE64            the certificate as base64 PEM instead of the files (no reload)
  --server-key=BASE64             the key as base64 PEM; goes with --server-cert
  --max-body-bytes=N              largest request body; larger is answered 413 (default 7340032)
  --read-timeout=DURATION         time a client has to send one request, TLS handshake
                                  included (default 10s)
  --shutdown-timeout=DURATION     on SIGTERM/SIGINT, time to finish in-flight requests
                                  before exiting (default 15s)
  --threads=N                     connections served at once (default 64)

Placement:
  --legacy-indexing=auto|on|off   place Pods without KubeRay's index labels (KubeRay 1.4, or
                                  1.5 without RayMultiHostIndexing) from the cluster's Pods and
                                  slot claims shared by every replica (needs API access; auto,
                                  the default: on when API access is configured, which in a Pod
                                  means always)
  --kube-config-path=FILE         kubeconfig for API access (default: in-cluster config)
  --reservation-ttl=DURATION      how long a slot claim holds its slot for a Pod the Pod watch
                                  has not shown yet (default 10s)
  --claim-timeout=DURATION        budget for writing one slot claim, retries included; then the
                                  Pod is denied as retryable (default 3s; keep it well under
                                  the webhook configuration's timeoutSeconds)
  --namespace=NS                  namespace of the claim Leases when neither POD_NAMESPACE nor
                                  the service account's namespace file
                                  (/var/run/secrets/kubernetes.io/serviceaccount/namespace) is
                                  set; the first of the three that is set wins
                                  Env: POD_NAME names this replica in its claims (else the host
                                  name).
  --kuberay-version=VERSION       KubeRay operator version (default 1.6); 1.3 or older names
                                  the headless Service <cluster>-headless-worker-svc
  --tpu-process-port-base=N       first slicebuilder/TPU process port (default 8471)
  --megascale-port-base=N         MEGASCALE_PORT base (default 8081)
  --device-plugin-port=N          port in TPU_DEVICE_PLUGIN_ADDR (default 2112)

Logging:
  --log-format=text|json          one line per admission as text or JSON (default text)
  --v=0..4                        verbosity: 0 admissions, reloads and errors; 1 connection and
                                  TLS events; 2 request details; 3-4 patches (default 0)

  -h, --help                      this text
  --version                       print the version

Durations are Go durations: 15s, 500ms, 1m30s. A bad flag or value exits with status 2.
)";
}

}  // namespace server
