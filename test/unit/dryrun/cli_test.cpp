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
  CHECK_THAT(r.out, Catch::StartsWith(
                        "RayCluster default/ray-torchtpu-cluster: admitted; 4 worker Pod(s)"));
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
  CHECK(line_count(l.out) == 4);  // a table per Pod: header + row, twice
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
