#include "kube/listed_cluster.h"

#include "base/json/access.h"

namespace kube {

void list_objects(Sink& sink, std::span<const nlohmann::json> objects, std::string_view kind) {
  sink.list_begin();
  for (const nlohmann::json& object : objects) {
    if (webhook::string_member(&object, "kind") == kind) {
      sink.listed(object);
    }
  }
  sink.list_end();
}

ListedCluster::ListedCluster() { list({}); }

void ListedCluster::list(std::span<const nlohmann::json> objects) {
  list_objects(feed_, objects, "Pod");
  list_objects(nodes_, objects, "Node");
  list_objects(services_, objects, "Service");
}

}  // namespace kube
