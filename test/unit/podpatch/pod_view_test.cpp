// lib/podpatch/pod_view: docs/spec.md Terms "TPU container", "chips per host", the topology
// precedence of "Slice", M4's Kueue-managed triggers, and the JSON shape checks that keep malformed
// Pods from reaching mutate (M2-style denials that name the field).
#include "podpatch/pod_view.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "podpatch/keys.h"

using podpatch::json;
using podpatch::PodView;

namespace {

// A KubeRay v6e-16 worker (test/fixtures/pods/v6e-16-multihost-worker-indexed.json, trimmed to what
// the webhook reads): a TPU container first, then a sidecar without TPUs.
json kuberay_worker() {
  return json::parse(R"({
    "kind": "Pod", "apiVersion": "v1",
    "metadata": {
      "generateName": "raycluster-tpu-v6e-multihost-tpu-group-worker-",
      "namespace": "default", "creationTimestamp": null,
      "labels": {"ray.io/cluster": "raycluster-tpu-v6e-multihost", "ray.io/group": "tpu-group",
                 "ray.io/node-type": "worker", "ray.io/replica-host-index": "0",
                 "ray.io/worker-group-replica-index": "0",
                 "ray.io/worker-group-replica-name": "tpu-group-x7k2b"}},
    "spec": {
      "containers": [
        {"name": "ray-worker", "image": "rayproject/ray:2.52.0-py310",
         "env": [{"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
                 {"name": "JAX_PLATFORMS", "value": "tpu,cpu"}],
         "resources": {"limits": {"cpu": "24", "google.com/tpu": "4", "memory": "200G"},
                       "requests": {"cpu": "24", "google.com/tpu": "4", "memory": "200G"}}},
        {"name": "log-sidecar", "image": "busybox",
         "resources": {"limits": {"cpu": "1"}}}],
      "nodeSelector": {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                       "cloud.google.com/gke-tpu-topology": "4x4"}},
    "status": {}})");
}

// A Pod whose container `name` has the given resources.
json pod_with_resources(const json& resources, const std::string& name = "ray-worker") {
  json pod = {{"metadata", {{"name", "p"}}},
              {"spec", {{"containers", json::array({{{"name", name}}})}}}};
  if (!resources.is_null()) {
    pod["spec"]["containers"][0]["resources"] = resources;
  }
  return pod;
}

}  // namespace

TEST_CASE("PodView reads a KubeRay TPU worker", "[podpatch][pod_view]") {
  const json pod = kuberay_worker();
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE(view.has_value());
  CHECK(&view->pod() == &pod);  // borrows, does not copy
  CHECK(view->is_tpu_pod());
  REQUIRE(view->tpu_containers().size() == 1);
  CHECK(view->tpu_containers()[0].index == 0);
  CHECK(view->tpu_containers()[0].chips == 4);
  CHECK(view->tpu_containers()[0].name == "ray-worker");
  CHECK(view->chips_per_host() == 4);
  CHECK(view->container(1)["name"] == "log-sidecar");
  CHECK(view->name().empty());
  CHECK(view->generate_name() == "raycluster-tpu-v6e-multihost-tpu-group-worker-");
  CHECK(view->display_name() == "raycluster-tpu-v6e-multihost-tpu-group-worker-");
  CHECK(view->namespace_name() == "default");
  CHECK(view->label(podpatch::keys::kClusterLabel) == "raycluster-tpu-v6e-multihost");
  CHECK(view->label(podpatch::keys::kReplicaNameLabel) == "tpu-group-x7k2b");
  CHECK_FALSE(view->label(podpatch::keys::kKueueQueueLabel).has_value());
  // (Only the labels and annotations the fast decode keeps compile: test/build/listed_keys.py.)
  CHECK_FALSE(view->annotation(podpatch::keys::kSubsliceAnnotation).has_value());
  CHECK(view->accelerator() == "tpu-v6e-slice");
  CHECK(view->node_selector(podpatch::keys::kTopologySelector) == "4x4");
  REQUIRE(view->topology().has_value());
  CHECK(view->topology()->value == "4x4");
  CHECK(view->topology()->field == "nodeSelector cloud.google.com/gke-tpu-topology");
  CHECK_FALSE(view->kueue_managed());
  CHECK_FALSE(view->deleting());
  CHECK(view->required_pod_affinity_terms() == nullptr);
}

