// lib/server/flags: every flag of docs/server.md "Flags", its default, and every bad flag or value
// as one InvalidArgument line (the binary exits 2 with it).
#include "server/flags.h"

#include <catch2/catch.hpp>
#include <set>

#include "../support/flag_docs.h"
#include "base/encoding/base64.h"

namespace {

using namespace std::chrono_literals;

server::Flags parse_ok(std::vector<std::string> args) {
  webhook::Result<server::Flags> f = server::parse_flags(args);
  if (!f) {
    FAIL("unexpected error: " << f.error().message);
  }
  return *f;
}

std::string parse_error(std::vector<std::string> args) {
  webhook::Result<server::Flags> f = server::parse_flags(args);
  REQUIRE_FALSE(f.has_value());
  CHECK(f.error().code == webhook::ErrorCode::kInvalidArgument);
  CHECK(f.error().message.find('\n') == std::string::npos);
  return f.error().message;
}

}  // namespace

TEST_CASE("defaults match docs/server.md and the Go webhook's paths", "[flags]") {
  server::Flags f = parse_ok({});
  CHECK(f.bind_address.text() == ":9443");
  CHECK(f.health_address.text() == ":8081");
  CHECK(f.tls_cert_file == "/etc/kuberay-tpu-webhook/tls/tls.crt");
  CHECK(f.tls_key_file == "/etc/kuberay-tpu-webhook/tls/tls.key");
  CHECK(f.legacy_indexing == server::LegacyIndexing::kAuto);
  CHECK(f.max_body_bytes == 7u * 1024 * 1024);
  CHECK_FALSE(f.max_body_bytes_given);
  CHECK(f.read_timeout == 10s);
  CHECK(f.shutdown_timeout == 15s);
  CHECK(f.reservation_ttl == 10s);
  CHECK(f.log_format == server::LogFormat::kText);
  CHECK(f.verbosity == 0);
  CHECK(f.handler.ports.tpu_process_base == 8471);
  CHECK(f.handler.ports.megascale_base == 8081);
  CHECK(f.handler.ports.device_plugin == 2112);
  CHECK(f.handler.kuberay.text() == "1.6");
  CHECK(f.claim_timeout == 3s);
  CHECK(f.namespace_name.empty());
}

TEST_CASE("M3.3: the slot-claim flags: --claim-timeout and --namespace", "[flags]") {
  server::Flags f = parse_ok({"--claim-timeout=2500ms", "--namespace=ray"});
  CHECK(f.claim_timeout == 2500ms);
  CHECK(f.namespace_name == "ray");
  CHECK(parse_ok({"--claim-timeout=30s"}).claim_timeout == 30s);
  std::string help = server::usage();
  CHECK_THAT(help, Catch::Contains("--claim-timeout=DURATION") &&
                       Catch::Contains("POD_NAMESPACE") &&
                       Catch::Contains("/var/run/secrets/kubernetes.io/serviceaccount/namespace") &&
                       Catch::Contains("POD_NAME"));
}

TEST_CASE("every flag is read in Go's forms", "[flags]") {
  server::Flags f =
      parse_ok({"--bind-address=127.0.0.1:0", "-health-address", "[::1]:9000", "--tls-cert-file=/c",
                "--tls-private-key-file", "/k", "--kube-config-path=/kc", "--legacy-indexing=off",
                "--reservation-ttl=1m30s", "--kuberay-version=1.3", "--tpu-process-port-base=9471",
                "--megascale-port-base=9081", "--device-plugin-port=3112",
                "--max-body-bytes=1048576", "--read-timeout=250ms", "--shutdown-timeout=2m",
                "--threads=4", "--log-format=json", "-v=4"});
  CHECK(f.bind_address.host == "127.0.0.1");
  CHECK(f.bind_address.port == 0);
  CHECK(f.health_address.host == "::1");
  CHECK(f.health_address.text() == "[::1]:9000");
  CHECK(f.tls_cert_file == "/c");
  CHECK(f.tls_key_file == "/k");
  CHECK(f.kube_config_path == "/kc");
  CHECK(f.legacy_indexing == server::LegacyIndexing::kOff);
  CHECK(f.reservation_ttl == 90s);
  CHECK(f.handler.kuberay.legacy_headless_service());
  CHECK(f.handler.ports.tpu_process_base == 9471);
  CHECK(f.handler.ports.megascale_base == 9081);
  CHECK(f.handler.ports.device_plugin == 3112);
  CHECK(f.max_body_bytes == 1048576u);
  CHECK(f.max_body_bytes_given);
  CHECK(f.read_timeout == 250ms);
  CHECK(f.shutdown_timeout == 2min);
  CHECK(f.threads == 4);
  CHECK(f.log_format == server::LogFormat::kJson);
  CHECK(f.verbosity == 4);
}

