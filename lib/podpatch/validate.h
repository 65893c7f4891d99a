#pragma once
// Validation of the RayClusters KubeRay starts (docs/spec.md V1-V5): a RayCluster itself, or the
// one KubeRay generates from a RayJob's spec.rayClusterSpec or a RayService's
// spec.rayClusterConfig. Each TPU worker group's numOfHosts must match its topology, a subsliced
// group must be placeable, and the names the webhook will write must be DNS labels; what probably
// will not start is warned about.
//
//   podpatch::ValidationSources sources{nodes, services, kuberay_version};
//   webhook::Result<podpatch::RayObject> o = podpatch::read_ray_object(object, "RayJob", ns);
//   podpatch::ClusterReport r = podpatch::validate_ray_object(*o, sources);
//   if (!r.status) deny(r.status.error());   // names the object and the first failing group (V4)

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/json/access.h"
#include "base/status/result.h"
#include "podpatch/sources.h"
#include "topology/addresses.h"
#include "topology/names.h"

namespace podpatch {

// KubeRay names the RayCluster of a RayJob or RayService "<name>-" and 5 random characters; this
// placeholder (of the same length and alphabet) stands for them wherever the name is needed
// before KubeRay chose it.
inline constexpr std::string_view kGeneratedSuffix = "xxxxx";

// The ray.io kinds validated, and the field of each that holds the RayCluster spec.
struct RayKind {
  std::string_view kind;        // "RayCluster", "RayJob", "RayService"
  std::string_view resource;    // "rayclusters", ...
  std::string_view spec_field;  // "spec", "spec.rayClusterSpec", "spec.rayClusterConfig"
};
// nullptr for any other kind.
const RayKind* find_ray_kind(std::string_view kind);
std::span<const RayKind> ray_kinds();

// A ray.io object as far as validation and webhook-dryrun need it.
struct RayObject {
  const RayKind* kind = nullptr;
  std::string ns;
  std::string name;
  // The RayCluster KubeRay creates for it: the object's own name, or "<name>-xxxxx" for a RayJob
  // or RayService (generated_name).
  std::string cluster;
  bool generated_name = false;
  const json* metadata = nullptr;  // the object's; its labels and annotations are the cluster's
  const json* spec = nullptr;      // the RayCluster spec; null when KubeRay creates none
  // A RayJob with spec.clusterSelector runs on this existing RayCluster instead of creating one.
  std::string existing_cluster;

  // "RayJob default/my-job" (names cut to webhook::bounded); messages start with it.
  std::string display() const;
};

// Reads `object` as `kind` (find_ray_kind). The namespace is the object's, else `request_ns`.
// InvalidArgument for an unsupported kind, a missing name or a cluster spec that is not an object.
webhook::Result<RayObject> read_ray_object(const json& object, std::string_view kind,
                                           std::string_view request_ns);

// The RayCluster KubeRay creates from `o` (metadata with name, namespace, the object's labels and
// annotations plus KubeRay's ray.io/originated-from-* labels; the spec), for webhook-dryrun to
// expand. Null when o.spec is null.
json generated_raycluster(const RayObject& o);

struct ClusterReport {
  // The first failing worker group decides (V4); its Error carries the reason (reasons.h).
  webhook::Status status;
  std::string denied_group;           // its groupName
  std::vector<std::string> warnings;  // from every group checked, each once
};

// What validation reads beyond the object.
struct ValidationSources {
  NodeSource& nodes;
  ServiceSource& services;
  topology::KubeRayVersion kuberay;
  topology::Ports ports{};  // the lists' port bases, for their sizes (V5.1)
};

// The headless Service peers resolve through (docs/spec.md Terms "svc"): the live one labelled
// for the cluster when `services` knows it (`live` set), else the one KubeRay's version creates.
std::string headless_service(ServiceSource& services, std::string_view ns, std::string_view cluster,
                             topology::KubeRayVersion kuberay, bool* live = nullptr);

// The names a Pod that gets DNS (M4) is given must be DNS labels: the Service (its subdomain) and
// the hostnames <group>-<r>-<h> of a slice of `hosts` hosts, up to replica `last_replica` (the
// longest name is the last host's of the last replica). InvalidArgument with reason
// invalid_name, saying what to rename; the Pod path and validation (V5) share it.
webhook::Status check_dns_names(std::string_view service, std::string_view cluster,
                                std::string_view group, int hosts, int last_replica = 0);

// docs/spec.md V1-V5 for the cluster spec of `o`. An object that creates no RayCluster passes.
ClusterReport validate_ray_object(const RayObject& o, const ValidationSources& sources);

// validate_ray_object for a RayCluster, with no Services known and the default KubeRay version.
ClusterReport validate_raycluster(const json& cluster, NodeSource& nodes,
                                  std::string_view request_ns = "");

}  // namespace podpatch