TEST_CASE("PodView: names for messages", "[podpatch][pod_view]") {
  auto [metadata, display] = GENERATE(table<json, std::string>({
      {json{{"name", "w-abcde"}, {"generateName", "w-"}}, "w-abcde"},
      {json{{"name", ""}, {"generateName", "w-"}}, "w-"},
      {json{{"generateName", "w-"}}, "w-"},
      {json::object(), "(no name)"},
      {json{{"name", ""}, {"generateName", ""}}, "(no name)"},
  }));
  CAPTURE(metadata.dump());
  json pod = {{"metadata", metadata}};
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE(view.has_value());
  CHECK(view->display_name() == display);
  CHECK_FALSE(view->is_tpu_pod());
  CHECK(view->namespace_name().empty());
  CHECK(view->accelerator().empty());
  CHECK_FALSE(view->topology().has_value());
}

TEST_CASE("Terms/chips per host: request, else limit; numbers or strings", "[podpatch][pod_view]") {
  auto [resources, chips] = GENERATE(table<json, int>({
      // Good rows.
      {json::parse(R"({"requests": {"google.com/tpu": "4"}, "limits": {"google.com/tpu": "4"}})"),
       4},
      {json::parse(R"({"limits": {"google.com/tpu": "4"}})"), 4},
      {json::parse(R"({"requests": {"google.com/tpu": "8"}})"), 8},
      {json::parse(R"({"requests": {"google.com/tpu": 4}, "limits": {"google.com/tpu": 4}})"), 4},
      {json::parse(R"({"limits": {"google.com/tpu": 1}})"), 1},
      // A signed JSON integer, as webhook-dryrun makes of a YAML `google.com/tpu: 4`.
      {json{{"limits", {{"google.com/tpu", std::int64_t{4}}}}}, 4},
      // The request wins when both are set (Terms; Kubernetes requires them equal anyway).
      {json::parse(R"({"requests": {"google.com/tpu": "4"}, "limits": {"google.com/tpu": "8"}})"),
       4},
      {json::parse(R"({"requests": {"google.com/tpu": 2}, "limits": {"google.com/tpu": "8"}})"), 2},
      // A zero request counts as missing: the limit decides.
      {json::parse(R"({"requests": {"google.com/tpu": "0"}, "limits": {"google.com/tpu": "4"}})"),
       4},
      {json::parse(R"({"requests": {"google.com/tpu": null}, "limits": {"google.com/tpu": "4"}})"),
       4},
      {json::parse(R"({"requests": {"google.com/tpu": "007"}})"), 7},
      {json::parse(R"({"requests": {"google.com/tpu": "1024"}})"), 1024},
      // Not a TPU container: zero or absent (Terms), or only other resources.
      {json::parse(R"({"requests": {"google.com/tpu": "0"}, "limits": {"google.com/tpu": 0}})"), 0},
      {json::parse(R"({"requests": {"cpu": "4"}, "limits": {"nvidia.com/gpu": "4"}})"), 0},
      {json::parse(R"({})"), 0},
      {json::parse(R"({"requests": null, "limits": null})"), 0},
      {json(), 0},  // no resources at all
  }));
  CAPTURE(resources.dump());
  json pod = pod_with_resources(resources);
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE(view.has_value());
  CHECK(view->is_tpu_pod() == (chips > 0));
  CHECK(view->chips_per_host() == chips);
  CHECK(view->tpu_containers().size() == (chips > 0 ? 1u : 0u));
}