TEST_CASE("help and version flags stop parsing", "[flags]") {
  CHECK(parse_ok({"--help"}).help);
  CHECK(parse_ok({"-h"}).help);
  CHECK(parse_ok({"-help", "--bogus"}).help);
  CHECK(parse_ok({"--version"}).version);
  CHECK(server::usage().find("--bind-address") != std::string::npos);
  CHECK(server::version_text().starts_with("kuberay-tpu-webhook "));
}

TEST_CASE("the base64 flags --server-cert and --server-key carry PEM", "[flags]") {
  std::string cert = webhook::base64_encode("-----BEGIN CERTIFICATE-----\nx\n");
  std::string key = webhook::base64_encode("-----BEGIN PRIVATE KEY-----\ny\n");
  server::Flags f = parse_ok({"--server-cert=" + cert, "--server-key=" + key});
  CHECK(f.server_cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
  CHECK(f.server_key_pem.starts_with("-----BEGIN PRIVATE KEY-----"));
}

TEST_CASE("bad flags and values are one line naming the flag", "[flags]") {
  std::string cert = webhook::base64_encode("-----BEGIN CERTIFICATE-----\nx\n");
  std::string key = webhook::base64_encode("-----BEGIN PRIVATE KEY-----\ny\n");
  auto [args, expected] = GENERATE_COPY(table<std::vector<std::string>, std::string>({
      {{"--bogus=1"}, "unknown flag --bogus"},
      {{"positional"}, "unexpected argument \"positional\""},
      {{"--bind-address"}, "--bind-address needs a value"},
      {{"--bind-address=9443"}, "--bind-address=9443: expected host:port"},
      {{"--bind-address=:99999"}, "port must be a number from 0 to 65535"},
      {{"--bind-address=::1:9443"}, "IPv6 host needs brackets"},
      {{"--bind-address=localhost:9443"}, "the host must be an IP address"},
      {{"--health-address=[webhook]:8081"}, "names are not resolved"},
      {{"--bind-address=10.0.0.256:9443"}, "--bind-address=10.0.0.256:9443: the host must"},
      {{"--health-address=:x"}, "--health-address=:x"},
      {{"--legacy-indexing=maybe"}, "expected auto, on or off"},
      {{"--reservation-ttl=10"}, "missing unit"},
      {{"--reservation-ttl=0s"}, "must be more than 0"},
      {{"--claim-timeout=3"}, "missing unit"},
      {{"--claim-timeout=0s"}, "must be more than 0 and at most 30s"},
      {{"--claim-timeout=31s"}, "must be more than 0 and at most 30s"},
      {{"--namespace"}, "--namespace needs a value"},
      {{"--read-timeout=-1s"}, "no sign"},
      {{"--read-timeout=5parsecs"}, "unknown unit"},
      {{"--read-timeout=1h"}, "at most 600s"},
      {{"--shutdown-timeout=abc"}, "--shutdown-timeout=abc"},
      {{"--kuberay-version=one"}, "--kuberay-version=one"},
      {{"--tpu-process-port-base=0"}, "port number from 1 to 65535"},
      {{"--megascale-port-base=70000"}, "port number from 1 to 65535"},
      {{"--device-plugin-port=-1"}, "port number from 1 to 65535"},
      {{"--max-body-bytes=10"}, "from 4096 to"},
      {{"--max-body-bytes=7MiB"}, "whole number"},
      {{"--threads=0"}, "from 1 to 4096"},
      {{"--log-format=xml"}, "expected text or json"},
      {{"--v=5"}, "from 0 to 4"},
      {{"--help=maybe"}, "expected true or false"},
      {{"--server-cert=!!!"}, "--server-cert: expected base64 of a PEM file"},
      {{"--server-cert=" + cert}, "go together"},
      {{"--server-key=" + key}, "go together"},
      {{"--server-cert=" + cert, "--server-key=" + key, "--tls-cert-file=/c"}, "use one pair"},
      {{"--tls-cert-file="}, "must not be empty"},
  }));
  CAPTURE(args);
  std::string message = parse_error(args);
  CHECK_THAT(message, Catch::Contains(expected));
}

TEST_CASE("the memory limit flag takes a byte count, at least 32Mi", "[flags]") {
  CHECK(parse_ok({}).memory_limit == 0);  // 0: the cgroup's limit decides
  CHECK(parse_ok({"--memory-limit=256Mi"}).memory_limit == 268435456);
  CHECK(parse_ok({"--memory-limit=1Gi"}).memory_limit == 1073741824);
  CHECK(parse_ok({"--memory-limit=33554432"}).memory_limit == 33554432);
  CHECK(parse_ok({"--memory-limit=34M"}).memory_limit == 34000000);
  auto [args, expected] = GENERATE(table<std::vector<std::string>, std::string>({
      {{"--memory-limit=33554431"}, "--memory-limit=33554431: must be at least 32Mi"},
      {{"--memory-limit=31Mi"}, "must be at least 32Mi"},
      {{"--memory-limit=1.5Gi"}, "expected a byte count such as 268435456 or 256Mi"},
      {{"--memory-limit=1Pi"}, "expected a byte count"},
      {{"--memory-limit=256MiB"}, "expected a byte count"},
      {{"--memory-limit=-1"}, "expected a byte count"},
      {{"--memory-limit=16777216Ti"}, "expected a byte count"},
  }));
  CAPTURE(args);
  CHECK_THAT(parse_error(args), Catch::Contains(expected));
}

TEST_CASE("a private key is never echoed in an error", "[flags]") {
  std::string message = parse_error({"--server-key=c2VjcmV0LWtleS1ieXRlcw"});  // not PEM
  CHECK(message.find("c2VjcmV0") == std::string::npos);
}

TEST_CASE("Go durations", "[flags]") {
  auto [text, ns] = GENERATE(table<std::string, std::int64_t>({
      {"0", 0},
      {"15s", 15'000'000'000},
      {"1m30s", 90'000'000'000},
      {"250ms", 250'000'000},
      {"1.5h", 5'400'000'000'000},
      {"10us", 10'000},
      {"10\xC2\xB5s", 10'000},
      {"7ns", 7},
      {".5s", 500'000'000},
  }));
  CAPTURE(text);
  webhook::Result<std::chrono::nanoseconds> d = server::parse_duration(text);
  REQUIRE(d.has_value());
  CHECK(d->count() == ns);
}

TEST_CASE("bad Go durations", "[flags]") {
  auto text = GENERATE(as<std::string>{}, "", "s", "10", "1.2.3s", "-5s", "5 s", "5sec",
                       "99999999999h", ".s");
  CAPTURE(text);
  CHECK_FALSE(server::parse_duration(text).has_value());
}

TEST_CASE("every flag parse_flags reads is in --help and docs/server.md, and no other", "[flags]") {
  std::vector<std::string> spellings = server::flag_spellings();
  std::set<std::string> table(spellings.begin(), spellings.end());
  CHECK(table.size() == spellings.size());  // no flag is in the table twice
  CHECK(table.count("--bind-address") == 1);
  CHECK(table.count("-h") == 1);
  CHECK(testing::help_flags(server::usage()) == table);
  CHECK(testing::documented_flags(FIXTURE_DIR "/../../docs/server.md") == table);
}

TEST_CASE("--help keeps its sections, defaults and the flags' value names", "[flags]") {
  std::string help = server::usage();
  CHECK_THAT(help, Catch::StartsWith("kuberay-tpu-webhook: the admission webhook") &&
                       Catch::Contains("\nServing:\n  --bind-address=HOST:PORT        HTTPS") &&
                       Catch::Contains("\nPlacement:\n  --legacy-indexing=auto|on|off   place") &&
                       Catch::Contains("\nLogging:\n  --log-format=text|json") &&
                       Catch::Contains("  --kuberay-version=VERSION       KubeRay operator version "
                                       "(default 1.6)") &&
                       Catch::Contains("  --tpu-process-port-base=N       first slicebuilder/TPU "
                                       "process port (default 8471)") &&
                       Catch::Contains("(default 8081)") && Catch::Contains("(default 2112)") &&
                       Catch::Contains("\n\n  -h, --help                      this text\n") &&
                       Catch::EndsWith("exits with status 2.\n"));
}

TEST_CASE("the flags shared with webhook-dryrun word their errors as it does", "[flags]") {
  // The same lines test/unit/dryrun/cli_test.cpp expects after "webhook-dryrun: ".
  CHECK(parse_error({"--tpu-process-port-base=70000"}) ==
        "--tpu-process-port-base=70000: expected a port number from 1 to 65535");
  CHECK(parse_error({"--device-plugin-port", "0"}) ==
        "--device-plugin-port 0: expected a port number from 1 to 65535");
  CHECK(parse_error({"--kuberay-version=latest"}) ==
        "--kuberay-version=latest: KubeRay version \"latest\" is invalid; expected MAJOR.MINOR "
        "such as 1.6 or v1.5.0");
  CHECK(parse_error({"--megascale-port-base"}) ==
        "flag --megascale-port-base needs a value (see --help)");
  CHECK(parse_error({"--bogus=1"}) == "unknown flag --bogus (see --help)");
}

TEST_CASE("Managed certificates: --cert-mode=managed and its flags: defaults, values and refusals",
          "[flags]") {
  server::Flags d = parse_ok({});
  CHECK(d.cert_mode == server::CertMode::kFiles);
  CHECK(d.cert_secret_name == "kuberay-tpu-webhook-certs");
  CHECK(d.cert_service_name == "kuberay-tpu-webhook");
  CHECK(d.mutating_config_name == "kuberay-tpu-mutating-webhook-cfg");
  CHECK(d.validating_config_name == "kuberay-tpu-validating-webhook-cfg");
  CHECK(d.cert_validity == 8760h);
  CHECK(d.cert_ca_validity == 87600h);
  CHECK(d.cert_renew_before == 720h);

  server::Flags m = parse_ok({"--cert-mode=managed", "--cert-secret-name=s", "--cert-service-name",
                              "svc", "--mutating-webhook-config-name=", "--cert-validity=6s",
                              "--cert-ca-validity=12s", "--cert-renew-before=3s"});
  CHECK(m.cert_mode == server::CertMode::kManaged);
  CHECK(m.cert_secret_name == "s");
  CHECK(m.cert_service_name == "svc");
  CHECK(m.mutating_config_name.empty());
  CHECK(m.cert_validity == 6s);
  CHECK(m.cert_ca_validity == 12s);
  CHECK(m.cert_renew_before == 3s);
  // The lifetimes are checked against each other in managed mode only.
  CHECK(parse_ok({"--cert-validity=1s"}).cert_validity == 1s);

  auto [args, expected] = GENERATE_COPY(table<std::vector<std::string>, std::string>({
      {{"--cert-mode=auto"}, "--cert-mode=auto: expected files or managed"},
      {{"--cert-validity=6"}, "--cert-validity=6: missing unit"},
      {{"--cert-mode=managed", "--cert-validity=1s"}, "--cert-validity must be at least 2s"},
      {{"--cert-mode=managed", "--cert-validity=10s", "--cert-renew-before=10s"},
       "--cert-renew-before must be less than --cert-validity"},
      {{"--cert-mode=managed", "--cert-validity=10s", "--cert-renew-before=1s",
        "--cert-ca-validity=19s"},
       "--cert-ca-validity must be at least twice --cert-validity"},
      {{"--cert-mode=managed", "--cert-secret-name="},
       "--cert-secret-name and --cert-service-name must not be empty"},
      {{"--cert-mode=managed", "--tls-cert-file=/c"}, "--cert-mode=managed makes its own"},
      {{"--cert-mode=managed", "--server-cert=" + webhook::base64_encode("-----BEGIN CERT\n"),
        "--server-key=" + webhook::base64_encode("-----BEGIN KEY\n")},
       "--cert-mode=managed makes its own"},
  }));
  CAPTURE(args);
  CHECK_THAT(parse_error(args), Catch::Contains(expected));
}
