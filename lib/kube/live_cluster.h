#pragma once
// Legacy placement from the live Kubernetes API, in one object the server wires in a few lines.
// It owns the API client, the Pod, Node and Service watches (a thread each), the SliceRegistry
// they feed, the ClaimStore that places label-less Pods through slot claims shared with the other
// replicas (and its janitor thread), and the live Node and Service sources.
//
//   webhook::Result<kube::ClusterConfig> config = kube::load_config(flags.kube_config_path);
//   if (!config) { /* log config.error().message; exit 1 */ }
//   kube::LiveClusterOptions options;
//   options.claims = {.ns = ns, .holder = kube::replica_identity(kube::process_env()),
//                     .ttl = flags.reservation_ttl, .budget = flags.claim_timeout};
//   options.log = [&](kube::LogLevel level, const std::string& line) { /* to the server's log */ };
//   webhook::Result<std::unique_ptr<kube::LiveCluster>> live =
//       kube::LiveCluster::create(*config, std::move(options));
//   if (!live) { /* log live.error().message; exit 1 */ }
//   (*live)->start();                                      // lists, then watches; returns at once
//   // with --legacy-indexing=off: options.watch_pods = false, and kube::DisabledSlotAllocator
//   admission::Handler handler(flags.handler, (*live)->pods(), (*live)->nodes(),
//                              (*live)->services());
//   // /readyz: ReadinessCheck{"pods-synced", [&] { return (*live)->pods_synced(); }}
//   // /metrics: append (*live)->metrics_text()
//   ...
//   (*live)->stop();                                       // after the server drained
//
// What place() answers (docs/legacy-placement.md): before the first Pod list completes,
// Unavailable (503) saying the webhook is starting — the Pod's creation fails and KubeRay retries
// it; Pods with KubeRay's index labels never reach place() and are admitted regardless. While the
// Pod watch reconnects (resuming from its resourceVersion, or relisting after 410 Gone), the last
// known Pods plus the shared claims keep answering for half the claim TTL; after that, and when a
// claim cannot be written, label-less Pods are denied as retryable (kube/claims.h).

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/status/result.h"
#include "kube/api_client.h"
#include "kube/claims.h"
#include "kube/clock.h"
#include "kube/config.h"
#include "kube/live_sources.h"
#include "kube/log.h"
#include "kube/reflector.h"
#include "kube/slice_registry.h"

namespace kube {

struct LiveClusterOptions {
  // Where and how this replica writes its slot claims (ns, holder, ttl = --reservation-ttl,
  // budget = --claim-timeout). Used when watch_pods.
  ClaimStoreOptions claims;
  // KubeRay worker Pods, for legacy placement (docs/spec.md M3.3). Without it
  // (--legacy-indexing=off with API access) pods() stays unsynced and answers Unavailable: give the
  // Handler kube::DisabledSlotAllocator instead, and keep the live Nodes and Services.
  bool watch_pods = true;
  bool watch_nodes = true;     // TPU Nodes, for subslices (docs/spec.md M4, V3)
  bool watch_services = true;  // headless Services (docs/spec.md Terms)
  ReflectorOptions reflector;
  Clock* clock = nullptr;  // null: the system clock; else must outlive the LiveCluster
  Logger log;              // called from the watch threads
};

class LiveCluster {
 public:
  // Parses the CA and client certificate; contacts nothing yet. InvalidArgument naming what
  // does not parse.
  static webhook::Result<std::unique_ptr<LiveCluster>> create(const ClusterConfig& config,
                                                              LiveClusterOptions options);
  ~LiveCluster();  // stop()
  LiveCluster(const LiveCluster&) = delete;
  LiveCluster& operator=(const LiveCluster&) = delete;

  // Starts the watch threads. Call once.
  void start();
  // Ends the requests in flight and joins the threads. Idempotent; thread-safe.
  void stop();

  // True once the first Pod list completed (and forever after): /readyz.
  bool pods_synced() const { return registry_.synced(); }

  podpatch::SlotAllocator& pods() { return claims_; }
  ClaimStore& claims() { return claims_; }
  podpatch::NodeSource& nodes() { return nodes_; }
  podpatch::ServiceSource& services() { return services_; }
  SliceRegistry& registry() { return registry_; }
  const Reflector* reflector(std::string_view resource) const;  // "pods", "nodes", "services"
  // "https://host:port" of the API server, for the startup log line.
  std::string server() const { return client_->server(); }

  // The Prometheus text of the watches, the registry and the claims: kuberay_tpu_webhook_kube_*
  // per resource (synced, lists, relists, watch restarts, API errors, oversized objects, events)
  // and kuberay_tpu_webhook_legacy_* (Pods holding slots, claims written, writes, reads,
  // conflicts, API errors, denials, confirmations, Leases deleted). HELP and TYPE lines included.
  std::string metrics_text();

 private:
  LiveCluster(std::unique_ptr<ApiClient> client, LiveClusterOptions options);

  std::unique_ptr<Clock> own_clock_;
  LiveClusterOptions options_;
  Clock& clock_;
  std::unique_ptr<ApiClient> client_;
  SliceRegistry registry_;
  ClaimStore claims_;
  PodFeed pod_feed_{registry_, [this](const PodRecord& pod) { claims_.shown(pod.key, pod.slot); }};
  LiveNodeSource nodes_;
  LiveServiceSource services_;
  std::vector<std::unique_ptr<Reflector>> reflectors_;
  std::vector<std::jthread> threads_;
  std::mutex stop_mu_;
  bool started_ = false;
};

}  // namespace kube
