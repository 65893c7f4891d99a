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
