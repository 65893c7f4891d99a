#pragma once
// The facts of one TPU slice, from the accelerator label, the topology and the Pod's chips per
// host (docs/spec.md Terms "Slice"; docs/topology.md §2: hosts = max(chips / chips_per_host, 1)).
//
//   auto slice = topology::Slice::create({"tpu-v6e-slice", "4x4", 4});
//   slice->hosts();              // 4
//   slice->devices_per_host();   // 4
//
// An invalid Slice cannot exist: create() checks everything.

#include <string>
#include <string_view>
#include <vector>

#include "base/status/result.h"
#include "topology/accelerator.h"
#include "topology/shape.h"

namespace topology {

struct SliceSpec {
  std::string_view accelerator;  // cloud.google.com/gke-tpu-accelerator; may be unknown or empty
  std::string_view topology;     // e.g. "4x4"
  int chips_per_host = 0;        // sum of google.com/tpu over the Pod's TPU containers
};

class Slice {
 public:
  // Returns InvalidArgument for a malformed topology (naming the bad token) or a chips-per-host
  // below 1, and FailedPrecondition when chips per host neither divides the chip count nor covers
  // it (docs/spec.md M2).
  static webhook::Result<Slice> create(const SliceSpec& spec);

  const std::string& accelerator() const { return accelerator_; }
  // nullptr when the accelerator label is outside the known table (docs/spec.md M7 warns).
  const Accelerator* known_accelerator() const { return known_; }
  const Shape& shape() const { return shape_; }
  int chips() const { return shape_.chips(); }
  int chips_per_host() const { return chips_per_host_; }
  int hosts() const { return hosts_; }
  bool multi_host() const { return hosts_ > 1; }
  int chiplets() const { return chiplets_; }
  bool tpu7x() const { return chiplets_ == 2; }
  int devices_per_host() const { return chips_per_host_ * chiplets_; }
  int total_devices() const { return chips() * chiplets_; }

  // Advice for the user that does not stop admission: an unknown accelerator, a chip count per
  // host that no machine type of this generation offers, a topology rank the generation does not
  // use. Each is a full sentence.
  std::vector<std::string> advisories() const;

  // For a known accelerator whose machine types cannot give a host of this slice
  // chips_per_host() chips: the google.com/tpu values that can ("a 4x4 slice needs google.com/tpu
  // 4 per host"), else "". Used in advisories() and in the numOfHosts denial (docs/spec.md V2).
  std::string chips_fix() const;

 private:
  Slice() = default;

  std::string accelerator_;
  const Accelerator* known_ = nullptr;
  Shape shape_;
  int chips_per_host_ = 0;
  int hosts_ = 0;
  int chiplets_ = 1;
};

}  // namespace topology