TEST_CASE("Terms/TPU container: a google.com/tpu other than zero, requested or limited",
          "[podpatch][pod_view]") {
  auto [resources, tpu] = GENERATE(table<std::string, bool>({
      {R"({"requests": {"google.com/tpu": "0"}, "limits": {"google.com/tpu": "4"}})", true},
      {R"({"requests": {"google.com/tpu": 1}})", true},
      {R"({"limits": {"google.com/tpu": "4"}})", true},
      {R"({"requests": {"google.com/tpu": "0"}, "limits": {"google.com/tpu": "0"}})", false},
      {R"({"requests": {"nvidia.com/gpu": "4"}, "limits": {"cpu": "4"}})", false},
      {R"({})", false},
  }));
  CAPTURE(resources);
  webhook::Result<PodView> view = PodView::create(pod_with_resources(json::parse(resources)));
  REQUIRE(view.has_value());
  CHECK(view->is_tpu_pod() == tpu);  // a TPU Pod: at least one TPU container
  CHECK(view->tpu_containers().size() == (tpu ? 1u : 0u));
}

TEST_CASE("Terms/chips per host: the sum over TPU containers, in container order",
          "[podpatch][pod_view]") {
  json pod = json::parse(R"({"spec": {"containers": [
      {"name": "sidecar", "resources": {"limits": {"cpu": "1"}}},
      {"name": "numa-0", "resources": {"requests": {"google.com/tpu": "2"}, "limits": {"google.com/tpu": "2"}}},
      {"name": "empty"},
      {"name": "numa-1", "resources": {"limits": {"google.com/tpu": 2}}}]}})");
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE(view.has_value());
  REQUIRE(view->tpu_containers().size() == 2);
  CHECK(view->tpu_containers()[0].index == 1);
  CHECK(view->tpu_containers()[0].name == "numa-0");
  CHECK(view->tpu_containers()[1].index == 3);
  CHECK(view->tpu_containers()[1].name == "numa-1");
  CHECK(view->chips_per_host() == 4);
  CHECK(view->container(3)["name"] == "numa-1");
}

TEST_CASE("M2: google.com/tpu must be a whole number of chips", "[podpatch][pod_view]") {
  auto [quantity, shown] = GENERATE(table<json, std::string>({
      {json("4.5"), "\"4.5\""},
      {json("-1"), "\"-1\""},
      {json("+4"), "\"+4\""},
      {json("4Gi"), "\"4Gi\""},
      {json("4k"), "\"4k\""},
      {json("1e1"), "\"1e1\""},
      {json(""), "\"\""},
      {json(" 4"), "\" 4\""},
      {json("1025"), "\"1025\""},
      {json("99999999999999999999999"), "\"99999999999999999999999\""},
      {json(4.0), "4.0"},
      {json(-4), "-4"},
      {json(1025), "1025"},
      {json(true), "true"},
      {json::array({4}), "[4]"},
      {json{{"value", 4}}, "{\"value\":4}"},
  }));
  CAPTURE(quantity.dump());
  for (std::string kind : {"requests", "limits"}) {
    CAPTURE(kind);
    json pod = pod_with_resources({{kind, {{"google.com/tpu", quantity}}}});
    webhook::Result<PodView> view = PodView::create(pod);
    REQUIRE_FALSE(view.has_value());
    CHECK(view.error().code == webhook::ErrorCode::kInvalidArgument);
    CHECK(view.error().message == "spec.containers[ray-worker].resources." + kind +
                                      "[google.com/tpu] " + shown +
                                      " is not a whole number of TPU chips; set it to the chips "
                                      "per host the machine type has, such as \"4\"");
  }
}

