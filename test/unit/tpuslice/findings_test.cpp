// Each recorded cluster of test/fixtures/tpu-slice/ through `kubectl tpu-slice check|status`
// against the fake kube-apiserver. Every expected value is written by hand from the fixture.
#include <catch2/catch.hpp>

#include "tpuslice_support.h"

using nlohmann::json;
using testing::findings_of;
using testing::RecordedCluster;

namespace {

const std::string kSlice = "slice ml/v6e-cluster group v6e-16 replica 0";
const std::string kPod0 = "v6e-cluster-v6e-16-worker-4xk2p";
const std::string kPod1 = "v6e-cluster-v6e-16-worker-9bz7q";
const std::string kPod2 = "v6e-cluster-v6e-16-worker-c2m8t";
const std::string kPod3 = "v6e-cluster-v6e-16-worker-hx5wn";

// `check v6e-cluster -n ml -o json` on a fixture: exit 1, and the answer.
json broken(const std::string& fixture, const std::string& cluster = "v6e-cluster") {
  RecordedCluster c(fixture);
  testing::CliRun r = c.run({"check", cluster, "-n", "ml", "-o", "json"});
  INFO(r.out << r.err);
  CHECK(r.code == 1);
  CHECK(r.err.empty());
  return r.json();
}

// The one finding of `check` in `answer`.
json only(const json& answer, const std::string& check) {
  std::vector<json> f = findings_of(answer, check);
  INFO(answer.dump(2));
  REQUIRE(f.size() == 1);
  return f.front();
}

std::string verdict(const std::string& fixture, const std::string& cluster = "v6e-cluster") {
  RecordedCluster c(fixture);
  testing::CliRun r = c.run({"status", cluster, "-n", "ml", "-o", "json"});
  json slices = r.json().at("slices");
  REQUIRE(slices.size() == 1);
  return slices[0].at("verdict").get<std::string>();
}

}  // namespace

TEST_CASE("healthy v6e 4x4: no findings, one ready slice of 4 Pods with the webhook's env") {
  RecordedCluster c("healthy-v6e-4x4");
  testing::CliRun check = c.run({"check", "v6e-cluster", "-n", "ml"});
  CHECK(check.code == 0);
  CHECK(check.out == "No findings: 1 slices checked, each consistent.\n");
  CHECK(check.err.empty());

  testing::CliRun status = c.run({"status", "v6e-cluster", "-n", "ml", "-o", "json"});
  CHECK(status.code == 0);
  json slices = status.json().at("slices");
  REQUIRE(slices.size() == 1);
  CHECK(slices[0]["verdict"] == "ready");
  CHECK(slices[0]["hosts"] == 4);
  CHECK(slices[0]["replica"] == 0);
  CHECK(slices[0]["group"] == "v6e-16");
  REQUIRE(slices[0]["pods"].size() == 4);
  json p3 = slices[0]["pods"][3];
  CHECK(p3["name"] == kPod3);
  CHECK(p3["workerId"] == "3");
  CHECK(p3["hostname"] == "v6e-16-0-3");
  CHECK(p3["tpuName"] == "v6e-16-0");
  CHECK(p3["topology"] == "4x4");
  CHECK(p3["node"] == "gke-tpu-v6e-pool-3");
  CHECK(p3["nodePool"] == "tpu-v6e-pool");
  CHECK(p3["nodePoolFrom"] == "node");
  CHECK(p3["phase"] == "Running");
  CHECK(p3["ready"] == true);

  testing::CliRun table = c.run({"status", "v6e-cluster", "-n", "ml"});
  CHECK(table.code == 0);
  CHECK_THAT(table.out, Catch::StartsWith("SLICE ml/v6e-cluster group v6e-16 replica 0: ready "
                                          "(4/4 Pods)\n  POD "));
  CHECK_THAT(table.out, Catch::Contains(kPod1 + "  Running  true   gke-tpu-v6e-pool-1  "
                                                "tpu-v6e-pool  1              v6e-16-0-1"));
}

TEST_CASE("healthy tpu7x 2x2x2 multi-slice: two ready slices, one node pool each") {
  RecordedCluster c("healthy-tpu7x-2x2x2");
  testing::CliRun check = c.run({"check", "ironwood", "-n", "ml"});
  CHECK(check.code == 0);
  CHECK(check.out == "No findings: 2 slices checked, each consistent.\n");
  testing::CliRun status = c.run({"status", "-n", "ml", "-o", "json"});
  CHECK(status.code == 0);
  json slices = status.json().at("slices");
  REQUIRE(slices.size() == 2);
  for (int r = 0; r < 2; ++r) {
    json s = slices[static_cast<std::size_t>(r)];
    CHECK(s["replica"] == r);
    CHECK(s["hosts"] == 2);
    CHECK(s["verdict"] == "ready");
    REQUIRE(s["pods"].size() == 2);
    CHECK(s["pods"][1]["workerId"] == "1");
    CHECK(s["pods"][1]["topology"] == "2x2x2");
  }
  CHECK(slices[1]["pods"][0]["tpuName"] == "tpu7x-1");
  CHECK(slices[1]["pods"][0]["hostname"] == "tpu7x-1-0");
  CHECK(slices[0]["pods"][0]["nodePool"] == "tpu7x-pool-a");
  CHECK(slices[1]["pods"][0]["nodePool"] == "tpu7x-pool-b");
}

