// docs/spec.md M8 (and V5.1): every value the webhook writes is one environment string a container
// can exec, the mutated Pod stays within the size budget, and what is left out or refused is said.
// Expected sizes are worked out by hand from topology.md §6's formulas: a host entry of group g
// and Service s is "<g>-<r>-<h>.<s>", so a list of H entries holds H x (|g| + |s| + 4) bytes of
// names at replica 0, plus the digits of 0 .. H-1, plus its commas.
#include "podpatch/limits.h"

#include <spawn.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <string>
#include <vector>

#include "admission/handler.h"
#include "support/test_support.h"
#include "topology/addresses.h"

extern char** environ;

using testing::json;

namespace {

constexpr std::size_t kLimit = 131072;

struct PodSpec {
  std::string accelerator = "tpu7x";
  std::string topology = "16x16x36";
  std::vector<int> chips = {4};  // google.com/tpu of each TPU container
  std::string group = "g";
  std::string cluster = "c";
  int replica = 0;
  int host = 0;
  json env = json::array();  // given to every TPU container
};

// A worker Pod as KubeRay >= 1.6 creates it, with the index labels (M3.1).
json pod(const PodSpec& p) {
  json containers = json::array();
  for (std::size_t i = 0; i < p.chips.size(); ++i) {
    std::string chips = std::to_string(p.chips[i]);
    containers.push_back(
        {{"name", "tpu-" + std::to_string(i)},
         {"image", "rayproject/ray:2.52.0"},
         {"resources",
          {{"requests", {{"google.com/tpu", chips}}}, {"limits", {{"google.com/tpu", chips}}}}},
         {"env", p.env}});
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"generateName", p.cluster + "-" + p.group + "-worker-"},
            {"namespace", "default"},
            {"labels",
             {{"ray.io/cluster", p.cluster},
              {"ray.io/group", p.group},
              {"ray.io/node-type", "worker"},
              {"app.kubernetes.io/name", "kuberay"},
              {"ray.io/worker-group-replica-index", std::to_string(p.replica)},
              {"ray.io/replica-host-index", std::to_string(p.host)}}}}},
          {"spec",
           {{"containers", containers},
            {"nodeSelector",
             {{"cloud.google.com/gke-tpu-accelerator", p.accelerator},
              {"cloud.google.com/gke-tpu-topology", p.topology}}}}}};
}

struct Admitted {
  admission::Response response;
  json mutated;
  // The value of `name` in TPU container `c`, or "<unset>".
  std::string env(const std::string& name, std::size_t c = 0) const {
    std::string out = "<unset>";
    for (const json& e : mutated["spec"]["containers"][c]["env"]) {
      if (e["name"] == name && e.contains("value")) {
        out = e["value"].get<std::string>();
      }
    }
    return out;
  }
};

Admitted admit(const PodSpec& p, std::size_t body_bytes = 0) {
  static testing::Harness h;
  json object = pod(p);
  admission::Request req = testing::pod_request(object);
  req.body_bytes = body_bytes;
  Admitted a{h.handler.mutate(req), object};
  if (a.response.allowed && admission::has_patch(a.response)) {
    a.mutated = object.patch(admission::patch_ops(a.response));
  }
  return a;
}

std::string name_of(std::size_t n, char c) { return std::string(n, c); }

// TorchTPU's multihost launcher, as its rule reads (docs/spec.md M8.2): for each entry of
// TPU_WORKER_HOSTNAMES, ports TORCH_TPU_BASE_PORT .. + TORCH_TPU_DEVICES_PER_HOST - 1.
std::string torchtpu_derive(const std::string& hostnames, int base, int devices) {
  std::string out;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = hostnames.find(',', start);
    std::string host = hostnames.substr(start, comma - start);
    for (int i = 0; i < devices; ++i) {
      out += (out.empty() ? "" : ",") + host + ":" + std::to_string(base + i);
    }
    if (comma == std::string::npos) {
      return out;
    }
    start = comma + 1;
  }
}

// M5.3's list as the spec words it, for replica 0 of group g behind Service s.
std::string spec_slicebuilder(const std::string& g, const std::string& s, int hosts, int devices) {
  std::string out;
  for (int h = 0; h < hosts; ++h) {
    for (int p = 0; p < devices; ++p) {
      out += (out.empty() ? "" : ",") + g + "-0-" + std::to_string(h) + "." + s + ":" +
             std::to_string(8471 + p);
    }
  }
  return out;
}

