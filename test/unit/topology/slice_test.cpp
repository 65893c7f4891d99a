// lib/topology/slice: docs/spec.md Terms "Slice" and M2's chips-per-host rule, pinned by the worked
// examples E1-E8 of docs/topology.md §4 (with the address lists of lib/topology/addresses built
// the way docs/spec.md M5.2/M5.3 build them).
#include "topology/slice.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "topology/addresses.h"

namespace {

// H<i> of docs/topology.md §4: group "g", replica 0, RayCluster "c".
constexpr std::string_view kSvc = "c-headless";

std::string h(int i) { return "g-0-" + std::to_string(i) + ".c-headless"; }

// The worker host list M5.3 uses: the hosts' DNS names, or localhost on a single host.
std::string host_entries(const topology::Slice& s) {
  if (!s.multi_host()) {
    return "localhost";
  }
  return topology::worker_hostnames("g", 0, s.hosts(), kSvc);
}

std::string slicebuilder(const topology::Slice& s) {
  std::string entries = host_entries(s);
  int ports = s.chips() / static_cast<int>(topology::list_size(entries)) * s.chiplets();
  return topology::address_list(entries, ports, 8471);
}

}  // namespace

TEST_CASE("Terms/Slice: worked examples E1-E8 of docs/topology.md §4", "[topology][slice]") {
  auto [example, accelerator, topo, per_host, chips, hosts, chiplets, devices_per_host, total,
        torch_topology, first,
        last] = GENERATE(table<std::string, std::string, std::string, int, int, int, int, int, int,
                               std::string, std::string, std::string>({
      {"E1", "tpu-v6e-slice", "4x4", 4, 16, 4, 1, 4, 16, "4,4,1", h(0) + ":8471", h(3) + ":8474"},
      {"E2", "tpu-v6e-slice", "2x4", 8, 8, 1, 1, 8, 8, "2,4,1", "localhost:8471", "localhost:8478"},
      {"E2 with tpu=4", "tpu-v6e-slice", "2x4", 4, 8, 2, 1, 4, 8, "2,4,1", h(0) + ":8471",
       h(1) + ":8474"},
      {"E3", "tpu-v5-lite-podslice", "4x4", 4, 16, 4, 1, 4, 16, "4,4,1", h(0) + ":8471",
       h(3) + ":8474"},
      {"E4", "tpu-v4-podslice", "2x2x4", 4, 16, 4, 1, 4, 16, "2,2,4", h(0) + ":8471",
       h(3) + ":8474"},
      {"E5", "tpu-v5p-slice", "2x2x2", 4, 8, 2, 1, 4, 8, "2,2,2", h(0) + ":8471", h(1) + ":8474"},
      {"E6", "tpu7x", "2x2x2", 4, 8, 2, 2, 8, 16, "2,2,2,2", h(0) + ":8471", h(1) + ":8478"},
      {"E7", "tpu7x", "2x2x1", 4, 4, 1, 2, 8, 8, "2,2,1,2", "localhost:8471", "localhost:8478"},
      {"E8", "tpu7x", "4x4x4", 4, 64, 16, 2, 8, 128, "4,4,4,2", h(0) + ":8471", h(15) + ":8478"},
  }));
  CAPTURE(example, accelerator, topo, per_host);
  webhook::Result<topology::Slice> s = topology::Slice::create({accelerator, topo, per_host});
  REQUIRE(s.has_value());
  CHECK(s->accelerator() == accelerator);
  REQUIRE(s->known_accelerator() != nullptr);
  CHECK(s->known_accelerator()->label == accelerator);
  CHECK(s->shape().text() == topo);
  CHECK(s->chips() == chips);
  CHECK(s->chips_per_host() == per_host);
  CHECK(s->hosts() == hosts);
  CHECK(s->multi_host() == (hosts > 1));
  CHECK(s->chiplets() == chiplets);
  CHECK(s->tpu7x() == (accelerator == "tpu7x"));
  CHECK(s->devices_per_host() == devices_per_host);
  CHECK(s->total_devices() == total);
  CHECK(topology::torch_tpu_topology(s->shape(), s->chiplets()) == torch_topology);
  // TORCH_TPU_SLICEBUILDER_ADDRESSES: one entry per logical device, host-major.
  std::vector<std::string> list = testing::split_list(slicebuilder(*s));
  CHECK(static_cast<int>(list.size()) == total);
  CHECK(list.front() == first);
  CHECK(list.back() == last);
  // Every example is a shape GKE offers: no advice.
  CHECK(s->advisories().empty());
}

