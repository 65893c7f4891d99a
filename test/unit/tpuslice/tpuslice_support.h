#pragma once
// A recorded cluster (test/fixtures/tpu-slice/<case>.cluster.yaml) served by the fake
// kube-apiserver on a free loopback port, a kubeconfig for it, and kubectl-tpu_slice run
// in-process against it.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fake_apiserver.h"
#include "kube_support.h"

namespace testing {

struct CliRun {
  int code = -1;
  std::string out;
  std::string err;
  nlohmann::json json() const;  // `out` parsed (fails the test when it is not JSON)
};

// The objects of a recorded cluster.
std::vector<nlohmann::json> load_fixture(const std::string& name);

// "pods" for a Pod, "rayclusters" for a RayCluster, ...
std::string resource_of(const nlohmann::json& object);

class RecordedCluster {
 public:
  explicit RecordedCluster(const std::string& fixture, FakeApiServer::Options options = {});
  FakeApiServer& api() { return api_; }
  // A kubeconfig whose current context reaches the fake API (plain http on 127.0.0.1).
  std::string kubeconfig(const std::string& extra_context_fields = "") const;
  // kubectl-tpu_slice `args`, with $KUBECONFIG set to kubeconfig().
  CliRun run(std::vector<std::string> args) const;

  TempDir dir;

 private:
  FakeApiServer api_;
};

// kubectl-tpu_slice `args` with the environment `env` (name=value pairs).
CliRun run_plugin(const std::vector<std::string>& args,
                  const std::vector<std::pair<std::string, std::string>>& env);

// The findings of a `check -o json` answer whose check is `check`.
std::vector<nlohmann::json> findings_of(const nlohmann::json& answer, const std::string& check);

}  // namespace testing
