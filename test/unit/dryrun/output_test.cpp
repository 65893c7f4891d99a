#include "dryrun/output.h"

#include <catch2/catch.hpp>

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
