#pragma once
// Every label, annotation, resource and env name the webhook reads or writes, named once.

#include <algorithm>
#include <array>
#include <string_view>

namespace podpatch::keys {

// Resources and scheduling.
inline constexpr std::string_view kTpuResource = "google.com/tpu";
inline constexpr std::string_view kAcceleratorSelector = "cloud.google.com/gke-tpu-accelerator";
inline constexpr std::string_view kTopologySelector = "cloud.google.com/gke-tpu-topology";
inline constexpr std::string_view kSubsliceAnnotation = "cloud.google.com/gke-tpu-slice-topology";
inline constexpr std::string_view kGkeNodePool = "cloud.google.com/gke-nodepool";
inline constexpr std::string_view kGceTopologyBlock = "cloud.google.com/gce-topology-block";
inline constexpr std::string_view kGceTopologySubblock = "cloud.google.com/gce-topology-subblock";
inline constexpr std::string_view kGceTopologyHost = "cloud.google.com/gce-topology-host";
inline constexpr std::string_view kGoogleTopologyPrefix = "cloud.google.com/";
inline constexpr std::string_view kNamespaceNameLabel = "kubernetes.io/metadata.name";

// KubeRay labels.
inline constexpr std::string_view kClusterLabel = "ray.io/cluster";
inline constexpr std::string_view kGroupLabel = "ray.io/group";
inline constexpr std::string_view kNodeTypeLabel = "ray.io/node-type";
inline constexpr std::string_view kReplicaIndexLabel = "ray.io/worker-group-replica-index";
inline constexpr std::string_view kHostIndexLabel = "ray.io/replica-host-index";
inline constexpr std::string_view kReplicaNameLabel = "ray.io/worker-group-replica-name";
inline constexpr std::string_view kHeadlessServiceLabel = "ray.io/headless-worker-svc";
inline constexpr std::string_view kCreatedByLabel = "app.kubernetes.io/created-by";
inline constexpr std::string_view kAppNameLabel = "app.kubernetes.io/name";
// Its value on every Pod KubeRay creates, unless the template sets another; the mutating
// webhook's objectSelector requires it.
inline constexpr std::string_view kAppNameValue = "kuberay";
// The label this webhook adds for legacy placement and affinity: "<group>-<replica>".
inline constexpr std::string_view kLegacyReplicaLabel = "replicaIndex";

// Kueue and opt-outs.
inline constexpr std::string_view kKueueQueueLabel = "kueue.x-k8s.io/queue-name";
inline constexpr std::string_view kKueueTopologyAnnotation =
    "kueue.x-k8s.io/podset-required-topology";
inline constexpr std::string_view kSkipCheckAnnotation = "cloud.google.com/skip-tpu-webhook-check";

// The labels and annotations of a Pod the mutation reads: the fast decode keeps only these of a
// Pod (admission/pod_review.cpp), and PodView::label and ::annotation take no other (Listed).
inline constexpr auto kPodLabelsRead = std::to_array<std::string_view>(
    {kClusterLabel, kGroupLabel, kReplicaIndexLabel, kHostIndexLabel, kReplicaNameLabel,
     kLegacyReplicaLabel, kKueueQueueLabel});
inline constexpr auto kPodAnnotationsRead = std::to_array<std::string_view>(
    {kSubsliceAnnotation, kKueueTopologyAnnotation, kSkipCheckAnnotation});
template <std::size_t N>
constexpr bool listed(const std::array<std::string_view, N>& keys, std::string_view key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// A key of `List`, checked as the program compiles: `Listed<kPodLabelsRead> k = "x";` for an
// "x" not in it does not compile ("not a constant expression", at the throw below).
template <const auto& List>
struct Listed {
  consteval Listed(std::string_view k) : key(k) {
    if (!listed(List, k)) {
      throw "a key the fast decode does not keep: add it to kPodLabelsRead or kPodAnnotationsRead";
    }
  }
  template <std::size_t N>
  consteval Listed(const char (&k)[N]) : Listed(std::string_view(k, N - 1)) {}
  std::string_view key;
};

// Environment variables (docs/spec.md M5).
inline constexpr std::string_view kMegascaleNumSlices = "MEGASCALE_NUM_SLICES";
inline constexpr std::string_view kMegascaleSliceId = "MEGASCALE_SLICE_ID";
inline constexpr std::string_view kMegascaleCoordinator = "MEGASCALE_COORDINATOR_ADDRESS";
inline constexpr std::string_view kMegascalePort = "MEGASCALE_PORT";
inline constexpr std::string_view kWorkerHostnames = "TPU_WORKER_HOSTNAMES";
inline constexpr std::string_view kProcessAddresses = "TPU_PROCESS_ADDRESSES";
inline constexpr std::string_view kProcessPort = "TPU_PROCESS_PORT";
inline constexpr std::string_view kTorchTopology = "TORCH_TPU_TOPOLOGY";
inline constexpr std::string_view kTorchSlicebuilder = "TORCH_TPU_SLICEBUILDER_ADDRESSES";
// Set instead of TORCH_TPU_SLICEBUILDER_ADDRESSES when that list would not fit in one environment
// string (docs/spec.md M8.2): TorchTPU's launcher derives the list from them.
inline constexpr std::string_view kTorchBasePort = "TORCH_TPU_BASE_PORT";
inline constexpr std::string_view kTorchDevicesPerHost = "TORCH_TPU_DEVICES_PER_HOST";
inline constexpr std::string_view kWorkerId = "TPU_WORKER_ID";
inline constexpr std::string_view kTpuName = "TPU_NAME";
inline constexpr std::string_view kDevicePluginHostIp = "TPU_DEVICE_PLUGIN_HOST_IP";
inline constexpr std::string_view kDevicePluginAddr = "TPU_DEVICE_PLUGIN_ADDR";

// Every variable above, once.
inline constexpr auto kWebhookEnv = std::to_array<std::string_view>(
    {kMegascaleNumSlices, kMegascaleSliceId, kMegascaleCoordinator, kMegascalePort,
     kWorkerHostnames, kProcessAddresses, kProcessPort, kTorchTopology, kTorchSlicebuilder,
     kTorchBasePort, kTorchDevicesPerHost, kWorkerId, kTpuName, kDevicePluginHostIp,
     kDevicePluginAddr});

// Every variable above begins with one of these: the webhook reads or writes no other env entry's
// value (the fast decode keeps only such an entry's position, admission/pod_review.cpp).
constexpr bool webhook_env(std::string_view name) {
  return name.starts_with("TPU_") || name.starts_with("TORCH_TPU_") ||
         name.starts_with("MEGASCALE_");
}
static_assert(std::all_of(kWebhookEnv.begin(), kWebhookEnv.end(), webhook_env));

}  // namespace podpatch::keys