TEST_CASE("duplicate TPU_WORKER_ID: the two Pods, the id no Pod has, the webhook's value") {
  json a = broken("duplicate-worker-id");
  json dup = only(a, "duplicate-worker-id");
  CHECK(dup["message"] == kSlice + ": TPU_WORKER_ID 1 is on 2 Pods (" + kPod1 + ", " + kPod3 +
                              "); each host of a slice needs its own id");
  CHECK(dup["evidence"] ==
        json::array({"Pod " + kPod1 + ": TPU_WORKER_ID=1", "Pod " + kPod3 + ": TPU_WORKER_ID=1"}));
  CHECK(dup["command"] ==
        "kubectl get pods -n ml -l ray.io/cluster=v6e-cluster,ray.io/group=v6e-16 -L "
        "ray.io/worker-group-replica-index,ray.io/replica-host-index -o wide");
  CHECK(only(a, "missing-worker-id")["message"] ==
        kSlice + " has 4 Pods for 4 hosts, but no Pod has TPU_WORKER_ID 3");
  json env = only(a, "env-differs");
  CHECK(env["message"] == "Pod ml/" + kPod3 +
                              ": its env differs from what the webhook would set now "
                              "(TPU_WORKER_ID)");
  CHECK(env["evidence"] == json::array({"TPU_WORKER_ID is \"1\"; the webhook would set \"3\""}));
  CHECK(env["command"] == "kubectl delete pod -n ml " + kPod3 +
                              "   # KubeRay recreates it and the webhook sets its env");
  CHECK(a["findings"].size() == 3);
  CHECK(verdict("duplicate-worker-id") == "broken");
}

TEST_CASE("a hostname in TPU_WORKER_HOSTNAMES with no Pod behind it") {
  json a = broken("hostname-without-pod");
  json f = only(a, "unresolved-hostname");
  CHECK(f["message"] == kSlice +
                            ": 1 of the hosts in TPU_WORKER_HOSTNAMES will not resolve, so the "
                            "slice cannot initialize");
  CHECK(f["evidence"] == json::array({"v6e-16-0-3.v6e-cluster-headless: no Pod has hostname "
                                      "v6e-16-0-3 and subdomain v6e-cluster-headless"}));
  CHECK(a["findings"].size() == 1);
  CHECK(verdict("hostname-without-pod") == "broken");
}

TEST_CASE("the headless Service: missing, named otherwise, selecting no Pod") {
  json missing = only(broken("headless-service-missing"), "headless-service");
  CHECK(missing["message"] ==
        "RayCluster ml/v6e-cluster: the Pods' subdomain names Service "
        "v6e-cluster-headless, which does not exist");
  CHECK(missing["command"] ==
        "kubectl get services -n ml -l ray.io/headless-worker-svc=v6e-cluster -o wide");

  json renamed_answer = broken("headless-service-renamed");
  CHECK(only(renamed_answer, "headless-service")["message"] ==
        "RayCluster ml/v6e-cluster: the Pods' subdomain is v6e-cluster-headless but the "
        "cluster's headless Service is named v6e-cluster-workers, so their hostnames do not "
        "resolve");
  // The webhook would now name the live Service in every Pod's hostnames.
  std::vector<json> drift = findings_of(renamed_answer, "env-differs");
  REQUIRE(drift.size() == 4);
  CHECK_THAT(drift[0]["message"].get<std::string>(), Catch::Contains("TPU_WORKER_HOSTNAMES"));

  json selects = only(broken("headless-service-selects-nothing"), "headless-service");
  CHECK(selects["message"] ==
        "RayCluster ml/v6e-cluster: Service v6e-cluster-headless does not select 4 of the worker "
        "Pods");
  CHECK(selects["evidence"][0] ==
        "Pod " + kPod0 + " is not selected by Service v6e-cluster-headless");
}

TEST_CASE("env that differs from what the webhook would compute now") {
  json a = broken("env-differs");
  json f = only(a, "env-differs");
  CHECK(f["message"] ==
        "Pod ml/" + kPod2 + ": its env differs from what the webhook would set now (TPU_NAME)");
  CHECK(f["evidence"] ==
        json::array({"TPU_NAME is \"v6e-16-1\"; the webhook would set \"v6e-16-0\""}));
  CHECK(a["findings"].size() == 1);
}

