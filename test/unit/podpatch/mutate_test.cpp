// lib/podpatch/mutate: docs/spec.md M3's replicaIndex label, M4's hostname, subdomain and affinity,
// M5's env (order, values, "present" exceptions), M6 (the patch applies and re-mutating changes
// nothing) and the M7 warnings about user values.
#include "podpatch/mutate.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "podpatch/affinity.h"
#include "podpatch/env.h"
#include "support/test_support.h"

using podpatch::json;
using podpatch::PodView;
using podpatch::Slot;

namespace {

const json kHostIp = {{"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", "status.hostIP"}}}};
const json kUserFrom = {{"fieldRef", {{"fieldPath", "metadata.annotations['x']"}}}};

json tpu_container(const std::string& name, int chips, json env = json::array()) {
  return {{"name", name},
          {"image", "rayproject/ray:2.52.0"},
          {"resources",
           {{"requests", {{"google.com/tpu", std::to_string(chips)}}},
            {"limits", {{"google.com/tpu", std::to_string(chips)}}}}},
          {"env", std::move(env)}};
}

// A KubeRay worker of RayCluster "c", group "g", without index labels.
json worker(const std::string& accelerator, const std::string& topo, std::vector<json> containers) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"generateName", "c-g-worker-"},
            {"namespace", "default"},
            {"labels",
             {{"ray.io/cluster", "c"}, {"ray.io/group", "g"}, {"ray.io/node-type", "worker"}}}}},
          {"spec",
           {{"containers", json(std::move(containers))},
            {"nodeSelector",
             {{"cloud.google.com/gke-tpu-accelerator", accelerator},
              {"cloud.google.com/gke-tpu-topology", topo}}}}}};
}

json one_container(const std::string& accelerator, const std::string& topo, int chips,
                   json env = json::array()) {
  return worker(accelerator, topo, {tpu_container("ray-worker", chips, std::move(env))});
}

struct Options {
  Slot slot{0, 0};
  std::string svc = "c-headless";
  bool add_replica_label = false;
  topology::Ports ports;
  std::string topology_key;  // empty: default_topology_key of the Pod
};

// Options for replica r, host h.
Options at(int replica, int host) {
  Options o;
  o.slot = {replica, host};
  return o;
}
Options at(Slot slot) { return at(slot.replica, slot.host); }

struct Outcome {
  json original;
  json mutated;
  json patch;
  std::vector<std::string> warnings;

  const json& container(std::size_t i = 0) const { return mutated["spec"]["containers"][i]; }
  const json& env(std::size_t i = 0) const { return container(i)["env"]; }
  std::vector<std::string> names(std::size_t i = 0) const {
    std::vector<std::string> out;
    for (const json& e : env(i)) {
      out.push_back(e["name"].get<std::string>());
    }
    return out;
  }
  // The last entry of `name` in container i (Kubernetes' view), or null.
  json entry(const std::string& name, std::size_t i = 0) const {
    json found;
    for (const json& e : env(i)) {
      if (e["name"] == name) {
        found = e;
      }
    }
    return found;
  }
  std::string value(const std::string& name, std::size_t i = 0) const {
    return testing::env_of(mutated, name, i);
  }
  int count(const std::string& name, std::size_t i = 0) const {
    int n = 0;
    for (const json& e : env(i)) {
      n += e["name"] == name ? 1 : 0;
    }
    return n;
  }
};

// Mutates `pod` the way the Handler does (Slice from the view's topology, accelerator and chips
// per host), checks the M6 properties and records the patch for the kubectl test.
Outcome run(const std::string& name, const json& pod, const Options& o = {}) {
  Outcome out;
  out.original = pod;
  webhook::Result<PodView> view = PodView::create(out.original);
  REQUIRE(view.has_value());
  REQUIRE(view->topology().has_value());
  webhook::Result<topology::Slice> slice = topology::Slice::create(
      {view->accelerator(), view->topology()->value, view->chips_per_host()});
  REQUIRE(slice.has_value());
  podpatch::MutationPlan plan;
  plan.slice = &*slice;
  plan.slot = o.slot;
  std::string topology_key =
      o.topology_key.empty() ? podpatch::default_topology_key(*view) : o.topology_key;
  plan.svc = o.svc;
  plan.topology_key = topology_key;
  plan.ports = o.ports;
  plan.add_replica_label = o.add_replica_label;
  out.mutated = out.original;
  out.warnings = podpatch::mutate(out.mutated, *view, plan);
  out.patch = json::diff(out.original, out.mutated);
  // M6: the server writes the patch straight from the changes, without the mutated copy: the
  // same operations as nlohmann's diff, byte for byte.
  std::string text;
  podpatch::write_patch(*view, podpatch::plan_mutation(*view, plan), text);
  CHECK(text == webhook::dump_json(out.patch));
  // M6: the patch turns the Pod the API server sent into the mutated one ...
  CHECK(out.original.patch(out.patch) == out.mutated);
  testing::record_patch("unit-mutate-" + name, out.original, out.patch);
  // ... and re-admitting the mutated Pod changes nothing.
  webhook::Result<PodView> again = PodView::create(out.mutated);
  REQUIRE(again.has_value());
  json twice = out.mutated;
  (void)podpatch::mutate(twice, *again, plan);
  CHECK(json::diff(out.mutated, twice) == json::array());
  return out;
}

std::string slicebuilder(const std::string& hosts, int ports, int base = 8471) {
  return topology::address_list(hosts, ports, base);
}

std::string dns(int replica, int hosts, const std::string& svc = "c-headless") {
  return topology::worker_hostnames("g", replica, hosts, svc);
}

// `n` times ",a": the rest of a host list of n + 1 entries that starts with "a".
std::string more_entries(std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    out += ",a";
  }
  return out;
}

