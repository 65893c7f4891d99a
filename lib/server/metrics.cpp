#include "server/metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/metrics/prometheus.h"

#ifndef WEBHOOK_VERSION
#define WEBHOOK_VERSION "0.0.0"
#endif

namespace server {
namespace {

constexpr std::string_view kPrefix = "kuberay_tpu_webhook_";

std::string full(std::string_view name) { return std::string(kPrefix) + std::string(name); }

using webhook::prometheus::escape_label;
using webhook::prometheus::family;
using webhook::prometheus::number;
using webhook::prometheus::sample;

// process_* metrics as Prometheus client libraries export them, from /proc/self.
void process_metrics(std::string& out) {
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (!std::getline(stat, line)) {
    return;
  }
  // Fields after the command name, which is in parentheses and may hold spaces.
  std::size_t close = line.rfind(')');
  if (close == std::string::npos) {
    return;
  }
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  std::vector<std::string> f;
  while (rest >> field) {
    f.push_back(field);
  }
  // f[0] is field 3 (state): utime is field 14, stime 15, starttime 22, vsize 23, rss 24.
  if (f.size() < 22) {
    return;
  }
  auto ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  auto page = static_cast<double>(sysconf(_SC_PAGESIZE));
  double cpu = (std::stod(f[11]) + std::stod(f[12])) / ticks;
  double start_ticks = std::stod(f[19]);
  double vsize = std::stod(f[20]);
  double rss = std::stod(f[21]) * page;
  double boot = 0;
  std::ifstream proc_stat("/proc/stat");
  while (std::getline(proc_stat, line)) {
    if (line.rfind("btime ", 0) == 0) {
      boot = std::stod(line.substr(6));
    }
  }
  int fds = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      fds += e->d_name[0] != '.';
    }
    closedir(d);
    --fds;  // the directory's own descriptor
  }
  family(out, "process_cpu_seconds_total", "counter",
         "Total user and system CPU time spent in seconds.");
  sample(out, "process_cpu_seconds_total", "", number(cpu));
  family(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  sample(out, "process_resident_memory_bytes", "", number(rss));
  family(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
  sample(out, "process_virtual_memory_bytes", "", number(vsize));
  family(out, "process_open_fds", "gauge", "Number of open file descriptors.");
  sample(out, "process_open_fds", "", std::to_string(fds));
  family(out, "process_start_time_seconds", "gauge",
         "Start time of the process since unix epoch in seconds.");
  sample(out, "process_start_time_seconds", "", number(boot + start_ticks / ticks));
}

}  // namespace

std::string_view webhook_name(Webhook w) {
  switch (w) {
    case Webhook::kMutate:
      return "mutate";
    case Webhook::kValidate:
      return "validate";
    case Webhook::kOther:
      return "other";
  }
  return "other";
}

Metrics::Metrics() = default;

int Metrics::code_index(int code) {
  for (std::size_t i = 0; i + 1 < kCodes.size(); ++i) {
    if (kCodes[i] == code) {
      return static_cast<int>(i);
    }
  }
  return static_cast<int>(kCodes.size()) - 1;
}

void Metrics::request_started(Webhook w) {
  in_flight_[static_cast<std::size_t>(w)].fetch_add(1, std::memory_order_relaxed);
}

void Metrics::request_finished(Webhook w, int code, std::chrono::nanoseconds latency) {
  auto wi = static_cast<std::size_t>(w);
  in_flight_[wi].fetch_sub(1, std::memory_order_relaxed);
  requests_[wi][static_cast<std::size_t>(code_index(code))].fetch_add(1, std::memory_order_relaxed);
  double seconds = std::chrono::duration<double>(latency).count();
  std::size_t bucket = kLatencyBuckets.size();
  for (std::size_t i = 0; i < kLatencyBuckets.size(); ++i) {
    if (seconds <= kLatencyBuckets[i]) {
      bucket = i;
      break;
    }
  }
  Histogram& h = latency_[wi];
  h.counts[bucket].fetch_add(1, std::memory_order_relaxed);
  h.sum_ns.fetch_add(static_cast<std::uint64_t>(latency.count() > 0 ? latency.count() : 0),
                     std::memory_order_relaxed);
}

std::atomic<std::uint64_t>* Metrics::reason_counter(Webhook w, std::string_view reason) {
  if (reason.size() >= ReasonSlot{}.name.size()) {
    return &reasons_overflow_[static_cast<std::size_t>(w)];
  }
  for (ReasonSlot& slot : reasons_) {
    int state = slot.state.load(std::memory_order_acquire);
    if (state == 0) {
      int expected = 0;
      if (slot.state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
        slot.webhook = w;
        std::memcpy(slot.name.data(), reason.data(), reason.size());
        slot.name[reason.size()] = '\0';
        slot.state.store(2, std::memory_order_release);
        return &slot.count;
      }
      state = expected;
    }
    while (state == 1) {  // another thread is naming this slot: a few instructions away
      state = slot.state.load(std::memory_order_acquire);
    }
    if (slot.webhook == w && std::string_view(slot.name.data()) == reason) {
      return &slot.count;
    }
  }
  return &reasons_overflow_[static_cast<std::size_t>(w)];
}

void Metrics::denial(Webhook w, std::string_view reason) {
  reason_counter(w, reason.empty() ? "unspecified" : reason)
      ->fetch_add(1, std::memory_order_relaxed);
}

void Metrics::placement(std::string_view path) {
  (path == "legacy" ? placements_legacy_ : placements_labels_)
      .fetch_add(1, std::memory_order_relaxed);
}

void Metrics::slicebuilder_omitted() {
  slicebuilder_omitted_.fetch_add(1, std::memory_order_relaxed);
}

void Metrics::tls_reload(bool ok) { (ok ? reloads_ok_ : reloads_failed_).fetch_add(1); }
void Metrics::set_certificate_expiry(std::int64_t unix_seconds) { cert_expiry_ = unix_seconds; }
void Metrics::set_ready(bool ready) { ready_ = ready; }
void Metrics::connection_opened() {
  connections_open_.fetch_add(1, std::memory_order_relaxed);
  connections_total_.fetch_add(1, std::memory_order_relaxed);
}
void Metrics::connection_closed() { connections_open_.fetch_sub(1, std::memory_order_relaxed); }

// One family after another.
std::string Metrics::render() const {
  std::string out;
  out.reserve(8192);
  render_requests(out);
  render_denials(out);
  render_events(out);
  render_state(out);
  process_metrics(out);
  return out;
}

// Requests by code, their latency and those in flight.
void Metrics::render_requests(std::string& out) const {
  const Webhook all[] = {Webhook::kMutate, Webhook::kValidate, Webhook::kOther};
  std::string name = full("requests_total");
  family(out, name, "counter",
         "Admission requests by webhook (mutate, validate, other paths) and code: the "
         "AdmissionReview status code, or the HTTP status when the answer is not a review.");
  for (Webhook w : all) {
    for (std::size_t c = 0; c < kCodes.size(); ++c) {
      std::uint64_t v = requests_[static_cast<std::size_t>(w)][c].load(std::memory_order_relaxed);
      if (v == 0 && !(w != Webhook::kOther && kCodes[c] == 200)) {
        continue;
      }
      std::string code = kCodes[c] == 0 ? "other" : std::to_string(kCodes[c]);
      sample(out, name, "webhook=\"" + std::string(webhook_name(w)) + "\",code=\"" + code + "\"",
             std::to_string(v));
    }
  }

  name = full("request_duration_seconds");
  family(out, name, "histogram",
         "Time from a request's body being read to its answer being ready, by webhook.");
  for (Webhook w : {Webhook::kMutate, Webhook::kValidate}) {
    const Histogram& h = latency_[static_cast<std::size_t>(w)];
    std::string label = "webhook=\"" + std::string(webhook_name(w)) + "\"";
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < h.counts.size(); ++i) {
      cumulative += h.counts[i].load(std::memory_order_relaxed);
      std::string le = i < kLatencyBuckets.size() ? number(kLatencyBuckets[i]) : "+Inf";
      sample(out, name + "_bucket", label + ",le=\"" + le + "\"", std::to_string(cumulative));
    }
    sample(out, name + "_sum", label,
           number(static_cast<double>(h.sum_ns.load(std::memory_order_relaxed)) / 1e9));
    sample(out, name + "_count", label, std::to_string(cumulative));
  }