TEST_CASE("a Pod created without the webhook: no env at all, and its peers cannot reach it") {
  json a = broken("no-webhook-env");
  json f = only(a, "no-webhook-env");
  CHECK(f["message"] == "Pod ml/" + kPod1 +
                            " has no TPU_WORKER_ID: the webhook never mutated it; it was created "
                            "while the webhook was not in its path (down, or its "
                            "MutatingWebhookConfiguration missing)");
  CHECK(f["command"] == "kubectl delete pod -n ml " + kPod1 +
                            "   # KubeRay recreates it and the webhook sets its env");
  json h = only(a, "unresolved-hostname");
  CHECK(h["evidence"] == json::array({"v6e-16-0-1.v6e-cluster-headless: no Pod has hostname "
                                      "v6e-16-0-1 and subdomain v6e-cluster-headless"}));
  CHECK(findings_of(a, "env-differs").empty());
  RecordedCluster c("no-webhook-env");
  json status = c.run({"status", "v6e-cluster", "-n", "ml", "-o", "json"}).json();
  CHECK(status["slices"][0]["pods"][1]["webhookEnv"] == false);
  CHECK(status["slices"][0]["pods"][1]["workerId"] == "");
}

TEST_CASE("a slice split over two node pools") {
  json f = only(broken("split-node-pools"), "split-node-pools");
  CHECK(f["message"] == kSlice +
                            " is split over 2 node pools (tpu-v6e-pool, tpu-v6e-pool-b); the "
                            "hosts of one slice must be in one TPU node pool");
  CHECK(f["evidence"][3] ==
        "Pod " + kPod3 + ": node pool tpu-v6e-pool-b (from Node gke-tpu-v6e-pool-b-3)");
  CHECK(f["command"] ==
        "kubectl get nodes -L cloud.google.com/gke-nodepool,cloud.google.com/gke-tpu-topology");
}

TEST_CASE("a Pod Pending on the slice affinity: the scheduler's message, the slice pending") {
  json a = broken("affinity-pending");
  json f = only(a, "affinity-pending");
  CHECK(f["message"] == "Pod ml/" + kPod3 +
                            " is Pending: the scheduler finds no node that satisfies the slice's "
                            "pod affinity (its peers' node pool or topology has no free TPU host)");
  CHECK(f["evidence"] ==
        json::array({"PodScheduled=False: 0/3 nodes are available: 3 node(s) didn't match pod "
                     "affinity rules. preemption: 0/3 nodes are available: 3 Preemption is not "
                     "helpful for scheduling."}));
  CHECK(f["command"] == "kubectl describe pod -n ml " + kPod3);
  CHECK(a["findings"].size() == 1);
  CHECK(verdict("affinity-pending") == "pending");
}

TEST_CASE("MEGASCALE_SLICE_ID shared by both slices of a group") {
  json a = broken("megascale-mismatch", "ironwood");
  json f = only(a, "megascale-mismatch");
  CHECK(f["message"] ==
        "group ml/ironwood tpu7x: the MEGASCALE_* values of its slices disagree, "
        "so the multi-slice job cannot form");
  CHECK(f["evidence"] == json::array({"MEGASCALE_SLICE_ID=\"0\" on replicas 0, 1"}));
  CHECK(f["replica"] == -1);
  std::vector<json> drift = findings_of(a, "env-differs");
  REQUIRE(drift.size() == 2);
  CHECK(drift[0]["evidence"] ==
        json::array({"MEGASCALE_SLICE_ID is \"0\"; the webhook would set \"1\""}));
}

TEST_CASE("the webhook's Service without a ready endpoint") {
  json a = broken("webhook-no-endpoints");
  json f = only(a, "webhook-no-endpoints");
  CHECK(f["message"] ==
        "the webhook's Service ray-system/kuberay-tpu-webhook has no ready "
        "endpoints: TPU worker Pods created now get no TPU env (or are refused, "
        "with failurePolicy Fail)");
  CHECK(f["evidence"] == json::array({"1 EndpointSlices, 1 endpoints, none ready"}));
  CHECK(f["namespace"] == "ray-system");
  // The slices themselves are fine.
  CHECK(verdict("webhook-no-endpoints") == "ready");
}

TEST_CASE("check as a table: the finding, its evidence and its command") {
  RecordedCluster c("env-differs");
  testing::CliRun r = c.run({"check", "v6e-cluster", "-n", "ml"});
  CHECK(r.code == 1);
  CHECK(r.out == "[env-differs] Pod ml/" + kPod2 +
                     ": its env differs from what the webhook would set now (TPU_NAME)\n"
                     "    TPU_NAME is \"v6e-16-1\"; the webhook would set \"v6e-16-0\"\n"
                     "    fix or see more: kubectl delete pod -n ml " +
                     kPod2 + "   # KubeRay recreates it and the webhook sets its env\n");
  testing::CliRun y = c.run({"check", "v6e-cluster", "-n", "ml", "-o", "yaml"});
  CHECK(y.code == 1);
  CHECK_THAT(y.out, Catch::Contains("check: env-differs"));
}

