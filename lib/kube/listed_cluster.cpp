#include "kube/listed_cluster.h"

#include <optional>

#include "base/json/access.h"
#include "kube/reflector.h"

namespace kube {

bool selected(const nlohmann::json& object, std::string_view selector) {
  const nlohmann::json* labels = webhook::member(object, "metadata", "labels");
  while (!selector.empty()) {
    std::size_t comma = selector.find(',');
    std::string_view term = selector.substr(0, comma);
    selector = comma == std::string_view::npos ? std::string_view() : selector.substr(comma + 1);
    std::size_t eq = term.find('=');
    std::optional<std::string_view> value = webhook::string_member(labels, term.substr(0, eq));
    if (!value || (eq != std::string_view::npos && *value != term.substr(eq + 1))) {
      return false;
    }
  }
  return true;
}

void list_objects(Sink& sink, std::span<const nlohmann::json> objects, std::string_view kind,
                  std::string_view selector) {
  sink.list_begin();
  for (const nlohmann::json& object : objects) {
    if (webhook::string_member(&object, "kind") == kind && selected(object, selector)) {
      sink.listed(object);
    }
  }
  sink.list_end();
}

ListedCluster::ListedCluster() { list({}); }

void ListedCluster::list(std::span<const nlohmann::json> objects) {
  list_objects(feed_, objects, "Pod", kPodSelector);
  list_objects(nodes_, objects, "Node", kNodeSelector);
  list_objects(services_, objects, "Service", kServiceSelector);
}

}  // namespace kube
