#include "topology/names.h"

#include "base/text/numbers.h"

namespace topology {
namespace {

// Go's unicode.IsPunct over ASCII (symbols such as $ + < = > ^ ` | ~ are not punctuation).
bool is_go_punct(char c) {
  constexpr std::string_view kPunct = "!\"#%&'()*,-./:;?@[\\]_{}";
  return kPunct.find(c) != std::string_view::npos;
}

}  // namespace

webhook::Result<KubeRayVersion> parse_kuberay_version(std::string_view text) {
  std::string_view t = text;
  if (t.starts_with('v')) {
    t.remove_prefix(1);
  }
  auto bad = [&] {
    return webhook::invalid_argument("KubeRay version \"" + std::string(text) +
                                     "\" is invalid; expected MAJOR.MINOR such as 1.6 or v1.5.0");
  };
  std::size_t dot = t.find('.');
  if (dot == std::string_view::npos) {
    return bad();
  }
  std::string_view rest = t.substr(dot + 1);
  std::size_t dot2 = rest.find('.');
  std::optional<std::int64_t> major = webhook::parse_non_negative(t.substr(0, dot), 1000);
  std::optional<std::int64_t> minor = webhook::parse_non_negative(rest.substr(0, dot2), 1000);
  if (!major || !minor) {
    return bad();
  }
  if (dot2 != std::string_view::npos &&
      !webhook::parse_non_negative(rest.substr(dot2 + 1), 100000)) {
    return bad();
  }
  return KubeRayVersion{static_cast<int>(*major), static_cast<int>(*minor)};
}

std::string check_name(std::string_view name) {
  constexpr std::size_t kMax = 50;
  std::string out(name.size() > kMax ? name.substr(name.size() - kMax) : name);
  if (!out.empty() && out[0] >= '0' && out[0] <= '9') {
    out[0] = 'r';
  }
  if (!out.empty() && is_go_punct(out[0])) {
    out[0] = 'r';
  }
  return out;
}

std::string headless_service_name(std::string_view cluster, KubeRayVersion version) {
  if (version.legacy_headless_service()) {
    return check_name(std::string(cluster) + "-headless-worker-svc");
  }
  std::string out;
  out.reserve(cluster.size() + 9);
  out.append(cluster).append("-headless");
  return out;
}

namespace {

// "<group>-<replica>-<host>" appended to `out`.
void append_host_name(std::string& out, std::string_view group, int replica, int host) {
  out.append(group)
      .append("-")
      .append(std::to_string(replica))
      .append("-")
      .append(std::to_string(host));
}

// The most bytes "-<replica>-<host>" takes.
constexpr std::size_t kHostSuffixBytes = 24;

}  // namespace

std::string host_name(std::string_view group, int replica, int host) {
  std::string out;
  out.reserve(group.size() + kHostSuffixBytes);
  append_host_name(out, group, replica, host);
  return out;
}

void append_host_dns_name(std::string& out, std::string_view group, int replica, int host,
                          std::string_view svc) {
  append_host_name(out, group, replica, host);
  out.append(".").append(svc);
}

std::string host_dns_name(std::string_view group, int replica, int host, std::string_view svc) {
  std::string out;
  out.reserve(group.size() + kHostSuffixBytes + 1 + svc.size());
  append_host_dns_name(out, group, replica, host, svc);
  return out;
}

bool is_dns1123_label(std::string_view name) {
  if (name.empty() || name.size() > 63) {
    return false;
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  for (char c : name) {
    if (!alnum(c) && c != '-') {
      return false;
    }
  }
  return alnum(name.front()) && alnum(name.back());
}

}  // namespace topology
