#include "kube/live_cluster.h"

#include "base/metrics/prometheus.h"
#include "base/thread/name.h"

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
      registry_(clock_),
      claims_(*client_, registry_, clock_, options_.claims, options_.log) {
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
    // The claim Leases of the webhook's namespace: other replicas' claims as they are written.
    reflectors_.push_back(std::make_unique<Reflector>(*client_, claims_.lease_resource(),
                                                      claims_.feed(), clock_, options_.log, ro));
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
    threads_.emplace_back([reflector](std::stop_token stop) {
      webhook::name_this_thread("watch-" + reflector->resource().name);
      reflector->run(stop);
    });
  }
  if (options_.watch_pods) {
    threads_.emplace_back([this](std::stop_token stop) {
      webhook::name_this_thread("claims-janitor");
      claims_.run(stop);
    });
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
  claims_.cancel();
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

namespace {

void watch_metrics(std::string& out, const std::vector<std::unique_ptr<Reflector>>& reflectors);
void legacy_metrics(std::string& out, const SliceRegistry::Stats& pods, const ClaimStore::Stats& c);

}  // namespace

std::string LiveCluster::metrics_text() {
  std::string out;
  watch_metrics(out, reflectors_);
  if (options_.watch_pods) {
    SliceRegistry::Stats pods = registry_.stats();
    legacy_metrics(out, pods, claims_.stats());
  }
  return out;
}

namespace {

namespace prom = webhook::prometheus;

// kuberay_tpu_webhook_kube_*: each family with one sample per watched resource.
void watch_metrics(std::string& out, const std::vector<std::unique_ptr<Reflector>>& reflectors) {
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    std::string full = std::string("kuberay_tpu_webhook_kube_") + name;
    prom::family(out, full, type, help);
    for (const std::unique_ptr<Reflector>& r : reflectors) {
      prom::sample(out, full, "resource=\"" + prom::escape_label(r->resource().name) + "\"",
                   std::to_string(value(*r)));
    }
  };
  using C = const ReflectorCounters&;
  family("synced", "gauge", "1 once the first list of the resource completed.",
         [](const Reflector& r) { return r.synced() ? 1 : 0; });
  family("lists_total", "counter", "Complete lists of the resource.", [](const Reflector& r) {
    C c = r.counters();
    return c.lists.load();
  });
  family("relists_total", "counter", "Lists after the first (410 Gone, oversized object).",
         [](const Reflector& r) {
           C c = r.counters();
           return c.relists.load();
         });
  family("watch_restarts_total", "counter", "Watches that broke and were resumed after a backoff.",
         [](const Reflector& r) {
           C c = r.counters();
           return c.watch_restarts.load();
         });
  family("api_errors_total", "counter", "Failed list or watch requests.", [](const Reflector& r) {
    C c = r.counters();
    return c.api_errors.load();
  });
  family("oversized_objects_total", "counter", "Objects refused for exceeding the size bound.",
         [](const Reflector& r) {
           C c = r.counters();
           return c.oversized.load();
         });
  family("watch_events_total", "counter", "ADDED, MODIFIED and DELETED events applied.",
         [](const Reflector& r) {
           C c = r.counters();
           return c.events.load();
         });
}

// kuberay_tpu_webhook_legacy_*: the registry's Pods and the claim store's counters.
void legacy_metrics(std::string& out, const SliceRegistry::Stats& pods,
                    const ClaimStore::Stats& c) {
  auto gauge = [&](const char* name, const char* type, const char* help, std::uint64_t v) {
    std::string full = std::string("kuberay_tpu_webhook_legacy_") + name;
    prom::family(out, full, type, help);
    prom::sample(out, full, "", std::to_string(v));
  };
  gauge("pods", "gauge", "Watched Pods holding a slot of a worker group.", pods.pods);
  gauge("claim_groups", "gauge", "Worker groups whose claim Lease this replica holds in memory.",
        c.groups);
  gauge("claims_written_total", "counter",
        "Slot claims written to the API server (one per Pod placed without index labels).",
        c.claims_written);
  gauge("claim_writes_total", "counter",
        "Write requests for claim Leases: claims, janitor rewrites and deletions.", c.writes);
  gauge("claim_reads_total", "counter", "Reads of a group's claim Lease.", c.reads);
  gauge("claim_watched_total", "counter",
        "Newer claim Lease states taken from the watch of claim Leases (no read needed).",
        c.watched);
  gauge("claim_conflicts_total", "counter",
        "Claim writes answered 409 because another replica wrote first (then retried).",
        c.conflicts);
  gauge("claim_api_errors_total", "counter", "Failed claim Lease requests.", c.api_errors);
  gauge("claim_denied_total", "counter",
        "Label-less Pods denied as retryable: no claim written within --claim-timeout, the Pod "
        "watch down for more than half the TTL, or 500 open claims in the group.",
        c.denied);
  gauge("claims_confirmed_total", "counter",
        "Claims whose Pod this replica's watch showed on the claimed slot.", c.confirmed);
  gauge("claim_objects_deleted_total", "counter",
        "Claim Leases deleted by the janitor once they held no live claim.", c.objects_deleted);
}

}  // namespace

}  // namespace kube