// Runs /bin/true with one environment string of `bytes` bytes ("X=aaa...", NUL not counted).
int spawn_with_env_string(std::size_t bytes) {
  std::string var = "X=" + std::string(bytes - 2, 'a');
  char* envp[] = {var.data(), nullptr};
  char arg0[] = "true";
  char* argv[] = {arg0, nullptr};
  pid_t pid = 0;
  int rc = posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, envp);
  if (rc == 0) {
    int status = 0;
    waitpid(pid, &status, 0);
  }
  return rc;
}

}  // namespace

TEST_CASE("M8.1: the limit is Linux's MAX_ARG_STRLEN, the NUL counted", "[admission][limits]") {
  CHECK(podpatch::kMaxEnvStringBytes == 32 * 4096);
  // "NAME=value" of 131,071 bytes is 131,072 with its NUL: the last that execs.
  CHECK(spawn_with_env_string(kLimit - 1) == 0);
  CHECK(spawn_with_env_string(kLimit) == E2BIG);
  CHECK(podpatch::env_string_bytes(1, 131069) == kLimit);
  CHECK(podpatch::env_string_fits(1, 131069));
  CHECK_FALSE(podpatch::env_string_fits(1, 131070));
}

TEST_CASE("topology.md §6: list sizes computed without building the lists", "[admission][limits]") {
  // "g-0-0.c-headless" .. "g-0-9.c-headless": 16 bytes each, "g-0-10..." and "g-0-11...": 17.
  CHECK(topology::worker_hostnames_size(1, 0, 12, 10) == 10 * 16 + 2 * 17 + 11);
  CHECK(topology::worker_hostnames_size(1, 0, 12, 10) ==
        topology::worker_hostnames("g", 0, 12, "c-headless").size());
  // "a:8471,a:8472,bb:8471,bb:8472"
  CHECK(topology::address_list_size(3, 2, 2, 8471) == 29);
  // Replica 10 adds one digit to each entry.
  CHECK(topology::worker_hostnames_size(1, 10, 2, 10) == 2 * 17 + 1);
  CHECK(topology::decimal_digits(0) == 1);
  CHECK(topology::decimal_digits(2303) == 4);
}

TEST_CASE("M8.2: tpu7x 16x16x36 (9,216 chips, 2,304 hosts): the slicebuilder list is left out",
          "[admission][limits]") {
  PodSpec p;  // group "g", cluster "c": entries "g-0-<h>.c-headless", 15 bytes + digits of h
  p.host = 2303;
  Admitted a = admit(p);
  REQUIRE(a.response.allowed);
  // Digits of 0..2303: 10 x 1 + 90 x 2 + 900 x 3 + 1304 x 4 = 8,106.
  const std::size_t names = 2304 * 15 + 8106;
  CHECK(a.env("TPU_WORKER_HOSTNAMES").size() == names + 2303);
  CHECK(a.env("TPU_PROCESS_ADDRESSES").size() == names + 2304 * 5 + 2303);
  CHECK(a.env("TORCH_TPU_SLICEBUILDER_ADDRESSES") == "<unset>");
  CHECK(a.env("TORCH_TPU_BASE_PORT") == "8471");
  CHECK(a.env("TORCH_TPU_DEVICES_PER_HOST") == "8");  // 4 chips x 2 chiplets
  CHECK(a.env("TPU_WORKER_ID") == "2303");
  // 8 addresses per host: 8 x names + 18,432 x ":8471".size() + 18,431 commas, plus the name.
  const std::size_t would_be = 8 * names + 18432 * 5 + 18431;
  CHECK(would_be == 451919);
  std::string bytes = "451,953 bytes";  // 32 + 1 + 451,919 + 1
  bool warned = false;
  for (const std::string& w : a.response.warnings) {
    warned = warned || (w.find("TORCH_TPU_SLICEBUILDER_ADDRESSES left out") != std::string::npos &&
                        w.find(bytes) != std::string::npos &&
                        w.find("TORCH_TPU_DEVICES_PER_HOST=8") != std::string::npos);
  }
  CHECK(warned);
  CHECK(a.response.omitted == std::vector<std::string_view>{"TORCH_TPU_SLICEBUILDER_ADDRESSES"});
  CHECK_THAT(admission::encode(a.response),
             Catch::Contains(R"("omitted":"TORCH_TPU_SLICEBUILDER_ADDRESSES")"));
  // Every value the webhook wrote execs.
  for (const json& e : a.mutated["spec"]["containers"][0]["env"]) {
    if (e.contains("value")) {
      CHECK(podpatch::env_string_fits(e["name"].get<std::string>().size(),
                                      e["value"].get<std::string>().size()));
    }
  }
  // TorchTPU's launcher derives, from what the Pod carries, exactly M5.3's list.
  std::string derived =
      torchtpu_derive(a.env("TPU_WORKER_HOSTNAMES"), std::stoi(a.env("TORCH_TPU_BASE_PORT")),
                      std::stoi(a.env("TORCH_TPU_DEVICES_PER_HOST")));
  CHECK(derived.size() == would_be);
  CHECK(derived.starts_with("g-0-0.c-headless:8471,g-0-0.c-headless:8472,"));
  CHECK(derived.ends_with(",g-0-2303.c-headless:8478"));
  CHECK(derived == spec_slicebuilder("g", "c-headless", 2304, 8));
  testing::record_patch("limits-tpu7x-16x16x36-omitted", pod(p), admission::patch_ops(a.response));
}

