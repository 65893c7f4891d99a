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

// ---- The ray start command (KubeRay's Pod builder) -----------------------------------------
// Expected commands are written out by hand from KubeRay's rules: flags sorted, each as
// " --key=value " (so two spaces between flags and one at the end).

namespace {

constexpr const char* kAddress = " --address=rc-head-svc.ns.svc.cluster.local:6379 ";
constexpr const char* kUlimit = "ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ";

// A one-group RayCluster rc/ns whose worker container is `container`; `group` adds to the group.
json one_group(json container, const json& group = json::object()) {
  json g = {{"groupName", "g"},
            {"replicas", 1},
            {"template", {{"spec", {{"containers", json::array({std::move(container)})}}}}}};
  g.update(group);
  return {{"apiVersion", "ray.io/v1"},
          {"kind", "RayCluster"},
          {"metadata", {{"name", "rc"}, {"namespace", "ns"}}},
          {"spec", {{"workerGroupSpecs", json::array({g})}}}};
}

json ray_container(const json& resources = nullptr) {
  json c = {{"name", "ray-worker"}, {"image", "rayproject/ray:2.52.0"}};
  if (!resources.is_null()) {
    c["resources"] = resources;
  }
  return c;
}

json first_pod(const json& rc) {
  auto pods = dryrun::expand_workers(rc, {});
  REQUIRE(pods);
  REQUIRE_FALSE(pods->empty());
  return pods->front().pod;
}

std::string start_command(const json& rc) {
  return testing::env_of(first_pod(rc), "KUBERAY_GEN_RAY_START_CMD");
}

}  // namespace

TEST_CASE("ray start: KubeRay's worker defaults with no params and no resources",
          "[dryrun][expand][ray-start]") {
  CHECK(start_command(one_group(ray_container())) ==
        std::string("ray start ") + kAddress +
            " --block  --dashboard-agent-listen-port=52365  --metrics-export-port=8080 ");
}

TEST_CASE("ray start: rayStartParams pass through, sorted, YAML numbers and booleans as text",
          "[dryrun][expand][ray-start]") {
  json rc = one_group(ray_container(), {{"rayStartParams",
                                         {{"object-store-memory", 100000000},
                                          {"num-cpus", "0"},
                                          {"disable-usage-stats", true},
                                          {"temp-dir", "/tmp/ray"}}}});
  CHECK(start_command(rc) ==
        std::string("ray start ") + kAddress +
            " --block  --dashboard-agent-listen-port=52365  --disable-usage-stats "
            " --metrics-export-port=8080  --num-cpus=0  --object-store-memory=100000000 "
            " --temp-dir=/tmp/ray ");
}

TEST_CASE("ray start: the params' own address and ports win, block is always on",
          "[dryrun][expand][ray-start]") {
  json rc = one_group(ray_container(), {{"rayStartParams",
                                         {{"address", "other:1234"},
                                          {"metrics-export-port", "9090"},
                                          {"dashboard-agent-listen-port", 1234},
                                          {"block", "false"}}}});
  CHECK(start_command(rc) ==
        "ray start  --address=other:1234  --block  --dashboard-agent-listen-port=1234 "
        " --metrics-export-port=9090 ");
}

TEST_CASE("ray start: true is a bare switch, false is dropped, except for boolean-valued flags",
          "[dryrun][expand][ray-start]") {
  json rc = one_group(ray_container(), {{"rayStartParams",
                                         {{"disable-usage-stats", "TRUE"},
                                          {"verbose", "false"},
                                          {"log-color", "false"},
                                          {"include-dashboard", "False"},
                                          {"include-log-monitor", "true"}}}});
  CHECK(start_command(rc) ==
        std::string("ray start ") + kAddress +
            " --block  --dashboard-agent-listen-port=52365  --disable-usage-stats "
            " --include-dashboard=False  --include-log-monitor=true  --log-color=false "
            " --metrics-export-port=8080 ");
}