  name = full("requests_in_flight");
  family(out, name, "gauge", "Admission requests being answered now, by webhook.");
  for (Webhook w : {Webhook::kMutate, Webhook::kValidate}) {
    sample(out, name, "webhook=\"" + std::string(webhook_name(w)) + "\"",
           std::to_string(in_flight_[static_cast<std::size_t>(w)].load()));
  }
}

void Metrics::render_denials(std::string& out) const {
  const Webhook all[] = {Webhook::kMutate, Webhook::kValidate, Webhook::kOther};
  std::string name = full("denials_total");
  family(out, name, "counter",
         "Admission requests answered allowed: false, by webhook and reason.");
  for (const ReasonSlot& slot : reasons_) {
    if (slot.state.load(std::memory_order_acquire) != 2) {
      continue;
    }
    sample(out, name,
           "webhook=\"" + std::string(webhook_name(slot.webhook)) + "\",reason=\"" +
               escape_label(slot.name.data()) + "\"",
           std::to_string(slot.count.load(std::memory_order_relaxed)));
  }
  for (Webhook w : all) {
    if (std::uint64_t v = reasons_overflow_[static_cast<std::size_t>(w)].load(); v > 0) {
      sample(out, name, "webhook=\"" + std::string(webhook_name(w)) + R"(",reason="other")",
             std::to_string(v));
    }
  }
}

