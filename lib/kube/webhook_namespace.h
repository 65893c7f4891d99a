#pragma once
// Who and where this replica is, for legacy placement's slot claims (docs/legacy-placement.md):
// the namespace its claim Leases live in, and its own name in the claims it writes.
//
//   webhook::Result<kube::NamespaceSource> ns =
//       kube::webhook_namespace(kube::process_env(), kube::kServiceAccountDir,
//       flags.namespace_name);
//   std::string me = kube::replica_identity(kube::process_env());

#include <string>
#include <string_view>

#include "base/status/result.h"
#include "kube/config.h"

namespace kube {

// The webhook's namespace: POD_NAMESPACE, else the service account's namespace file, else
// `flag`. Returns the namespace and where it came from ("POD_NAMESPACE", the file's path,
// "--namespace"); FailedPrecondition saying how to set it when all three are empty.
struct NamespaceSource {
  std::string ns;
  std::string origin;
};
webhook::Result<NamespaceSource> webhook_namespace(const EnvLookup& env, std::string_view sa_dir,
                                                   const std::string& flag);

// This replica's name in its claims: POD_NAME, else the host name.
std::string replica_identity(const EnvLookup& env);

}  // namespace kube