TEST_CASE("M8.2: where the webhook writes the list, TorchTPU's derivation gives the same",
          "[admission][limits]") {
  struct Case {
    std::string accelerator, topology;
    std::vector<int> chips;
    int devices;  // chips per host x chiplets, by hand
  };
  for (const Case& c :
       {Case{"tpu-v6e-slice", "4x4", {4}, 4}, Case{"tpu7x", "2x2x2", {4}, 8},
        Case{"tpu-v4-podslice", "2x2x4", {4}, 4}, Case{"tpu7x", "4x4x4", {2, 2}, 8}}) {
    PodSpec p;
    p.accelerator = c.accelerator;
    p.topology = c.topology;
    p.chips = c.chips;
    Admitted a = admit(p);
    REQUIRE(a.response.allowed);
    CAPTURE(c.accelerator, c.topology);
    CHECK(a.response.omitted.empty());
    CHECK(a.env("TORCH_TPU_BASE_PORT") == "<unset>");
    for (std::size_t k = 0; k < c.chips.size(); ++k) {
      CHECK(torchtpu_derive(a.env("TPU_WORKER_HOSTNAMES", k), 8471, c.devices) ==
            a.env("TORCH_TPU_SLICEBUILDER_ADDRESSES", k));
    }
  }
}

TEST_CASE("M8.1: TPU_WORKER_HOSTNAMES on both sides of the limit, v5p 16x20x28 (2,240 hosts)",
          "[admission][limits]") {
  PodSpec p;
  p.accelerator = "tpu-v5p-slice";
  p.topology = "16x20x28";  // 8,960 chips, 4 per host
  p.group = name_of(20, 'g');
  // Digits of 0..2239: 10 + 180 + 2700 + 1240 x 4 = 7,850. With group + Service = 50 bytes:
  // 2,240 x (50 + 4) + 7,850 + 2,239 commas = 131,049, and 20 + 1 + 131,049 + 1 = 131,071.
  SECTION("one byte under: admitted") {
    p.cluster = name_of(21, 'c');  // Service "ccc...-headless", 30 bytes
    Admitted a = admit(p);
    REQUIRE(a.response.allowed);
    CHECK(a.env("TPU_WORKER_HOSTNAMES").size() == 131049);
    // The slicebuilder list (4 x 121,050 + ...) is left out, the host list kept.
    CHECK(a.env("TORCH_TPU_DEVICES_PER_HOST") == "4");
  }
  SECTION("one character more: denied, shorten by 1") {
    p.cluster = name_of(22, 'c');  // 2,240 x 55 + 7,850 + 2,239 + 22 = 133,311
    Admitted a = admit(p);
    REQUIRE_FALSE(a.response.allowed);
    CHECK(a.response.code == 400);
    CHECK(a.response.reason == "env_too_long");
    CHECK_THAT(a.response.message, Catch::Contains("TPU_WORKER_HOSTNAMES would be 133,311 bytes"));
    CHECK_THAT(a.response.message, Catch::Contains("2,240 entries"));
    CHECK_THAT(a.response.message, Catch::Contains("by at least 1 character in total"));
    CHECK_THAT(a.response.message, Catch::Contains("argument list too long"));
  }
  SECTION("far over: the characters to cut are (bytes - 131,072) / entries, rounded up") {
    p.group = name_of(40, 'g');
    p.cluster = name_of(44, 'c');  // 40 + 53 = 93: 2,240 x 97 + 10,111 = 227,391
    Admitted a = admit(p);
    REQUIRE_FALSE(a.response.allowed);
    // (227,391 - 131,072) / 2,240 = 42.999..., so 43.
    CHECK_THAT(a.response.message, Catch::Contains("227,391 bytes"));
    CHECK_THAT(a.response.message, Catch::Contains("by at least 43 characters"));
  }
}

