#pragma once
// Pod, Node and Service sources backed by objects given up front: webhook-dryrun's --existing
// files and the tests. The live, watch-fed implementations live in lib/kube.
//
//   admission::StaticPodSource pods;
//   pods.add(existing_pod_json);                    // ignored unless it holds a slot
//   auto slot = pods.place(key, 4, /*dry_run=*/false);   // reserves: the next call sees it

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/json/access.h"
#include "podpatch/placement.h"
#include "podpatch/sources.h"

namespace admission {

class StaticPodSource : public podpatch::PodSource {
 public:
  // Records the slot an existing Pod holds (docs/spec.md M3.3: a TPU Pod with labels
  // ray.io/cluster, ray.io/group, replicaIndex=<group>-<n> and a TPU_WORKER_ID, not being deleted).
  // Returns false, recording nothing, for any other object.
  bool add(const podpatch::json& pod);

  // docs/spec.md M3.3 over the recorded Pods; a non-dry-run placement is recorded as a new Pod.
  using podpatch::PodSource::place;
  webhook::Result<podpatch::Slot> place(const podpatch::PlaceRequest& request) override;

 private:
  std::mutex mu_;
  std::map<podpatch::GroupKey, std::vector<podpatch::Holder>> holders_;
  int admitted_ = 0;
};

// The PodSource of a webhook running without legacy placement (--legacy-indexing=off): every
// Pod without KubeRay's index labels is denied with a message saying how to fix it.
class DisabledPodSource : public podpatch::PodSource {
 public:
  using podpatch::PodSource::place;
  webhook::Result<podpatch::Slot> place(const podpatch::PlaceRequest& request) override;
};

class StaticNodeSource : public podpatch::NodeSource {
 public:
  // With listable=false, nodes_matching answers "cannot list" as a webhook without API access.
  explicit StaticNodeSource(bool listable = true) : listable_(listable) {}
  // Records a Node's labels (metadata.labels of a v1 Node object). False for other objects.
  bool add(const podpatch::json& node);
  void add_labels(podpatch::Labels labels) { nodes_.push_back(std::move(labels)); }
  std::optional<std::vector<podpatch::Labels>> nodes_matching(
      const podpatch::Labels& selector) override;

 private:
  bool listable_;
  std::vector<podpatch::Labels> nodes_;
};

class StaticServiceSource : public podpatch::ServiceSource {
 public:
  // Records a Service labelled ray.io/headless-worker-svc. False for other objects.
  bool add(const podpatch::json& service);
  std::optional<std::string> headless_service(std::string_view ns,
                                              std::string_view cluster) override;

 private:
  std::map<std::pair<std::string, std::string>, std::string, std::less<>> services_;
};

}  // namespace admission
