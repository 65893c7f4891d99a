#include "tpuslice/snapshot.h"

#include <optional>

#include "base/json/access.h"
#include "base/text/text.h"

namespace tpuslice {
namespace {

constexpr int kMaxPages = 400;  // 100,000 objects: a bound, not a limit anyone should meet

struct Listed {
  std::vector<json> items;
  std::optional<std::string> forbidden;  // set: 403, with the API's message
};

std::string page_path(const std::string& path, const std::string& selector, const std::string& cont,
                      int page_size) {
  std::string q = path + "?limit=" + std::to_string(page_size);
  if (!selector.empty()) {
    q += "&labelSelector=" + kube::url_encode(selector);
  }
  if (!cont.empty()) {
    q += "&continue=" + kube::url_encode(cont);
  }
  return q;
}

webhook::Error http_error(const kube::ApiClient& client, const std::string& what, int status,
                          const std::string& body) {
  std::string why = status_message(body);
  std::string hint;
  if (status == 401) {
    hint = "; the credentials of " + client.config().origin + " were not accepted";
  } else if (status == 404) {
    hint = "; is the API served here (is KubeRay's ray.io/v1 CRD installed)?";
  }
  return webhook::Error{webhook::ErrorCode::kUnavailable,
                        "cannot list " + what + " from " + client.server() + ": HTTP " +
                            std::to_string(status) + (why.empty() ? "" : ": " + why) + hint};
}

// Every page of one list. A 410 on a continue token restarts the list once.
webhook::Result<Listed> list_all(kube::ApiClient& client, const std::string& what,
                                 const std::string& path, const std::string& selector,
                                 const Scope& scope) {
  Listed out;
  std::string cont;
  bool restarted = false;
  for (int page = 0; page < kMaxPages; ++page) {
    ASSIGN_OR_RETURN(kube::ApiClient::Reply reply,
                     client.send("GET", page_path(path, selector, cont, scope.page_size), "", "",
                                 scope.timeout));
    if (reply.status == 403) {
      out.forbidden = status_message(reply.body);
      return out;
    }
    if (reply.status == 410 && !cont.empty() && !restarted) {
      restarted = true;
      cont.clear();
      out.items.clear();
      continue;
    }
    if (reply.status != 200) {
      return http_error(client, what, reply.status, reply.body);
    }
    json body = json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
    const json* items = webhook::member(body, "items");
    if (body.is_discarded() || (items != nullptr && !items->is_array())) {
      return webhook::Error{webhook::ErrorCode::kUnavailable,
                            "cannot list " + what + " from " + client.server() +
                                ": the answer is not a Kubernetes list"};
    }
    for (const json& item : items == nullptr ? json::array() : *items) {
      out.items.push_back(item);
    }
    cont = std::string(
        webhook::string_member(webhook::member(body, "metadata"), "continue").value_or(""));
    if (cont.empty()) {
      return out;
    }
  }
  return webhook::Error{webhook::ErrorCode::kResourceExhausted,
                        "cannot list " + what + ": more than " +
                            std::to_string(scope.page_size * kMaxPages) + " objects"};
}

std::string scoped(const Scope& scope, const std::string& prefix, const std::string& resource) {
  return scope.all_namespaces ? prefix + "/" + resource
                              : prefix + "/namespaces/" + scope.ns + "/" + resource;
}

// Lists into `into`, or records a 403 in `snapshot.unreadable`.
webhook::Status read_kind(kube::ApiClient& client, const Scope& scope, const std::string& resource,
                          const std::string& path, const std::string& selector,
                          std::vector<json>& into, Snapshot& snapshot) {
  ASSIGN_OR_RETURN(Listed listed, list_all(client, resource, path, selector, scope));
  if (listed.forbidden) {
    snapshot.unreadable[resource] = *listed.forbidden;
  }
  into = std::move(listed.items);
  return {};
}

}  // namespace

std::string status_message(const std::string& body) {
  json status = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (std::optional<std::string_view> m = webhook::string_member(&status, "message")) {
    return std::string(*m);
  }
  std::string line = body.substr(0, body.find('\n'));
  return line.size() > 200 ? line.substr(0, 200) : line;
}

webhook::Result<Snapshot> read_snapshot(kube::ApiClient& client, const Scope& scope) {
  Snapshot s;
  s.webhook_namespace = scope.webhook_namespace;
  std::string workers = "ray.io/node-type=worker";
  if (!scope.cluster.empty()) {
    workers += ",ray.io/cluster=" + scope.cluster;
  }
  RETURN_IF_ERROR(
      read_kind(client, scope, "pods", scoped(scope, "/api/v1", "pods"), workers, s.pods, s));
  if (auto it = s.unreadable.find("pods"); it != s.unreadable.end()) {
    return webhook::Error{
        webhook::ErrorCode::kFailedPrecondition,
        "cannot list pods: " + it->second + "; nothing can be checked without the worker Pods"};
  }
  RETURN_IF_ERROR(read_kind(client, scope, "rayclusters",
                            scoped(scope, "/apis/ray.io/v1", "rayclusters"), "", s.rayclusters, s));
  if (!scope.cluster.empty()) {
    std::erase_if(s.rayclusters, [&](const json& rc) {
      return webhook::string_member(webhook::member(rc, "metadata"), "name") != scope.cluster;
    });
  }
  RETURN_IF_ERROR(read_kind(client, scope, "nodes", "/api/v1/nodes", "", s.nodes, s));
  RETURN_IF_ERROR(read_kind(client, scope, "services", scoped(scope, "/api/v1", "services"), "",
                            s.services, s));
  RETURN_IF_ERROR(read_kind(
      client, scope, "endpointslices",
      "/apis/discovery.k8s.io/v1/namespaces/" + scope.webhook_namespace + "/endpointslices",
      std::string("kubernetes.io/service-name=") + kWebhookService, s.endpointslices, s));
  return s;
}

}  // namespace tpuslice
