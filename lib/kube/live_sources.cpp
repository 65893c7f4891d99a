#include "kube/live_sources.h"

#include "base/json/access.h"
#include "podpatch/keys.h"

namespace kube {
namespace {

using podpatch::json;

std::string name_of(const json& object) {
  return std::string(
      webhook::string_member(webhook::member(object, "metadata"), "name").value_or(""));
}

podpatch::Labels labels_of(const json& object) {
  return podpatch::to_labels(webhook::member(object, "metadata", "labels"));
}

// (namespace, name) and the ray.io/headless-worker-svc label of a Service.
std::optional<std::pair<std::pair<std::string, std::string>, std::string>> service_of(
    const json& object) {
  const json* md = webhook::member(object, "metadata");
  std::optional<std::string_view> name = webhook::string_member(md, "name");
  if (!name) {
    return std::nullopt;
  }
  std::string ns(webhook::string_member(md, "namespace").value_or("default"));
  std::string cluster(
      webhook::string_member(webhook::member(md, "labels"), podpatch::keys::kHeadlessServiceLabel)
          .value_or(""));
  return std::make_pair(std::make_pair(std::move(ns), std::string(*name)), std::move(cluster));
}

}  // namespace

void PodFeed::listed(const json& object) {
  if (std::optional<PodRecord> r = pod_record(object)) {
    pending_.push_back(std::move(*r));
  }
}

void PodFeed::list_end() {
  registry_.replace(std::move(pending_));
  std::vector<PodRecord>().swap(pending_);
}

void PodFeed::event(EventType type, const json& object) {
  std::string uid = pod_uid(object);
  if (type == EventType::kDeleted) {
    registry_.remove(uid);
  } else {
    std::optional<PodRecord> record = pod_record(object);
    std::optional<PodRecord> shown = on_shown_ ? record : std::nullopt;
    // The registry first: once told, a placement stops counting the Pod's claim, so the Pod must
    // already hold its slot there, or the slot would look free between the two.
    registry_.upsert(uid, std::move(record));
    if (shown) {
      on_shown_(*shown);
    }
  }
}

std::optional<std::vector<podpatch::Labels>> LiveNodeSource::nodes_matching(
    const podpatch::Labels& selector) {
  std::shared_lock lock(mu_);
  if (!synced_) {
    return std::nullopt;
  }
  std::vector<podpatch::Labels> out;
  for (const auto& [name, labels] : nodes_) {
    if (podpatch::matches(labels, selector)) {
      out.push_back(labels);
    }
  }
  return out;
}

std::size_t LiveNodeSource::size() const {
  std::shared_lock lock(mu_);
  return nodes_.size();
}

void LiveNodeSource::listed(const json& object) { pending_[name_of(object)] = labels_of(object); }

void LiveNodeSource::list_end() {
  std::unique_lock lock(mu_);
  nodes_.swap(pending_);
  pending_.clear();
  synced_ = true;
}

void LiveNodeSource::event(EventType type, const json& object) {
  std::string name = name_of(object);
  std::unique_lock lock(mu_);
  if (type == EventType::kDeleted) {
    nodes_.erase(name);
  } else {
    nodes_[name] = labels_of(object);
  }
}

std::optional<std::string> LiveServiceSource::headless_service(std::string_view ns,
                                                               std::string_view cluster) {
  std::shared_lock lock(mu_);
  for (auto it = services_.lower_bound(Key(std::string(ns), ""));
       it != services_.end() && it->first.first == ns; ++it) {
    if (it->second == cluster) {
      return it->first.second;
    }
  }
  return std::nullopt;
}

std::size_t LiveServiceSource::size() const {
  std::shared_lock lock(mu_);
  return services_.size();
}

void LiveServiceSource::listed(const json& object) {
  if (auto s = service_of(object); s && !s->second.empty()) {
    pending_[s->first] = s->second;
  }
}

void LiveServiceSource::list_end() {
  std::unique_lock lock(mu_);
  services_.swap(pending_);
  pending_.clear();
}

void LiveServiceSource::event(EventType type, const json& object) {
  auto s = service_of(object);
  if (!s) {
    return;
  }
  std::unique_lock lock(mu_);
  if (type == EventType::kDeleted || s->second.empty()) {
    services_.erase(s->first);
  } else {
    services_[s->first] = s->second;
  }
}

}  // namespace kube
