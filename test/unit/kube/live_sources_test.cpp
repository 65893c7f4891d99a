// The watch-fed Service source (kube/live_sources.h): the headless Service name peers resolve
// (docs/spec.md Terms, "Headless Service name"), whether its objects come from a list or from
// watch events.
#include "kube/live_sources.h"

#include <catch2/catch.hpp>
#include <vector>

#include "kube/listed_cluster.h"

using nlohmann::json;

namespace {

json service(const std::string& ns, const std::string& name, const std::string& cluster) {
  json labels = json::object();
  if (!cluster.empty()) {
    labels["ray.io/headless-worker-svc"] = cluster;
  }
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}}};
}

}  // namespace

TEST_CASE("LiveServiceSource finds the Service labelled ray.io/headless-worker-svc") {
  kube::LiveServiceSource services;
  kube::list_objects(services,
                     std::vector<json>{service("ns", "svc-x", "c"), service("ns", "plain", "")},
                     "Service");
  CHECK(services.size() == 1);  // the unlabelled one is not kept
  CHECK(services.headless_service("ns", "c") == "svc-x");
  CHECK_FALSE(services.headless_service("other", "c").has_value());
  CHECK_FALSE(services.headless_service("ns", "d").has_value());
}

TEST_CASE(
    "Headless Service name: of several Services labelled for one cluster, the first by name") {
  json b = service("ns", "svc-b", "c");
  json a = service("ns", "svc-a", "c");
  json elsewhere = service("aaa", "svc-0", "c");  // another namespace never counts
  for (const std::vector<json>& order :
       {std::vector<json>{b, a, elsewhere}, std::vector<json>{elsewhere, a, b}}) {
    CAPTURE(order.front()["metadata"]["name"]);
    kube::LiveServiceSource listed;
    kube::list_objects(listed, order, "Service");
    CHECK(listed.headless_service("ns", "c") == "svc-a");

    kube::LiveServiceSource watched;
    kube::list_objects(watched, {}, "Service");
    for (const json& s : order) {
      watched.event(kube::EventType::kAdded, s);
    }
    CHECK(watched.headless_service("ns", "c") == "svc-a");
    watched.event(kube::EventType::kDeleted, a);
    CHECK(watched.headless_service("ns", "c") == "svc-b");
  }
}
