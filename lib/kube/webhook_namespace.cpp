#include "kube/webhook_namespace.h"

#include <unistd.h>

#include <optional>

namespace kube {

webhook::Result<NamespaceSource> webhook_namespace(const EnvLookup& env, std::string_view sa_dir,
                                                   const std::string& flag) {
  if (std::optional<std::string> ns = env("POD_NAMESPACE"); ns && !ns->empty()) {
    return NamespaceSource{*ns, "POD_NAMESPACE"};
  }
  std::string file = std::string(sa_dir) + "/namespace";
  if (webhook::Result<std::string> ns = read_file(file, 1024); ns) {
    std::string v = *ns;
    while (!v.empty() && (v.back() == '\n' || v.back() == ' ' || v.back() == '\r')) {
      v.pop_back();
    }
    if (!v.empty()) {
      return NamespaceSource{v, file};
    }
  }
  if (!flag.empty()) {
    return NamespaceSource{flag, "--namespace"};
  }
  return webhook::failed_precondition(
      "legacy placement keeps its slot claims in the webhook's own namespace, and none is known: "
      "set POD_NAMESPACE (the chart sets it from the downward API) or pass --namespace=NS");
}

std::string replica_identity(const EnvLookup& env) {
  if (std::optional<std::string> name = env("POD_NAME"); name && !name->empty()) {
    return *name;
  }
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0 && host[0] != '\0') {
    return host;
  }
  return "kuberay-tpu-webhook";
}

}  // namespace kube
