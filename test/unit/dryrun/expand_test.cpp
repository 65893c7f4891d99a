// RayCluster -> the worker Pods KubeRay would create (docs/dryrun.md "A RayCluster").
#include "dryrun/expand.h"

#include <catch2/catch.hpp>

#include "dryrun/documents.h"
#include "support/test_support.h"

using testing::json;

namespace {

json load_cluster(const std::string& file) {
  auto docs = dryrun::parse_documents(testing::read_text(testing::fixture_path(file)));
  REQUIRE(docs);
  return docs->front();
}

}  // namespace

TEST_CASE("expand_workers shapes Pods as KubeRay does, in creation order", "[dryrun][expand]") {
  json rc = load_cluster("gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml");
  auto pods = dryrun::expand_workers(rc, {});
  REQUIRE(pods);
  REQUIRE(pods->size() == 4);
  for (int h = 0; h < 4; ++h) {
    const dryrun::WorkerPod& w = (*pods)[static_cast<std::size_t>(h)];
    CAPTURE(h);
    CHECK(w.group == "v6e-16");
    CHECK(w.replica == 0);
    CHECK(w.host == h);
    const json& md = w.pod["metadata"];
    CHECK_FALSE(md.contains("name"));  // the API server names it after admission
    CHECK(md["generateName"] == "ray-torchtpu-cluster-v6e-16-worker-");
    CHECK(md["namespace"] == "default");
    CHECK(md["labels"]["ray.io/cluster"] == "ray-torchtpu-cluster");
    CHECK(md["labels"]["ray.io/group"] == "v6e-16");
    CHECK(md["labels"]["ray.io/node-type"] == "worker");
    CHECK(md["labels"]["app.kubernetes.io/created-by"] == "kuberay-operator");
    CHECK(md["labels"]["ray.io/worker-group-replica-index"] == "0");
    CHECK(md["labels"]["ray.io/replica-host-index"] == std::to_string(h));
    CHECK(md["ownerReferences"][0]["kind"] == "RayCluster");
    const json& c = w.pod["spec"]["containers"][0];
    CHECK(c["resources"]["limits"]["google.com/tpu"] == "4");
    CHECK(testing::env_of(w.pod, "FQ_RAY_IP") ==
          "ray-torchtpu-cluster-head-svc.default.svc.cluster.local");
    CHECK(w.pod["spec"]["initContainers"].back()["name"] == "wait-gcs-ready");
    CHECK(w.pod["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-topology"] == "4x4");
  }
  // One replica shares one replica name.
  CHECK((*pods)[0].pod["metadata"]["labels"]["ray.io/worker-group-replica-name"] ==
        (*pods)[3].pod["metadata"]["labels"]["ray.io/worker-group-replica-name"]);
}

TEST_CASE("expand_workers: replicas x numOfHosts, clamped, suspended groups create nothing",
          "[dryrun][expand]") {
  json rc = load_cluster("gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml");
  json& g = rc["spec"]["workerGroupSpecs"][0];
  auto [replicas, min, max, suspend, want] =
      GENERATE(table<int, int, int, bool, int>({{1, 0, 5, false, 4},
                                                {3, 0, 5, false, 12},
                                                {9, 0, 2, false, 8},
                                                {0, 2, 5, false, 8},
                                                {2, 0, 5, true, 0}}));
  g["replicas"] = replicas;
  g["minReplicas"] = min;
  g["maxReplicas"] = max;
  g["suspend"] = suspend;
  CHECK(dryrun::desired_pods(g) == want);
  CHECK(dryrun::expand_workers(rc, {})->size() == static_cast<std::size_t>(want));
}

TEST_CASE("expand_workers without KubeRay indexing creates only the missing Pods",
          "[dryrun][expand]") {
  json rc = load_cluster("gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml");
  dryrun::ExpandOptions o;
  o.indexing = false;
  o.existing[{"default", "ray-torchtpu-cluster", "v6e-16"}] = 3;
  auto pods = dryrun::expand_workers(rc, o);
  REQUIRE(pods->size() == 1);
  CHECK_FALSE((*pods)[0].pod["metadata"]["labels"].contains("ray.io/worker-group-replica-index"));
  CHECK_FALSE((*pods)[0].pod["metadata"]["labels"].contains("ray.io/replica-host-index"));
}

TEST_CASE("expand_workers refuses a RayCluster without a name", "[dryrun][expand]") {
  auto pods = dryrun::expand_workers(json{{"kind", "RayCluster"}, {"spec", json::object()}}, {});
  REQUIRE_FALSE(pods);
  CHECK_THAT(pods.error().message, Catch::Contains("metadata.name"));
}