TEST_CASE("M2: every malformed shape PodView checks is named in the message",
          "[podpatch][pod_view]") {
  // Each row breaks one field of an otherwise good TPU Pod; `set` is a JSON Pointer and `value`
  // what goes there. Bad rows only: the good Pod itself is checked first.
  auto [pointer, value, message] = GENERATE(table<std::string, json, std::string>({
      {"/metadata", json("x"), "metadata must be an object, got string"},
      {"/metadata", json::array(), "metadata must be an object, got array"},
      {"/metadata/name", json(5), "metadata.name must be a string, got number"},
      {"/metadata/generateName", json(true), "metadata.generateName must be a string, got boolean"},
      {"/metadata/namespace", json::object(), "metadata.namespace must be a string, got object"},
      {"/metadata/labels", json::array(), "metadata.labels must be an object, got array"},
      {"/metadata/labels", json("a=b"), "metadata.labels must be an object, got string"},
      {"/metadata/labels/ray.io~1group", json(1),
       "metadata.labels \"ray.io/group\" must be a string, got number"},
      {"/metadata/labels/x", json(), "metadata.labels \"x\" must be a string, got null"},
      {"/metadata/annotations", json(3), "metadata.annotations must be an object, got number"},
      {"/metadata/annotations/cloud.google.com~1gke-tpu-slice-topology", json::array({"2x2"}),
       "metadata.annotations \"cloud.google.com/gke-tpu-slice-topology\" must be a string, got "
       "array"},
      {"/spec", json::array(), "spec must be an object, got array"},
      {"/spec/nodeSelector", json("4x4"), "spec.nodeSelector must be an object, got string"},
      {"/spec/nodeSelector/cloud.google.com~1gke-tpu-topology", json(16),
       "spec.nodeSelector \"cloud.google.com/gke-tpu-topology\" must be a string, got number"},
      {"/spec/hostname", json(1), "spec.hostname must be a string, got number"},
      {"/spec/subdomain", json::object(), "spec.subdomain must be a string, got object"},
      {"/spec/containers", json::object(), "spec.containers must be an array, got object"},
      {"/spec/containers", json("c"), "spec.containers must be an array, got string"},
      {"/spec/containers/1", json("sidecar"), "spec.containers[1] must be an object, got string"},
      {"/spec/containers/0/resources", json("4"),
       "spec.containers[ray-worker].resources must be an object, got string"},
      {"/spec/containers/0/resources/limits", json::array(),
       "spec.containers[ray-worker].resources.limits must be an object, got array"},
      {"/spec/containers/0/resources/requests", json(4),
       "spec.containers[ray-worker].resources.requests must be an object, got number"},
      {"/spec/containers/0/env", json::object(),
       "spec.containers[ray-worker].env must be an array, got object"},
      {"/spec/containers/0/env/0", json("A=1"),
       "spec.containers[ray-worker].env[0] must be an object with a string name"},
      {"/spec/containers/0/env/0", json{{"value", "1"}},
       "spec.containers[ray-worker].env[0] must be an object with a string name"},
      {"/spec/containers/0/env/1/name", json(1),
       "spec.containers[ray-worker].env[1] must be an object with a string name"},
      {"/spec/containers/0/env/1/value", json(1),
       "spec.containers[ray-worker].env[1].value must be a string, got number"},
      {"/spec/containers/0/env/1/value", json(false),
       "spec.containers[ray-worker].env[1].value must be a string, got boolean"},
      {"/spec/affinity", json::array(), "spec.affinity must be an object, got array"},
      {"/spec/affinity", json{{"podAffinity", "x"}},
       "spec.affinity.podAffinity must be an object, got string"},
      {"/spec/affinity", json{{"podAntiAffinity", 1}},
       "spec.affinity.podAntiAffinity must be an object, got number"},
      {"/spec/affinity",
       json{{"podAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution", json::object()}}}},
       "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution must be an "
       "array, got object"},
      {"/spec/affinity",
       json{{"podAntiAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution", "t"}}}},
       "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution must be an "
       "array, got string"},
  }));
  CAPTURE(pointer, value.dump());
  json pod = kuberay_worker();
  REQUIRE(PodView::create(pod).has_value());
  pod[json::json_pointer(pointer)] = value;
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE_FALSE(view.has_value());
  CHECK(view.error().code == webhook::ErrorCode::kInvalidArgument);
  CHECK(view.error().message == message);
}

TEST_CASE("M2: a container without a name is named by its index", "[podpatch][pod_view]") {
  json pod = pod_with_resources({{"requests", {{"google.com/tpu", "x"}}}});
  pod["spec"]["containers"][0].erase("name");
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE_FALSE(view.has_value());
  CHECK_THAT(view.error().message,
             Catch::StartsWith("spec.containers[0].resources.requests[google.com/tpu] \"x\""));
}

