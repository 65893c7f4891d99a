#pragma once
// Helpers shared by the unit tests: fixtures, golden files, recorded patches, fake clusters.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "admission/handler.h"
#include "kube/listed_cluster.h"

namespace testing {

using json = nlohmann::json;

// FIXTURE_DIR + "/" + relative.
std::string fixture_path(const std::string& relative);
std::string read_text(const std::string& path);
json read_json(const std::string& path);
// Every file in FIXTURE_DIR/<dir> whose name ends with `suffix`, sorted.
std::vector<std::string> fixture_files(const std::string& dir, const std::string& suffix);

// Compares `actual` with the golden JSON file at `path` (parsed, so formatting does not matter);
// with the environment variable UPDATE_GOLDEN=1 writes it instead. Returns a json::diff of the
// two for the failure message, empty when they match.
json check_golden(const std::string& path, const json& actual);

// Saves `patch` with the Pod it applies to and the Pod it should give, so
// test/integration/kubectl_patch_test.py applies it with `kubectl patch --local` and compares:
// every patch a unit test produces goes through Kubernetes' own JSON Patch code.
void record_patch(const std::string& name, const json& pod, const json& patch);

// A cluster for the Handler: Pods (legacy placement), Nodes and headless Services, held by the
// server's own classes as webhook-dryrun --existing fills them (kube::ListedCluster).
struct FakeCluster {
  kube::ListedCluster state;
  // Lists the Pods, Nodes and Services of a YAML/JSON file (a List or multi-document YAML).
  void load(const std::string& path);
};

// A Handler over a FakeCluster.
struct Harness {
  explicit Harness(admission::Config config = {})
      : handler(config, cluster.state.pods(), cluster.state.nodes(), cluster.state.services()) {}
  FakeCluster cluster;
  admission::Handler handler;
};

// Webhook flags from a fixture's <case>.config.json.
admission::Config config_from(const json& flags);

// A CREATE request for `object` (a Pod unless kind says otherwise).
admission::Request pod_request(json object, std::string uid = "uid-test", bool dry_run = false);
admission::Request cluster_request(json object, std::string operation = "CREATE");

// The JSON of a Response, with its patch decoded: what golden files hold.
json readable(const admission::Response& response);

// Applies the response's patch to `original` (an empty patch leaves it as is).
json apply(const json& original, const admission::Response& response);

// The items of a comma-separated list ("" has none; items are not trimmed): how the tests read
// the address lists the webhook writes.
std::vector<std::string> split_list(std::string_view text);

// The literal env value `name` of container `index` in a Pod, or "" when absent.
std::string env_of(const json& pod, const std::string& name, std::size_t index = 0);

}  // namespace testing
