#include "podpatch/placement.h"

#include <map>

#include "base/text/numbers.h"
#include "podpatch/env.h"
#include "podpatch/keys.h"
#include "podpatch/reasons.h"
#include "topology/accelerator.h"

namespace podpatch {

namespace {

constexpr std::int64_t kMaxIndex = 1'000'000;

webhook::Result<int> index_label(std::string_view key, std::string_view value) {
  std::optional<std::int64_t> n = webhook::parse_non_negative(value, kMaxIndex);
  if (!n) {
    return webhook::invalid_argument("label " + std::string(key) + "=\"" + std::string(value) +
                                     "\" is not a non-negative integer; KubeRay sets it, so "
                                     "remove it from the Pod template");
  }
  return static_cast<int>(*n);
}

}  // namespace

std::string_view path_name(PlacementPath path) {
  return path == PlacementPath::kLegacy ? "legacy" : "labels";
}

std::string_view path_detail(PlacementPath path) {
  switch (path) {
    case PlacementPath::kLabels:
      return "index-labels";
    case PlacementPath::kReplicaLabel:
      return "replica-label";
    case PlacementPath::kAlreadyPlaced:
      return "already-placed";
    case PlacementPath::kLegacy:
      return "legacy";
  }
  return "legacy";
}

webhook::Result<std::optional<Placement>> placement_from_labels(const PodView& pod, int hosts) {
  std::optional<std::string_view> replica = pod.label(keys::kReplicaIndexLabel);
  std::optional<std::string_view> host = pod.label(keys::kHostIndexLabel);
  if (replica && host) {
    webhook::Result<int> r = index_label(keys::kReplicaIndexLabel, *replica);
    if (!r) {
      return r.error();
    }
    webhook::Result<int> h = index_label(keys::kHostIndexLabel, *host);
    if (!h) {
      return h.error();
    }
    if (*h >= hosts) {
      return webhook::invalid_argument(
          "label " + std::string(keys::kHostIndexLabel) + "=\"" + std::string(*host) +
          "\" is not below the slice's " + std::to_string(hosts) +
          " hosts; numOfHosts of the worker group must match its TPU topology");
    }
    return std::optional<Placement>(Placement{{*r, *h}, PlacementPath::kLabels});
  }
  if (replica && hosts == 1) {
    webhook::Result<int> r = index_label(keys::kReplicaIndexLabel, *replica);
    if (!r) {
      return r.error();
    }
    return std::optional<Placement>(Placement{{*r, 0}, PlacementPath::kReplicaLabel});
  }
  return std::optional<Placement>();
}

webhook::Result<GroupKey> worker_group(const PodView& pod, std::string_view default_ns) {
  std::string_view cluster = pod.label(keys::kClusterLabel).value_or("");
  std::string_view group = pod.label(keys::kGroupLabel).value_or("");
  if (cluster.empty() || group.empty()) {
    std::string_view missing = cluster.empty() ? keys::kClusterLabel : keys::kGroupLabel;
    return webhook::invalid_argument(
               "label " + std::string(missing) +
               " is missing; KubeRay sets it on every worker Pod, so create TPU workers "
               "through a RayCluster (or add the label)")
        .with_reason(reasons::kMissingLabel);
  }
  std::string_view ns = pod.namespace_name().empty() ? default_ns : pod.namespace_name();
  return GroupKey{std::string(ns), std::string(cluster), std::string(group)};
}

std::optional<GroupKey> group_key(const PodView& pod, std::string_view default_ns) {
  webhook::Result<GroupKey> key = worker_group(pod, default_ns);
  return key ? std::optional<GroupKey>(std::move(key).value()) : std::nullopt;
}

std::optional<Slot> recorded_slot(const PodView& pod) {
  std::optional<std::string_view> group = pod.label(keys::kGroupLabel);
  std::optional<std::string_view> replica_label = pod.label(keys::kLegacyReplicaLabel);
  if (!group || !replica_label || pod.tpu_containers().empty()) {
    return std::nullopt;
  }
  std::string prefix = std::string(*group) + "-";
  if (!replica_label->starts_with(prefix)) {
    return std::nullopt;
  }
  std::optional<std::int64_t> r =
      webhook::parse_non_negative(replica_label->substr(prefix.size()), kMaxIndex);
  std::optional<std::string_view> id =
      env_literal(pod.container(pod.tpu_containers().front().index), keys::kWorkerId);
  std::optional<std::int64_t> worker =
      id ? webhook::parse_non_negative(*id, kMaxIndex) : std::nullopt;
  if (!r || !worker) {
    return std::nullopt;
  }
  std::int64_t host = *worker;
  if (topology::is_tpu7x(pod.accelerator())) {
    host /= static_cast<std::int64_t>(pod.tpu_containers().size());
  }
  return Slot{static_cast<int>(*r), static_cast<int>(host)};
}

webhook::Result<Slot> choose_slot(std::span<const Holder> holders, int hosts, const GroupKey& key) {
  std::map<int, std::map<int, const Holder*>> taken;  // replica -> host -> holder
  for (const Holder& h : holders) {
    auto [it, inserted] = taken[h.slot.replica].emplace(h.slot.host, &h);
    if (!inserted) {
      return webhook::Error{
          webhook::ErrorCode::kAlreadyExists,
          "Pods \"" + it->second->pod + "\" and \"" + h.pod + "\" both hold host " +
              std::to_string(h.slot.host) + " of replica " + std::to_string(h.slot.replica) +
              " of worker group \"" + key.group + "\" (RayCluster " + key.ns + "/" + key.cluster +
              "), so that slice cannot initialize; delete one of them (kubectl delete pod -n " +
              key.ns + " " + h.pod + ") and it will be recreated on the free host"};
    }
  }
  std::optional<int> replica;
  for (const auto& [r, used] : taken) {
    if (static_cast<int>(used.size()) < hosts) {
      replica = r;
      break;
    }
  }
  if (!replica) {
    int r = 0;
    while (taken.contains(r)) {
      ++r;
    }
    replica = r;
  }
  int host = 0;
  if (auto it = taken.find(*replica); it != taken.end()) {
    while (it->second.contains(host)) {
      ++host;
    }
  }
  return Slot{*replica, host};
}

}  // namespace podpatch