TEST_CASE("M8.1: TPU_PROCESS_ADDRESSES exactly at the limit, tpu7x 16x20x28 (2,240 hosts)",
          "[admission][limits]") {
  PodSpec p;
  p.topology = "16x20x28";
  p.group = name_of(15, 'g');
  // group + Service = 45: 2,240 x 49 + 7,850 digits + 2,240 x ":8471" + 2,239 commas = 131,049,
  // and 21 + 1 + 131,049 + 1 = 131,072 exactly.
  SECTION("exactly 131,072 bytes with the NUL: admitted") {
    p.cluster = name_of(21, 'c');
    Admitted a = admit(p);
    REQUIRE(a.response.allowed);
    CHECK(a.env("TPU_PROCESS_ADDRESSES").size() == 131049);
  }
  SECTION("one character more: denied") {
    p.cluster = name_of(22, 'c');  // 2,240 bytes more: 133,312
    Admitted a = admit(p);
    REQUIRE_FALSE(a.response.allowed);
    CHECK_THAT(a.response.message, Catch::Contains("TPU_PROCESS_ADDRESSES would be 133,312 bytes"));
    CHECK_THAT(a.response.message, Catch::Contains("by at least 1 character in total"));
  }
}

TEST_CASE("M8.2: the slicebuilder list from the user's host list, on both sides of the limit",
          "[admission][limits]") {
  // v6e 16x16 (256 chips, 64 hosts) with a TPU_WORKER_HOSTNAMES of 256 entries: 1 port each.
  // The list is E + 256 x ":8471" + 255 commas, and 32 + 1 + that + 1 = E + 1,569 with E the
  // entries' bytes: exactly 131,072 for E = 129,503.
  auto user_list = [](std::size_t entry_bytes) {
    std::string list;
    for (int i = 0; i < 256; ++i) {
      std::size_t n = entry_bytes / 256 + (static_cast<std::size_t>(i) < entry_bytes % 256);
      list += (i > 0 ? "," : "") + std::string(n, 'h');
    }
    return list;
  };
  PodSpec p;
  p.accelerator = "tpu-v6e-slice";
  p.topology = "16x16";
  SECTION("exactly at the limit: written") {
    p.env = json::array({{{"name", "TPU_WORKER_HOSTNAMES"}, {"value", user_list(129503)}}});
    Admitted a = admit(p);
    REQUIRE(a.response.allowed);
    CHECK(a.env("TORCH_TPU_SLICEBUILDER_ADDRESSES").size() == 131072 - 34);
    CHECK(a.response.omitted.empty());
  }
  SECTION("one byte over: left out, derived from the user's list") {
    p.env = json::array({{{"name", "TPU_WORKER_HOSTNAMES"}, {"value", user_list(129504)}}});
    Admitted a = admit(p);
    REQUIRE(a.response.allowed);
    CHECK(a.env("TORCH_TPU_SLICEBUILDER_ADDRESSES") == "<unset>");
    CHECK(a.env("TORCH_TPU_DEVICES_PER_HOST") == "1");
    CHECK(torchtpu_derive(a.env("TPU_WORKER_HOSTNAMES"), 8471, 1).size() + 34 == 131073);
  }
}

