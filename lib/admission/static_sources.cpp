#include "base/json/access.h"
#include "admission/static_sources.h"

#include "podpatch/keys.h"
#include "podpatch/pod_view.h"

namespace admission {

using webhook::member;
using webhook::string_member;

using podpatch::json;

bool StaticPodSource::add(const json& pod) {
  webhook::Result<podpatch::PodView> view = podpatch::PodView::create(pod);
  if (!view || view->deleting()) {
    return false;
  }
  std::optional<podpatch::GroupKey> key = podpatch::group_key(*view, "default");
  std::optional<podpatch::Slot> slot = podpatch::recorded_slot(*view);
  if (!key || !slot) {
    return false;
  }
  std::lock_guard lock(mu_);
  holders_[*key].push_back({view->display_name(), *slot});
  return true;
}

webhook::Result<podpatch::Slot> StaticPodSource::place(const podpatch::PlaceRequest& request) {
  std::lock_guard lock(mu_);
  std::vector<podpatch::Holder>& holders = holders_[request.key];
  webhook::Result<podpatch::Slot> slot =
      podpatch::choose_slot(holders, request.hosts, request.key);
  if (slot && !request.dry_run) {
    holders.push_back({"(Pod admitted #" + std::to_string(++admitted_) + ")", *slot});
  }
  return slot;
}

webhook::Result<podpatch::Slot> DisabledPodSource::place(const podpatch::PlaceRequest& request) {
  return webhook::Error{
      webhook::ErrorCode::kFailedPrecondition,
      "the Pod has no KubeRay index labels (ray.io/worker-group-replica-index" +
          std::string(request.hosts > 1 ? ", ray.io/replica-host-index" : "") +
          ") and this webhook runs without legacy placement, so it cannot tell which host of "
          "worker group \"" + request.key.group +
          "\" it is; enable KubeRay's RayMultiHostIndexing feature gate (KubeRay >= 1.5) or run "
          "the webhook with --legacy-indexing=auto or on (Helm value tpuWebhook.legacyIndexing, "
          "default \"auto\")"};
}

bool StaticNodeSource::add(const json& node) {
  if (string_member(&node, "kind") != std::string_view("Node")) {
    return false;
  }
  nodes_.push_back(podpatch::to_labels(member(node, "metadata", "labels")));
  return true;
}

std::optional<std::vector<podpatch::Labels>> StaticNodeSource::nodes_matching(
    const podpatch::Labels& selector) {
  if (!listable_) {
    return std::nullopt;
  }
  std::vector<podpatch::Labels> out;
  for (const podpatch::Labels& n : nodes_) {
    if (podpatch::matches(n, selector)) {
      out.push_back(n);
    }
  }
  return out;
}

bool StaticServiceSource::add(const json& service) {
  if (string_member(&service, "kind") != std::string_view("Service")) {
    return false;
  }
  const json* metadata = member(service, "metadata");
  std::optional<std::string_view> cluster =
      string_member(member(metadata, "labels"), podpatch::keys::kHeadlessServiceLabel);
  std::optional<std::string_view> name = string_member(metadata, "name");
  if (!cluster || !name) {
    return false;
  }
  std::string ns(string_member(metadata, "namespace").value_or("default"));
  services_[{ns, std::string(*cluster)}] = std::string(*name);
  return true;
}

std::optional<std::string> StaticServiceSource::headless_service(std::string_view ns,
                                                                 std::string_view cluster) {
  auto it = services_.find(std::pair<std::string, std::string>(ns, cluster));
  if (it == services_.end()) {
    return std::nullopt;
  }
  return it->second;
}

}  // namespace admission
