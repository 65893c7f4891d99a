// webhook-dryrun end to end, in-process: the GKE tutorial golden, output formats, exit codes and
// the bad-input battery (exit 2, one line on stderr, nothing on stdout).
#include "dryrun/cli.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "base/encoding/base64.h"
#include "dryrun/documents.h"
#include "support/flag_docs.h"
#include "support/test_support.h"

using testing::json;
namespace fs = std::filesystem;

namespace {

struct Run {
  int code = -1;
  std::string out;
  std::string err;
};

Run run(std::vector<std::string> args, const std::string& stdin_text = "") {
  std::istringstream in(stdin_text);
  std::ostringstream out;
  std::ostringstream err;
  Run r;
  r.code = dryrun::run_cli(args, {in, out, err});
  r.out = out.str();
  r.err = err.str();
  return r;
}

std::string fixture(const std::string& rel) { return testing::fixture_path(rel); }

// Scratch files live in one directory per test process, removed when the process ends. A file's
// name is derived from its content, so a test re-run by Catch's GENERATE finds the same path.
class ScratchDir {
 public:
  ScratchDir()
      : dir_(fs::temp_directory_path() / ("webhook-dryrun-test-" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  std::string write(const std::string& content, const std::string& suffix) {
    fs::path p = dir_ / (std::to_string(std::hash<std::string>{}(content)) + suffix);
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }

 private:
  fs::path dir_;
};

class TempFile {
 public:
  explicit TempFile(const std::string& content, const std::string& suffix = ".yaml") {
    static ScratchDir dir;
    path_ = dir.write(content, suffix);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

int line_count(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

}  // namespace

TEST_CASE("GKE tutorial: webhook-dryrun reproduces the environment the tutorial shows",
          "[dryrun][cli][golden]") {
  json expected = testing::read_json(fixture("gke-tutorial/expected-env.json"));
  auto indexing = GENERATE(as<std::string>{}, "on", "off");
  for (const auto& [file, want] : expected.items()) {
    if (file.starts_with("_")) {
      continue;
    }
    CAPTURE(file, indexing);
    Run r = run({"-o", "json", "--kuberay-indexing=" + indexing, fixture("gke-tutorial/" + file)});
    REQUIRE(r.code == 0);
    json list = json::parse(r.out);
    REQUIRE(list["kind"] == "List");
    REQUIRE(list["items"].size() == want["worker_pods"].get<std::size_t>());
    const json& shown = want["shown_pod"];
    int matches = 0;
    for (const json& pod : list["items"]) {
      if (testing::env_of(pod, "TPU_WORKER_ID") != shown["TPU_WORKER_ID"].get<std::string>()) {
        continue;
      }
      ++matches;
      for (const auto& [name, value] : shown.items()) {
        CAPTURE(name);
        CHECK(testing::env_of(pod, name) == value.get<std::string>());
      }
    }
    CHECK(matches == 1);
    // Every worker Pod of the slice has a distinct TPU_WORKER_ID.
    std::set<std::string> ids;
    for (const json& pod : list["items"]) {
      ids.insert(testing::env_of(pod, "TPU_WORKER_ID"));
    }
    CHECK(ids.size() == list["items"].size());
  }
}

TEST_CASE("a RayCluster prints the slice table by default", "[dryrun][cli]") {
  Run r = run({fixture("gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml")});
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  CHECK_THAT(r.out,
             Catch::StartsWith("RayCluster default/ray-torchtpu-cluster: admitted; peers resolve "
                               "through headless Service ray-torchtpu-cluster-headless; 4 worker "
                               "Pod(s)\n"));
  CHECK(line_count(r.out) == 6);  // summary, header, 4 Pods
  CHECK_THAT(r.out, Catch::Contains("v6e-16-0-3.ray-torchtpu-cluster-headless") &&
                        Catch::Contains("v6e-16-0-0.ray-torchtpu-cluster-headless:8471"));
}

TEST_CASE("a Pod prints as YAML, JSON, patch or review, all from one answer", "[dryrun][cli]") {
  std::string pod_file = fixture("pods/v6e-16-multihost-worker-indexed.json");
  json pod = testing::read_json(pod_file);
  Run patch = run({"-o", "patch", pod_file});
  REQUIRE(patch.code == 0);
  json p = json::parse(patch.out);
  REQUIRE(p.is_array());
  REQUIRE_FALSE(p.empty());
  testing::record_patch("cli-indexed-pod", pod, p);
  json mutated = pod.patch(p);

  Run as_json = run({"-o", "json", pod_file});
  CHECK(json::parse(as_json.out) == mutated);
  Run as_yaml = run({pod_file});
  auto docs = dryrun::parse_documents(as_yaml.out);
  REQUIRE(docs);
  CHECK(docs->front() == mutated);
  Run review = run({"-o", "review", pod_file});
  json response = json::parse(review.out)["response"];
  CHECK(response["allowed"] == true);
  CHECK(response["patchType"] == "JSONPatch");
  CHECK(json::parse(*webhook::base64_decode(response["patch"].get<std::string>())) == p);
  // Re-admitting the printed Pod changes nothing (M6): the patch is [].
  TempFile again(as_json.out, ".json");
  Run twice = run({"-o", "patch", again.path()});
  CHECK(twice.code == 0);
  CHECK(json::parse(twice.out) == json::array());
}

TEST_CASE("stdin, multi-document YAML and Lists are read item by item", "[dryrun][cli]") {
  std::string pod = testing::read_text(fixture("pods/v6e-2x4-singlehost-worker.json"));
  std::string multi = "---\n" + pod + "\n---\n" + pod + "\n";
  Run r = run({"-o", "patch", "-"}, multi);
  CHECK(r.code == 0);
  CHECK(line_count(r.out) > 10);
  json list = {{"apiVersion", "v1"},
               {"kind", "List"},
               {"items", json::array({json::parse(pod), json::parse(pod)})}};
  Run l = run({"-o", "table", "-"}, list.dump());
  CHECK(l.code == 0);
  CHECK(line_count(l.out) == 3);  // one table: one header, a row per Pod
}

TEST_CASE("an AdmissionReview prints its response; unreadable ones exit 2", "[dryrun][cli]") {
  Run ok = run({fixture("admission/v6e-16-indexed-host3.json")});
  CHECK(ok.code == 0);
  CHECK(json::parse(ok.out)["response"]["uid"] == "uid-v6e-16-indexed-host3");
  Run denied = run({fixture("admission/deny-topology-trailing-x.json")});
  CHECK(denied.code == 1);
  CHECK(json::parse(denied.out)["response"]["status"]["code"] == 400);
  json no_request = {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}};
  TempFile f(no_request.dump(), ".json");
  Run bad = run({f.path()});
  CHECK(bad.code == 2);
  CHECK(line_count(bad.err) == 1);
  CHECK_THAT(bad.err, Catch::Contains(f.path()) && Catch::Contains("no request"));
  json v1beta1 = testing::read_json(fixture("admission/v6e-16-indexed-host3.json"));
  v1beta1["apiVersion"] = "admission.k8s.io/v1beta1";
  TempFile g(v1beta1.dump(), ".json");
  Run old = run({g.path()});
  CHECK(old.code == 1);  // the uid is readable: answered as the server would, denied
  CHECK(json::parse(old.out)["response"]["uid"] == "uid-v6e-16-indexed-host3");
}

TEST_CASE("a denied RayCluster prints why and exits 1", "[dryrun][cli]") {
  Run r = run({fixture("rayclusters/invalid/num-of-hosts-mismatch.yaml")});
  CHECK(r.code == 1);
  CHECK_THAT(r.out,
             Catch::Contains("Number of workers in worker group not equal to specified topology"));
  Run review = run({"-o", "review", fixture("rayclusters/invalid/num-of-hosts-mismatch.yaml")});
  CHECK(review.code == 1);
  CHECK(json::parse(review.out)["response"]["allowed"] == false);
  Run as_json = run({"-o", "json", fixture("rayclusters/invalid/num-of-hosts-mismatch.yaml")});
  CHECK(as_json.code == 1);
  CHECK(as_json.out.empty());
  CHECK(line_count(as_json.err) == 1);
}

TEST_CASE("existing Pods (--existing) feed legacy placement, before or after the inputs (M3.3)",
          "[dryrun][cli]") {
  std::string cluster = fixture("admission/legacy-gap.cluster.yaml");
  std::string pod = fixture("pods/v6e-16-multihost-worker-no-indexing.json");
  for (const auto& args : {std::vector<std::string>{"--existing", cluster, "-o", "json", pod},
                           std::vector<std::string>{"-o", "json", pod, "--existing=" + cluster}}) {
    Run r = run(args);
    REQUIRE(r.code == 0);
    json mutated = json::parse(r.out);
    CHECK(testing::env_of(mutated, "TPU_WORKER_ID") == "2");
    CHECK(mutated["spec"]["hostname"] == "tpu-group-0-2");
    CHECK_THAT(r.err, Catch::Contains("Warning: placed as replica 0 host 2"));
  }
  // A RayCluster without indexing: KubeRay creates only the missing Pod, which takes the gap.
  json existing = dryrun::parse_documents(testing::read_text(cluster))->front();
  for (json& p : existing["items"]) {
    p["metadata"]["labels"]["ray.io/cluster"] = "ray-torchtpu-cluster";
    p["metadata"]["labels"]["ray.io/group"] = "v6e-16";
    p["metadata"]["labels"]["replicaIndex"] =
        "v6e-16-" + p["metadata"]["labels"]["replicaIndex"].get<std::string>().substr(10);
  }
  TempFile f(existing.dump(), ".json");
  Run rc = run({"--kuberay-indexing=off", "--existing", f.path(), "-o", "json",
                fixture("gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml")});
  REQUIRE(rc.code == 0);
  json list = json::parse(rc.out);
  REQUIRE(list["items"].size() == 1);
  CHECK(testing::env_of(list["items"][0], "TPU_WORKER_ID") == "2");
}

TEST_CASE("namespace-less --existing Pods are in -n's namespace, as the inputs are (M3.3)",
          "[dryrun][cli]") {
  json existing =
      dryrun::parse_documents(testing::read_text(fixture("admission/legacy-gap.cluster.yaml")))
          ->front();
  for (json& p : existing["items"]) {
    p["metadata"].erase("namespace");
  }
  TempFile f(existing.dump(), ".json");
  json pod =
      json::parse(testing::read_text(fixture("pods/v6e-16-multihost-worker-no-indexing.json")));
  pod["metadata"].erase("namespace");
  TempFile input(pod.dump(), ".json");
  // Both in "team": the existing Pods hold hosts 0, 1 and 3, so the new Pod takes the gap.
  Run same = run({"-n", "team", "--existing", f.path(), "-o", "json", input.path()});
  REQUIRE(same.code == 0);
  CHECK(testing::env_of(json::parse(same.out), "TPU_WORKER_ID") == "2");
  // An input in another namespace is another worker group: host 0.
  pod["metadata"]["namespace"] = "other";
  TempFile elsewhere(pod.dump(), ".json");
  Run other = run({"-n", "team", "--existing", f.path(), "-o", "json", elsewhere.path()});
  REQUIRE(other.code == 0);
  CHECK(testing::env_of(json::parse(other.out), "TPU_WORKER_ID") == "0");
}

TEST_CASE("explain (--explain) writes the derivation to stderr", "[dryrun][cli]") {
  Run r = run({"--explain", "-o", "patch", fixture("pods/v6e-16-multihost-worker-indexed.json")});
  CHECK(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("#   hosts: max(16 / 4, 1) = 4 (multi-host)"));
  CHECK(json::parse(r.out).is_array());
}

TEST_CASE("flags shared with the server change the answer", "[dryrun][cli]") {
  Run r = run({"-o", "json", "--tpu-process-port-base=9000", "--device-plugin-port", "3000",
               "--kuberay-version=v1.3.0", fixture("pods/v6e-16-multihost-worker-indexed.json")});
  REQUIRE(r.code == 0);
  json pod = json::parse(r.out);
  CHECK_THAT(
      testing::env_of(pod, "TORCH_TPU_SLICEBUILDER_ADDRESSES"),
      Catch::StartsWith("tpu-group-0-0.raycluster-tpu-v6e-multihost-headless-worker-svc:9000,"));
  CHECK(testing::env_of(pod, "TPU_DEVICE_PLUGIN_ADDR") == "$(TPU_DEVICE_PLUGIN_HOST_IP):3000");
}

TEST_CASE("help and version flags", "[dryrun][cli]") {
  Run help = run({"--help"});
  CHECK(help.code == 0);
  CHECK_THAT(help.out, Catch::Contains("Usage: webhook-dryrun") && Catch::Contains("Example:") &&
                           Catch::Contains("--existing") && Catch::Contains("--explain"));
  Run version = run({"--version"});
  CHECK(version.code == 0);
  CHECK_THAT(version.out, Catch::StartsWith("webhook-dryrun "));
}

TEST_CASE("every flag the CLI reads is in --help and docs/dryrun.md, and no other",
          "[dryrun][cli][flags]") {
  std::vector<std::string> spellings = dryrun::flag_spellings();
  std::set<std::string> table(spellings.begin(), spellings.end());
  CHECK(table.size() == spellings.size());  // no flag is in the table twice
  CHECK(table.count("-o") == 1);
  CHECK(table.count("--existing") == 1);
  Run help = run({"--help"});
  CHECK(testing::help_flags(help.out) == table);
  CHECK(testing::documented_flags(FIXTURE_DIR "/../../docs/dryrun.md") == table);
  CHECK_THAT(help.out,
             Catch::Contains("\nFlags:\n  -o, --output FORMAT        yaml, json, patch, review or "
                             "table") &&
                 Catch::Contains("  --kuberay-version VERSION  KubeRay operator version (default "
                                 "1.6)") &&
                 Catch::Contains("  --device-plugin-port N     TPU device plugin port in "
                                 "TPU_DEVICE_PLUGIN_ADDR (default 2112)\n"));
}

TEST_CASE("flags are read in Go's forms, as the server reads them", "[dryrun][cli][flags]") {
  std::string pod = fixture("pods/v6e-16-multihost-worker-indexed.json");
  Run reference = run({"-o", "json", pod});
  REQUIRE(reference.code == 0);
  auto args =
      GENERATE_COPY(as<std::vector<std::string>>{}, std::vector<std::string>{"-o=json", pod},
                    std::vector<std::string>{"--output", "json", pod},
                    std::vector<std::string>{"-output=json", pod},
                    std::vector<std::string>{pod, "--", "-o", "json"},
                    std::vector<std::string>{"-o", "json", "--", pod});
  CAPTURE(args);
  Run r = run(args);
  if (args[1] == "--") {  // after "--" every argument is a file
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("webhook-dryrun: -o: cannot open the file"));
  } else {
    CHECK(r.code == 0);
    CHECK(r.out == reference.out);
  }
}

TEST_CASE("the flags shared with the server word their errors as it does", "[dryrun][cli][flags]") {
  // The same lines test/unit/server/flags_test.cpp expects from server::parse_flags.
  std::string rc = fixture("gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml");
  auto [args, line] = GENERATE_COPY(table<std::vector<std::string>, std::string>({
      {{"--tpu-process-port-base=70000", rc},
       "--tpu-process-port-base=70000: expected a port number from 1 to 65535"},
      {{"--device-plugin-port", "0", rc},
       "--device-plugin-port 0: expected a port number from 1 to 65535"},
      {{"--kuberay-version=latest", rc},
       "--kuberay-version=latest: KubeRay version \"latest\" is invalid; expected MAJOR.MINOR "
       "such as 1.6 or v1.5.0"},
      {{rc, "--megascale-port-base"}, "flag --megascale-port-base needs a value (see --help)"},
      {{"--bogus=1", rc}, "unknown flag --bogus (see --help)"},
  }));
  CAPTURE(args);
  Run r = run(args);
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "webhook-dryrun: " + line + "\n");
}

TEST_CASE("bad usage and unreadable input: exit 2, one line on stderr naming the file",
          "[dryrun][cli][bounds]") {
  TempFile empty("");
  TempFile truncated("{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {", ".json");
  TempFile broken("kind: Pod\nmetadata:\n  labels: [a\n");
  TempFile binary(std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16), ".png");
  TempFile deep(std::string(200'000, '[') + std::string(200'000, ']'), ".json");
  TempFile deep_yaml("a: " + std::string(200'000, '['));
  TempFile wrong_kind("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n");
  TempFile scalar("just a string\n");
  TempFile no_kind("metadata: {name: x}\n");
  TempFile bad_list("apiVersion: v1\nkind: List\nitems: [1, 2]\n");
  TempFile rc(testing::read_text(fixture("gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml")));
  TempFile existing_wrong("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n");
  std::string missing = (fs::temp_directory_path() / "webhook-dryrun-no-such-file.yaml").string();
  std::string rc_text = testing::read_text(fixture("rayclusters/valid/subslice-2x4-of-4x4.yaml"));
  TempFile nameless(
      std::string(rc_text).replace(rc_text.find("name: ray-torchtpu-cluster"), 4, "nam"));
  TempFile groupless(
      std::string(rc_text).replace(rc_text.find("groupName: v6e-16"), 17, "groupName: ''"));
  auto [name, args, message] =
      GENERATE_COPY(table<std::string, std::vector<std::string>, std::string>({
          {"empty file", {empty.path()}, "empty input"},
          {"truncated JSON", {truncated.path()}, "not valid JSON"},
          {"broken YAML", {broken.path()}, "not valid YAML"},
          {"binary", {binary.path()}, "binary data"},
          {"200k-deep JSON nesting", {deep.path()}, "deeper than"},
          {"200k-deep YAML nesting", {deep_yaml.path()}, "deeper than"},
          {"wrong kind", {wrong_kind.path()}, "kind Deployment is not supported"},
          {"scalar document", {scalar.path()}, "is not a Kubernetes object"},
          {"no kind", {no_kind.path()}, "has no kind"},
          {"List of scalars", {bad_list.path()}, "item 1"},
          {"missing file", {missing}, "cannot open"},
          {"no input", {}, "no input file"},
          {"unknown flag", {"--frobnicate", rc.path()}, "unknown flag --frobnicate"},
          {"bad output", {"-o", "xml", rc.path()}, "-o xml"},
          {"flag without value", {rc.path(), "--existing"}, "--existing needs a value"},
          {"bad indexing", {"--kuberay-indexing=maybe", rc.path()}, "on or off"},
          {"bad port", {"--tpu-process-port-base=70000", rc.path()}, "port number"},
          {"bad version", {"--kuberay-version=latest", rc.path()}, "MAJOR.MINOR"},
          {"patch of a RayCluster", {"-o", "patch", rc.path()}, "-o patch applies to Pods"},
          {"existing of wrong kind",
           {"--existing", existing_wrong.path(), rc.path()},
           "kind ConfigMap"},
          {"existing missing", {"--existing", missing, rc.path()}, "cannot open"},
          {"RayCluster without a name (found by fuzzing)", {nameless.path()}, "no metadata.name"},
          {"worker group without a name", {groupless.path()}, "has no groupName"},
          {"a good input before a bad one", {rc.path(), wrong_kind.path()}, "kind Deployment"},
      }));
  CAPTURE(name);
  Run r = run(args);
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(line_count(r.err) == 1);
  CHECK_THAT(r.err, Catch::StartsWith("webhook-dryrun: ") && Catch::Contains(message));
}

TEST_CASE(
    "legacy placement in one run: a dry run reserves nothing, a placement is seen by the "
    "next input (M3.3)",
    "[dryrun][cli]") {
  std::string dry = fixture("admission/legacy-dry-run.json");  // dryRun: true, label-less
  std::string pod = fixture("pods/v6e-16-multihost-worker-no-indexing.json");  // same group
  Run r = run({"-o", "json", dry, pod, dry, pod});
  REQUIRE(r.code == 0);
  std::vector<std::string> placed;
  for (std::size_t at = r.err.find("placed as replica "); at != std::string::npos;
       at = r.err.find("placed as replica ", at + 1)) {
    placed.push_back(r.err.substr(at, r.err.find(" from the group", at) - at));
  }
  CHECK(placed == std::vector<std::string>{
                      "placed as replica 0 host 0", "placed as replica 0 host 0",  // dry, then real
                      "placed as replica 0 host 1", "placed as replica 0 host 1"});
}

namespace {

json pod_fixture(const std::string& rel) { return testing::read_json(fixture(rel)); }

std::string as_list(const std::vector<json>& items) {
  return webhook::dump_json(json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", items}});
}

}  // namespace

TEST_CASE("V1: a RayJob expands into the RayCluster KubeRay generates, its Service and hostnames",
          "[dryrun][cli][rayjob]") {
  Run r = run({fixture("rayjobs/valid/ray-job.tpu-v6e-16-multihost.yaml")});
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  CHECK_THAT(r.out, Catch::StartsWith(
                        "RayJob default/v6e-16-job: admitted; KubeRay creates RayCluster "
                        "v6e-16-job-xxxxx (\"xxxxx\" stands for the 5 random characters KubeRay "
                        "picks); peers resolve through headless Service v6e-16-job-xxxxx-headless; "
                        "4 worker Pod(s)\n"));
  CHECK_THAT(r.out, Catch::Contains("tpu-group-0-3.v6e-16-job-xxxxx-headless"));
  CHECK(line_count(r.out) == 6);  // the line, one header, four Pods

  Run pods = run({"-o", "json", fixture("rayjobs/valid/ray-job.tpu-v6e-16-multihost.yaml")});
  REQUIRE(pods.code == 0);
  json list = json::parse(pods.out);
  REQUIRE(list["items"].size() == 4);
  const json& md = list["items"][3]["metadata"];
  CHECK(md["labels"]["ray.io/cluster"] == "v6e-16-job-xxxxx");
  CHECK(md["generateName"] == "v6e-16-job-xxxxx-tpu-group-worker-");
  CHECK(list["items"][3]["spec"]["subdomain"] == "v6e-16-job-xxxxx-headless");

  Run selected = run({fixture("rayjobs/valid/cluster-selector.yaml")});
  CHECK(selected.code == 0);
  CHECK(selected.out ==
        "RayJob default/on-shared-cluster: admitted; it runs on the existing RayCluster "
        "\"shared-tpu\" (spec.clusterSelector), so KubeRay creates no Pods for it\n");

  Run bad = run({fixture("rayjobs/invalid/num-of-hosts-mismatch.yaml")});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.out, Catch::Contains(": denied: Number of workers in worker group not equal to "
                                      "specified topology: RayJob default/v6e-16-job-bad: "));
  Run patch = run({"-o", "patch", fixture("rayjobs/valid/ray-job.tpu-jax.yaml")});
  CHECK(patch.code == 2);
  CHECK(line_count(patch.err) == 1);
  CHECK_THAT(patch.err, Catch::Contains("-o patch applies to Pods; for a RayJob use table"));
}

TEST_CASE("V1: a RayService's worker Pods are its generated RayCluster's, marked for serving",
          "[dryrun][cli][rayservice]") {
  Run r = run({"-o", "json", fixture("rayservices/valid/ray-service.tpu-v6e-16-multihost.yaml")});
  REQUIRE(r.code == 0);
  json list = json::parse(r.out);
  REQUIRE(list["items"].size() == 4);
  for (const json& pod : list["items"]) {
    CHECK(pod["metadata"]["labels"]["ray.io/serve"] == "true");
    CHECK(pod["metadata"]["labels"]["ray.io/cluster"] == "v6e-16-serve-xxxxx");
  }
  CHECK(testing::env_of(list["items"][2], "TPU_WORKER_ID") == "2");
}

TEST_CASE("V5: a warning validation and every worker Pod share is printed once",
          "[dryrun][cli][warnings]") {
  Run r = run({fixture("rayclusters/valid/accelerator-typo.yaml")});
  CHECK(r.code == 0);
  CHECK(r.err ==
        "Warning: RayCluster default/raycluster-tpu-v6e-multihost: worker group \"tpu-group\": "
        "accelerator \"tpu-v6e-slcie\" is not a known GKE TPU accelerator (did you mean "
        "\"tpu-v6e-slice\"? known: tpu-v4-podslice, tpu-v5p-slice, tpu-v5-lite-podslice, "
        "tpu-v5-lite-device, tpu-v6e-slice, tpu7x); treated as a TPU with 1 device(s) per chip. "
        "Check nodeSelector cloud.google.com/gke-tpu-accelerator\n");
}

TEST_CASE("dry run = server: --legacy-indexing=off denies label-less Pods as that server does",
          "[dryrun][cli][flags]") {
  std::string rc = fixture("rayclusters/valid/ray-cluster.tpu-v6e-16-multihost.yaml");
  Run legacy = run({"--kuberay-indexing=off", rc});
  CHECK(legacy.code == 0);  // auto: legacy placement, as a server with API access
  Run off = run({"--kuberay-indexing=off", "--legacy-indexing=off", rc});
  CHECK(off.code == 1);
  CHECK_THAT(off.out, Catch::Contains(
                          "worker Pod #1 of group tpu-group denied: Pod "
                          "\"raycluster-tpu-v6e-multihost-tpu-group-worker-\" in namespace "
                          "\"default\": the Pod has no KubeRay index labels "
                          "(ray.io/worker-group-replica-index, ray.io/replica-host-index) and this "
                          "webhook runs without legacy placement"));
  // Indexed Pods need no legacy placement.
  CHECK(run({"--legacy-indexing=off", rc}).code == 0);
  Run pod = run({"--legacy-indexing=off", "-o", "review",
                 fixture("pods/v6e-16-multihost-worker-no-indexing.json")});
  CHECK(pod.code == 1);
  CHECK(json::parse(pod.out)["response"]["status"]["code"] == 400);

  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--legacy-indexing=maybe", rc},
        {"--legacy-indexing=off", "--existing", rc, rc},
        {"--excluded-namespace=", rc}}) {
    Run bad = run(args);
    CAPTURE(args);
    CHECK(bad.code == 2);
    CHECK(line_count(bad.err) == 1);
    CHECK(bad.out.empty());
  }
  CHECK_THAT(run({"--legacy-indexing=off", "--existing", rc, rc}).err,
             Catch::Contains("--existing describes what the webhook reads through the Kubernetes "
                             "API, which a webhook with --legacy-indexing=off goes without"));
}

TEST_CASE("dry run = server: what the webhook configurations never send is reported, exit 3",
          "[dryrun][cli][selectors]") {
  // A worker template overriding app.kubernetes.io/name: KubeRay keeps it, the objectSelector
  // then never matches.
  Run hidden = run({fixture("rayclusters/valid/app-name-label-override.yaml")});
  CHECK(hidden.code == 3);
  CHECK_THAT(hidden.out, Catch::Contains("4 worker Pod(s), 4 of them not sent to the webhook"));
  CHECK_THAT(hidden.out,  // with the table, as denials are
             Catch::Contains("worker Pod #4 of group tpu-group is not sent to the webhook: the "
                             "MutatingWebhookConfiguration's objectSelector needs the label "
                             "app.kubernetes.io/name=kuberay and the Pod has "
                             "app.kubernetes.io/name=\"trainer\"; kube-apiserver creates it "
                             "unchanged"));

  json pod = pod_fixture("pods/v6e-16-multihost-worker-indexed.json");
  json head = pod;
  head["metadata"]["labels"]["ray.io/node-type"] = "head";
  TempFile head_file(webhook::dump_json(head), ".json");
  Run h = run({head_file.path()});
  CHECK(h.code == 3);
  CHECK(h.out.empty());
  CHECK_THAT(h.err, Catch::Contains("needs the label ray.io/node-type=worker and the Pod has "
                                    "ray.io/node-type=\"head\""));

  json system = pod;
  system["metadata"]["namespace"] = "kube-system";
  TempFile system_file(webhook::dump_json(system), ".json");
  CHECK_THAT(run({system_file.path()}).err,
             Catch::Contains("namespace \"kube-system\" is left out by the webhook "
                             "configurations' namespaceSelector"));
  std::string pod_file = fixture("pods/v6e-16-multihost-worker-indexed.json");
  CHECK(run({"--excluded-namespace", "default", pod_file}).code == 3);
  CHECK(run({"--excluded-namespace", "other", pod_file}).code == 0);
  CHECK(run({"-n", "team", "--excluded-namespace", "team",
             fixture("rayjobs/valid/ray-job.tpu-jax.yaml")})
            .code == 3);
  // A denial outranks "not sent" in the exit status.
  CHECK(run({head_file.path(), fixture("rayclusters/invalid/num-of-hosts-mismatch.yaml")}).code ==
        1);
  // An AdmissionReview was sent: it is answered.
  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request",
                  {{"uid", "u-1"},
                   {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                   {"operation", "CREATE"},
                   {"namespace", "kube-system"},
                   {"object", system}}}};
  TempFile review_file(webhook::dump_json(review), ".json");
  CHECK(run({review_file.path()}).code == 0);
}

TEST_CASE("output: Pod dumps make one table naming each Pod; patches are labelled per Pod",
          "[dryrun][cli][output]") {
  json a = pod_fixture("pods/v6e-16-multihost-worker-indexed.json");
  a["metadata"]["name"] = "raycluster-tpu-v6e-multihost-tpu-group-worker-abcde";
  json b = a;
  b["metadata"]["name"] = "raycluster-tpu-v6e-multihost-tpu-group-worker-fghij";
  b["metadata"]["labels"]["ray.io/replica-host-index"] = "2";
  TempFile pods(as_list({a, b}), ".json");

  Run table = run({"-o", "table", pods.path()});
  REQUIRE(table.code == 0);
  CHECK(line_count(table.out) == 3);  // one header, two Pods
  CHECK_THAT(table.out, Catch::StartsWith("#  POD "));
  CHECK_THAT(table.out,
             Catch::Contains("\n1  raycluster-tpu-v6e-multihost-tpu-group-worker-abcde "));
  CHECK_THAT(table.out,
             Catch::Contains("\n2  raycluster-tpu-v6e-multihost-tpu-group-worker-fghij "));
  CHECK(table.out.find("MEGASCALE") == std::string::npos);

  Run patches = run({"-o", "patch", pods.path()});
  REQUIRE(patches.code == 0);
  json all = json::parse(patches.out);
  REQUIRE(all.is_array());
  REQUIRE(all.size() == 2);
  CHECK(all[0]["pod"] == "default/raycluster-tpu-v6e-multihost-tpu-group-worker-abcde");
  CHECK(all[1]["pod"] == "default/raycluster-tpu-v6e-multihost-tpu-group-worker-fghij");
  CHECK(all[1]["patch"].is_array());
  CHECK(all[1]["patch"].dump().find("\"tpu-group-0-2\"") != std::string::npos);
  testing::record_patch("cli-labelled-patch-fghij", b, all[1]["patch"]);
  // One Pod: the bare patch, for kubectl patch.
  Run one = run({"-o", "patch", fixture("pods/v6e-16-multihost-worker-indexed.json")});
  CHECK(json::parse(one.out).is_array());
  CHECK(json::parse(one.out)[0].contains("op"));

  // A multi-slice group gets the MEGASCALE column: slice id / slice count.
  Run ms = run({fixture("rayclusters/valid/multislice-v6e-2x4x4.yaml")});
  REQUIRE(ms.code == 0);
  CHECK_THAT(ms.out, Catch::Contains("MEGASCALE"));
  CHECK_THAT(ms.out, Catch::Contains("  1/2\n"));
}

TEST_CASE("V1: KubeRay's TPU RayJob samples are validated and expanded",
          "[dryrun][cli][rayjob][samples]") {
  // file, RayJob name, worker Pods (replicas x numOfHosts), the last worker's TPU_WORKER_ID and
  // hostname ("-" when single-host: no hostname).
  auto [file, name, pods, last_id, last_host] =
      GENERATE(table<std::string, std::string, int, std::string, std::string>({
          {"ray-job.tpu-jax.yaml", "rayjob-tpu-jax", 1, "0", ""},
          {"ray-job.tpu-v6e-singlehost.yaml", "v6e-4-job", 1, "0", ""},
          {"ray-job.tpu-v6e-16-multihost.yaml", "v6e-16-job", 4, "3", "tpu-group-0-3"},
          {"ray-job.tpu-v6e-256-multihost.yaml", "v6e-256-job", 64, "63", "tpu-group-0-63"},
      }));
  CAPTURE(file);
  Run r = run({"-o", "json", fixture("rayjobs/valid/" + file)});
  REQUIRE(r.code == 0);
  json list = json::parse(r.out);
  REQUIRE(list["items"].size() == static_cast<std::size_t>(pods));
  const json& last = list["items"].back();
  CHECK(last["metadata"]["labels"]["ray.io/cluster"] == name + "-xxxxx");
  CHECK(last["metadata"]["labels"]["ray.io/node-type"] == "worker");
  CHECK(testing::env_of(last, "TPU_WORKER_ID") == last_id);
  if (last_host.empty()) {
    CHECK_FALSE(last["spec"].contains("hostname"));
  } else {
    CHECK(last["spec"]["hostname"] == last_host);
    CHECK(last["spec"]["subdomain"] == name + "-xxxxx-headless");
  }
  CHECK_THAT(run({fixture("rayjobs/valid/" + file)}).out,
             Catch::StartsWith("RayJob default/" + name +
                               ": admitted; KubeRay creates RayCluster " + name + "-xxxxx "));
}

namespace {

// A RayCluster of one tpu7x 16x16x36 group: 9,216 chips, 2,304 hosts of 4 chips.
const char* kLargestTpu7x = R"(apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: ironwood
  namespace: ml
spec:
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.41.0
  workerGroupSpecs:
  - groupName: tpu7x
    replicas: 1
    numOfHosts: 2304
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.41.0
          resources:
            limits:
              google.com/tpu: "4"
            requests:
              google.com/tpu: "4"
        nodeSelector:
          cloud.google.com/gke-tpu-accelerator: tpu7x
          cloud.google.com/gke-tpu-topology: 16x16x36
)";

}  // namespace

TEST_CASE("M3.3/M8: legacy placement of a 2,304-host tpu7x cluster gives ids 0..2303 once each",
          "[dryrun][cli][large]") {
  TempFile file(kLargestTpu7x);
  Run r = run({"--kuberay-indexing=off", file.path()});
  REQUIRE(r.code == 0);
  // The validation warning and the Pods' one: the list left out (spec M8.2, V5.1).
  CHECK_THAT(r.err, Catch::Contains("TORCH_TPU_SLICEBUILDER_ADDRESSES left out"));
  CHECK_THAT(r.err, Catch::Contains("TORCH_TPU_SLICEBUILDER_ADDRESSES would be"));
  std::istringstream lines(r.out);
  std::string line;
  std::getline(lines, line);  // the cluster's line
  std::getline(lines, line);  // the header
  std::vector<int> ids;
  while (std::getline(lines, line)) {
    std::istringstream cells(line);
    std::string ordinal, pod, group, replica, host, id, hostname, tpu_name, topology, peer;
    cells >> ordinal >> pod >> group >> replica >> host >> id >> hostname >> tpu_name >> topology >>
        peer;
    CHECK(replica == "0");
    CHECK(host == id);
    CHECK(hostname == "tpu7x-0-" + id + ".ironwood-headless");
    // Left out, the first address is the one TorchTPU derives.
    CHECK(line.ends_with("tpu7x-0-0.ironwood-headless:8471 (derived)"));
    ids.push_back(std::stoi(id));
  }
  REQUIRE(ids.size() == 2304);
  std::set<int> distinct(ids.begin(), ids.end());
  CHECK(distinct.size() == 2304);
  CHECK(*distinct.begin() == 0);
  CHECK(*distinct.rbegin() == 2303);
}
