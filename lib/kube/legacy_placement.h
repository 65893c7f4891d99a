#pragma once
// Legacy placement as the server starts it (docs/legacy-placement.md): from the command line to
// the sources the admission Handler reads. With API access it is a LiveCluster (the Pod, Node and
// Service watches, and the slot claims shared with the other replicas in Leases of the webhook's
// namespace); without, Pods lacking KubeRay's index labels are denied with a message saying how to
// fix it, Nodes cannot be listed and headless Service names follow --kuberay-version.
//
//   webhook::Result<std::unique_ptr<kube::LegacyPlacement>> placement =
//       kube::LegacyPlacement::open({.enabled = true, .kube_config_path = path, ...}, log);
//   if (!placement) { /* already logged: exit 1 */ }
//   admission::Handler handler(config, (*placement)->pods(), (*placement)->nodes(),
//                              (*placement)->services());
//   (*placement)->start();   // lists, then watches; returns at once
//   ...
//   (*placement)->stop();    // after the server drained

#include <memory>
#include <string>

#include "base/log/log.h"
#include "base/status/result.h"
#include "kube/clock.h"
#include "kube/live_cluster.h"
#include "kube/live_sources.h"
#include "kube/slot_allocators.h"

namespace kube {

struct LegacyPlacementOptions {
  // --legacy-indexing: auto and on enable it; on also requires API access (auto goes without
  // when no API configuration is found, which in a Pod it always is).
  bool enabled = true;
  bool required = false;
  std::string kube_config_path;                         // --kube-config-path
  std::string namespace_flag;                           // --namespace
  Duration reservation_ttl = std::chrono::seconds(10);  // --reservation-ttl
  Duration claim_timeout = std::chrono::seconds(3);     // --claim-timeout
};

class LegacyPlacement {
 public:
  // Reads the API configuration and the webhook's namespace and creates the LiveCluster (nothing
  // is contacted yet), logging to `log` (which must outlive the object) what it found: the lines
  // "slot claims", "legacy placement off: ...", "legacy placement". An error is logged too
  // ("cannot start: ...") before it is returned: --legacy-indexing=on without API access, API
  // access without a namespace, an API configuration that does not parse.
  static webhook::Result<std::unique_ptr<LegacyPlacement>> open(
      const LegacyPlacementOptions& options, const webhook::Logger& log);
  LegacyPlacement(const LegacyPlacement&) = delete;
  LegacyPlacement& operator=(const LegacyPlacement&) = delete;
  ~LegacyPlacement();

  // Whether the live cluster is there (else the sources below are the disabled ones).
  bool enabled() const { return live_ != nullptr; }
  podpatch::SlotAllocator& pods();
  podpatch::NodeSource& nodes();
  podpatch::ServiceSource& services();
  // /readyz's "pods-synced" and the kube metrics (LiveCluster); true and "" when disabled.
  bool pods_synced() const;
  std::string metrics_text();

  // Starts and stops the watch threads; nothing when disabled.
  void start();
  void stop();

 private:
  explicit LegacyPlacement(std::unique_ptr<LiveCluster> live);

  std::unique_ptr<LiveCluster> live_;
  DisabledSlotAllocator no_pods_;
  LiveNodeSource no_nodes_;        // never listed: nodes_matching answers "cannot list"
  LiveServiceSource no_services_;  // never listed: no Service name
};

}  // namespace kube