namespace {

// The object of `resource` named `name` in namespace ml of a recorded cluster.
json object_of(RecordedCluster& c, const std::string& resource, const std::string& name) {
  std::optional<json> o = c.api().get(resource, "ml", name);
  REQUIRE(o.has_value());
  return *o;
}

}  // namespace

TEST_CASE("a peer that is not Ready does not resolve when the Service publishes only ready Pods") {
  RecordedCluster c("healthy-v6e-4x4");
  json svc = object_of(c, "services", "v6e-cluster-headless");
  svc["spec"]["publishNotReadyAddresses"] = false;
  REQUIRE(c.api().update("services", svc));
  json pod = object_of(c, "pods", kPod2);
  pod["status"]["conditions"][3]["status"] = "False";
  REQUIRE(c.api().update("pods", pod));
  testing::CliRun r = c.run({"check", "v6e-cluster", "-n", "ml", "-o", "json"});
  CHECK(r.code == 1);
  json f = only(r.json(), "unresolved-hostname");
  CHECK(f["evidence"] == json::array({"v6e-16-0-2.v6e-cluster-headless: Pod " + kPod2 +
                                      " is not Ready and Service v6e-cluster-headless does not "
                                      "publish not-ready addresses"}));
}

TEST_CASE("a headless Service that is not headless") {
  RecordedCluster c("healthy-v6e-4x4");
  json svc = object_of(c, "services", "v6e-cluster-headless");
  svc["spec"]["clusterIP"] = "10.12.0.7";
  REQUIRE(c.api().update("services", svc));
  testing::CliRun r = c.run({"check", "v6e-cluster", "-n", "ml", "-o", "json"});
  CHECK(r.code == 1);
  CHECK(only(r.json(), "headless-service")["message"] ==
        "RayCluster ml/v6e-cluster: Service v6e-cluster-headless is not headless (spec.clusterIP "
        "is not None), so it publishes no per-Pod DNS names");
}

TEST_CASE("a Pod the webhook would deny now is said, with its reason") {
  RecordedCluster c("healthy-v6e-4x4");
  json pod = object_of(c, "pods", kPod1);
  pod["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-topology"] = "4x";
  REQUIRE(c.api().update("pods", pod));
  testing::CliRun r = c.run({"check", "v6e-cluster", "-n", "ml", "-o", "json"});
  CHECK(r.code == 1);
  std::vector<json> f = findings_of(r.json(), "env-differs");
  REQUIRE(f.size() == 1);
  CHECK_THAT(f[0]["message"].get<std::string>(),
             Catch::StartsWith("Pod ml/" + kPod1 + ": the webhook would deny this Pod now: ") &&
                 Catch::Contains("4x"));
}

TEST_CASE("a container that could not exec: argument list too long (docs/spec.md M8.1)") {
  json a = broken("argument-list-too-long");
  json f = only(a, "argument-list-too-long");
  CHECK(f["message"] ==
        "Pod ml/" + kPod1 +
            " container ray-worker cannot start: \"argument list too long\" (E2BIG): one of its "
            "environment strings is over Linux's limit of 131,072 bytes for NAME=value; a "
            "webhook that follows docs/spec.md M8 leaves TORCH_TPU_SLICEBUILDER_ADDRESSES out "
            "and refuses host lists over the limit: upgrade it, shorten the worker group and "
            "RayCluster names if it refuses them, then delete the Pods so KubeRay recreates them");
  // The longest env of the fixture's Pod, NAME=value with its NUL: 32 + 1 + 16 x 36 - 1 + 1,
  // 25 + 1 + 167 + 1, 20 + 1 + 4 x 31 + 3 + 1.
  CHECK(f["evidence"] ==
        json::array({"Pod " + kPod1 +
                         " container ray-worker: failed to create containerd task: failed to "
                         "create shim task: OCI runtime create failed: runc create failed: "
                         "unable to start container process: exec: \"/bin/bash\": argument list "
                         "too long: unknown",
                     "Pod " + kPod1 + " env TORCH_TPU_SLICEBUILDER_ADDRESSES: 625 bytes",
                     "Pod " + kPod1 + " env KUBERAY_GEN_RAY_START_CMD: 194 bytes",
                     "Pod " + kPod1 + " env TPU_WORKER_HOSTNAMES: 149 bytes"}));
  CHECK(f["command"] ==
        "kubectl delete pods -n ml -l ray.io/cluster=v6e-cluster,ray.io/group=v6e-16   # once "
        "the webhook is upgraded");
  CHECK(f["replica"] == 0);
}
