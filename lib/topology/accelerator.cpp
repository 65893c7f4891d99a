#include "topology/accelerator.h"

#include <algorithm>
#include <array>

namespace topology {
namespace {

constexpr std::array<int, 1> kFourChips = {4};
constexpr std::array<int, 3> kLiteChips = {1, 4, 8};
constexpr std::array<int, 2> kIronwoodChips = {1, 4};

// From the GKE machine types (docs/topology.md §1): ct4p-hightpu-4t, ct5p-hightpu-4t,
// ct5lp-hightpu-{1,4,8}t, ct6e-standard-{1,4,8}t, tpu7x-standard-{1,4}t.
constexpr std::array<Accelerator, 6> kAccelerators = {{
    {"tpu-v4-podslice", "v4", 3, kFourChips, 1, false},
    {"tpu-v5p-slice", "v5p", 3, kFourChips, 1, false},
    {"tpu-v5-lite-podslice", "v5e", 2, kLiteChips, 1, false},
    {"tpu-v5-lite-device", "v5e", 2, kLiteChips, 1, true},
    {"tpu-v6e-slice", "v6e", 2, kLiteChips, 1, false},
    {"tpu7x", "tpu7x", 3, kIronwoodChips, 2, false},
}};

}  // namespace

bool Accelerator::offers_chips_per_host(int chips) const {
  return std::find(chips_per_host.begin(), chips_per_host.end(), chips) != chips_per_host.end();
}

std::span<const Accelerator> accelerators() { return kAccelerators; }

const Accelerator* find_accelerator(std::string_view label) {
  for (const Accelerator& a : kAccelerators) {
    if (a.label == label) {
      return &a;
    }
  }
  return nullptr;
}

bool is_tpu7x(std::string_view label) { return label.starts_with("tpu7x"); }

int chiplets_per_chip(std::string_view label) { return is_tpu7x(label) ? 2 : 1; }

}  // namespace topology