TEST_CASE("ray start: the group's resources field overrides cpu, memory, GPUs and --resources",
          "[dryrun][expand][ray-start]") {
  json container = ray_container({{"limits", {{"cpu", "64"}, {"google.com/tpu", "4"}}}});
  json rc = one_group(container,
                      {{"rayStartParams", {{"num-cpus", "16"}, {"resources", "'{\"old\":1}'"}}},
                       {"resources",
                        {{"CPU", "500m"},
                         {"memory", "1Gi"},
                         {"nvidia.com/gpu", "2"},
                         {"TPU", "8"},
                         {"custom", "0.5"},
                         {"Big", "1e21"},
                         {"Large", "1e20"},
                         {"bad", "1K"},
                         {"worse", true}}}});
  // cpu 500m rounds up; TPU is in --resources already, so the google.com/tpu limit adds nothing;
  // the unparsable quantities are skipped; keys sorted by bytes (upper case first).
  CHECK(start_command(rc) ==
        std::string("ray start ") + kAddress +
            " --block  --dashboard-agent-listen-port=52365  --memory=1073741824 "
            " --metrics-export-port=8080  --num-cpus=1  --num-gpus=2 "
            " --resources='{\"Big\":1e+21,\"Large\":100000000000000000000,\"TPU\":8,"
            "\"custom\":0.5}' ");
}

TEST_CASE("ray start: --resources numbers are written as Go's encoding/json writes them",
          "[dryrun][expand][ray-start]") {
  json rc = one_group(ray_container(), {{"resources",
                                         {{"a", "1e-7"},
                                          {"b", "0.000001"},
                                          {"c", "1.5"},
                                          {"d", "123456789012345678e3"},
                                          {"e", "4"},
                                          {"f<&>", "2"}}}});
  // Below 1e-6 as an exponent without its leading zero; 1.2345678901234568e20 as the shortest
  // digits padded with zeros (the double's exact value is 123456789012345683968); HTML-safe keys.
  CHECK(start_command(rc) ==
        std::string("ray start ") + kAddress +
            " --block  --dashboard-agent-listen-port=52365  --metrics-export-port=8080 "
            " --resources='{\"a\":1e-7,\"b\":0.000001,\"c\":1.5,\"d\":123456789012345680000,"
            "\"e\":4,\"f\\u003c\\u0026\\u003e\":2}' ");
}

TEST_CASE("ray start: the group's labels become --labels, keys sorted",
          "[dryrun][expand][ray-start]") {
  json rc = one_group(ray_container(), {{"labels", {{"zone", "a"}, {"accelerator", "tpu"}}}});
  json pod = first_pod(rc);
  CHECK(testing::env_of(pod, "KUBERAY_GEN_RAY_START_CMD") ==
        std::string("ray start ") + kAddress +
            " --block  --dashboard-agent-listen-port=52365  --labels=accelerator=tpu,zone=a "
            " --metrics-export-port=8080 ");
  CHECK(pod["metadata"]["labels"]["zone"] == "a");  // and label the Pod, as before
}

TEST_CASE("ray start: --num-cpus from the cpu limit, else the request, rounded up",
          "[dryrun][expand][ray-start]") {
  auto [resources, flag] = GENERATE(table<json, std::string>({
      {{{"limits", {{"cpu", "2500m"}}}, {"requests", {{"cpu", "1"}}}}, " --num-cpus=3 "},
      {{{"requests", {{"cpu", "1500m"}}}}, " --num-cpus=2 "},
      {{{"limits", {{"cpu", "0"}}}, {"requests", {{"cpu", 4}}}}, " --num-cpus=4 "},
      {{{"limits", {{"cpu", "0"}}}}, ""},
  }));
  CAPTURE(resources);
  CHECK(start_command(one_group(ray_container(resources))) ==
        std::string("ray start ") + kAddress +
            " --block  --dashboard-agent-listen-port=52365  --metrics-export-port=8080 " + flag);
}