TEST_CASE("PodView: a Pod that is not a JSON object", "[podpatch][pod_view]") {
  auto [pod, type] = GENERATE(table<json, std::string>({
      {json::array(), "array"},
      {json("pod"), "string"},
      {json(), "null"},
      {json(1), "number"},
  }));
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE_FALSE(view.has_value());
  CHECK(view.error().code == webhook::ErrorCode::kInvalidArgument);
  CHECK(view.error().message == "the Pod must be a JSON object, got " + type);
}

TEST_CASE("PodView: null and absent optional fields are fine", "[podpatch][pod_view]") {
  auto pod = GENERATE(
      json::object(), json::parse(R"({"metadata": null, "spec": null})"),
      json::parse(R"({"metadata": {"labels": null, "annotations": null, "name": null},
                      "spec": {"nodeSelector": null, "containers": null, "affinity": null,
                               "hostname": null}})"),
      json::parse(R"({"spec": {"containers": []}})"),
      json::parse(R"({"spec": {"affinity": {"podAffinity": null, "nodeAffinity": {"x": 1}}}})"),
      // Env of a container without TPUs is not the webhook's business.
      json::parse(R"({"spec": {"containers": [{"name": "c", "env": "not checked"}]}})"),
      json::parse(
          R"({"spec": {"containers": [{"name": "c", "resources": {"limits": {"google.com/tpu": "4"}},
                                                "env": null}]}})"));
  CAPTURE(pod.dump());
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE(view.has_value());
  CHECK_FALSE(view->kueue_managed());
  CHECK(view->required_pod_affinity_terms() == nullptr);
}

TEST_CASE("Terms/Slice: the subslice annotation wins over the nodeSelector topology",
          "[podpatch][pod_view]") {
  auto [annotations, node_selector, value, field] =
      GENERATE(table<json, json, std::string, std::string>({
          {json{{"cloud.google.com/gke-tpu-slice-topology", "2x4"}},
           json{{"cloud.google.com/gke-tpu-topology", "4x4"}}, "2x4",
           "annotation cloud.google.com/gke-tpu-slice-topology"},
          {json{{"cloud.google.com/gke-tpu-slice-topology", "2x2x2"}}, json(), "2x2x2",
           "annotation cloud.google.com/gke-tpu-slice-topology"},
          {json{{"other", "1x1"}}, json{{"cloud.google.com/gke-tpu-topology", "4x4"}}, "4x4",
           "nodeSelector cloud.google.com/gke-tpu-topology"},
          {json(), json{{"cloud.google.com/gke-tpu-topology", "2x2x4"}}, "2x2x4",
           "nodeSelector cloud.google.com/gke-tpu-topology"},
      }));
  CAPTURE(annotations.dump(), node_selector.dump());
  std::optional<podpatch::TopologyField> t =
      podpatch::topology_field(annotations.is_null() ? nullptr : &annotations,
                               node_selector.is_null() ? nullptr : &node_selector);
  REQUIRE(t.has_value());
  CHECK(t->value == value);
  CHECK(t->field == field);
  // The view answers the same from a Pod.
  json pod = {{"metadata", {{"annotations", annotations}}},
              {"spec", {{"nodeSelector", node_selector}}}};
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE(view.has_value());
  REQUIRE(view->topology().has_value());
  CHECK(view->topology()->value == value);
  CHECK(view->topology()->field == field);
}

TEST_CASE("Terms/Slice: no topology anywhere", "[podpatch][pod_view]") {
  const json annotations = {{"cloud.google.com/gke-tpu-topology", "4x4"}};          // wrong place
  const json node_selector = {{"cloud.google.com/gke-tpu-slice-topology", "4x4"}};  // wrong place
  CHECK_FALSE(podpatch::topology_field(nullptr, nullptr).has_value());
  CHECK_FALSE(podpatch::topology_field(&annotations, &node_selector).has_value());
}

