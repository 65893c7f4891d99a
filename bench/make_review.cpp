// make-review: prints the AdmissionReview kube-apiserver would send the webhook, as one line of
// JSON, for the benchmark, the integration tests and scripts/run-dev.sh.
//
//   make-review --worker 3 examples/gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml
//       the 4th worker Pod KubeRay creates for the RayCluster (unmutated), for POST /mutate; of a
//       RayJob or RayService, of the RayCluster KubeRay generates for it
//   make-review --validate examples/gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml
//       the RayCluster (RayJob, RayService) itself, for POST /validate
//   make-review pod.json          a Pod file as it is
//
// Flags: --uid UID (default "make-review-<n>"), --kuberay-indexing=on|off (KubeRay's index labels
// on the expanded Pods, default on), --namespace NS (default "default"), --dry-run.
// Exit 0, or 2 with one line on stderr.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "admission/review.h"
#include "base/text/numbers.h"
#include "dryrun/documents.h"
#include "dryrun/expand.h"
#include "podpatch/validate.h"

namespace {

using json = nlohmann::json;

struct Options {
  std::string file;
  int worker = 0;
  bool validate = false;
  bool indexing = true;
  bool dry_run = false;
  std::string uid;
  std::string ns = "default";
};

int fail(const std::string& line) {
  std::cerr << "make-review: " << line << "\n";
  return 2;
}

json review(const Options& o, const json& object, const json& kind, const json& resource,
            const std::string& name) {
  std::string ns = o.ns;
  if (object.contains("metadata") && object["metadata"].contains("namespace")) {
    ns = object["metadata"]["namespace"].get<std::string>();
  }
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", o.uid.empty() ? "make-review-" + std::to_string(o.worker) : o.uid},
            {"kind", kind},
            {"resource", resource},
            {"requestKind", kind},
            {"requestResource", resource},
            {"name", name},
            {"namespace", ns},
            {"operation", "CREATE"},
            {"userInfo", {{"username", "system:serviceaccount:ray-system:kuberay-operator"}}},
            {"object", object},
            {"oldObject", nullptr},
            {"dryRun", o.dry_run},
            {"options", {{"apiVersion", "meta.k8s.io/v1"}, {"kind", "CreateOptions"}}}}}};
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto next = [&]() -> std::string { return i + 1 < args.size() ? args[++i] : ""; };
    if (a == "--worker") {
      auto n = webhook::parse_non_negative(next(), 100000);
      if (!n) {
        return fail("--worker needs a Pod number (0 is the first worker Pod)");
      }
      o.worker = static_cast<int>(*n);
    } else if (a == "--validate") {
      o.validate = true;
    } else if (a == "--kuberay-indexing=on" || a == "--kuberay-indexing=off") {
      o.indexing = a.ends_with("on");
    } else if (a == "--dry-run") {
      o.dry_run = true;
    } else if (a == "--uid") {
      o.uid = next();
    } else if (a == "--namespace") {
      o.ns = next();
    } else if (a.starts_with("-")) {
      return fail("unknown flag " + a);
    } else {
      o.file = a;
    }
  }
  if (o.file.empty()) {
    return fail("usage: make-review [--worker N | --validate] [--uid UID] FILE");
  }
  std::ifstream f(o.file, std::ios::binary);
  if (!f) {
    return fail(o.file + ": cannot open the file");
  }
  std::ostringstream text;
  text << f.rdbuf();
  webhook::Result<std::vector<json>> docs = dryrun::parse_documents(text.str());
  if (!docs || docs->empty()) {
    return fail(o.file + ": " + (docs ? "no document" : docs.error().message));
  }
  const json& object = docs->front();
  std::string kind = object.value("kind", "");
  json pod_kind = {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}};
  json pod_resource = {{"group", ""}, {"version", "v1"}, {"resource", "pods"}};
  if (kind == "Pod") {
    std::cout << webhook::dump_json(review(o, object, pod_kind, pod_resource, "")) << "\n";
    return 0;
  }
  const podpatch::RayKind* ray_kind = podpatch::find_ray_kind(kind);
  if (ray_kind == nullptr) {
    return fail(o.file + ": expected a Pod, RayCluster, RayJob or RayService, got kind " + kind);
  }
  if (o.validate) {
    json rc_kind = {{"group", "ray.io"}, {"version", "v1"}, {"kind", ray_kind->kind}};
    json rc_resource = {{"group", "ray.io"}, {"version", "v1"}, {"resource", ray_kind->resource}};
    std::string name = object["metadata"].value("name", "");
    std::cout << webhook::dump_json(review(o, object, rc_kind, rc_resource, name)) << "\n";
    return 0;
  }
  webhook::Result<podpatch::RayObject> ray = podpatch::read_ray_object(object, kind, o.ns);
  if (!ray) {
    return fail(o.file + ": " + ray.error().message);
  }
  json cluster = podpatch::generated_raycluster(*ray);
  dryrun::ExpandOptions eo;
  eo.indexing = o.indexing;
  eo.default_namespace = o.ns;
  webhook::Result<std::vector<dryrun::WorkerPod>> pods = dryrun::expand_workers(cluster, eo);
  if (!pods) {
    return fail(o.file + ": " + pods.error().message);
  }
  if (static_cast<std::size_t>(o.worker) >= pods->size()) {
    return fail(o.file + ": --worker " + std::to_string(o.worker) + " but the RayCluster has " +
                std::to_string(pods->size()) + " worker Pod(s)");
  }
  const json& pod = (*pods)[static_cast<std::size_t>(o.worker)].pod;
  std::cout << webhook::dump_json(review(o, pod, pod_kind, pod_resource, "")) << "\n";
  return 0;
}