bool any_contains(const std::vector<std::string>& warnings, const std::string& text) {
  for (const std::string& w : warnings) {
    if (w.find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE("M5: env order and values, multi-host v6e 4x4 with multi-slice (E1)",
          "[podpatch][mutate]") {
  json pod = one_container("tpu-v6e-slice", "4x4", 4,
                           json::parse(R"([{"name": "JAX_PLATFORMS", "value": "tpu,cpu"},
                                           {"name": "MEGASCALE_NUM_SLICES", "value": "2"}])"));
  Outcome r = run("e1-multislice", pod, at(1, 2));
  CHECK(r.names() == std::vector<std::string>{
                         "JAX_PLATFORMS", "MEGASCALE_NUM_SLICES",
                         // M5.1
                         "MEGASCALE_SLICE_ID", "MEGASCALE_COORDINATOR_ADDRESS", "MEGASCALE_PORT",
                         // M5.2
                         "TPU_WORKER_HOSTNAMES",
                         // M5.3
                         "TORCH_TPU_TOPOLOGY", "TORCH_TPU_SLICEBUILDER_ADDRESSES",
                         // M5.4-M5.6
                         "TPU_WORKER_ID", "TPU_NAME", "TPU_DEVICE_PLUGIN_HOST_IP",
                         "TPU_DEVICE_PLUGIN_ADDR"});
  CHECK(r.value("MEGASCALE_SLICE_ID") == "1");
  CHECK(r.value("MEGASCALE_COORDINATOR_ADDRESS") == "g-0-0.c-headless");
  CHECK(r.value("MEGASCALE_PORT") == "8081");
  CHECK(r.value("TPU_WORKER_HOSTNAMES") ==
        "g-1-0.c-headless,g-1-1.c-headless,g-1-2.c-headless,g-1-3.c-headless");
  CHECK(r.value("TORCH_TPU_TOPOLOGY") == "4,4,1");
  CHECK(r.value("TORCH_TPU_SLICEBUILDER_ADDRESSES") == slicebuilder(dns(1, 4), 4));
  CHECK(r.value("TPU_WORKER_ID") == "2");
  CHECK(r.value("TPU_NAME") == "g-1");
  CHECK(r.entry("TPU_DEVICE_PLUGIN_HOST_IP") ==
        json{{"name", "TPU_DEVICE_PLUGIN_HOST_IP"}, {"valueFrom", kHostIp}});
  CHECK(r.value("TPU_DEVICE_PLUGIN_ADDR") == "$(TPU_DEVICE_PLUGIN_HOST_IP):2112");
  // M4.
  CHECK(r.mutated["spec"]["hostname"] == "g-1-2");
  CHECK(r.mutated["spec"]["subdomain"] == "c-headless");
  CHECK(r.mutated["spec"].contains("affinity"));
  CHECK(r.warnings.empty());
}

TEST_CASE("M5: env order and values, multi-host tpu7x 2x2x2 with multi-slice (E6)",
          "[podpatch][mutate]") {
  json pod = one_container("tpu7x", "2x2x2", 4,
                           json::parse(R"([{"name": "MEGASCALE_NUM_SLICES", "value": "4"}])"));
  Outcome r = run("e6-multislice", pod, at(1, 1));
  CHECK(r.names() == std::vector<std::string>{
                         "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID",
                         "MEGASCALE_COORDINATOR_ADDRESS", "MEGASCALE_PORT", "TPU_WORKER_HOSTNAMES",
                         "TPU_PROCESS_ADDRESSES", "TPU_PROCESS_PORT", "TORCH_TPU_TOPOLOGY",
                         "TORCH_TPU_SLICEBUILDER_ADDRESSES", "TPU_WORKER_ID", "TPU_NAME",
                         "TPU_DEVICE_PLUGIN_HOST_IP", "TPU_DEVICE_PLUGIN_ADDR"});
  CHECK(r.value("MEGASCALE_SLICE_ID") == "1");
  CHECK(r.value("MEGASCALE_COORDINATOR_ADDRESS") == "g-0-0.c-headless:8081");
  CHECK(r.value("MEGASCALE_PORT") == "8081");
  CHECK(r.value("TPU_WORKER_HOSTNAMES") == "g-1-0.c-headless,g-1-1.c-headless");
  CHECK(r.value("TPU_PROCESS_ADDRESSES") == "g-1-0.c-headless:8471,g-1-1.c-headless:8471");
  CHECK(r.value("TPU_PROCESS_PORT") == "8471");
  CHECK(r.value("TORCH_TPU_TOPOLOGY") == "2,2,2,2");
  CHECK(r.value("TORCH_TPU_SLICEBUILDER_ADDRESSES") == slicebuilder(dns(1, 2), 8));
  CHECK(testing::split_list(r.value("TORCH_TPU_SLICEBUILDER_ADDRESSES")).size() == 16);
  CHECK(r.value("TPU_WORKER_ID") == "1");
  CHECK(r.value("TPU_NAME") == "g-1");
  CHECK(r.mutated["spec"]["hostname"] == "g-1-1");
  CHECK(r.warnings.empty());
}

TEST_CASE("M5: single-host slices (E2, E7): no hostnames, localhost slicebuilder",
          "[podpatch][mutate]") {
  auto [row, accelerator, topo, chips, torch, ports] =
      GENERATE(table<std::string, std::string, std::string, int, std::string, int>({
          {"e2-v6e-2x4", "tpu-v6e-slice", "2x4", 8, "2,4,1", 8},
          {"v6e-2x2", "tpu-v6e-slice", "2x2", 4, "2,2,1", 4},
          // google.com/tpu larger than the slice: one port per chip of the slice, not per chip
          // requested (docs/topology.md 2.7).
          {"v6e-2x2-tpu8", "tpu-v6e-slice", "2x2", 8, "2,2,1", 4},
          {"e7-tpu7x-2x2x1", "tpu7x", "2x2x1", 4, "2,2,1,2", 8},
          {"v4-2x2x1", "tpu-v4-podslice", "2x2x1", 4, "2,2,1", 4},
      }));
  CAPTURE(row);
  Outcome r = run("single-host-" + row, one_container(accelerator, topo, chips), at(3, 0));
  CHECK(r.names() == std::vector<std::string>{
                         "TORCH_TPU_TOPOLOGY", "TORCH_TPU_SLICEBUILDER_ADDRESSES", "TPU_WORKER_ID",
                         "TPU_NAME", "TPU_DEVICE_PLUGIN_HOST_IP", "TPU_DEVICE_PLUGIN_ADDR"});
  CHECK(r.value("TORCH_TPU_TOPOLOGY") == torch);
  CHECK(r.value("TORCH_TPU_SLICEBUILDER_ADDRESSES") == slicebuilder("localhost", ports));
  CHECK(r.value("TPU_WORKER_ID") == "0");
  CHECK(r.value("TPU_NAME") == "g-3");
  // M4: single host without MEGASCALE_NUM_SLICES: no DNS identity, no affinity.
  CHECK_FALSE(r.mutated["spec"].contains("hostname"));
  CHECK_FALSE(r.mutated["spec"].contains("subdomain"));
  CHECK_FALSE(r.mutated["spec"].contains("affinity"));
  CHECK(r.warnings.empty());
}

TEST_CASE("M5.2/M5.4: tpu7x with two TPU containers (NUMA-aligned), per-container values",
          "[podpatch][mutate]") {
  auto [row, topo, slot, hostnames, process] =
      GENERATE(table<std::string, std::string, Slot, std::string, std::string>({
          {"multi-host", "2x2x2", Slot{0, 1}, "g-0-0.c-headless,g-0-1.c-headless",
           "g-0-0.c-headless:8471,g-0-0.c-headless:8472,g-0-1.c-headless:8471,"
           "g-0-1.c-headless:8472"},
          // Single host: TPU_PROCESS_ADDRESSES lists localhost once per container.
          {"single-host", "2x2x1", Slot{0, 0}, "", "localhost:8471,localhost:8472"},
      }));
  CAPTURE(row);
  json pod =
      worker("tpu7x", topo,
             {tpu_container("numa-0", 2,
                            json::parse(R"([{"name": "MEGASCALE_NUM_SLICES", "value": "2"}])")),
              json{{"name", "sidecar"}, {"image", "busybox"}},
              tpu_container("numa-1", 2,
                            json::parse(R"([{"name": "MEGASCALE_NUM_SLICES", "value": "2"}])"))});
  Outcome r = run("tpu7x-two-containers-" + row, pod, at(slot));
  for (std::size_t i : {std::size_t{0}, std::size_t{2}}) {
    int k = i == 0 ? 0 : 1;
    CAPTURE(i, k);
    CHECK(r.value("MEGASCALE_PORT", i) == std::to_string(8081 + k));
    CHECK(r.value("MEGASCALE_COORDINATOR_ADDRESS", i) == "g-0-0.c-headless:8081");
    CHECK(r.value("TPU_WORKER_HOSTNAMES", i) == hostnames);
    CHECK(r.value("TPU_PROCESS_ADDRESSES", i) == process);
    CHECK(r.value("TPU_PROCESS_PORT", i) == std::to_string(8471 + k));
    // h x TPU containers + k.
    CHECK(r.value("TPU_WORKER_ID", i) == std::to_string(slot.host * 2 + k));
    CHECK(r.value("TORCH_TPU_TOPOLOGY", i) == (topo == "2x2x2" ? "2,2,2,2" : "2,2,1,2"));
    // Devices per host: 4 chips x 2 chiplets, whichever container reads it.
    CHECK(testing::split_list(r.value("TORCH_TPU_SLICEBUILDER_ADDRESSES", i)).size() ==
          (topo == "2x2x2" ? 16u : 8u));
  }
  // The sidecar is not a TPU container: untouched.
  CHECK(r.container(1) == r.original["spec"]["containers"][1]);
  // M4: MEGASCALE_NUM_SLICES gives even the single host its DNS name.
  CHECK(r.mutated["spec"]["hostname"] == "g-0-" + std::to_string(slot.host));
  CHECK(r.mutated["spec"]["subdomain"] == "c-headless");
}

TEST_CASE("M5.1/M5.4: other generations with two TPU containers share the port and worker id",
          "[podpatch][mutate]") {
  const json megascale = json::parse(R"([{"name": "MEGASCALE_NUM_SLICES", "value": "2"}])");
  json pod = worker("tpu-v5p-slice", "2x2x2",
                    {tpu_container("half-0", 2, megascale), tpu_container("half-1", 2, megascale)});
  Outcome r = run("v5p-two-containers", pod, at(1, 1));
  for (std::size_t i : {std::size_t{0}, std::size_t{1}}) {
    CAPTURE(i);
    CHECK(r.value("MEGASCALE_PORT", i) == "8081");  // + k only on tpu7x
    CHECK(r.value("MEGASCALE_COORDINATOR_ADDRESS", i) == "g-0-0.c-headless");
    CHECK(r.value("TPU_WORKER_ID", i) == "1");  // h, not h x containers + k
    CHECK(r.value("TPU_WORKER_HOSTNAMES", i) == "g-1-0.c-headless,g-1-1.c-headless");
    CHECK(r.value("TORCH_TPU_TOPOLOGY", i) == "2,2,2");
    CHECK(r.count("TPU_PROCESS_ADDRESSES", i) == 0);
    CHECK(r.count("TPU_PROCESS_PORT", i) == 0);
  }
}

TEST_CASE("M5.2: TPU_PROCESS_* only on tpu7x, and only multi-host or several containers",
          "[podpatch][mutate]") {
  auto [row, pod, process] = GENERATE(table<std::string, json, bool>({
      {"tpu7x-multi-host", one_container("tpu7x", "2x2x4", 4), true},
      {"tpu7x-prefixed-multi-host", one_container("tpu7x-foo", "2x2x2", 4), true},
      {"tpu7x-single-host-one-container", one_container("tpu7x", "2x2x1", 4), false},
      {"v6e-multi-host", one_container("tpu-v6e-slice", "4x4", 4), false},
      {"v5p-two-containers",
       worker("tpu-v5p-slice", "2x2x1", {tpu_container("a", 2), tpu_container("b", 2)}), false},
  }));
  CAPTURE(row);
  Outcome r = run("process-vars-" + row, pod);
  CHECK(r.count("TPU_PROCESS_ADDRESSES") == (process ? 1 : 0));
  CHECK(r.count("TPU_PROCESS_PORT") == (process ? 1 : 0));
}

TEST_CASE("M5.1: MEGASCALE_* only when MEGASCALE_NUM_SLICES is present", "[podpatch][mutate]") {
  auto [row, num_slices, set] = GENERATE(table<std::string, json, bool>({
      {"literal", json{{"name", "MEGASCALE_NUM_SLICES"}, {"value", "2"}}, true},
      {"valueFrom", json{{"name", "MEGASCALE_NUM_SLICES"}, {"valueFrom", kUserFrom}}, true},
      {"empty", json{{"name", "MEGASCALE_NUM_SLICES"}, {"value", ""}}, false},
      {"absent", json{{"name", "OTHER"}, {"value", "2"}}, false},
  }));
  CAPTURE(row);
  for (std::string topo : {"4x4", "2x4"}) {  // multi-host and single-host
    CAPTURE(topo);
    Outcome r =
        run("megascale-" + row + "-" + topo,
            one_container("tpu-v6e-slice", topo, topo == "4x4" ? 4 : 8, json::array({num_slices})),
            at(2, 0));
    for (const char* var :
         {"MEGASCALE_SLICE_ID", "MEGASCALE_COORDINATOR_ADDRESS", "MEGASCALE_PORT"}) {
      CAPTURE(var);
      CHECK(r.count(var) == (set ? 1 : 0));
    }
    if (set) {
      CHECK(r.value("MEGASCALE_SLICE_ID") == "2");
      CHECK(r.value("MEGASCALE_COORDINATOR_ADDRESS") == "g-0-0.c-headless");
    }
    // M4: a single host gets hostname and subdomain only for multi-slice.
    bool dns_identity = topo == "4x4" || set;
    CHECK(r.mutated["spec"].contains("hostname") == dns_identity);
    CHECK(r.mutated["spec"].contains("subdomain") == dns_identity);
    CHECK(r.mutated["spec"].contains("affinity") == (topo == "4x4"));
  }
}

TEST_CASE("M4: needs_pod_dns", "[podpatch][mutate]") {
  auto [row, pod, needs] = GENERATE(table<std::string, json, bool>({
      {"multi-host", one_container("tpu-v6e-slice", "4x4", 4), true},
      {"single-host", one_container("tpu-v6e-slice", "2x4", 8), false},
      {"single-host multi-slice",
       one_container("tpu-v6e-slice", "2x4", 8,
                     json::parse(R"([{"name": "MEGASCALE_NUM_SLICES", "value": "2"}])")),
       true},
      {"single-host, empty MEGASCALE_NUM_SLICES",
       one_container("tpu-v6e-slice", "2x4", 8,
                     json::parse(R"([{"name": "MEGASCALE_NUM_SLICES", "value": ""}])")),
       false},
      // Only TPU containers count.
      {"single-host, sidecar multi-slice",
       worker("tpu-v6e-slice", "2x4",
              {tpu_container("ray-worker", 8),
               json::parse(
                   R"({"name": "s", "env": [{"name": "MEGASCALE_NUM_SLICES", "value": "2"}]})")}),
       false},
  }));
  CAPTURE(row);
  webhook::Result<PodView> view = PodView::create(pod);
  REQUIRE(view.has_value());
  webhook::Result<topology::Slice> slice = topology::Slice::create(
      {view->accelerator(), view->topology()->value, view->chips_per_host()});
  REQUIRE(slice.has_value());
  CHECK(podpatch::needs_pod_dns(*view, *slice) == needs);
}

// "Present" exceptions, one row per rule: the Pod starts with `env`; afterwards the last entry of
// `var` must be `want` (null: absent), found at position `index` (-1: don't care), and a warning
// containing `warning` must exist (empty: no warning at all).
TEST_CASE("M5: each var is set only if not present, with the spec's exceptions",
          "[podpatch][mutate]") {
  auto [row, topo, env, var, want, index,
        warning] = GENERATE(table<std::string, std::string, json, std::string, json, int,
                                  std::string>({
      // M5.2 TPU_WORKER_HOSTNAMES (multi-host v6e 4x4, replica 0).
      {"hostnames-localhost-replaced", "4x4",
       json::parse(
           R"([{"name": "TPU_WORKER_HOSTNAMES", "value": "localhost"}, {"name": "X", "value": "1"}])"),
       "TPU_WORKER_HOSTNAMES", json{{"name", "TPU_WORKER_HOSTNAMES"}, {"value", dns(0, 4)}}, 0, ""},
      {"hostnames-empty-replaced-in-place", "4x4",
       json::parse(
           R"([{"name": "TPU_WORKER_HOSTNAMES", "value": ""}, {"name": "X", "value": "1"}])"),
       "TPU_WORKER_HOSTNAMES", json{{"name", "TPU_WORKER_HOSTNAMES"}, {"value", dns(0, 4)}}, 0, ""},
      {"hostnames-user-kept", "4x4",
       json::parse(R"([{"name": "TPU_WORKER_HOSTNAMES", "value": "a,b,c,d"}])"),
       "TPU_WORKER_HOSTNAMES", json{{"name", "TPU_WORKER_HOSTNAMES"}, {"value", "a,b,c,d"}}, 0,
       "container \"ray-worker\": kept TPU_WORKER_HOSTNAMES=\"a,b,c,d\" from the Pod spec, but "
       "this slice needs \"g-0-0.c-headless,g-0-1.c-headless,g-0-2.c-headless,"
       "g-0-3.c-headless\""},
      {"hostnames-valuefrom-kept", "4x4",
       json::array({{{"name", "TPU_WORKER_HOSTNAMES"}, {"valueFrom", kUserFrom}}}),
       "TPU_WORKER_HOSTNAMES", json{{"name", "TPU_WORKER_HOSTNAMES"}, {"valueFrom", kUserFrom}}, 0,
       ""},
      {"hostnames-equal-untouched", "4x4",
       json::array({{{"name", "TPU_WORKER_HOSTNAMES"}, {"value", dns(0, 4)}}}),
       "TPU_WORKER_HOSTNAMES", json{{"name", "TPU_WORKER_HOSTNAMES"}, {"value", dns(0, 4)}}, 0, ""},
      // Single host: TPU_WORKER_HOSTNAMES is none of the webhook's business.
      {"hostnames-single-host-absent", "2x4", json::array(), "TPU_WORKER_HOSTNAMES", json(), -1,
       ""},
      {"hostnames-single-host-localhost-kept", "2x4",
       json::parse(R"([{"name": "TPU_WORKER_HOSTNAMES", "value": "localhost"}])"),
       "TPU_WORKER_HOSTNAMES", json{{"name", "TPU_WORKER_HOSTNAMES"}, {"value", "localhost"}}, 0,
       ""},
      // M5.3 TORCH_TPU_*.
      {"torch-topology-present-skips-both", "4x4",
       json::parse(R"([{"name": "TORCH_TPU_TOPOLOGY", "value": "4,4,1"}])"),
       "TORCH_TPU_SLICEBUILDER_ADDRESSES", json(), -1, ""},
      {"torch-topology-differs-kept", "4x4",
       json::parse(R"([{"name": "TORCH_TPU_TOPOLOGY", "value": "8,8,1"}])"), "TORCH_TPU_TOPOLOGY",
       json{{"name", "TORCH_TPU_TOPOLOGY"}, {"value", "8,8,1"}}, 0,
       "kept TORCH_TPU_TOPOLOGY=\"8,8,1\" from the Pod spec, but this slice needs \"4,4,1\""},
      {"torch-topology-valuefrom-skips-slicebuilder", "4x4",
       json::array({{{"name", "TORCH_TPU_TOPOLOGY"}, {"valueFrom", kUserFrom}}}),
       "TORCH_TPU_SLICEBUILDER_ADDRESSES", json(), -1, ""},
      {"torch-topology-empty-set-in-place", "4x4",
       json::parse(R"([{"name": "TORCH_TPU_TOPOLOGY", "value": ""}, {"name": "X", "value": "1"}])"),
       "TORCH_TPU_TOPOLOGY", json{{"name", "TORCH_TPU_TOPOLOGY"}, {"value", "4,4,1"}}, 0, ""},
      {"slicebuilder-user-kept", "4x4",
       json::parse(R"([{"name": "TORCH_TPU_SLICEBUILDER_ADDRESSES", "value": "x:1"}])"),
       "TORCH_TPU_SLICEBUILDER_ADDRESSES",
       json{{"name", "TORCH_TPU_SLICEBUILDER_ADDRESSES"}, {"value", "x:1"}}, 0,
       "kept TORCH_TPU_SLICEBUILDER_ADDRESSES=\"x:1\""},
      // A user host list that divides the chips feeds the slicebuilder list.
      {"slicebuilder-from-user-hostnames", "4x4",
       json::parse(R"([{"name": "TPU_WORKER_HOSTNAMES", "value": "a,b"}])"),
       "TORCH_TPU_SLICEBUILDER_ADDRESSES",
       json{{"name", "TORCH_TPU_SLICEBUILDER_ADDRESSES"}, {"value", slicebuilder("a,b", 8)}}, -1,
       "kept TPU_WORKER_HOSTNAMES=\"a,b\""},
      // ... one that does not is not used, and M7 warns.
      {"slicebuilder-user-hostnames-not-dividing", "4x4",
       json::parse(R"([{"name": "TPU_WORKER_HOSTNAMES", "value": "a,b,c"}])"),
       "TORCH_TPU_SLICEBUILDER_ADDRESSES",
       json{{"name", "TORCH_TPU_SLICEBUILDER_ADDRESSES"}, {"value", slicebuilder(dns(0, 4), 4)}},
       -1,
       "container \"ray-worker\": TPU_WORKER_HOSTNAMES has 3 entries, which do not divide the "
       "slice's 16 chips; TORCH_TPU_SLICEBUILDER_ADDRESSES uses the webhook's host list instead"},
      {"slicebuilder-user-hostnames-empty-entry", "4x4",
       json::parse(R"([{"name": "TPU_WORKER_HOSTNAMES", "value": "a,,b,c"}])"),
       "TORCH_TPU_SLICEBUILDER_ADDRESSES",
       json{{"name", "TORCH_TPU_SLICEBUILDER_ADDRESSES"}, {"value", slicebuilder(dns(0, 4), 4)}},
       -1,
       "container \"ray-worker\": TPU_WORKER_HOSTNAMES \"a,,b,c\" has an empty entry; "
       "TORCH_TPU_SLICEBUILDER_ADDRESSES uses the webhook's host list instead"},
      // More entries than the slice has chips: counted, never split, and it does not divide.
      {"slicebuilder-user-hostnames-more-than-chips", "4x4",
       json::array({{{"name", "TPU_WORKER_HOSTNAMES"}, {"value", "a" + more_entries(20000)}}}),
       "TORCH_TPU_SLICEBUILDER_ADDRESSES",
       json{{"name", "TORCH_TPU_SLICEBUILDER_ADDRESSES"}, {"value", slicebuilder(dns(0, 4), 4)}},
       -1,
       "container \"ray-worker\": TPU_WORKER_HOSTNAMES has 20001 entries, which do not divide "
       "the slice's 16 chips; TORCH_TPU_SLICEBUILDER_ADDRESSES uses the webhook's host list "
       "instead"},
      // An empty entry decides first; a list longer than 253 bytes is shown cut.
      {"slicebuilder-user-hostnames-many-empty-entries", "4x4",
       json::array({{{"name", "TPU_WORKER_HOSTNAMES"}, {"value", std::string(300, ',')}}}),
       "TORCH_TPU_SLICEBUILDER_ADDRESSES",
       json{{"name", "TORCH_TPU_SLICEBUILDER_ADDRESSES"}, {"value", slicebuilder(dns(0, 4), 4)}},
       -1,
       "container \"ray-worker\": TPU_WORKER_HOSTNAMES \"" + std::string(253, ',') +
           "\"\u2026(300 bytes) has an empty entry; TORCH_TPU_SLICEBUILDER_ADDRESSES uses the "
           "webhook's host list instead"},
      {"slicebuilder-valuefrom-hostnames", "4x4",
       json::array({{{"name", "TPU_WORKER_HOSTNAMES"}, {"valueFrom", kUserFrom}}}),
       "TORCH_TPU_SLICEBUILDER_ADDRESSES",
       json{{"name", "TORCH_TPU_SLICEBUILDER_ADDRESSES"}, {"value", slicebuilder(dns(0, 4), 4)}},
       -1, ""},
      // Single host: localhost, whatever the container sets.
      {"slicebuilder-single-host-ignores-hostnames", "2x4",
       json::parse(R"([{"name": "TPU_WORKER_HOSTNAMES", "value": "a,b"}])"),
       "TORCH_TPU_SLICEBUILDER_ADDRESSES",
       json{{"name", "TORCH_TPU_SLICEBUILDER_ADDRESSES"}, {"value", slicebuilder("localhost", 8)}},
       -1, ""},
      // M5.4 TPU_WORKER_ID (host 2 of 4 in these rows; single host: 0).
      {"worker-id-literal-replaced-in-place", "4x4",
       json::parse(R"([{"name": "TPU_WORKER_ID", "value": "0"}, {"name": "X", "value": "1"}])"),
       "TPU_WORKER_ID", json{{"name", "TPU_WORKER_ID"}, {"value", "2"}}, 0,
       "container \"ray-worker\": replaced TPU_WORKER_ID=\"0\" with \"2\": a template value is "
       "copied to every host, so the webhook sets the ID of each host"},
      {"worker-id-equal-untouched", "4x4",
       json::parse(R"([{"name": "TPU_WORKER_ID", "value": "2"}])"), "TPU_WORKER_ID",
       json{{"name", "TPU_WORKER_ID"}, {"value", "2"}}, 0, ""},
      {"worker-id-empty-in-place", "4x4",
       json::parse(R"([{"name": "TPU_WORKER_ID", "value": ""}, {"name": "X", "value": "1"}])"),
       "TPU_WORKER_ID", json{{"name", "TPU_WORKER_ID"}, {"value", "2"}}, 0, ""},
      {"worker-id-valuefrom-kept", "4x4",
       json::array({{{"name", "TPU_WORKER_ID"}, {"valueFrom", kUserFrom}}}), "TPU_WORKER_ID",
       json{{"name", "TPU_WORKER_ID"}, {"valueFrom", kUserFrom}}, 0, ""},
      {"worker-id-duplicate-last-replaced", "4x4",
       json::parse(
           R"([{"name": "TPU_WORKER_ID", "value": "7"}, {"name": "TPU_WORKER_ID", "value": "0"}])"),
       "TPU_WORKER_ID", json{{"name", "TPU_WORKER_ID"}, {"value", "2"}}, 1,
       "replaced TPU_WORKER_ID=\"0\" with \"2\""},
      {"worker-id-single-host", "2x4", json::parse(R"([{"name": "TPU_WORKER_ID", "value": "5"}])"),
       "TPU_WORKER_ID", json{{"name", "TPU_WORKER_ID"}, {"value", "0"}}, 0,
       "replaced TPU_WORKER_ID=\"5\" with \"0\""},
      // M5.5 TPU_NAME.
      {"tpu-name-user-kept", "4x4", json::parse(R"([{"name": "TPU_NAME", "value": "mine"}])"),
       "TPU_NAME", json{{"name", "TPU_NAME"}, {"value", "mine"}}, 0,
       "kept TPU_NAME=\"mine\" from the Pod spec, but this slice needs \"g-0\""},
      {"tpu-name-empty-in-place", "4x4",
       json::parse(R"([{"name": "TPU_NAME", "value": ""}, {"name": "X", "value": "1"}])"),
       "TPU_NAME", json{{"name", "TPU_NAME"}, {"value", "g-0"}}, 0, ""},
      // M5.6 device plugin.
      {"host-ip-user-kept", "4x4",
       json::array({{{"name", "TPU_DEVICE_PLUGIN_HOST_IP"}, {"value", "10.0.0.1"}}}),
       "TPU_DEVICE_PLUGIN_HOST_IP",
       json{{"name", "TPU_DEVICE_PLUGIN_HOST_IP"}, {"value", "10.0.0.1"}}, 0, ""},
      {"host-ip-empty-in-place", "4x4",
       json::parse(
           R"([{"name": "TPU_DEVICE_PLUGIN_HOST_IP", "value": ""}, {"name": "X", "value": "1"}])"),
       "TPU_DEVICE_PLUGIN_HOST_IP",
       json{{"name", "TPU_DEVICE_PLUGIN_HOST_IP"}, {"valueFrom", kHostIp}}, 0, ""},
      {"plugin-addr-user-kept", "4x4",
       json::parse(
           R"([{"name": "TPU_DEVICE_PLUGIN_ADDR", "value": "$(TPU_DEVICE_PLUGIN_HOST_IP):2113"}])"),
       "TPU_DEVICE_PLUGIN_ADDR",
       json{{"name", "TPU_DEVICE_PLUGIN_ADDR"}, {"value", "$(TPU_DEVICE_PLUGIN_HOST_IP):2113"}}, 0,
       "kept TPU_DEVICE_PLUGIN_ADDR=\"$(TPU_DEVICE_PLUGIN_HOST_IP):2113\""},
  }));
  CAPTURE(row);
  json pod = one_container("tpu-v6e-slice", topo, topo == "4x4" ? 4 : 8, env);
  Outcome r = run("present-" + row, pod, at(0, topo == "4x4" ? 2 : 0));
  CAPTURE(r.env().dump(), r.warnings);
  CHECK(r.entry(var) == want);
  if (index >= 0) {
    REQUIRE(r.env().size() > static_cast<std::size_t>(index));
    CHECK(r.env()[static_cast<std::size_t>(index)] == want);
  }
  // A var is never duplicated by the webhook (a duplicate present in the Pod stays as it was).
  int before = 0;
  for (const json& e : pod["spec"]["containers"][0]["env"]) {
    before += e["name"] == var ? 1 : 0;
  }
  CHECK(r.count(var) == std::max(before, want.is_null() ? 0 : 1));
  if (warning.empty()) {
    CHECK(r.warnings.empty());
  } else {
    CHECK(any_contains(r.warnings, warning));
  }
}

TEST_CASE("M7: warnings show a container name longer than 253 bytes cut", "[podpatch][mutate]") {
  std::string name(1000, 'n');
  json pod = worker("tpu-v6e-slice", "4x4",
                    {tpu_container(name, 4, json::parse(R"([{"name": "TPU_WORKER_ID", "value": "0"},
                                                   {"name": "TPU_NAME", "value": "mine"}])"))});
  Outcome r = run("long-container-name", pod, at(0, 2));
  CAPTURE(r.warnings);
  REQUIRE(r.warnings.size() == 2);
  const std::string prefix = "container \"" + std::string(253, 'n') + "\"\u2026(1000 bytes): ";
  CHECK(r.warnings[0] == prefix +
                             "replaced TPU_WORKER_ID=\"0\" with \"2\": a template value is "
                             "copied to every host, so the webhook sets the ID of each host");
  CHECK(r.warnings[1] == prefix +
                             "kept TPU_NAME=\"mine\" from the Pod spec, but this slice needs "
                             "\"g-0\"; remove it from the template unless you mean it");
  CHECK(r.value("TPU_WORKER_ID") == "2");
}

TEST_CASE("M5.2: TPU_PROCESS_ADDRESSES exceptions on tpu7x", "[podpatch][mutate]") {
  auto [row, topo, chips, user, want,
        warned] = GENERATE(table<std::string, std::string, int, std::string, std::string, bool>({
      // Multi-host: a value containing localhost is replaced.
      {"multi-host-localhost", "2x2x2", 4, "localhost:8471",
       "g-0-0.c-headless:8471,g-0-1.c-headless:8471", false},
      {"multi-host-mixed-localhost", "2x2x2", 4, "localhost:8471,h1:8471",
       "g-0-0.c-headless:8471,g-0-1.c-headless:8471", false},
      {"multi-host-user", "2x2x2", 4, "h0:8471,h1:8471", "h0:8471,h1:8471", true},
      {"multi-host-empty", "2x2x2", 4, "", "g-0-0.c-headless:8471,g-0-1.c-headless:8471", false},
  }));
  CAPTURE(row);
  Outcome r =
      run("process-addresses-" + row,
          one_container("tpu7x", topo, chips,
                        json::array({{{"name", "TPU_PROCESS_ADDRESSES"}, {"value", user}}})));
  CHECK(r.value("TPU_PROCESS_ADDRESSES") == want);
  CHECK(r.count("TPU_PROCESS_ADDRESSES") == 1);
  CHECK(r.names()[0] == "TPU_PROCESS_ADDRESSES");  // in place
  CHECK(any_contains(r.warnings, "kept TPU_PROCESS_ADDRESSES") == warned);
}

TEST_CASE("M5: an empty entry that would refer to a later variable is appended, not filled",
          "[podpatch][mutate]") {
  // TPU_DEVICE_PLUGIN_ADDR is $(TPU_DEVICE_PLUGIN_HOST_IP):2112; Kubernetes expands $(VAR) only
  // from entries that come earlier, so an empty ADDR before HOST_IP is left as it is and the
  // value goes in a new entry after HOST_IP's (the last entry of a name is the one used).
  Outcome r =
      run("device-plugin-addr-empty-first",
          one_container("tpu-v6e-slice", "4x4", 4,
                        json::array({{{"name", "TPU_DEVICE_PLUGIN_ADDR"}, {"value", ""}}})));
  std::vector<std::string> names = r.names();
  CHECK(names.front() == "TPU_DEVICE_PLUGIN_ADDR");
  CHECK(r.env()[0]["value"] == "");  // the template's entry, kept
  CHECK(r.count("TPU_DEVICE_PLUGIN_ADDR") == 2);
  CHECK(r.value("TPU_DEVICE_PLUGIN_ADDR") == "$(TPU_DEVICE_PLUGIN_HOST_IP):2112");
  auto host_ip = std::find(names.begin(), names.end(), "TPU_DEVICE_PLUGIN_HOST_IP");
  auto addr = std::find(names.rbegin(), names.rend(), "TPU_DEVICE_PLUGIN_ADDR");
  REQUIRE(host_ip != names.end());
  CHECK(host_ip - names.begin() < names.rend() - addr - 1);  // HOST_IP before the last ADDR

  // HOST_IP already before it: filled in place, one entry.
  json env = json::array({{{"name", "TPU_DEVICE_PLUGIN_HOST_IP"},
                           {"valueFrom", {{"fieldRef", {{"fieldPath", "status.hostIP"}}}}}},
                          {{"name", "TPU_DEVICE_PLUGIN_ADDR"}, {"value", ""}}});
  Outcome in_place =
      run("device-plugin-addr-empty-after-host-ip", one_container("tpu-v6e-slice", "4x4", 4, env));
  CHECK(in_place.count("TPU_DEVICE_PLUGIN_ADDR") == 1);
  CHECK(in_place.names()[1] == "TPU_DEVICE_PLUGIN_ADDR");
  CHECK(in_place.value("TPU_DEVICE_PLUGIN_ADDR") == "$(TPU_DEVICE_PLUGIN_HOST_IP):2112");
}

TEST_CASE("M5.2: on a single tpu7x host a localhost TPU_PROCESS_ADDRESSES is kept",
          "[podpatch][mutate]") {
  json pod =
      worker("tpu7x", "2x2x1",
             {tpu_container(
                  "numa-0", 2,
                  json::parse(R"([{"name": "TPU_PROCESS_ADDRESSES", "value": "localhost:8471"}])")),
              tpu_container("numa-1", 2)});
  Outcome r = run("process-addresses-single-host-kept", pod);
  CHECK(r.value("TPU_PROCESS_ADDRESSES", 0) == "localhost:8471");
  CHECK(r.value("TPU_PROCESS_ADDRESSES", 1) == "localhost:8471,localhost:8472");
  CHECK(any_contains(r.warnings,
                     "container \"numa-0\": kept TPU_PROCESS_ADDRESSES=\"localhost:8471\""));
  CHECK(r.value("TPU_PROCESS_PORT", 0) == "8471");
  CHECK(r.value("TPU_PROCESS_PORT", 1) == "8472");
}

TEST_CASE("M5.1: present MEGASCALE_* values are kept, M7 warns when they contradict",
          "[podpatch][mutate]") {
  json pod = one_container("tpu-v6e-slice", "4x4", 4, json::parse(R"([
      {"name": "MEGASCALE_NUM_SLICES", "value": "2"},
      {"name": "MEGASCALE_SLICE_ID", "value": "1"},
      {"name": "MEGASCALE_COORDINATOR_ADDRESS", "valueFrom": {"fieldRef": {"fieldPath": "x"}}},
      {"name": "MEGASCALE_PORT", "value": ""}])"));
  Outcome r = run("megascale-present", pod, at(0, 0));
  CHECK(r.value("MEGASCALE_SLICE_ID") == "1");
  CHECK(r.count("MEGASCALE_SLICE_ID") == 1);
  CHECK(r.entry("MEGASCALE_COORDINATOR_ADDRESS").contains("valueFrom"));
  CHECK(r.count("MEGASCALE_COORDINATOR_ADDRESS") == 1);
  CHECK(r.env()[3] == json{{"name", "MEGASCALE_PORT"}, {"value", "8081"}});  // in place
  REQUIRE(r.warnings.size() == 1);
  CHECK(r.warnings[0] ==
        "container \"ray-worker\": kept MEGASCALE_SLICE_ID=\"1\" from the Pod spec, but this slice "
        "needs \"0\"; remove it from the template unless you mean it");
}

TEST_CASE("M5.3: the subslice annotation's topology feeds TORCH_TPU_* (better than upstream)",
          "[podpatch][mutate]") {
  json pod = one_container("tpu-v6e-slice", "4x4", 4);
  pod["metadata"]["annotations"] = {{"cloud.google.com/gke-tpu-slice-topology", "2x4"}};
  Outcome r = run("subslice-torch", pod, at(0, 1));
  CHECK(r.value("TORCH_TPU_TOPOLOGY") == "2,4,1");
  CHECK(r.value("TPU_WORKER_HOSTNAMES") == "g-0-0.c-headless,g-0-1.c-headless");
  CHECK(r.value("TORCH_TPU_SLICEBUILDER_ADDRESSES") == slicebuilder(dns(0, 2), 4));
  CHECK(r.value("TPU_WORKER_ID") == "1");
}

TEST_CASE("M4: hostname, subdomain and affinity of a multi-host Pod", "[podpatch][mutate]") {
  auto [row, labels, key, value] = GENERATE(table<std::string, json, std::string, std::string>({
      // KubeRay >= 1.5 with the gate on: the replica-name label keeps the slice together.
      {"replica-name",
       json{{"ray.io/worker-group-replica-name", "g-x7k2b"},
            {"ray.io/replica-host-index", "3"},
            {"ray.io/worker-group-replica-index", "1"}},
       "ray.io/worker-group-replica-name", "g-x7k2b"},
      // Without the host index the replica name is not trusted: replicaIndex.
      {"replica-name-without-host-index", json{{"ray.io/worker-group-replica-name", "g-x7k2b"}},
       "replicaIndex", "g-1"},
      {"no-labels", json::object(), "replicaIndex", "g-1"},
  }));
  CAPTURE(row);
  json pod = one_container("tpu-v6e-slice", "4x4", 4);
  pod["metadata"]["labels"].update(labels);
  Options o = at(1, 3);
  o.svc = "c-headless-worker-svc";
  o.topology_key = "cloud.google.com/gce-topology-block";
  Outcome r = run("affinity-" + row, pod, o);
  CHECK(r.mutated["spec"]["hostname"] == "g-1-3");
  CHECK(r.mutated["spec"]["subdomain"] == "c-headless-worker-svc");
  CHECK(r.value("TPU_WORKER_HOSTNAMES") == dns(1, 4, "c-headless-worker-svc"));
  json expected = json::object();
  podpatch::merge_affinity(expected, {key, value, "c", "cloud.google.com/gce-topology-block"});
  CHECK(r.mutated["spec"]["affinity"] == expected["spec"]["affinity"]);
  const json& term = r.mutated["spec"]["affinity"]["podAffinity"]
                              ["requiredDuringSchedulingIgnoredDuringExecution"][0];
  CHECK(term["labelSelector"]["matchExpressions"][0] ==
        json{{"key", key}, {"operator", "In"}, {"values", {value}}});
  CHECK(term["labelSelector"]["matchExpressions"][1] ==
        json{{"key", "ray.io/cluster"}, {"operator", "In"}, {"values", {"c"}}});
  CHECK(term["topologyKey"] == "cloud.google.com/gce-topology-block");
}

TEST_CASE("M4: an existing hostname or subdomain is replaced, M7 warns", "[podpatch][mutate]") {
  auto [row, hostname, subdomain,
        warnings] = GENERATE(table<std::string, json, json, std::vector<std::string>>({
      {"different",
       json("mine"),
       json("svc"),
       {"replaced spec.hostname \"mine\" with \"g-0-1\" so the slice's peers can resolve this Pod",
        "replaced spec.subdomain \"svc\" with \"c-headless\" so the slice's peers can resolve "
        "this Pod"}},
      {"empty", json(""), json(""), std::vector<std::string>{}},
      {"same", json("g-0-1"), json("c-headless"), std::vector<std::string>{}},
      {"null", json(), json(), std::vector<std::string>{}},
  }));
  CAPTURE(row);
  json pod = one_container("tpu-v6e-slice", "4x4", 4);
  pod["spec"]["hostname"] = hostname;
  pod["spec"]["subdomain"] = subdomain;
  Outcome r = run("hostname-" + row, pod, at(0, 1));
  CHECK(r.mutated["spec"]["hostname"] == "g-0-1");
  CHECK(r.mutated["spec"]["subdomain"] == "c-headless");
  CHECK(r.warnings == warnings);
}

TEST_CASE("M3: the replicaIndex label is added only when the plan says so", "[podpatch][mutate]") {
  auto [row, add, labels_before] = GENERATE(table<std::string, bool, json>({
      {"added", true, json{{"ray.io/cluster", "c"}, {"ray.io/group", "g"}}},
      {"overwritten", true,
       json{{"ray.io/cluster", "c"}, {"ray.io/group", "g"}, {"replicaIndex", "g-9"}}},
      {"not-added", false, json{{"ray.io/cluster", "c"}, {"ray.io/group", "g"}}},
  }));
  CAPTURE(row);
  json pod = one_container("tpu-v6e-slice", "2x4", 8);
  pod["metadata"]["labels"] = labels_before;
  Options o = at(2, 0);
  o.add_replica_label = add;
  Outcome r = run("replica-label-" + row, pod, o);
  if (add) {
    CHECK(r.mutated["metadata"]["labels"]["replicaIndex"] == "g-2");
  } else {
    CHECK_FALSE(r.mutated["metadata"]["labels"].contains("replicaIndex"));
  }
  CHECK(r.mutated["metadata"]["labels"]["ray.io/cluster"] == "c");
}

TEST_CASE("M5.5: TPU_NAME is the worker group and the Pod's replica, <g>-<r>",
          "[podpatch][mutate]") {
  auto [replica, want] = GENERATE(table<int, std::string>({{0, "g-0"}, {3, "g-3"}, {12, "g-12"}}));
  Outcome r = run("m55-tpu-name-" + std::to_string(replica),
                  one_container("tpu-v6e-slice", "4x4", 4), at(replica, 1));
  CHECK(r.entry("TPU_NAME") == json{{"name", "TPU_NAME"}, {"value", want}});
}

TEST_CASE(
    "M5.6: the device plugin is reached at the node's IP, from the downward API, on "
    "--device-plugin-port",
    "[podpatch][mutate]") {
  const json host_ip = json::parse(
      R"({"name": "TPU_DEVICE_PLUGIN_HOST_IP",
          "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.hostIP"}}})");
  Outcome r = run("m56-default", one_container("tpu-v6e-slice", "4x4", 4), at(0, 0));
  CHECK(r.entry("TPU_DEVICE_PLUGIN_HOST_IP") == host_ip);
  CHECK(r.value("TPU_DEVICE_PLUGIN_ADDR") == "$(TPU_DEVICE_PLUGIN_HOST_IP):2112");
  Options o = at(0, 0);
  o.ports.device_plugin = 2999;
  Outcome other = run("m56-port", one_container("tpu-v6e-slice", "2x4", 8), o);
  CHECK(other.entry("TPU_DEVICE_PLUGIN_HOST_IP") == host_ip);
  CHECK(other.value("TPU_DEVICE_PLUGIN_ADDR") == "$(TPU_DEVICE_PLUGIN_HOST_IP):2999");
}

TEST_CASE("M5: custom port bases", "[podpatch][mutate]") {
  json pod = one_container("tpu7x", "2x2x2", 4,
                           json::parse(R"([{"name": "MEGASCALE_NUM_SLICES", "value": "2"}])"));
  topology::Ports ports;
  ports.tpu_process_base = 9000;
  ports.megascale_base = 9100;
  ports.device_plugin = 3000;
  Options o = at(0, 1);
  o.ports = ports;
  Outcome r = run("custom-ports", pod, o);
  CHECK(r.value("MEGASCALE_COORDINATOR_ADDRESS") == "g-0-0.c-headless:9100");
  CHECK(r.value("MEGASCALE_PORT") == "9100");
  CHECK(r.value("TPU_PROCESS_ADDRESSES") == "g-0-0.c-headless:9000,g-0-1.c-headless:9000");
  CHECK(r.value("TPU_PROCESS_PORT") == "9000");
  CHECK(r.value("TORCH_TPU_SLICEBUILDER_ADDRESSES") == slicebuilder(dns(0, 2), 8, 9000));
  CHECK(r.value("TPU_DEVICE_PLUGIN_ADDR") == "$(TPU_DEVICE_PLUGIN_HOST_IP):3000");
}

TEST_CASE(
    "M6: nothing but the TPU containers' env, the labels and the Pod spec fields of M4 "
    "changes",
    "[podpatch][mutate]") {
  json pod =
      worker("tpu-v6e-slice", "4x4",
             {json{{"name", "init-like"},
                   {"image", "busybox"},
                   {"env", json::array({{{"name", "A"}, {"value", "1"}}})}},
              tpu_container("ray-worker", 4, json::parse(R"([{"name": "B", "value": "2"}])"))});
  pod["spec"]["initContainers"] = json::array({tpu_container("init", 4)});
  pod["spec"]["tolerations"] = json::array({{{"key", "google.com/tpu"}, {"operator", "Exists"}}});
  Options o = at(0, 3);
  o.add_replica_label = true;
  Outcome r = run("only-expected-paths", pod, o);
  for (const json& op : r.patch) {
    std::string path = op["path"].get<std::string>();
    CAPTURE(path);
    bool allowed = path.starts_with("/spec/containers/1/env") || path == "/spec/hostname" ||
                   path == "/spec/subdomain" || path.starts_with("/spec/affinity") ||
                   path == "/metadata/labels/replicaIndex";
    CHECK(allowed);
  }
  CHECK(r.mutated["spec"]["initContainers"] == pod["spec"]["initContainers"]);
  CHECK(r.mutated["spec"]["containers"][0] == pod["spec"]["containers"][0]);
  CHECK(r.env(1)[0] == json{{"name", "B"}, {"value", "2"}});
}
