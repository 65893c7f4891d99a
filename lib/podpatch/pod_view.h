#pragma once
// Read-only facts of a raw Pod (nlohmann::json), checked once at construction.
//
//   webhook::Result<podpatch::PodView> view = podpatch::PodView::create(pod_json);
//   if (view && view->is_tpu_pod()) {
//     view->label(keys::kClusterLabel);    // optional<string_view>
//     view->chips_per_host();              // sum of google.com/tpu over TPU containers
//   }
//
// The view borrows the json: it must outlive the view and must not change while in use.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/json/access.h"
#include "base/status/result.h"
#include "podpatch/keys.h"
#include "podpatch/labels.h"

namespace podpatch {

// Bounds on what one Pod may make the webhook process (refused with ResourceExhausted). Real
// worker Pods have a handful of containers and a few dozen env entries.
inline constexpr std::size_t kMaxContainers = 256;
inline constexpr std::size_t kMaxEnvEntries = 4096;

// A container with a non-zero google.com/tpu request or limit (docs/spec.md Terms "TPU container").
struct TpuContainer {
  int index = 0;          // position in spec.containers
  int chips = 0;          // the request, else the limit
  std::string_view name;  // container name, for messages
};

// The TPU containers of a containers array, in order. `where` prefixes messages, such as
// `spec.containers`. InvalidArgument when the array or a container is not the right JSON type,
// or a google.com/tpu quantity is not a whole number of chips (names container, field, value).
webhook::Result<std::vector<TpuContainer>> find_tpu_containers(const json* containers,
                                                               std::string_view where);

// Kueue manages the placement (label kueue.x-k8s.io/queue-name, annotation
// kueue.x-k8s.io/podset-required-topology) or the user opted out
// (cloud.google.com/skip-tpu-webhook-check: "true"). Arguments may be null.
bool kueue_managed(const json* labels, const json* annotations);

// Where a topology came from: the subslice annotation wins over the nodeSelector.
struct TopologyField {
  std::string_view value;
  std::string_view field;  // "annotation cloud.google.com/gke-tpu-slice-topology" or
                           // "nodeSelector cloud.google.com/gke-tpu-topology"
};
// docs/spec.md Terms "Slice": annotation cloud.google.com/gke-tpu-slice-topology if present, else
// nodeSelector cloud.google.com/gke-tpu-topology; nullopt when neither is set.
std::optional<TopologyField> topology_field(const json* annotations, const json* node_selector);

// How messages and logs name a Pod: metadata.name, else metadata.generateName (KubeRay's worker
// Pods have no name yet at admission), else `fallback` (such as the AdmissionRequest's name),
// else "(no name)". The one Pod-name formatter.
std::string pod_name(const json& pod, std::string_view fallback = "");

class PodView {
 public:
  // Checks the JSON shape of everything the webhook reads or writes: metadata, labels,
  // annotations and nodeSelector are objects of strings; spec.containers is an array of
  // objects; env lists and affinity terms have the right types; google.com/tpu quantities are
  // whole numbers. InvalidArgument naming the field otherwise.
  static webhook::Result<PodView> create(const json& pod);

  const json& pod() const { return *pod_; }
  std::string_view name() const;
  std::string_view generate_name() const;
  std::string_view namespace_name() const;
  // pod_name(pod()): metadata.name, else generateName, else "(no name)".
  std::string display_name() const { return pod_name(*pod_); }

  // `key` is one of keys::kPodLabelsRead / kPodAnnotationsRead, the only ones the server's fast
  // decode keeps of a Pod; any other does not compile (list a key there before reading it).
  std::optional<std::string_view> label(keys::Listed<keys::kPodLabelsRead> key) const;
  std::optional<std::string_view> annotation(keys::Listed<keys::kPodAnnotationsRead> key) const;
  std::optional<std::string_view> node_selector(std::string_view key) const;
  const json* node_selector_object() const { return node_selector_; }

  std::span<const TpuContainer> tpu_containers() const { return tpu_; }
  bool is_tpu_pod() const { return !tpu_.empty(); }
  int chips_per_host() const;
  const json& container(int index) const;

  std::optional<TopologyField> topology() const;
  std::string_view accelerator() const;
  bool kueue_managed() const;
  bool deleting() const;
  // spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution, or nullptr.
  const json* required_pod_affinity_terms() const;

 private:
  explicit PodView(const json& pod) : pod_(&pod) {}

  const json* pod_;
  const json* labels_ = nullptr;
  const json* annotations_ = nullptr;
  const json* node_selector_ = nullptr;
  const json* containers_ = nullptr;
  std::vector<TpuContainer> tpu_;
};

}  // namespace podpatch