TEST_CASE("Terms/Slice: E1 and E6 address lists in full", "[topology][slice]") {
  SECTION("E1 v6e 4x4: 16 slicebuilder addresses, 4 hostnames") {
    topology::Slice s = *topology::Slice::create({"tpu-v6e-slice", "4x4", 4});
    std::string want;
    for (int host = 0; host < 4; ++host) {
      for (int port = 8471; port <= 8474; ++port) {
        want += (want.empty() ? "" : ",") + h(host) + ":" + std::to_string(port);
      }
    }
    CHECK(slicebuilder(s) == want);
    CHECK(host_entries(s) == h(0) + "," + h(1) + "," + h(2) + "," + h(3));
  }
  SECTION("E6 tpu7x 2x2x2: hostnames, process addresses and slicebuilder") {
    topology::Slice s = *topology::Slice::create({"tpu7x", "2x2x2", 4});
    std::string hosts = host_entries(s);
    CHECK(hosts == "g-0-0.c-headless,g-0-1.c-headless");
    // TPU_PROCESS_ADDRESSES: one entry per process (one TPU container per host).
    CHECK(topology::address_list(hosts, 1, 8471) == "g-0-0.c-headless:8471,g-0-1.c-headless:8471");
    CHECK(slicebuilder(s) ==
          "g-0-0.c-headless:8471,g-0-0.c-headless:8472,g-0-0.c-headless:8473,"
          "g-0-0.c-headless:8474,g-0-0.c-headless:8475,g-0-0.c-headless:8476,"
          "g-0-0.c-headless:8477,g-0-0.c-headless:8478,g-0-1.c-headless:8471,"
          "g-0-1.c-headless:8472,g-0-1.c-headless:8473,g-0-1.c-headless:8474,"
          "g-0-1.c-headless:8475,g-0-1.c-headless:8476,g-0-1.c-headless:8477,"
          "g-0-1.c-headless:8478");
  }
  SECTION("E7 tpu7x 2x2x1: 8 localhost addresses") {
    topology::Slice s = *topology::Slice::create({"tpu7x", "2x2x1", 4});
    CHECK(slicebuilder(s) ==
          "localhost:8471,localhost:8472,localhost:8473,localhost:8474,localhost:8475,"
          "localhost:8476,localhost:8477,localhost:8478");
  }
  SECTION("E8 tpu7x 4x4x4: TPU_PROCESS_ADDRESSES is H0:8471 ... H15:8471") {
    topology::Slice s = *topology::Slice::create({"tpu7x", "4x4x4", 4});
    std::vector<std::string> process =
        testing::split_list(topology::address_list(host_entries(s), 1, 8471));
    REQUIRE(process.size() == 16);
    for (int i = 0; i < 16; ++i) {
      CHECK(process[static_cast<std::size_t>(i)] == h(i) + ":8471");
    }
    CHECK(host_entries(s).starts_with(h(0) + "," + h(1) + ","));
  }
}

TEST_CASE("M2: chips per host that covers the whole slice gives one host", "[topology][slice]") {
  auto [accelerator, topo, per_host, chips] = GENERATE(table<std::string, std::string, int, int>({
      {"tpu-v6e-slice", "2x2", 4, 4},
      {"tpu-v6e-slice", "2x2", 8, 4},  // chips < chips per host: hosts = max(0, 1) = 1
      {"tpu-v6e-slice", "1x1", 1, 1},
      {"tpu-v6e-slice", "1x1", 4, 1},
      {"tpu7x", "2x2x1", 8, 4},
      {"tpu-v4-podslice", "2x2x1", 4, 4},
  }));
  CAPTURE(accelerator, topo, per_host);
  webhook::Result<topology::Slice> s = topology::Slice::create({accelerator, topo, per_host});
  REQUIRE(s.has_value());
  CHECK(s->chips() == chips);
  CHECK(s->hosts() == 1);
  CHECK_FALSE(s->multi_host());
}

TEST_CASE("M2: chips per host that divides the chips gives chips / chips-per-host hosts",
          "[topology][slice]") {
  auto [topo, per_host, hosts] = GENERATE(table<std::string, int, int>({
      {"4x4", 1, 16},
      {"4x4", 2, 8},
      {"4x4", 4, 4},
      {"4x4", 8, 2},
      {"4x4", 16, 1},
      {"16x16", 4, 64},
      {"96x96", 4, 2304},
  }));
  CAPTURE(topo, per_host);
  webhook::Result<topology::Slice> s = topology::Slice::create({"tpu-v6e-slice", topo, per_host});
  REQUIRE(s.has_value());
  CHECK(s->hosts() == hosts);
}

