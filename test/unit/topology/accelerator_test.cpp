// lib/topology/accelerator: the generation table (docs/topology.md §1) and the chiplet rule of
// docs/spec.md Terms "Slice".
#include "topology/accelerator.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <span>
#include <string>
#include <vector>

namespace {

std::vector<int> to_vector(std::span<const int> s) { return {s.begin(), s.end()}; }

}  // namespace

TEST_CASE("every known accelerator has its generation's dims, chips per host and chiplets",
          "[topology][accelerator]") {
  auto [label, generation, dims, chips, chiplets, single_host_only] =
      GENERATE(table<std::string, std::string, int, std::vector<int>, int, bool>({
          {"tpu-v4-podslice", "v4", 3, {4}, 1, false},
          {"tpu-v5p-slice", "v5p", 3, {4}, 1, false},
          {"tpu-v5-lite-podslice", "v5e", 2, {1, 4, 8}, 1, false},
          {"tpu-v5-lite-device", "v5e", 2, {1, 4, 8}, 1, true},
          {"tpu-v6e-slice", "v6e", 2, {1, 4, 8}, 1, false},
          {"tpu7x", "tpu7x", 3, {1, 4}, 2, false},
      }));
  CAPTURE(label);
  const topology::Accelerator* a = topology::find_accelerator(label);
  REQUIRE(a != nullptr);
  CHECK(a->label == label);
  CHECK(a->generation == generation);
  CHECK(a->dims == dims);
  CHECK(to_vector(a->chips_per_host) == chips);
  CHECK(a->chiplets == chiplets);
  CHECK(a->single_host_only == single_host_only);
  for (int c : {1, 2, 3, 4, 8, 16}) {
    CAPTURE(c);
    bool offered = std::find(chips.begin(), chips.end(), c) != chips.end();
    CHECK(a->offers_chips_per_host(c) == offered);
  }
  // The table's chiplets agree with the prefix rule the Slice uses.
  CHECK(topology::chiplets_per_chip(label) == chiplets);
  CHECK(topology::is_tpu7x(label) == (chiplets == 2));
}

TEST_CASE("accelerators() lists the six labels in the order of the GKE documentation",
          "[topology][accelerator]") {
  std::vector<std::string> labels;
  for (const topology::Accelerator& a : topology::accelerators()) {
    labels.emplace_back(a.label);
  }
  CHECK(labels == std::vector<std::string>{"tpu-v4-podslice", "tpu-v5p-slice",
                                           "tpu-v5-lite-podslice", "tpu-v5-lite-device",
                                           "tpu-v6e-slice", "tpu7x"});
  // find_accelerator returns the table's own entry, not a copy.
  CHECK(topology::find_accelerator("tpu7x") == &topology::accelerators().back());
}

TEST_CASE(
    "unknown labels are not in the table; the tpu7x prefix rule still gives 2 chiplets "
    "(Terms, M7)",
    "[topology][accelerator]") {
  auto [label, tpu7x] = GENERATE(table<std::string, bool>({
      // Outside the table but starting with "tpu7x": TPU7x, as upstream's isV7x.
      {"tpu7x-foo", true},
      {"tpu7x-standard-4t", true},
      {"tpu7xx", true},
      // Not TPU7x: the prefix is exact and case-sensitive.
      {"", false},
      {"tpu7", false},
      {"tpu-v7x", false},
      {"TPU7x", false},
      {"xtpu7x", false},
      {" tpu7x", false},
      {"tpu-v6e", false},
      {"tpu-v6e-slice-x", false},
      {"TPU-V6E-SLICE", false},
  }));
  CAPTURE(label);
  CHECK(topology::find_accelerator(label) == nullptr);
  CHECK(topology::is_tpu7x(label) == tpu7x);
  CHECK(topology::chiplets_per_chip(label) == (tpu7x ? 2 : 1));
}

TEST_CASE("chips_per_host_for: the VM holding the whole slice, or the 4-chip multi-host VM",
          "[topology][accelerator]") {
  auto [label, chips, want] = GENERATE(table<std::string, int, std::vector<int>>({
      {"tpu-v6e-slice", 1, {1}},
      {"tpu-v6e-slice", 4, {4}},
      {"tpu-v6e-slice", 8, {8, 4}},  // 2x4: one 8-chip VM or two 4-chip ones
      {"tpu-v6e-slice", 16, {4}},
      {"tpu-v6e-slice", 256, {4}},
      {"tpu-v6e-slice", 2, {}},  // 1x2: no machine type
      {"tpu-v5-lite-device", 8, {8}},
      {"tpu-v5-lite-device", 16, {}},  // single-host slices only
      {"tpu-v4-podslice", 4, {4}},
      {"tpu-v4-podslice", 64, {4}},
      {"tpu7x", 1, {1}},
      {"tpu7x", 4, {4}},
      {"tpu7x", 8, {4}},
      {"tpu7x", 2, {}},
  }));
  CAPTURE(label, chips);
  const topology::Accelerator* a = topology::find_accelerator(label);
  REQUIRE(a != nullptr);
  CHECK(a->chips_per_host_for(chips) == want);
  for (int per_host : {1, 2, 4, 8, 16}) {  // and hosts_slice_with holds for exactly those
    CAPTURE(per_host);
    CHECK(a->hosts_slice_with(per_host, chips) ==
          (std::find(want.begin(), want.end(), per_host) != want.end()));
  }
}

TEST_CASE("closest_accelerator: the label a typo meant, or nothing", "[topology][accelerator]") {
  auto [typed, want] = GENERATE(table<std::string, std::string>({
      {"tpu-v6e-slcie", "tpu-v6e-slice"},     // two letters swapped
      {"tpu-v6e-slices", "tpu-v6e-slice"},    // one letter too many
      {"tpu-v6e-podslice", "tpu-v6e-slice"},  // v4's naming carried over
      {"TPU-V6E-SLICE", "tpu-v6e-slice"},     // case
      {"tpu-v5p-podslice", "tpu-v5p-slice"},
      {"tpu-v5-lite-pod", "tpu-v5-lite-podslice"},
      {"tpu-v7x", "tpu7x"},
      {"v6e", "tpu-v6e-slice"},  // a generation's short name
      {"v5e", "tpu-v5-lite-podslice"},
      {"tpu-v4", "tpu-v4-podslice"},
      {"tpu-v6e-slice", ""},  // known: nothing to suggest
      {"", ""},
      {"nvidia-h100-80gb", ""},
      {"gpu", ""},
      {"tpu-v9-slice", ""},  // a version no known generation has: new hardware, not a typo
      {std::string(200, 'x'), ""},
  }));
  CAPTURE(typed);
  CHECK(topology::closest_accelerator(typed) == want);
}
