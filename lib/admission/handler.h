#pragma once
// The one Handler both front doors use: the HTTPS server and webhook-dryrun (docs/architecture.md
// "The request path").
//
//   admission::Handler handler(config, pods, nodes, services);
//   admission::Response r = handler.mutate(request);     // POST /mutate  (Pods, M1-M7)
//   admission::Response v = handler.validate(request);   // POST /validate (ray.io, V1-V5)
//
//   admission::PodDecision why;                          // webhook-dryrun --explain
//   handler.mutate(request, &why);
//   for (const std::string& line : admission::explain(why)) ...
//
// A TPU Pod goes through named stages, each a function returning a webhook::Result: facts (M2)
// -> names (the headless Service and DNS labels) -> placement (M4 topology key, M3 slot) -> plan
// (the changes, podpatch::plan_mutation) -> patch (their JSON Patch text, podpatch::write_patch). A
// failing stage's Error (with its reason, podpatch/reasons.h) becomes the denial. Thread-safe when
// the sources are: the Handler itself holds no mutable state.

#include <optional>
#include <string>
#include <vector>

#include "admission/review.h"
#include "podpatch/mutate.h"
#include "podpatch/placement.h"
#include "podpatch/pod_view.h"
#include "podpatch/sources.h"
#include "topology/addresses.h"
#include "topology/names.h"
#include "topology/slice.h"

namespace admission {

struct Config {
  topology::Ports ports;
  topology::KubeRayVersion kuberay;
};

// Stage "facts": what the Pod itself says (docs/spec.md M2).
struct PodFacts {
  podpatch::GroupKey key;
  podpatch::TopologyField topology;
  topology::Slice slice;
};

// Stage "names": the headless Service peers resolve through (docs/spec.md Terms).
struct PodNames {
  std::string service;
  bool live = false;  // read from a Service labelled ray.io/headless-worker-svc, not derived
  bool dns = false;   // the Pod gets hostname and subdomain (M4)
};

// Stage "placement": the slot (M3) and the affinity's topology key (M4).
struct PodPlacement {
  podpatch::Placement placement;
  std::string topology_key;
};

// What Handler::mutate found and chose for one Pod, filled stage by stage as far as it got; the
// views inside point into the request's object, so it is valid while the request lives.
struct PodDecision {
  std::optional<podpatch::PodView> view;  // set once the Pod was read; !is_tpu_pod(): no change
  std::optional<PodFacts> facts;
  std::optional<PodNames> names;
  std::optional<PodPlacement> placement;
  // The Pod's mutable parts after the mutation (null before; left null when record_mutated is
  // false, as for the server, which only needs the patch).
  podpatch::json mutated;
  bool record_mutated = true;
};

class Handler {
 public:
  Handler(Config config, podpatch::SlotAllocator& pods, podpatch::NodeSource& nodes,
          podpatch::ServiceSource& services)
      : config_(config), pods_(pods), nodes_(nodes), services_(services) {}

  // docs/spec.md M1-M7. `decision`, when not null, receives what each stage found. Every answer
  // carries audit annotations (Response::audit).
  Response mutate(const Request& request, PodDecision* decision = nullptr) const;

  // docs/spec.md V1-V5: RayClusters, RayJobs and RayServices.
  Response validate(const Request& request) const;

  const Config& config() const { return config_; }

 private:
  webhook::Result<Response> mutate_tpu_pod(const Request& request, PodDecision& decision) const;
  webhook::Result<PodNames> choose_names(const PodFacts& facts,
                                         const podpatch::PodView& view) const;
  webhook::Result<PodPlacement> choose_placement(const Request& request,
                                                 const podpatch::PodView& view,
                                                 const PodFacts& facts) const;
  webhook::Result<std::string> topology_key(const podpatch::PodView& view,
                                            const PodFacts& facts) const;

  Config config_;
  podpatch::SlotAllocator& pods_;
  podpatch::NodeSource& nodes_;
  podpatch::ServiceSource& services_;
};

// The --explain lines for a decision: topology -> chips -> hosts -> placement -> names ->
// addresses, as far as the stages got.
std::vector<std::string> explain(const PodDecision& decision, const Config& config);

}  // namespace admission