TEST_CASE("M4: kueue_managed has three triggers", "[podpatch][pod_view]") {
  auto [labels, annotations, managed] = GENERATE(table<json, json, bool>({
      // The three triggers.
      {json{{"kueue.x-k8s.io/queue-name", "user-queue"}}, json(), true},
      {json{{"kueue.x-k8s.io/queue-name", ""}}, json(), true},  // present is enough
      {json(),
       json{{"kueue.x-k8s.io/podset-required-topology", "cloud.google.com/gce-topology-block"}},
       true},
      {json(), json{{"cloud.google.com/skip-tpu-webhook-check", "true"}}, true},
      // Not triggers.
      {json(), json(), false},
      {json::object(), json::object(), false},
      {json(), json{{"cloud.google.com/skip-tpu-webhook-check", "false"}}, false},
      {json(), json{{"cloud.google.com/skip-tpu-webhook-check", "True"}}, false},
      {json(), json{{"kueue.x-k8s.io/queue-name", "q"}}, false},  // a label, not an annotation
      {json{{"kueue.x-k8s.io/podset-required-topology", "x"}}, json(), false},  // an annotation
      {json{{"cloud.google.com/skip-tpu-webhook-check", "true"}}, json(), false},
      {json{{"kueue.x-k8s.io/queue-name-x", "q"}}, json(), false},
  }));
  CAPTURE(labels.dump(), annotations.dump());
  CHECK(podpatch::kueue_managed(labels.is_null() ? nullptr : &labels,
                                annotations.is_null() ? nullptr : &annotations) == managed);
  json pod = {{"metadata", json::object()}};
  if (!labels.is_null()) {
    pod["metadata"]["labels"] = labels;
  }
  if (!annotations.is_null()) {
    pod["metadata"]["annotations"] = annotations;
  }
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE(view.has_value());
  CHECK(view->kueue_managed() == managed);
}

TEST_CASE("M3.3: deleting() sees a deletionTimestamp", "[podpatch][pod_view]") {
  auto [metadata, deleting] = GENERATE(table<json, bool>({
      {json{{"deletionTimestamp", "2026-01-01T00:00:00Z"}}, true},
      {json{{"deletionTimestamp", nullptr}}, false},
      {json::object(), false},
  }));
  json pod = {{"metadata", metadata}};
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE(view.has_value());
  CHECK(view->deleting() == deleting);
}

TEST_CASE("M4: required_pod_affinity_terms", "[podpatch][pod_view]") {
  json pod = json::parse(R"({"spec": {"affinity": {
      "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "k"}],
                      "preferredDuringSchedulingIgnoredDuringExecution": []}}}})");
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE(view.has_value());
  REQUIRE(view->required_pod_affinity_terms() != nullptr);
  CHECK(*view->required_pod_affinity_terms() == json::parse(R"([{"topologyKey": "k"}])"));
}

TEST_CASE("find_tpu_containers prefixes messages with `where` (V1 uses the template path)",
          "[podpatch][pod_view]") {
  SECTION("good") {
    json containers =
        json::parse(R"([{"name": "a", "resources": {"limits": {"google.com/tpu": "4"}}},
                                      {"name": "b"}])");
    webhook::Result<std::vector<podpatch::TpuContainer>> tpu =
        podpatch::find_tpu_containers(&containers, "template.spec.containers");
    REQUIRE(tpu.has_value());
    REQUIRE(tpu->size() == 1);
    CHECK((*tpu)[0].chips == 4);
    CHECK(podpatch::find_tpu_containers(nullptr, "x")->empty());
  }
  SECTION("bad") {
    json containers =
        json::parse(R"([{"name": "a", "resources": {"limits": {"google.com/tpu": "four"}}}])");
    webhook::Result<std::vector<podpatch::TpuContainer>> tpu =
        podpatch::find_tpu_containers(&containers, "template.spec.containers");
    REQUIRE_FALSE(tpu.has_value());
    CHECK_THAT(tpu.error().message,
               Catch::StartsWith("template.spec.containers[a].resources.limits[google.com/tpu] "
                                 "\"four\" is not a whole number"));
    json object = json::object();
    CHECK(podpatch::find_tpu_containers(&object, "template.spec.containers").error().message ==
          "template.spec.containers must be an array, got object");
  }
}
