#pragma once
// DNS names of a slice's hosts and of the RayCluster's headless Service (docs/spec.md Terms).
//
//   auto v = topology::parse_kuberay_version("1.6");
//   topology::headless_service_name("ray-torchtpu-cluster", *v);  //
//   "ray-torchtpu-cluster-headless" topology::host_name("v6e-16", 0, 3); // "v6e-16-0-3"

#include <string>
#include <string_view>

#include "base/status/result.h"

namespace topology {

struct KubeRayVersion {
  int major = 1;
  int minor = 6;

  // KubeRay 1.3 and older named the headless Service CheckName(<cluster>-headless-worker-svc).
  bool legacy_headless_service() const { return major < 1 || (major == 1 && minor <= 3); }
  std::string text() const { return std::to_string(major) + "." + std::to_string(minor); }
};

// Parses "1.6", "v1.5.0" or "1.3.2" (patch ignored). InvalidArgument for anything else.
webhook::Result<KubeRayVersion> parse_kuberay_version(std::string_view text);

// KubeRay's CheckName: keeps the last 50 bytes of a longer name, then replaces a leading digit
// or punctuation character with 'r'. Does not lowercase. An empty name stays empty.
std::string check_name(std::string_view name);

// The headless Service KubeRay creates for `cluster`: "<cluster>-headless" (KubeRay >= 1.4,
// never truncated), or CheckName("<cluster>-headless-worker-svc") for KubeRay <= 1.3.
std::string headless_service_name(std::string_view cluster, KubeRayVersion version);

// Host h of replica r of group g: "<g>-<r>-<h>", the Pod's spec.hostname.
std::string host_name(std::string_view group, int replica, int host);

// "<g>-<r>-<h>.<svc>": the name peers resolve through the headless Service.
std::string host_dns_name(std::string_view group, int replica, int host, std::string_view svc);
// host_dns_name appended to `out`.
void append_host_dns_name(std::string& out, std::string_view group, int replica, int host,
                          std::string_view svc);

// True when `name` is an RFC 1123 DNS label: 1-63 characters of [a-z0-9-], starting and ending
// with a letter or digit. spec.hostname and spec.subdomain must be such labels.
bool is_dns1123_label(std::string_view name);

}  // namespace topology