TEST_CASE("M8: the largest slice of every generation", "[admission][limits]") {
  struct Case {
    std::string accelerator, topology;
    int hosts, devices;
    std::size_t slicebuilder;  // bytes of NAME=value+NUL, by hand
  };
  // Names "g" and "c-headless": entries of 15 bytes + the digits of the host.
  // v6e, v5e 16x16: 64 hosts, digits 10 + 54 x 2 = 118: 4 x (64 x 15 + 118) + 256 x 5 + 255 + 34.
  // v4 16x16x16: 1,024 hosts, digits 10 + 180 + 2700 + 24 x 4 = 2,986:
  //   4 x (1,024 x 15 + 2,986) + 4,096 x 5 + 4,095 + 34 = 97,993, under the limit.
  // v5p 16x20x28: 2,240 hosts: 4 x (2,240 x 15 + 7,850) + 8,960 x 5 + 8,959 + 34 = 219,593.
  // tpu7x 16x16x36: 2,304 hosts: 451,953 (above).
  for (const Case& c : {
           Case{"tpu-v6e-slice", "16x16", 64, 4, 4 * (64 * 15 + 118) + 256 * 5 + 255 + 34},
           Case{"tpu-v5-lite-podslice", "16x16", 64, 4, 4 * (64 * 15 + 118) + 256 * 5 + 255 + 34},
           Case{"tpu-v4-podslice", "16x16x16", 1024, 4, 97993},
           Case{"tpu-v5p-slice", "16x20x28", 2240, 4, 219593},
           Case{"tpu7x", "16x16x36", 2304, 8, 451953},
       }) {
    CAPTURE(c.accelerator, c.topology);
    PodSpec p;
    p.accelerator = c.accelerator;
    p.topology = c.topology;
    p.host = c.hosts - 1;
    Admitted a = admit(p);
    REQUIRE(a.response.allowed);
    CHECK(a.env("TPU_WORKER_ID") == std::to_string(c.hosts - 1));
    bool fits = c.slicebuilder <= kLimit;
    CHECK(a.response.omitted.empty() == fits);
    if (fits) {
      CHECK(a.env("TORCH_TPU_SLICEBUILDER_ADDRESSES").size() + 34 == c.slicebuilder);
    } else {
      CHECK(a.env("TORCH_TPU_DEVICES_PER_HOST") == std::to_string(c.devices));
      CHECK_THAT(a.response.warnings.back(),
                 Catch::Contains(podpatch::with_commas(c.slicebuilder) + " bytes"));
    }
  }
}

TEST_CASE("M8: multi-slice (MEGASCALE) at 2,304 hosts, replica 1", "[admission][limits]") {
  PodSpec p;
  p.replica = 1;
  p.host = 7;
  p.env = json::array({{{"name", "MEGASCALE_NUM_SLICES"}, {"value", "2"}}});
  Admitted a = admit(p);
  REQUIRE(a.response.allowed);
  CHECK(a.env("MEGASCALE_SLICE_ID") == "1");
  CHECK(a.env("MEGASCALE_COORDINATOR_ADDRESS") == "g-0-0.c-headless:8081");
  CHECK(a.env("TPU_WORKER_HOSTNAMES").starts_with("g-1-0.c-headless,g-1-1.c-headless,"));
  CHECK(a.env("TPU_WORKER_HOSTNAMES").size() == 2304 * 15 + 8106 + 2303);
  CHECK(a.response.omitted.size() == 1);
}

TEST_CASE("M8.1/M8.3: tpu7x with two TPU containers carries every list twice",
          "[admission][limits]") {
  PodSpec p;
  p.chips = {2, 2};
  // Two containers: TPU_PROCESS_ADDRESSES has 4,608 entries, each host twice (:8471, :8472):
  // 2 x (2,304 x (L + 4) + 8,106) + 4,608 x 5 + 4,607 commas, L = group + Service.
  SECTION("both containers get the lists, and the derivation inputs") {
    Admitted a = admit(p);  // L = 11: 2 x 42,666 + 23,040 + 4,607 = 112,979
    REQUIRE(a.response.allowed);
    for (std::size_t k = 0; k < 2; ++k) {
      CHECK(a.env("TPU_PROCESS_ADDRESSES", k).size() == 112979);
      CHECK(a.env("TPU_PROCESS_PORT", k) == std::to_string(8471 + k));
      CHECK(a.env("TORCH_TPU_DEVICES_PER_HOST", k) == "8");
    }
    CHECK(a.response.omitted.size() == 1);  // once, though both containers leave it out
  }
  SECTION("L = 14 fits, L = 15 is 362 bytes over: shorten by 1") {
    p.group = name_of(4, 'g');  // L = 4 + 10 = 14: 4,608 x 18 + 16,212 + 27,647 + 23 = 126,826
    CHECK(admit(p).response.allowed);
    p.group = name_of(5, 'g');  // 4,608 more: 131,434
    Admitted a = admit(p);
    REQUIRE_FALSE(a.response.allowed);
    CHECK_THAT(a.response.message, Catch::Contains("131,434 bytes"));
    CHECK_THAT(a.response.message, Catch::Contains("4,608 entries"));
    CHECK_THAT(a.response.message, Catch::Contains("by at least 1 character"));
  }
  SECTION("M8.3: a large Pod as sent plus both copies of the lists is over the budget") {
    Admitted small = admit(p);
    REQUIRE(small.response.allowed);
    std::size_t patch = small.response.patch.size();
    // The Pod as sent is counted by its AdmissionReview's size (body_bytes).
    CHECK(admit(p, 1048576 - patch).response.allowed);
    Admitted a = admit(p, 1048576 - patch + 1);
    REQUIRE_FALSE(a.response.allowed);
    CHECK(a.response.reason == "pod_too_large");
    CHECK_THAT(a.response.message, Catch::Contains("over the webhook's budget of 1,048,576"));
    // The largest first: 2 x 112,979 and 2 x 44,969.
    CHECK_THAT(a.response.message,
               Catch::Contains("TPU_PROCESS_ADDRESSES 225,958, TPU_WORKER_HOSTNAMES 89,938"));
    CHECK_THAT(a.response.message, Catch::Contains("2 TPU container(s)"));
  }
}

