#include "kube/live_cluster.h"

namespace kube {
namespace {

Clock& pick_clock(LiveClusterOptions& options, std::unique_ptr<Clock>& own) {
  if (options.clock != nullptr) {
    return *options.clock;
  }
  own = std::make_unique<SystemClock>();
  return *own;
}

}  // namespace

webhook::Result<std::unique_ptr<LiveCluster>> LiveCluster::create(const ClusterConfig& config,
                                                                  LiveClusterOptions options) {
  webhook::Result<std::unique_ptr<ApiClient>> client = ApiClient::create(config);
  if (!client) {
    return client.error();
  }
  return std::unique_ptr<LiveCluster>(new LiveCluster(std::move(*client), std::move(options)));
}

LiveCluster::LiveCluster(std::unique_ptr<ApiClient> client, LiveClusterOptions options)
    : options_(std::move(options)),
      clock_(pick_clock(options_, own_clock_)),
      client_(std::move(client)),
      registry_(clock_, options_.reservation_ttl) {
  ReflectorOptions ro = options_.reflector;
  auto add = [&](std::string name, std::string_view selector, Sink& sink) {
    reflectors_.push_back(std::make_unique<Reflector>(
        *client_, Resource{name, "/api/v1/" + name, std::string(selector)}, sink, clock_,
        options_.log, ro));
    if (ro.seed != 0) {
      ++ro.seed;
    }
  };
  if (options_.watch_pods) {
    add("pods", kPodSelector, pod_feed_);
  }
  if (options_.watch_nodes) {
    add("nodes", kNodeSelector, nodes_);
  }
  if (options_.watch_services) {
    add("services", kServiceSelector, services_);
  }
}

LiveCluster::~LiveCluster() { stop(); }

void LiveCluster::start() {
  std::lock_guard lock(stop_mu_);
  if (started_) {
    return;
  }
  started_ = true;
  for (const std::unique_ptr<Reflector>& r : reflectors_) {
    Reflector* reflector = r.get();
    threads_.emplace_back([reflector](std::stop_token stop) { reflector->run(stop); });
  }
}

void LiveCluster::stop() {
  std::lock_guard lock(stop_mu_);
  for (std::jthread& t : threads_) {
    t.request_stop();
  }
  for (const std::unique_ptr<Reflector>& r : reflectors_) {
    r->cancel();
  }
  for (std::jthread& t : threads_) {
    if (t.joinable()) {
      t.join();
    }
  }
  threads_.clear();
}

const Reflector* LiveCluster::reflector(std::string_view resource) const {
  for (const std::unique_ptr<Reflector>& r : reflectors_) {
    if (r->resource().name == resource) {
      return r.get();
    }
  }
  return nullptr;
}

std::string LiveCluster::metrics_text() {
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help,
                    auto value) {
    out += std::string("# HELP kuberay_tpu_webhook_kube_") + name + " " + help + "\n";
    out += std::string("# TYPE kuberay_tpu_webhook_kube_") + name + " " + type + "\n";
    for (const std::unique_ptr<Reflector>& r : reflectors_) {
      out += std::string("kuberay_tpu_webhook_kube_") + name + "{resource=\"" +
             r->resource().name + "\"} " + std::to_string(value(*r)) + "\n";
    }
  };
  using C = const ReflectorCounters&;
  family("synced", "gauge", "1 once the first list of the resource completed.",
         [](const Reflector& r) { return r.synced() ? 1 : 0; });
  family("lists_total", "counter", "Complete lists of the resource.",
         [](const Reflector& r) { C c = r.counters(); return c.lists.load(); });
  family("relists_total", "counter", "Lists after the first (410 Gone, oversized object).",
         [](const Reflector& r) { C c = r.counters(); return c.relists.load(); });
  family("watch_restarts_total", "counter", "Watches that broke and were resumed after a backoff.",
         [](const Reflector& r) { C c = r.counters(); return c.watch_restarts.load(); });
  family("api_errors_total", "counter", "Failed list or watch requests.",
         [](const Reflector& r) { C c = r.counters(); return c.api_errors.load(); });
  family("oversized_objects_total", "counter", "Objects refused for exceeding the size bound.",
         [](const Reflector& r) { C c = r.counters(); return c.oversized.load(); });
  family("watch_events_total", "counter", "ADDED, MODIFIED and DELETED events applied.",
         [](const Reflector& r) { C c = r.counters(); return c.events.load(); });
  SliceRegistry::Stats s = registry_.stats();
  auto gauge = [&](const char* name, const char* type, const char* help, std::uint64_t v) {
    out += std::string("# HELP kuberay_tpu_webhook_legacy_") + name + " " + help + "\n";
    out += std::string("# TYPE kuberay_tpu_webhook_legacy_") + name + " " + type + "\n";
    out += std::string("kuberay_tpu_webhook_legacy_") + name + " " + std::to_string(v) + "\n";
  };
  gauge("pods", "gauge", "Watched Pods holding a slot of a worker group.", s.pods);
  gauge("reservations", "gauge", "Slots reserved by admissions, not yet confirmed by the watch.",
        s.reservations);
  gauge("reservations_made_total", "counter", "Slots reserved by admissions.", s.reserved_total);
  gauge("reservations_confirmed_total", "counter", "Reservations confirmed by the Pod watch.",
        s.confirmed_total);
  gauge("reservations_expired_total", "counter",
        "Reservations never confirmed within --reservation-ttl.", s.expired_total);
  return out;
}

}  // namespace kube
