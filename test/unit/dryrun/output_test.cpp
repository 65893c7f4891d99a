#include "dryrun/output.h"

#include <catch2/catch.hpp>
#include <sstream>

#include "base/json/access.h"
#include "dryrun/documents.h"
#include "support/test_support.h"

using testing::json;

TEST_CASE("to_yaml reads back as the same JSON (strings that look typed are quoted)",
          "[dryrun][output]") {
  json pod = testing::read_json(
      testing::fixture_path("pods/v6e-16-multihost-worker-indexed.admission-approx.json"));
  pod["metadata"]["labels"]["odd"] = "on";
  pod["metadata"]["annotations"] = {{"n", "4"}, {"t", "true"}, {"e", ""}, {"multi", "a\nb"}};
  pod["spec"]["empty_list"] = json::array();
  pod["spec"]["empty_map"] = json::object();
  std::string yaml = dryrun::to_yaml(pod);
  auto back = dryrun::parse_documents(yaml);
  REQUIRE(back);
  CAPTURE(json::diff(pod, back->front()).dump(2));
  CHECK(back->front() == pod);
}

TEST_CASE("format_table aligns the slice table's columns", "[dryrun][output]") {
  json pod = testing::read_json(testing::fixture_path("pods/v6e-2x4-singlehost-worker.json"));
  pod["spec"]["containers"][0]["env"] = json::array(
      {{{"name", "TPU_WORKER_ID"}, {"value", "0"}},
       {{"name", "TPU_NAME"}, {"value", "tpu-group-0"}},
       {{"name", "TORCH_TPU_TOPOLOGY"}, {"value", "2,4,1"}},
       {{"name", "TORCH_TPU_SLICEBUILDER_ADDRESSES"}, {"value", "localhost:8471,localhost:8472"}}});
  std::string table = dryrun::format_table({{1, "tpu-group", {0, 0}, pod}});
  CHECK_THAT(table, Catch::StartsWith("#  POD"));
  CHECK_THAT(table, Catch::Contains("tpu-group-0") && Catch::Contains("2,4,1") &&
                        Catch::Contains("localhost:8471\n") && Catch::Contains("  -  "));
  // Every row has the header's column starts.
  std::size_t header_topology = table.find("TORCH_TPU_TOPOLOGY");
  std::size_t row = table.find('\n') + 1;
  CHECK(table.substr(row + header_topology, 5) == "2,4,1");
}

TEST_CASE("ListWriter writes what dump_json and to_yaml write for the whole List",
          "[dryrun][output]") {
  json pod = testing::read_json(
      testing::fixture_path("pods/v6e-16-multihost-worker-indexed.admission-approx.json"));
  json other = pod;
  other["metadata"]["labels"]["n"] = "4";
  for (std::size_t n = 0; n < 3; ++n) {
    json list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", json::array()}};
    std::ostringstream as_json;
    std::ostringstream as_yaml;
    dryrun::ListWriter j(as_json, true);
    dryrun::ListWriter y(as_yaml, false);
    for (std::size_t i = 0; i < n; ++i) {
      const json& item = i == 0 ? pod : other;
      list["items"].push_back(item);
      j.item(item);
      y.item(item);
    }
    j.end();
    y.end();
    CAPTURE(n);
    CHECK(as_json.str() == webhook::dump_json(list, 2) + "\n");
    CHECK(as_yaml.str() == dryrun::to_yaml(list));
  }
}

TEST_CASE("to_yaml writes a long address list as a plain scalar, and reads it back",
          "[dryrun][output]") {
  std::string list;
  for (int h = 0; h < 200; ++h) {
    list += (h > 0 ? "," : "") + std::string("g-0-") + std::to_string(h) + ".c-headless:8471";
  }
  json value = {{"value", list}, {"k", "4"}};
  std::string yaml = dryrun::to_yaml(value);
  CHECK(yaml == "k: \"4\"\nvalue: " + list + "\n");
  auto back = dryrun::parse_documents(yaml);
  REQUIRE(back);
  CHECK(back->front() == value);
  // Text that holds the stand-in marker is written by yaml-cpp alone, and still reads back.
  value["m"] = "zqzlongplainvaluezqz";
  back = dryrun::parse_documents(dryrun::to_yaml(value));
  REQUIRE(back);
  CHECK(back->front() == value);
}

TEST_CASE("the table's FIRST_PEER when the slicebuilder list is left out (spec M8.2)",
          "[dryrun][output]") {
  json pod = testing::read_json(testing::fixture_path("pods/v6e-2x4-singlehost-worker.json"));
  pod["spec"]["containers"][0]["env"] = json::array(
      {{{"name", "TPU_WORKER_ID"}, {"value", "0"}},
       {{"name", "TPU_WORKER_HOSTNAMES"}, {"value", "g-0-0.c-headless,g-0-1.c-headless"}},
       {{"name", "TORCH_TPU_BASE_PORT"}, {"value", "8471"}},
       {{"name", "TORCH_TPU_DEVICES_PER_HOST"}, {"value", "8"}}});
  dryrun::RowCells cells = dryrun::row_cells({1, "g", {0, 0}, pod});
  CHECK(cells.cells.back() == "g-0-0.c-headless:8471 (derived)");
}