TEST_CASE("M8.1: no names are short enough for 9,216 one-chip hosts", "[admission][limits]") {
  PodSpec p;
  p.chips = {1};
  p.topology = "16x16x36";  // 9,216 hosts of 1 chip
  Admitted a = admit(p);
  REQUIRE_FALSE(a.response.allowed);
  CHECK(a.response.reason == "env_too_long");
  // Digits of 0..9215: 10 + 180 + 2700 + 8216 x 4 = 35,754. TPU_WORKER_HOSTNAMES would be
  // 9,216 x 15 + 35,754 + 9,215 + 22 = 183,231 bytes; TPU_PROCESS_ADDRESSES, each entry 5 bytes
  // longer (":8471"), 9,216 x 20 + 35,754 + 9,215 + 23 = 229,312: the larger cut, so the one named.
  CHECK_THAT(a.response.message, Catch::Contains("TPU_PROCESS_ADDRESSES would be 229,312 bytes"));
  CHECK_THAT(a.response.message,
             Catch::Contains("even one-character worker group and RayCluster names would not fit"));
}

namespace {

// A RayCluster (or, with kind, a RayJob) of one TPU worker group.
json ray_object(const PodSpec& p, int num_of_hosts, int replicas,
                const std::string& kind = "RayCluster") {
  json containers = pod(p)["spec"]["containers"];
  json group = {{"groupName", p.group},
                {"replicas", replicas},
                {"minReplicas", replicas},
                {"maxReplicas", replicas},
                {"numOfHosts", num_of_hosts},
                {"rayStartParams", json::object()},
                {"template",
                 {{"spec",
                   {{"containers", containers},
                    {"nodeSelector",
                     {{"cloud.google.com/gke-tpu-accelerator", p.accelerator},
                      {"cloud.google.com/gke-tpu-topology", p.topology}}}}}}}};
  json head = {{"rayStartParams", json::object()},
               {"template", {{"spec", {{"containers", json::array({{{"name", "head"}}})}}}}}};
  json spec = {{"headGroupSpec", head}, {"workerGroupSpecs", json::array({group})}};
  json object = {{"apiVersion", "ray.io/v1"},
                 {"kind", kind},
                 {"metadata", {{"name", p.cluster}, {"namespace", "default"}}}};
  object["spec"] = kind == "RayJob" ? json{{"rayClusterSpec", spec}} : spec;
  return object;
}

admission::Response validate(const json& object) {
  static testing::Harness h;
  admission::Request r = testing::cluster_request(object);
  r.kind = object["kind"];
  r.ns = "default";
  return h.handler.validate(r);
}

}  // namespace

TEST_CASE("V5.1: a tpu7x 16x16x36 RayCluster is warned at apply time that the list is left out",
          "[admission][limits]") {
  PodSpec p;
  admission::Response r = validate(ray_object(p, 2304, 1));
  REQUIRE(r.allowed);
  bool warned = false;
  for (const std::string& w : r.warnings) {
    warned = warned || (w.find("TORCH_TPU_SLICEBUILDER_ADDRESSES would be 451,953 bytes") !=
                            std::string::npos &&
                        w.find("TORCH_TPU_DEVICES_PER_HOST=8") != std::string::npos);
  }
  CHECK(warned);
}