TEST_CASE("M2: chips per host that does not divide the chips is FailedPrecondition",
          "[topology][slice]") {
  auto [accelerator, topo, per_host, hint] =
      GENERATE(table<std::string, std::string, int, std::string>({
          {"tpu-v6e-slice", "4x4", 3, "(tpu-v6e-slice VMs have 1, 4, 8 chips)"},
          {"tpu-v6e-slice", "4x4", 5, "(tpu-v6e-slice VMs have 1, 4, 8 chips)"},
          {"tpu-v6e-slice", "2x4", 3, "(tpu-v6e-slice VMs have 1, 4, 8 chips)"},
          {"tpu-v6e-slice", "4x4", 12, "(tpu-v6e-slice VMs have 1, 4, 8 chips)"},
          {"tpu7x", "2x2x2", 3, "(tpu7x VMs have 1, 4 chips)"},
          {"tpu-v4-podslice", "2x2x4", 6, "(tpu-v4-podslice VMs have 4 chips)"},
          // Unknown accelerator: no machine-type hint, but still the rule.
          {"tpu-v9", "4x4", 3, "that divides 16"},
      }));
  CAPTURE(accelerator, topo, per_host);
  webhook::Result<topology::Slice> s = topology::Slice::create({accelerator, topo, per_host});
  REQUIRE_FALSE(s.has_value());
  CAPTURE(s.error().message);
  CHECK(s.error().code == webhook::ErrorCode::kFailedPrecondition);
  webhook::Result<topology::Shape> shape = topology::parse_shape(topo);
  CHECK_THAT(s.error().message,
             Catch::Contains("google.com/tpu " + std::to_string(per_host) +
                             " chips per host does not divide the " +
                             std::to_string(shape->chips()) + " chips of topology " + topo));
  CHECK_THAT(s.error().message, Catch::Contains(hint));
}

TEST_CASE("M2: a bad topology or chips per host below 1 is InvalidArgument", "[topology][slice]") {
  auto [topo, per_host, message] = GENERATE(table<std::string, int, std::string>({
      {"4x", 4, "topology \"4x\" is invalid"},
      {"", 4, "topology is empty"},
      {"0x4", 4, "dimension 1 \"0\""},
      {"4x4", 0, "chips per host must be at least 1, got 0"},
      {"4x4", -4, "chips per host must be at least 1, got -4"},
      // The topology is checked first.
      {"abc", 0, "topology \"abc\" is invalid"},
  }));
  CAPTURE(topo, per_host);
  webhook::Result<topology::Slice> s = topology::Slice::create({"tpu-v6e-slice", topo, per_host});
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == webhook::ErrorCode::kInvalidArgument);
  CHECK_THAT(s.error().message, Catch::Contains(message));
}

