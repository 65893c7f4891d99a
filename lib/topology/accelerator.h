#pragma once
// The TPU generations GKE offers, keyed by the node label cloud.google.com/gke-tpu-accelerator.
//
//   const topology::Accelerator* a = topology::find_accelerator("tpu-v6e-slice");
//   if (a && a->offers_chips_per_host(4)) { ... }
//   int c = topology::chiplets_per_chip("tpu7x");   // 2

#include <span>
#include <string_view>
#include <vector>

namespace topology {

struct Accelerator {
  std::string_view label;               // value of cloud.google.com/gke-tpu-accelerator
  std::string_view generation;          // short name used in messages: v4, v5p, v5e, v6e, tpu7x
  int dims;                             // topology rank GKE uses for it: 2 or 3
  std::span<const int> chips_per_host;  // the machine types' chip counts per VM
  int chiplets;                         // logical devices per chip (2 on TPU7x)
  bool single_host_only;                // the legacy tpu-v5-lite-device offers no multi-host slices

  bool offers_chips_per_host(int chips) const;

  // The google.com/tpu values a host of a slice of `slice_chips` chips can have: the machine type
  // holding the whole slice on one VM, and for larger slices the multi-host machine type
  // (kMultiHostChipsPerVm chips per VM), when it divides the slice (docs/topology.md §1). Empty
  // when no machine type fits.
  std::vector<int> chips_per_host_for(int slice_chips) const;
  // Whether `chips` is one of chips_per_host_for(slice_chips).
  bool hosts_slice_with(int chips, int slice_chips) const;
};

// Multi-host slices of every known generation run on VMs of this many chips (the -4t machine
// types).
inline constexpr int kMultiHostChipsPerVm = 4;

// All known accelerators, in the order of the GKE documentation.
std::span<const Accelerator> accelerators();

// Returns the accelerator with this exact label, or nullptr when the label is unknown.
const Accelerator* find_accelerator(std::string_view label);

// Chiplets per chip by docs/spec.md Terms "Slice": 2 when the label is "tpu7x" or starts with
// "tpu7x" (also for labels outside the table, as upstream does), else 1.
int chiplets_per_chip(std::string_view label);

// "tpu7x" by the same prefix rule.
bool is_tpu7x(std::string_view label);

// The known label a mistyped one most likely meant: the closest by edit distance (a swap of two
// neighbouring characters counts as one edit) within about a quarter of its length, or the label
// of a generation named by its short name ("v6e", "TPU-V6E"). Empty when nothing is close.
std::string_view closest_accelerator(std::string_view label);

}  // namespace topology
