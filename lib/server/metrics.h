#pragma once
// The server's Prometheus metrics, kept in atomics (no lock on the request path) and written in
// the text exposition format by render().
//
//   server::Metrics m;
//   m.request_started(server::Webhook::kMutate);
//   m.request_finished(server::Webhook::kMutate, 200, std::chrono::microseconds(180));
//   m.denial(server::Webhook::kMutate, "invalid_topology");
//   std::string text = m.render();   // `promtool check metrics` accepts it
//
// Every name starts with kuberay_tpu_webhook_. Label values come from a fixed set (webhooks,
// codes, placement paths) or from the Handler's denial reasons; reasons beyond kMaxReasons
// distinct values are counted as "other", so a bug cannot grow the output without bound.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace server {

enum class Webhook { kMutate, kValidate, kOther };
inline constexpr int kWebhooks = 3;

// "mutate", "validate" or "other".
std::string_view webhook_name(Webhook w);

class Metrics {
 public:
  static constexpr int kMaxReasons = 64;
  // Upper bounds (seconds) of the latency histogram's buckets; +Inf is implied.
  static constexpr std::array<double, 14> kLatencyBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};

  Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // In-flight accounting and the request counter/histogram. `code` is the HTTP status, or the
  // AdmissionReview's status code when the answer is a review.
  void request_started(Webhook w);
  void request_finished(Webhook w, int code, std::chrono::nanoseconds latency);
  void denial(Webhook w, std::string_view reason);
  // `path` is podpatch::path_name: "labels" or "legacy".
  void placement(std::string_view path);
  // A Pod admitted with TORCH_TPU_SLICEBUILDER_ADDRESSES left out (docs/spec.md M8.2).
  void slicebuilder_omitted();
  void tls_reload(bool ok);
  // notAfter of the served certificate, in seconds since the Unix epoch.
  void set_certificate_expiry(std::int64_t unix_seconds);
  void set_ready(bool ready);
  void connection_opened();
  void connection_closed();

  // The Prometheus text format (version 0.0.4), with HELP and TYPE for every family, plus the
  // process_* metrics of this process read from /proc.
  std::string render() const;

 private:
  // render(), family by family.
  void render_requests(std::string& out) const;
  void render_denials(std::string& out) const;
  void render_events(std::string& out) const;
  void render_state(std::string& out) const;

  // Every status the server itself sends (the framing layer's included), and 0 for any other.
  static constexpr std::array<int, 18> kCodes = {200, 400, 403, 404, 405, 408, 409, 413, 414,
                                                 415, 417, 422, 431, 500, 501, 503, 505, 0};
  static constexpr int kBuckets = static_cast<int>(kLatencyBuckets.size()) + 1;

  struct Histogram {
    std::array<std::atomic<std::uint64_t>, kBuckets> counts{};
    std::atomic<std::uint64_t> sum_ns{0};
  };

  // A denial reason slot: claimed once (state 0 -> 1 -> 2), then only counted.
  struct ReasonSlot {
    std::atomic<int> state{0};
    Webhook webhook = Webhook::kOther;
    std::array<char, 48> name{};
    std::atomic<std::uint64_t> count{0};
  };

  static int code_index(int code);
  std::atomic<std::uint64_t>* reason_counter(Webhook w, std::string_view reason);

  std::array<std::array<std::atomic<std::uint64_t>, kCodes.size()>, kWebhooks> requests_{};
  std::array<Histogram, kWebhooks> latency_{};
  std::array<std::atomic<std::int64_t>, kWebhooks> in_flight_{};
  std::array<ReasonSlot, kMaxReasons> reasons_{};
  std::atomic<std::uint64_t> reasons_overflow_[kWebhooks]{};
  std::atomic<std::uint64_t> placements_labels_{0};
  std::atomic<std::uint64_t> placements_legacy_{0};
  std::atomic<std::uint64_t> slicebuilder_omitted_{0};
  std::atomic<std::uint64_t> reloads_ok_{0};
  std::atomic<std::uint64_t> reloads_failed_{0};
  std::atomic<std::int64_t> cert_expiry_{0};
  std::atomic<bool> ready_{false};
  std::atomic<std::int64_t> connections_open_{0};
  std::atomic<std::uint64_t> connections_total_{0};
};

}  // namespace server