TEST_CASE("ray start: --memory from the memory limit only", "[dryrun][expand][ray-start]") {
  std::string from_request =
      start_command(one_group(ray_container({{"requests", {{"memory", "1Gi"}}}})));
  CHECK(from_request.find("--memory") == std::string::npos);
  CHECK(start_command(one_group(
            ray_container({{"limits", {{"memory", "2G"}}}, {"requests", {{"memory", "1Gi"}}}}))) ==
        std::string("ray start ") + kAddress +
            " --block  --dashboard-agent-listen-port=52365  --memory=2000000000 "
            " --metrics-export-port=8080 ");
}

TEST_CASE("ray start: TPU and GPUs from the limits", "[dryrun][expand][ray-start]") {
  std::string prefix =
      std::string("ray start ") + kAddress + " --block  --dashboard-agent-listen-port=52365 ";
  SECTION("a TPU limit becomes {\"TPU\":n}") {
    CHECK(start_command(one_group(ray_container({{"limits", {{"google.com/tpu", "4"}}}}))) ==
          prefix + " --metrics-export-port=8080  --resources='{\"TPU\":4}' ");
  }
  SECTION("joining the params' own resources, whatever their quotes") {
    json rc = one_group(ray_container({{"limits", {{"google.com/tpu", 4}}}}),
                        {{"rayStartParams", {{"resources", "\"{\"custom\": 2}\""}}}});
    CHECK(start_command(rc) ==
          prefix + " --metrics-export-port=8080  --resources='{\"TPU\":4,\"custom\":2}' ");
  }
  SECTION("a GPU limit, MIG slices included, and a TPU one") {
    json limits = {{"nvidia.com/mig-2g.10gb", "1"}, {"google.com/tpu", "4"}};
    CHECK(start_command(one_group(ray_container({{"limits", limits}}))) ==
          prefix + " --metrics-export-port=8080  --num-gpus=1  --resources='{\"TPU\":4}' ");
  }
  SECTION("a zero TPU limit adds nothing") {
    CHECK(start_command(one_group(ray_container({{"limits", {{"google.com/tpu", "0"}}}}))) ==
          prefix + " --metrics-export-port=8080 ");
  }
}

TEST_CASE("ray start: no TPU added when --resources already names an accelerator",
          "[dryrun][expand][ray-start]") {
  std::string prefix =
      std::string("ray start ") + kAddress + " --block  --dashboard-agent-listen-port=52365 ";
  json limits = {{"limits", {{"google.com/tpu", "4"}, {"nvidia.com/gpu", "1"}}}};
  auto [resources, flags] = GENERATE(table<std::string, std::string>({
      {"'{\"TPU\":1}'", " --num-gpus=1  --resources='{\"TPU\":1}' "},
      {"{\"neuron_cores\": 2}", " --num-gpus=1  --resources={\"neuron_cores\": 2} "},
      // Not JSON: KubeRay leaves it alone and adds no accelerator, no GPU either.
      {"'TPU=1'", " --resources='TPU=1' "},
  }));
  CAPTURE(resources);
  json rc = one_group(ray_container(limits), {{"rayStartParams", {{"resources", resources}}}});
  CHECK(start_command(rc) == prefix + " --metrics-export-port=8080 " + flags);
}

