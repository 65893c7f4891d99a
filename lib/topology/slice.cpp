#include "topology/slice.h"

#include <algorithm>

#include "base/text/text.h"

namespace topology {
namespace {

std::string list_of(std::span<const int> values) {
  std::string out;
  for (int v : values) {
    out += (out.empty() ? "" : ", ") + std::to_string(v);
  }
  return out;
}

}  // namespace

webhook::Result<Slice> Slice::create(const SliceSpec& spec) {
  webhook::Result<Shape> shape = parse_shape(spec.topology);
  if (!shape) {
    return shape.error();
  }
  if (spec.chips_per_host < 1) {
    return webhook::invalid_argument("google.com/tpu chips per host must be at least 1, got " +
                                     std::to_string(spec.chips_per_host));
  }
  Slice s;
  s.accelerator_ = std::string(spec.accelerator);
  s.known_ = find_accelerator(spec.accelerator);
  s.shape_ = *shape;
  s.chips_per_host_ = spec.chips_per_host;
  s.chiplets_ = chiplets_per_chip(spec.accelerator);
  int chips = s.shape_.chips();
  if (chips > spec.chips_per_host && chips % spec.chips_per_host != 0) {
    std::string hint = "a chip count per host that divides " + std::to_string(chips);
    if (s.known_ != nullptr) {
      hint += " (" + std::string(s.known_->label) + " VMs have " +
              list_of(s.known_->chips_per_host) + " chips)";
    }
    return webhook::failed_precondition(
        "google.com/tpu " + std::to_string(spec.chips_per_host) +
        " chips per host does not divide the " + std::to_string(chips) + " chips of topology " +
        s.shape_.text() + "; request " + hint + ", or fix the topology");
  }
  s.hosts_ = std::max(chips / spec.chips_per_host, 1);
  return s;
}

std::vector<std::string> Slice::advisories() const {
  std::vector<std::string> out;
  if (known_ == nullptr) {
    std::string labels;
    for (const Accelerator& a : accelerators()) {
      labels += (labels.empty() ? "" : ", ") + std::string(a.label);
    }
    std::string_view guess = closest_accelerator(accelerator_);
    out.push_back("accelerator " + webhook::quote_bounded(accelerator_) +
                  " is not a known GKE TPU accelerator (" +
                  (guess.empty() ? "" : "did you mean " + webhook::quote(guess) + "? known: ") +
                  labels + "); treated as a TPU with " + std::to_string(chiplets_) +
                  " device(s) per chip. Check nodeSelector cloud.google.com/gke-tpu-accelerator");
    return out;
  }
  // A chip count per host no machine type has, or one this slice's hosts do not have (an 8-chip
  // VM holds a whole 2x4 slice, never a host of a 4x4 one). The legacy single-host accelerator's
  // multi-host slices are advised about below instead.
  std::string fix = chips_fix();
  if (!known_->offers_chips_per_host(chips_per_host_)) {
    out.push_back("google.com/tpu " + std::to_string(chips_per_host_) +
                  " per host: " + std::string(known_->label) + " machine types have " +
                  list_of(known_->chips_per_host) + " chips per VM, so no node can run this Pod; " +
                  fix);
  } else if (!fix.empty() && !(known_->single_host_only && multi_host())) {
    out.push_back("google.com/tpu " + std::to_string(chips_per_host_) +
                  " per host: " + std::string(known_->label) + " " + shape_.text() +
                  " slices do not run on VMs of " + std::to_string(chips_per_host_) +
                  " chips, so no node can run this Pod; " + fix);
  }
  if (known_->dims != shape_.rank) {
    out.push_back("topology " + shape_.text() + " has " + std::to_string(shape_.rank) +
                  " dimensions but " + std::string(known_->label) + " slices use " +
                  std::to_string(known_->dims) + " (such as " +
                  (known_->dims == 2 ? "4x4" : "2x2x2") + ")");
  }
  if (known_->single_host_only && multi_host()) {
    out.push_back(std::string(known_->label) +
                  " offers single-host slices only; use tpu-v5-lite-podslice for " +
                  std::to_string(hosts_) + " hosts");
  }
  return out;
}

std::string Slice::chips_fix() const {
  if (known_ == nullptr || known_->hosts_slice_with(chips_per_host_, chips())) {
    return {};
  }
  std::vector<int> valid = known_->chips_per_host_for(chips());
  if (valid.empty()) {
    return "no " + std::string(known_->label) + " machine type fits topology " + shape_.text();
  }
  std::string values;
  for (std::size_t i = 0; i < valid.size(); ++i) {
    values += (i == 0 ? "" : " or ") + std::to_string(valid[i]);
  }
  return "a " + shape_.text() + " slice needs google.com/tpu " + values + " per host";
}

}  // namespace topology
