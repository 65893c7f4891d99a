// lib/topology/addresses: the lists of docs/spec.md M5.1-M5.3 (docs/topology.md §2.6-2.8, 2.11).
#include "topology/addresses.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "support/test_support.h"

using Strings = std::vector<std::string>;

TEST_CASE("M5.2: worker_hostnames are the DNS names of the replica's hosts",
          "[topology][addresses]") {
  CHECK(topology::worker_hostnames("g", 0, 2, "c-headless") == "g-0-0.c-headless,g-0-1.c-headless");
  CHECK(topology::worker_hostnames("tpu-group", 3, 4, "rc-headless") ==
        "tpu-group-3-0.rc-headless,tpu-group-3-1.rc-headless,"
        "tpu-group-3-2.rc-headless,tpu-group-3-3.rc-headless");
  CHECK(topology::worker_hostnames("g", 0, 1, "s") == "g-0-0.s");
  CHECK(topology::worker_hostnames("g", 0, 0, "s").empty());
  // Hosts 10 and up take a digit more: the size computed beforehand is the size made.
  CHECK(topology::worker_hostnames("g", 12, 11, "s").size() ==
        10 * std::string("g-12-0.s").size() + std::string("g-12-10.s").size() + 10);
}

TEST_CASE("M5.2: comma-separated lists", "[topology][addresses]") {
  SECTION("the tests' split_list: an empty text has no items; items are not trimmed") {
    auto [text, items] = GENERATE(table<std::string, Strings>({
        {"", Strings{}},
        {"a", {"a"}},
        {"a,b", {"a", "b"}},
        {"g-0-0.c-headless,g-0-1.c-headless", {"g-0-0.c-headless", "g-0-1.c-headless"}},
        {"a,,b", {"a", "", "b"}},
        {",", {"", ""}},
        {"a,", {"a", ""}},
        {",a", {"", "a"}},
        {" a , b ", {" a ", " b "}},
        {"localhost", {"localhost"}},
    }));
    CAPTURE(text);
    CHECK(testing::split_list(text) == items);
  }
  SECTION("list_size and list_has_empty_item: what splitting would give, without splitting") {
    auto [text, size, has_empty] = GENERATE(table<std::string, std::size_t, bool>({
        {"", 0, false},
        {"a", 1, false},
        {"a,b", 2, false},
        {"a,,b", 3, true},
        {",", 2, true},
        {"a,", 2, true},
        {",a", 2, true},
        {" a , b ", 2, false},
        {std::string(1 << 20, ','), (1 << 20) + 1, true},
    }));
    CAPTURE(text.substr(0, 20), text.size());
    CHECK(topology::list_size(text) == size);
    CHECK(topology::list_has_empty_item(text) == has_empty);
    CHECK(testing::split_list(text).size() == size);
  }
}

TEST_CASE("M5.2/M5.3: address_list is host-major, ports ascending", "[topology][addresses]") {
  auto [entries, ports, base, text] = GENERATE(table<std::string, int, int, std::string>({
      {"h0,h1", 2, 8471, "h0:8471,h0:8472,h1:8471,h1:8472"},
      {"h0,h1,h2", 1, 8471, "h0:8471,h1:8471,h2:8471"},
      {"localhost", 4, 8471, "localhost:8471,localhost:8472,localhost:8473,localhost:8474"},
      {"localhost", 2, 9000, "localhost:9000,localhost:9001"},
      {"a", 1, 1, "a:1"},
      {"a,bb", 2, 8471, "a:8471,a:8472,bb:8471,bb:8472"},
      {"h9,h10", 1, 9999, "h9:9999,h10:9999"},
      // Nothing to list.
      {"", 4, 8471, ""},
      {"h0", 0, 8471, ""},
  }));
  CAPTURE(entries, text);
  CHECK(topology::address_list(entries, ports, base) == text);
  // address_list_size counts the entries' bytes without their commas.
  std::size_t count = topology::list_size(entries);
  CHECK(topology::address_list_size(entries.size() - (count > 0 ? count - 1 : 0), count, ports,
                                    base) == text.size());
}

TEST_CASE("M5.3: torch_tpu_topology gives 3 numbers, plus ,2 on TPU7x", "[topology][addresses]") {
  auto [shape, chiplets, text] = GENERATE(table<std::string, int, std::string>({
      {"4x4", 1, "4,4,1"},
      {"2x4", 1, "2,4,1"},
      {"1x1", 1, "1,1,1"},
      {"2x2x4", 1, "2,2,4"},
      {"2x2x2", 2, "2,2,2,2"},
      {"2x2x1", 2, "2,2,1,2"},
      {"4x4x4", 2, "4,4,4,2"},
      {"4x4", 2, "4,4,1,2"},
  }));
  CAPTURE(shape, chiplets);
  CHECK(topology::torch_tpu_topology(*topology::parse_shape(shape), chiplets) == text);
}

TEST_CASE("M5.1: megascale_coordinator is host 0 of replica 0; TPU7x adds the port",
          "[topology][addresses]") {
  auto [group, svc, tpu7x, base, text] =
      GENERATE(table<std::string, std::string, bool, int, std::string>({
          {"g", "c-headless", false, 8081, "g-0-0.c-headless"},
          {"g", "c-headless", true, 8081, "g-0-0.c-headless:8081"},
          {"tpu-group", "rc-headless", true, 9100, "tpu-group-0-0.rc-headless:9100"},
          {"tpu-group", "rc-headless", false, 9100, "tpu-group-0-0.rc-headless"},
      }));
  CAPTURE(group, tpu7x, base);
  CHECK(topology::megascale_coordinator(group, svc, tpu7x, base) == text);
}

TEST_CASE("Ports: the flag defaults are 8471, 8081 and 2112", "[topology][addresses]") {
  topology::Ports p;
  CHECK(p.tpu_process_base == 8471);
  CHECK(p.megascale_base == 8081);
  CHECK(p.device_plugin == 2112);
}
