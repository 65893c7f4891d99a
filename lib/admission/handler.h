#pragma once
// The one Handler both front doors use: the HTTPS server and webhook-dryrun (docs/architecture.md
// "Data flow").
//
//   admission::Handler handler(config, pods, nodes, services);
//   admission::Response r = handler.mutate(request);     // POST /mutate  (Pods, M1-M7)
//   admission::Response v = handler.validate(request);   // POST /validate (RayClusters, V1-V4)
//
// Thread-safe when the sources are: the Handler itself holds no mutable state.

#include <string>
#include <vector>

#include "admission/review.h"
#include "podpatch/sources.h"
#include "topology/addresses.h"
#include "topology/names.h"

namespace admission {

struct Config {
  topology::Ports ports;
  topology::KubeRayVersion kuberay;
};

enum class Endpoint { kMutate, kValidate };

class Handler {
 public:
  Handler(Config config, podpatch::PodSource& pods, podpatch::NodeSource& nodes,
          podpatch::ServiceSource& services)
      : config_(config), pods_(pods), nodes_(nodes), services_(services) {}

  // docs/spec.md M1-M7. When `explain` is not null, appends one line per derived value (topology ->
  // chips -> hosts -> placement -> names -> addresses).
  Response mutate(const Request& request, std::vector<std::string>* explain = nullptr) const;

  // docs/spec.md V1-V4.
  Response validate(const Request& request) const;

  Response handle(Endpoint endpoint, const Request& request) const {
    return endpoint == Endpoint::kMutate ? mutate(request) : validate(request);
  }

  const Config& config() const { return config_; }

 private:
  Config config_;
  podpatch::PodSource& pods_;
  podpatch::NodeSource& nodes_;
  podpatch::ServiceSource& services_;
};

}  // namespace admission
