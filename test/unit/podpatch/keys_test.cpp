// lib/podpatch/keys.h: every name the webhook reads or writes, spelled as docs/spec.md, KubeRay and
// GKE spell them. A typo here would silently turn the webhook into a no-op, so each is pinned.
#include "podpatch/keys.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <string_view>

namespace keys = podpatch::keys;

TEST_CASE("keys: labels, annotations and resources (Terms, M3, M4)", "[podpatch][keys]") {
  auto [key, spelled] = GENERATE(table<std::string_view, std::string>({
      {keys::kTpuResource, "google.com/tpu"},
      {keys::kAcceleratorSelector, "cloud.google.com/gke-tpu-accelerator"},
      {keys::kTopologySelector, "cloud.google.com/gke-tpu-topology"},
      {keys::kSubsliceAnnotation, "cloud.google.com/gke-tpu-slice-topology"},
      {keys::kGkeNodePool, "cloud.google.com/gke-nodepool"},
      {keys::kGceTopologyBlock, "cloud.google.com/gce-topology-block"},
      {keys::kGceTopologySubblock, "cloud.google.com/gce-topology-subblock"},
      {keys::kGceTopologyHost, "cloud.google.com/gce-topology-host"},
      {keys::kGoogleTopologyPrefix, "cloud.google.com/"},
      {keys::kNamespaceNameLabel, "kubernetes.io/metadata.name"},
      {keys::kClusterLabel, "ray.io/cluster"},
      {keys::kGroupLabel, "ray.io/group"},
      {keys::kNodeTypeLabel, "ray.io/node-type"},
      {keys::kReplicaIndexLabel, "ray.io/worker-group-replica-index"},
      {keys::kHostIndexLabel, "ray.io/replica-host-index"},
      {keys::kReplicaNameLabel, "ray.io/worker-group-replica-name"},
      {keys::kHeadlessServiceLabel, "ray.io/headless-worker-svc"},
      {keys::kCreatedByLabel, "app.kubernetes.io/created-by"},
      {keys::kAppNameLabel, "app.kubernetes.io/name"},
      {keys::kLegacyReplicaLabel, "replicaIndex"},
      {keys::kKueueQueueLabel, "kueue.x-k8s.io/queue-name"},
      {keys::kKueueTopologyAnnotation, "kueue.x-k8s.io/podset-required-topology"},
      {keys::kSkipCheckAnnotation, "cloud.google.com/skip-tpu-webhook-check"},
  }));
  CHECK(key == spelled);
}

TEST_CASE("keys: the env vars of M5", "[podpatch][keys]") {
  auto [key, spelled] = GENERATE(table<std::string_view, std::string>({
      {keys::kMegascaleNumSlices, "MEGASCALE_NUM_SLICES"},
      {keys::kMegascaleSliceId, "MEGASCALE_SLICE_ID"},
      {keys::kMegascaleCoordinator, "MEGASCALE_COORDINATOR_ADDRESS"},
      {keys::kMegascalePort, "MEGASCALE_PORT"},
      {keys::kWorkerHostnames, "TPU_WORKER_HOSTNAMES"},
      {keys::kProcessAddresses, "TPU_PROCESS_ADDRESSES"},
      {keys::kProcessPort, "TPU_PROCESS_PORT"},
      {keys::kTorchTopology, "TORCH_TPU_TOPOLOGY"},
      {keys::kTorchSlicebuilder, "TORCH_TPU_SLICEBUILDER_ADDRESSES"},
      {keys::kWorkerId, "TPU_WORKER_ID"},
      {keys::kTpuName, "TPU_NAME"},
      {keys::kDevicePluginHostIp, "TPU_DEVICE_PLUGIN_HOST_IP"},
      {keys::kDevicePluginAddr, "TPU_DEVICE_PLUGIN_ADDR"},
  }));
  CHECK(key == spelled);
}

TEST_CASE("keys: the gce topology labels all share the Google prefix M4 checks",
          "[podpatch][keys]") {
  std::set<std::string_view> distinct;
  for (std::string_view k : {keys::kGkeNodePool, keys::kGceTopologyBlock,
                             keys::kGceTopologySubblock, keys::kGceTopologyHost}) {
    CAPTURE(k);
    CHECK(k.starts_with(keys::kGoogleTopologyPrefix));
    distinct.insert(k);
  }
  CHECK(distinct.size() == 4);
}
