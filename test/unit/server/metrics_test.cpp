// lib/server/metrics: the Prometheus text of docs/server.md "Metrics" (names, labels, cumulative
// buckets). The integration test runs `promtool check metrics` on a live server's output.
#include "server/metrics.h"

#include <catch2/catch.hpp>

#include "base/metrics/prometheus.h"

namespace {

using namespace std::chrono_literals;

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

}  // namespace

TEST_CASE("every family has HELP and TYPE", "[metrics]") {
  server::Metrics m;
  std::string text = m.render();
  for (const char* family :
       {"kuberay_tpu_webhook_requests_total counter",
        "kuberay_tpu_webhook_request_duration_seconds histogram",
        "kuberay_tpu_webhook_requests_in_flight gauge", "kuberay_tpu_webhook_denials_total counter",
        "kuberay_tpu_webhook_placements_total counter",
        "kuberay_tpu_webhook_env_omitted_total counter",
        "kuberay_tpu_webhook_tls_reloads_total counter",
        "kuberay_tpu_webhook_tls_certificate_expiry_timestamp_seconds gauge",
        "kuberay_tpu_webhook_ready gauge", "kuberay_tpu_webhook_build_info gauge",
        "process_resident_memory_bytes gauge"}) {
    CAPTURE(family);
    CHECK(has_line(text, std::string("# TYPE ") + family));
  }
}

TEST_CASE("requests, latency, in-flight, denials, placements, reloads and expiry are counted",
          "[metrics]") {
  server::Metrics m;
  m.request_started(server::Webhook::kMutate);
  m.request_started(server::Webhook::kMutate);
  m.request_finished(server::Webhook::kMutate, 200, 300us);
  m.request_started(server::Webhook::kValidate);
  m.request_finished(server::Webhook::kValidate, 400, 2ms);
  m.request_started(server::Webhook::kOther);
  m.request_finished(server::Webhook::kOther, 404, 1us);
  m.request_started(server::Webhook::kMutate);
  m.request_finished(server::Webhook::kMutate, 418, 1us);  // an unlisted code
  m.denial(server::Webhook::kValidate, "invalid_topology");
  m.denial(server::Webhook::kValidate, "invalid_topology");
  m.denial(server::Webhook::kMutate, "has \"quotes\"\\");
  m.placement("labels");
  m.placement("legacy");
  m.placement("labels");
  m.slicebuilder_omitted();
  m.tls_reload(true);
  m.tls_reload(false);
  m.tls_reload(false);
  m.set_certificate_expiry(1893456000);
  m.set_ready(true);
  std::string text = m.render();
  CAPTURE(text);
  CHECK(has_line(text, R"(kuberay_tpu_webhook_requests_total{webhook="mutate",code="200"} 1)"));
  CHECK(has_line(text, R"(kuberay_tpu_webhook_requests_total{webhook="mutate",code="other"} 1)"));
  CHECK(has_line(text, R"(kuberay_tpu_webhook_requests_total{webhook="validate",code="400"} 1)"));
  CHECK(has_line(text, R"(kuberay_tpu_webhook_requests_total{webhook="other",code="404"} 1)"));
  CHECK(has_line(text, R"(kuberay_tpu_webhook_requests_in_flight{webhook="mutate"} 1)"));
  CHECK(has_line(
      text,
      R"(kuberay_tpu_webhook_request_duration_seconds_bucket{webhook="mutate",le="0.00025"} 1)"));
  CHECK(has_line(
      text,
      R"(kuberay_tpu_webhook_request_duration_seconds_bucket{webhook="mutate",le="0.0005"} 2)"));
  CHECK(has_line(
      text,
      R"(kuberay_tpu_webhook_request_duration_seconds_bucket{webhook="validate",le="0.001"} 0)"));
  CHECK(has_line(
      text,
      R"(kuberay_tpu_webhook_request_duration_seconds_bucket{webhook="validate",le="0.0025"} 1)"));
  CHECK(has_line(
      text,
      R"(kuberay_tpu_webhook_request_duration_seconds_bucket{webhook="validate",le="+Inf"} 1)"));
  CHECK(
      has_line(text, R"(kuberay_tpu_webhook_request_duration_seconds_count{webhook="mutate"} 2)"));
  CHECK(has_line(text,
                 R"(kuberay_tpu_webhook_request_duration_seconds_sum{webhook="validate"} 0.002)"));
  CHECK(has_line(
      text,
      R"(kuberay_tpu_webhook_denials_total{webhook="validate",reason="invalid_topology"} 2)"));
  CHECK(has_line(
      text, R"(kuberay_tpu_webhook_denials_total{webhook="mutate",reason="has \"quotes\"\\"} 1)"));
  CHECK(has_line(text, R"(kuberay_tpu_webhook_placements_total{path="labels"} 2)"));
  CHECK(has_line(text, R"(kuberay_tpu_webhook_placements_total{path="legacy"} 1)"));
  CHECK(has_line(
      text,
      R"(kuberay_tpu_webhook_env_omitted_total{variable="TORCH_TPU_SLICEBUILDER_ADDRESSES"} 1)"));
  CHECK(has_line(text, R"(kuberay_tpu_webhook_tls_reloads_total{result="success"} 1)"));
  CHECK(has_line(text, R"(kuberay_tpu_webhook_tls_reloads_total{result="failure"} 2)"));
  CHECK(has_line(text, "kuberay_tpu_webhook_tls_certificate_expiry_timestamp_seconds 1893456000"));
  CHECK(has_line(text, "kuberay_tpu_webhook_ready 1"));
}

TEST_CASE("denial reasons are bounded", "[metrics]") {
  server::Metrics m;
  for (int i = 0; i < server::Metrics::kMaxReasons + 10; ++i) {
    m.denial(server::Webhook::kMutate, "reason_" + std::to_string(i));
  }
  m.denial(server::Webhook::kMutate, std::string(100, 'x'));
  std::string text = m.render();
  CHECK(has_line(text, R"(kuberay_tpu_webhook_denials_total{webhook="mutate",reason="other"} 11)"));
  CHECK(text.find("reason_" + std::to_string(server::Metrics::kMaxReasons) + "\"") ==
        std::string::npos);
}

TEST_CASE("the Prometheus text writer: families, samples, escaped labels, shortest numbers",
          "[metrics]") {
  namespace prom = webhook::prometheus;
  std::string out;
  prom::family(out, "x_total", "counter", "Things.");
  prom::sample(out, "x_total", "", "3");
  prom::sample(out, "x_total", "name=\"" + prom::escape_label("a\"b\\c\nd") + "\"", "4");
  CHECK(out ==
        "# HELP x_total Things.\n# TYPE x_total counter\nx_total 3\n"
        "x_total{name=\"a\\\"b\\\\c\\nd\"} 4\n");
  CHECK(prom::number(0.00025) == "0.00025");
  CHECK(prom::number(1.0) == "1");
  CHECK(prom::number(2.5e-7) == "2.5e-07");
  CHECK(prom::number(123456789.0) == "123456789");
}