// Placements, omitted variables and certificate reloads.
void Metrics::render_events(std::string& out) const {
  std::string name = full("placements_total");
  family(out, name, "counter",
         "Worker Pods placed, by path: labels (KubeRay's index labels, stateless) or legacy "
         "(from the cluster's existing Pods).");
  sample(out, name, "path=\"labels\"", std::to_string(placements_labels_.load()));
  sample(out, name, "path=\"legacy\"", std::to_string(placements_legacy_.load()));

  name = full("env_omitted_total");
  family(out, name, "counter",
         "Worker Pods admitted with a variable left out because it would not fit in one "
         "environment string (131,072 bytes), by variable.");
  sample(out, name, "variable=\"TORCH_TPU_SLICEBUILDER_ADDRESSES\"",
         std::to_string(slicebuilder_omitted_.load()));

  name = full("tls_reloads_total");
  family(out, name, "counter",
         "Serving certificate reloads after a change of the files, by result (a failed reload "
         "keeps the previous certificate).");
  sample(out, name, "result=\"success\"", std::to_string(reloads_ok_.load()));
  sample(out, name, "result=\"failure\"", std::to_string(reloads_failed_.load()));
}

// The certificate's expiry, readiness, connections and the build.
void Metrics::render_state(std::string& out) const {
  std::string name = full("tls_certificate_expiry_timestamp_seconds");
  family(out, name, "gauge",
         "notAfter of the served certificate, in seconds since the Unix epoch.");
  sample(out, name, "", std::to_string(cert_expiry_.load()));

  name = full("ready");
  family(out, name, "gauge", "1 when /readyz answers 200.");
  sample(out, name, "", ready_.load() ? "1" : "0");

  name = full("connections_open");
  family(out, name, "gauge", "Client connections open on the HTTPS port.");
  sample(out, name, "", std::to_string(connections_open_.load()));
  name = full("connections_total");
  family(out, name, "counter", "Client connections accepted on the HTTPS port.");
  sample(out, name, "", std::to_string(connections_total_.load()));

  name = full("build_info");
  family(out, name, "gauge", "Always 1; the version label is the binary's version.");
  sample(out, name, "version=\"" + escape_label(WEBHOOK_VERSION) + "\"", "1");
}

}  // namespace server
