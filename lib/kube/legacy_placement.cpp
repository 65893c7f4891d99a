#include "kube/legacy_placement.h"

#include <utility>

#include "kube/config.h"
#include "kube/webhook_namespace.h"

namespace kube {
namespace {

// The LiveCluster for `api`, its claims in namespace `ns`; logs "slot claims".
webhook::Result<std::unique_ptr<LiveCluster>> live_cluster(const LegacyPlacementOptions& options,
                                                           const ClusterConfig& api,
                                                           const NamespaceSource& ns,
                                                           const webhook::Logger& log) {
  LiveClusterOptions live;
  live.claims.ns = ns.ns;
  live.claims.holder = replica_identity(process_env());
  live.claims.ttl = options.reservation_ttl;
  live.claims.budget = options.claim_timeout;
  log.info("slot claims",
           {{"namespace", ns.ns}, {"namespace_from", ns.origin}, {"replica", live.claims.holder}});
  live.log = webhook::line_logger(log, "kube");
  return LiveCluster::create(api, std::move(live));
}

// The LiveCluster when API access is configured, null when legacy placement goes without it.
webhook::Result<std::unique_ptr<LiveCluster>> open_live(const LegacyPlacementOptions& options,
                                                        const webhook::Logger& log) {
  webhook::Result<ClusterConfig> api = load_config(options.kube_config_path);
  if (!api && options.required) {
    log.error("cannot start: --legacy-indexing=on needs Kubernetes API access",
              {{"error", api.error().message}});
    return api.error();
  }
  webhook::Result<NamespaceSource> ns =
      webhook_namespace(process_env(), kServiceAccountDir, options.namespace_flag);
  if (api && !ns) {
    log.error("cannot start: legacy placement needs the webhook's namespace",
              {{"error", ns.error().message}});
    return ns.error();
  }
  if (!api) {
    log.info("legacy placement off: no Kubernetes API configuration",
             {{"reason", api.error().message}});
    return std::unique_ptr<LiveCluster>();
  }
  webhook::Result<std::unique_ptr<LiveCluster>> created = live_cluster(options, *api, *ns, log);
  if (!created) {
    log.error("cannot start: Kubernetes API configuration", {{"error", created.error().message}});
  }
  return created;
}

}  // namespace

webhook::Result<std::unique_ptr<LegacyPlacement>> LegacyPlacement::open(
    const LegacyPlacementOptions& options, const webhook::Logger& log) {
  std::unique_ptr<LiveCluster> live;
  if (options.enabled) {
    webhook::Result<std::unique_ptr<LiveCluster>> opened = open_live(options, log);
    if (!opened) {
      return opened.error();
    }
    live = std::move(*opened);
  }
  log.info("legacy placement",
           {{"enabled", live != nullptr}, {"api", live ? live->server() : std::string()}});
  return std::unique_ptr<LegacyPlacement>(new LegacyPlacement(std::move(live)));
}

LegacyPlacement::LegacyPlacement(std::unique_ptr<LiveCluster> live) : live_(std::move(live)) {}

LegacyPlacement::~LegacyPlacement() = default;

podpatch::SlotAllocator& LegacyPlacement::pods() {
  return live_ ? live_->pods() : static_cast<podpatch::SlotAllocator&>(no_pods_);
}

podpatch::NodeSource& LegacyPlacement::nodes() {
  return live_ ? live_->nodes() : static_cast<podpatch::NodeSource&>(no_nodes_);
}

podpatch::ServiceSource& LegacyPlacement::services() {
  return live_ ? live_->services() : static_cast<podpatch::ServiceSource&>(no_services_);
}

bool LegacyPlacement::pods_synced() const { return !live_ || live_->pods_synced(); }

std::string LegacyPlacement::metrics_text() { return live_ ? live_->metrics_text() : ""; }

void LegacyPlacement::start() {
  if (live_) {
    live_->start();
  }
}

void LegacyPlacement::stop() {
  if (live_) {
    live_->stop();
  }
}

}  // namespace kube