TEST_CASE("M7: advisories for shapes no GKE node can run", "[topology][slice]") {
  auto [accelerator, topo, per_host, advice] =
      GENERATE(table<std::string, std::string, int, std::vector<std::string>>({
          // Good rows: offered shapes give no advice.
          {"tpu-v6e-slice", "4x4", 4, std::vector<std::string>{}},
          {"tpu-v6e-slice", "1x1", 1, std::vector<std::string>{}},
          {"tpu-v5-lite-podslice", "2x4", 8, std::vector<std::string>{}},
          {"tpu-v5-lite-device", "2x2", 4, std::vector<std::string>{}},
          {"tpu7x", "2x2x1", 4, std::vector<std::string>{}},
          {"tpu7x", "1x1x1", 1, std::vector<std::string>{}},
          {"tpu-v4-podslice", "4x4x4", 4, std::vector<std::string>{}},
          // A chip count per host no machine type of the generation has.
          {"tpu-v4-podslice",
           "4x4x4",
           8,
           {"google.com/tpu 8 per host: tpu-v4-podslice machine types have 4 chips per VM, so "
            "no node can run this Pod; a 4x4x4 slice needs google.com/tpu 4 per host"}},
          {"tpu-v6e-slice",
           "4x4",
           2,
           {"google.com/tpu 2 per host: tpu-v6e-slice machine types have 1, 4, 8 chips per VM, "
            "so no node can run this Pod; a 4x4 slice needs google.com/tpu 4 per host"}},
          // A machine type of the generation, but not one this slice's hosts are.
          {"tpu-v6e-slice",
           "4x4",
           8,
           {"google.com/tpu 8 per host: tpu-v6e-slice 4x4 slices do not run on VMs of 8 chips, so "
            "no node can run this Pod; a 4x4 slice needs google.com/tpu 4 per host"}},
          {"tpu-v6e-slice",
           "2x2",
           8,
           {"google.com/tpu 8 per host: tpu-v6e-slice 2x2 slices do not run on VMs of 8 chips, so "
            "no node can run this Pod; a 2x2 slice needs google.com/tpu 4 per host"}},
          {"tpu-v5-lite-podslice",
           "4x8",
           1,
           {"google.com/tpu 1 per host: tpu-v5-lite-podslice 4x8 slices do not run on VMs of 1 "
            "chips, so no node can run this Pod; a 4x8 slice needs google.com/tpu 4 per host"}},
          // A 2x4 slice is one 8-chip VM or two 4-chip ones.
          {"tpu-v6e-slice", "2x4", 4, std::vector<std::string>{}},
          {"tpu7x",
           "2x2x2",
           8,
           {"google.com/tpu 8 per host: tpu7x machine types have 1, 4 chips per VM, so no node "
            "can run this Pod; a 2x2x2 slice needs google.com/tpu 4 per host"}},
          // A rank the generation does not use.
          {"tpu-v6e-slice",
           "2x2x2",
           4,
           {"topology 2x2x2 has 3 dimensions but tpu-v6e-slice slices use 2 (such as 4x4)"}},
          {"tpu-v4-podslice",
           "4x4",
           4,
           {"topology 4x4 has 2 dimensions but tpu-v4-podslice slices use 3 (such as 2x2x2)"}},
          // The legacy single-host accelerator asked for several hosts.
          {"tpu-v5-lite-device",
           "4x4",
           4,
           {"tpu-v5-lite-device offers single-host slices only; use tpu-v5-lite-podslice for 4 "
            "hosts"}},
          // Everything at once, in this order.
          {"tpu-v5-lite-device",
           "2x2x4",
           2,
           {"google.com/tpu 2 per host: tpu-v5-lite-device machine types have 1, 4, 8 chips per "
            "VM, so no node can run this Pod; no tpu-v5-lite-device machine type fits topology "
            "2x2x4",
            "topology 2x2x4 has 3 dimensions but tpu-v5-lite-device slices use 2 (such as 4x4)",
            "tpu-v5-lite-device offers single-host slices only; use tpu-v5-lite-podslice for 8 "
            "hosts"}},
      }));
  CAPTURE(accelerator, topo, per_host);
  webhook::Result<topology::Slice> s = topology::Slice::create({accelerator, topo, per_host});
  REQUIRE(s.has_value());
  CHECK(s->advisories() == advice);
}

TEST_CASE("M7: an unknown accelerator is advised about and still follows the chiplet rule",
          "[topology][slice]") {
  auto [accelerator, chiplets] = GENERATE(table<std::string, int>({
      {"", 1},
      {"tpu-v9-slice", 1},
      {"tpu-v7x", 1},
      {"tpu7x-foo", 2},
  }));
  CAPTURE(accelerator);
  webhook::Result<topology::Slice> s = topology::Slice::create({accelerator, "2x2x2", 4});
  REQUIRE(s.has_value());
  CHECK(s->known_accelerator() == nullptr);
  CHECK(s->chiplets() == chiplets);
  CHECK(s->devices_per_host() == 4 * chiplets);
  CHECK(s->total_devices() == 8 * chiplets);
  std::vector<std::string> advice = s->advisories();
  REQUIRE(advice.size() == 1);
  CHECK_THAT(advice[0], Catch::StartsWith("accelerator \"" + accelerator +
                                          "\" is not a known GKE TPU accelerator"));
  CHECK_THAT(advice[0], Catch::Contains("tpu-v4-podslice, tpu-v5p-slice, tpu-v5-lite-podslice, "
                                        "tpu-v5-lite-device, tpu-v6e-slice, tpu7x"));
  CHECK_THAT(advice[0],
             Catch::Contains("treated as a TPU with " + std::to_string(chiplets) + " device(s)"));
  CHECK_THAT(advice[0], Catch::Contains("cloud.google.com/gke-tpu-accelerator"));
}

TEST_CASE("M7: a mistyped accelerator's advice names the label it probably meant",
          "[topology][slice]") {
  webhook::Result<topology::Slice> s = topology::Slice::create({"tpu-v6e-slcie", "4x4", 4});
  REQUIRE(s.has_value());
  CHECK(s->advisories() ==
        std::vector<std::string>{
            "accelerator \"tpu-v6e-slcie\" is not a known GKE TPU accelerator (did you mean "
            "\"tpu-v6e-slice\"? known: tpu-v4-podslice, tpu-v5p-slice, tpu-v5-lite-podslice, "
            "tpu-v5-lite-device, tpu-v6e-slice, tpu7x); treated as a TPU with 1 device(s) per "
            "chip. Check nodeSelector cloud.google.com/gke-tpu-accelerator"});
}
