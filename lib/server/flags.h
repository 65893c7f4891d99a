#pragma once
// The command line of kuberay-tpu-webhook. Go-style flags (`--name=value`, `--name value`, one or
// two dashes), keeping the Go webhook's names so the binary is a drop-in.
//
//   webhook::Result<server::Flags> flags = server::parse_flags({"--bind-address=:9443", "--v=2"});
//   if (!flags) {
//     std::cerr << "kuberay-tpu-webhook: " << flags.error().message << "\n";
//     return 2;
//   }
//   if (flags->help) { std::cout << server::usage(); return 0; }
//
// Every bad flag or value is one InvalidArgument whose message is one line naming the flag, the
// value and what is expected.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "admission/config_flags.h"
#include "admission/handler.h"
#include "base/status/result.h"

namespace server {

using LegacyIndexing = admission::LegacyIndexing;
enum class LogFormat { kText, kJson };
// Where the serving certificate comes from: files (or --server-cert), or a Secret the webhook
// keeps itself, with its webhook configurations' caBundle (kube/cert_manager.h).
enum class CertMode { kFiles, kManaged };

// A listen address such as ":9443", "127.0.0.1:0" or "[::1]:8081". An empty host means every
// interface; port 0 asks the kernel for a free port.
struct ListenAddress {
  std::string host;
  int port = 0;

  // "host:port" as given (IPv6 hosts in brackets).
  std::string text() const;
};

struct Flags {
  ListenAddress bind_address{"", 9443};
  ListenAddress health_address{"", 8081};
  std::string tls_cert_file = "/etc/kuberay-tpu-webhook/tls/tls.crt";
  std::string tls_key_file = "/etc/kuberay-tpu-webhook/tls/tls.key";
  // PEM text decoded from --server-cert / --server-key (base64); when set, the files are not read.
  std::string server_cert_pem;
  std::string server_key_pem;
  std::string kube_config_path;
  // --cert-mode=managed: the Secret, the Service its certificate names, the configurations whose
  // caBundle trusts it ("" skips one), and the lifetimes.
  CertMode cert_mode = CertMode::kFiles;
  std::string cert_secret_name = "kuberay-tpu-webhook-certs";
  std::string cert_service_name = "kuberay-tpu-webhook";
  std::string mutating_config_name = "kuberay-tpu-mutating-webhook-cfg";
  std::string validating_config_name = "kuberay-tpu-validating-webhook-cfg";
  std::chrono::milliseconds cert_validity{std::chrono::hours(24 * 365)};
  std::chrono::milliseconds cert_ca_validity{std::chrono::hours(24 * 3650)};
  std::chrono::milliseconds cert_renew_before{std::chrono::hours(24 * 30)};
  LegacyIndexing legacy_indexing = LegacyIndexing::kAuto;
  std::chrono::milliseconds reservation_ttl{10'000};
  // Budget for writing one slot claim (retries included); well inside the webhook's 5 s
  // admission timeout.
  std::chrono::milliseconds claim_timeout{3'000};
  // The webhook's namespace when neither POD_NAMESPACE nor the service account's namespace file
  // gives one (kube::webhook_namespace).
  std::string namespace_name;
  admission::Config handler;  // --kuberay-version and the port bases
  std::size_t max_body_bytes = std::size_t{7} * 1024 * 1024;
  bool max_body_bytes_given = false;  // --max-body-bytes was passed
  std::chrono::milliseconds read_timeout{10'000};
  std::chrono::milliseconds idle_timeout{60'000};
  std::chrono::milliseconds shutdown_timeout{15'000};
  int threads = 64;
  int max_connections = 4096;  // per listening port
  bool max_connections_given = false;
  std::size_t max_header_bytes = 16384;
  // Bytes; 0: the container's cgroup memory limit, else kDefaultMemoryLimit.
  std::uint64_t memory_limit = 0;
  LogFormat log_format = LogFormat::kText;
  int verbosity = 0;
  bool help = false;
  bool version = false;
};

// Parses argv without the program name. --help and --version stop parsing and set their field.
// InvalidArgument (one line) for an unknown flag, a missing or malformed value, a value out of
// range, a positional argument, --server-cert without --server-key (or the reverse), or the
// base64 flags together with --tls-cert-file/--tls-private-key-file, or with --cert-mode=managed;
// in managed mode an empty --cert-secret-name or --cert-service-name, a --cert-validity under 2s,
// a --cert-renew-before not under --cert-validity, a --cert-ca-validity under twice
// --cert-validity.
webhook::Result<Flags> parse_flags(const std::vector<std::string>& args);

// Parses a Go duration such as "15s", "1m30s", "250ms" or "1.5h" (units ns, us, µs, ms, s, m,
// h; "0" needs none). InvalidArgument for a missing unit, an unknown unit, a sign or overflow.
webhook::Result<std::chrono::nanoseconds> parse_duration(std::string_view text);

// Parses ":9443", "host:9443", "[::1]:9443". InvalidArgument for a missing or bad port.
webhook::Result<ListenAddress> parse_listen_address(std::string_view text);

// The --help text, generated from the table parse_flags reads.
std::string usage();

// Every flag parse_flags accepts, as --help spells it ("--bind-address", "-h", "--help", ...).
std::vector<std::string> flag_spellings();

// The version printed by --version, e.g. "kuberay-tpu-webhook 0.3.0".
std::string version_text();

}  // namespace server