TEST_CASE("ray start: the container command and args run first, unless they start Ray",
          "[dryrun][expand][ray-start]") {
  std::string start = std::string("ray start ") + kAddress +
                      " --block  --dashboard-agent-listen-port=52365  --metrics-export-port=8080 ";
  SECTION("no command: bash runs the generated one") {
    json c = first_pod(one_group(ray_container()))["spec"]["containers"][0];
    CHECK(c["command"] == json::array({"/bin/bash", "-c", "--"}));
    CHECK(c["args"] == json::array({kUlimit + start}));
  }
  SECTION("a command and args: each element as \" <e> \", then && the generated one") {
    json container = ray_container();
    container["command"] = {"python", "app.py"};
    container["args"] = {"--x"};
    json c = first_pod(one_group(container))["spec"]["containers"][0];
    CHECK(c["command"] == json::array({"/bin/bash", "-c", "--"}));
    CHECK(c["args"] == json::array({" python  app.py  --x  && " + std::string(kUlimit) + start}));
  }
  SECTION("args alone") {
    json container = ray_container();
    container["args"] = {"echo hi"};
    json c = first_pod(one_group(container))["spec"]["containers"][0];
    CHECK(c["args"] == json::array({" echo hi  && " + std::string(kUlimit) + start}));
  }
  SECTION("a command that runs ray start itself is kept") {
    json container = ray_container();
    container["command"] = {"/bin/bash", "-c"};
    container["args"] = {"ray start --address=$RAY_ADDRESS --block"};
    json pod = first_pod(one_group(container));
    const json& c = pod["spec"]["containers"][0];
    CHECK(c["command"] == json::array({"/bin/bash", "-c"}));
    CHECK(c["args"] == json::array({"ray start --address=$RAY_ADDRESS --block"}));
    CHECK(testing::env_of(pod, "KUBERAY_GEN_RAY_START_CMD") == start);
  }
}

TEST_CASE("ray start: ray.io/overwrite-container-cmd keeps the container's command",
          "[dryrun][expand][ray-start]") {
  json container = ray_container();
  container["command"] = {"sleep", "infinity"};
  json rc = one_group(container);
  SECTION("on the Pod template") {
    rc["spec"]["workerGroupSpecs"][0]["template"]["metadata"]["annotations"] = {
        {"ray.io/overwrite-container-cmd", "True"}};
  }
  SECTION("on the RayCluster, which KubeRay copies onto the Pod") {
    rc["metadata"]["annotations"] = {{"ray.io/overwrite-container-cmd", "true"}};
  }
  json pod = first_pod(rc);
  const json& c = pod["spec"]["containers"][0];
  CHECK(c["command"] == json::array({"sleep", "infinity"}));
  CHECK_FALSE(c.contains("args"));
  CHECK(pod["metadata"]["annotations"].contains("ray.io/overwrite-container-cmd"));
  CHECK_FALSE(testing::env_of(pod, "KUBERAY_GEN_RAY_START_CMD").empty());
}

TEST_CASE("ray start: the GKE tutorial's tpu7x group advertises 8 TPU per host",
          "[dryrun][expand][ray-start]") {
  // resources: {TPU: "8"}; limits cpu 64, memory 250Gi (250 x 2^30), google.com/tpu 4.
  json pod = first_pod(load_cluster("gke-tutorial/ray-cluster.tpu-v7x-multihost.yaml"));
  std::string want =
      "ray start  --address=ray-torchtpu-cluster-head-svc.default.svc.cluster.local:6379 "
      " --block  --dashboard-agent-listen-port=52365  --memory=268435456000 "
      " --metrics-export-port=8080  --num-cpus=64  --resources='{\"TPU\":8}' ";
  CHECK(testing::env_of(pod, "KUBERAY_GEN_RAY_START_CMD") == want);
  CHECK(pod["spec"]["containers"][0]["args"] == json::array({kUlimit + want}));
}

TEST_CASE("ray start: the same command as a worker Pod KubeRay created",
          "[dryrun][expand][ray-start][golden]") {
  // The fixture Pod was created by KubeRay from this RayCluster (same name, group and resources).
  json real =
      testing::read_json(testing::fixture_path("pods/v6e-16-multihost-worker-indexed.json"));
  json pod = first_pod(load_cluster("rayclusters/valid/ray-cluster.tpu-v6e-16-multihost.yaml"));
  CHECK(testing::env_of(pod, "KUBERAY_GEN_RAY_START_CMD") ==
        testing::env_of(real, "KUBERAY_GEN_RAY_START_CMD"));
  CHECK(pod["spec"]["containers"][0]["command"] == real["spec"]["containers"][0]["command"]);
  CHECK(pod["spec"]["containers"][0]["args"] == real["spec"]["containers"][0]["args"]);
}