TEST_CASE("V5.1: host lists over the limit are denied at apply time with M8.1's numbers",
          "[admission][limits]") {
  PodSpec p;
  p.accelerator = "tpu-v5p-slice";
  p.topology = "16x20x28";
  p.group = name_of(20, 'g');
  SECTION("RayCluster, one character over") {
    p.cluster = name_of(22, 'c');
    admission::Response r = validate(ray_object(p, 2240, 1));
    REQUIRE_FALSE(r.allowed);
    CHECK(r.reason == "env_too_long");
    CHECK_THAT(r.message, Catch::StartsWith("RayCluster default/" + p.cluster + ": worker group"));
    CHECK_THAT(r.message, Catch::Contains("TPU_WORKER_HOSTNAMES would be 133,311 bytes"));
    CHECK_THAT(r.message, Catch::Contains("by at least 1 character in total"));
  }
  SECTION("the same names at the limit pass") {
    p.cluster = name_of(21, 'c');
    CHECK(validate(ray_object(p, 2240, 1)).allowed);
  }
  SECTION("replica 10 adds a digit to every entry: 2,240 bytes") {
    p.cluster = name_of(21, 'c');
    admission::Response r = validate(ray_object(p, 2240, 11));
    REQUIRE_FALSE(r.allowed);
    CHECK_THAT(r.message, Catch::Contains("133,311 bytes"));
  }
  SECTION("RayJob: the generated cluster <name>-xxxxx names the Service") {
    p.cluster = name_of(16, 'c');  // "cccc...-xxxxx-headless": 16 + 6 + 9 = 31
    admission::Response r = validate(ray_object(p, 2240, 1, "RayJob"));
    REQUIRE_FALSE(r.allowed);
    CHECK_THAT(r.message, Catch::StartsWith("RayJob default/" + p.cluster));
    CHECK_THAT(r.message, Catch::Contains("133,311 bytes"));
  }
}

TEST_CASE("M8.1: of two lists over the limit, the one needing the most cut is reported",
          "[admission][limits]") {
  // tpu7x 16x16x36, 2,304 hosts, 40-character group and cluster names (Service "<c>-headless"):
  // TPU_WORKER_HOSTNAMES would be 224,703 bytes, 41 characters to cut; TPU_PROCESS_ADDRESSES,
  // each entry with ":8471", 236,224 bytes, 46 to cut. Cutting 41 would leave the second over.
  PodSpec p;
  p.group = name_of(40, 'g');
  p.cluster = name_of(40, 'c');
  Admitted a = admit(p);
  REQUIRE_FALSE(a.response.allowed);
  CHECK_THAT(a.response.message,
             Catch::StartsWith("TPU_PROCESS_ADDRESSES would be 236,224 bytes") ||
                 Catch::Contains(": TPU_PROCESS_ADDRESSES would be 236,224 bytes"));
  CHECK_THAT(a.response.message, Catch::Contains("by at least 46 characters in total"));
  admission::Response r = validate(ray_object(p, 2304, 1));
  REQUIRE_FALSE(r.allowed);
  CHECK_THAT(r.message, Catch::Contains("TPU_PROCESS_ADDRESSES would be 236,224 bytes") &&
                            Catch::Contains("by at least 46 characters in total"));
  // Cut by that much, both fit.
  p.group = name_of(17, 'g');
  p.cluster = name_of(17, 'c');
  CHECK(admit(p).response.allowed);
  CHECK(validate(ray_object(p, 2304, 1)).allowed);
}

TEST_CASE("V5.1: a template over the Pod budget is denied at apply time", "[admission][limits]") {
  PodSpec p;
  p.accelerator = "tpu-v6e-slice";
  p.topology = "4x4";
  json object = ray_object(p, 4, 1);
  object["spec"]["workerGroupSpecs"][0]["template"]["metadata"]["annotations"]["big"] =
      std::string(1048576, 'x');
  admission::Response r = validate(object);
  REQUIRE_FALSE(r.allowed);
  CHECK(r.reason == "pod_too_large");
  CHECK_THAT(r.message, Catch::Contains("over the webhook's budget of 1,048,576 bytes"));
}
