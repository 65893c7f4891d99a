// lib/topology/names: docs/spec.md Terms "Headless Service name" and "Host name", KubeRay's
// CheckName (docs/spec.md Terms, "CheckName") and the --kuberay-version flag.
#include "topology/names.h"

#include <catch2/catch.hpp>
#include <string>

TEST_CASE("Terms/svc: check_name is KubeRay's CheckName", "[topology][names]") {
  auto [name, want] = GENERATE(table<std::string, std::string>({
      // At most 50 characters and a letter first: unchanged.
      {"raycluster-tpu-v6e-multihost-headless", "raycluster-tpu-v6e-multihost-headless"},
      {"raycluster-tpu-v6e-multihost-headless-worker-svc",
       "raycluster-tpu-v6e-multihost-headless-worker-svc"},
      {std::string(50, 'a'), std::string(50, 'a')},
      // docs/spec.md's CheckName example: a 44-character cluster; the cut leaves '-' first -> 'r'.
      {"tpu-v6e-256-multislice-training-cluster-prd1-headless",
       "rv6e-256-multislice-training-cluster-prd1-headless"},
      // docs/spec.md's CheckName example: a 49-character cluster; the cut leaves '0' first -> 'r'.
      {"llama3-70b-finetune-tpu-v6e-256-multislice-prod-a-headless",
       "rb-finetune-tpu-v6e-256-multislice-prod-a-headless"},
      // The KubeRay <= 1.3 suffix on the same clusters.
      {"tpu-v6e-256-multislice-training-cluster-prd1-headless-worker-svc",
       "ltislice-training-cluster-prd1-headless-worker-svc"},
      {"llama3-70b-finetune-tpu-v6e-256-multislice-prod-a-headless-worker-svc",
       "rtpu-v6e-256-multislice-prod-a-headless-worker-svc"},
      // 51 characters: the first one goes.
      {"x" + std::string(50, 'b'), std::string(50, 'b')},
      // A leading digit or Go punctuation is replaced even on short names.
      {"1abc", "rabc"},
      {"-abc", "rabc"},
      {".abc", "rabc"},
      {"_abc", "rabc"},
      // Go's unicode.IsPunct does not cover symbols such as '+' or '$'.
      {"+abc", "+abc"},
      {"$abc", "$abc"},
      // Not lowercased, not stripped at the end.
      {"ABC-", "ABC-"},
      {"", ""},
  }));
  CAPTURE(name);
  CHECK(topology::check_name(name) == want);
}

TEST_CASE("Terms/svc: KubeRay >= 1.4 names the Service <cluster>-headless, never truncated",
          "[topology][names]") {
  auto [cluster, want] = GENERATE(table<std::string, std::string>({
      {"c", "c-headless"},
      {"raycluster-tpu-v6e-multihost", "raycluster-tpu-v6e-multihost-headless"},
      // Better than upstream: 42-53 character names keep their full Service name.
      {"tpu-v6e-256-multislice-training-cluster-prd1",
       "tpu-v6e-256-multislice-training-cluster-prd1-headless"},
      {"llama3-70b-finetune-tpu-v6e-256-multislice-prod-a",
       "llama3-70b-finetune-tpu-v6e-256-multislice-prod-a-headless"},
      {std::string(53, 'c'), std::string(53, 'c') + "-headless"},
  }));
  CAPTURE(cluster);
  for (auto version : {topology::KubeRayVersion{1, 4}, topology::KubeRayVersion{1, 6},
                       topology::KubeRayVersion{1, 7}, topology::KubeRayVersion{2, 0}}) {
    CAPTURE(version.text());
    CHECK(topology::headless_service_name(cluster, version) == want);
  }
  // The default version is 1.6.
  CHECK(topology::headless_service_name(cluster, topology::KubeRayVersion{}) == want);
}

TEST_CASE("Terms/svc: KubeRay <= 1.3 names it CheckName(<cluster>-headless-worker-svc)",
          "[topology][names]") {
  auto [cluster, want] = GENERATE(table<std::string, std::string>({
      {"c", "c-headless-worker-svc"},
      {"raycluster-tpu-v6e-multihost", "raycluster-tpu-v6e-multihost-headless-worker-svc"},
      {"tpu-v6e-256-multislice-training-cluster-prd1",
       "ltislice-training-cluster-prd1-headless-worker-svc"},
      {"llama3-70b-finetune-tpu-v6e-256-multislice-prod-a",
       "rtpu-v6e-256-multislice-prod-a-headless-worker-svc"},
  }));
  CAPTURE(cluster);
  for (auto version : {topology::KubeRayVersion{1, 3}, topology::KubeRayVersion{1, 1},
                       topology::KubeRayVersion{0, 9}}) {
    CAPTURE(version.text());
    CHECK(version.legacy_headless_service());
    CHECK(topology::headless_service_name(cluster, version) == want);
  }
}

TEST_CASE("KubeRay version flag: parse_kuberay_version", "[topology][names]") {
  SECTION("good rows") {
    auto [text, major, minor, legacy] = GENERATE(table<std::string, int, int, bool>({
        {"1.6", 1, 6, false},
        {"v1.5.0", 1, 5, false},
        {"1.3.2", 1, 3, true},
        {"v1.3", 1, 3, true},
        {"1.4", 1, 4, false},
        {"1.4.0", 1, 4, false},
        {"0.9", 0, 9, true},
        {"2.0", 2, 0, false},
        {"1.10", 1, 10, false},
        {"1.0", 1, 0, true},
    }));
    CAPTURE(text);
    webhook::Result<topology::KubeRayVersion> v = topology::parse_kuberay_version(text);
    REQUIRE(v.has_value());
    CHECK(v->major == major);
    CHECK(v->minor == minor);
    CHECK(v->legacy_headless_service() == legacy);
    CHECK(v->text() == std::to_string(major) + "." + std::to_string(minor));
  }
  SECTION("bad rows") {
    auto text = GENERATE(as<std::string>{}, "", "1", "v", "v1", "1.", ".6", "1..6", "1.x", "x.6",
                         "1.6.", "1.6.x", "1.6.0.1", "1.6-rc1", "1.6.0-rc.1", "V1.6", "vv1.6",
                         " 1.6", "1.6 ", "-1.6", "+1.6", "1.-6", "one.six", "1,6", "9999.0");
    CAPTURE(text);
    webhook::Result<topology::KubeRayVersion> v = topology::parse_kuberay_version(text);
    REQUIRE_FALSE(v.has_value());
    CHECK(v.error().code == webhook::ErrorCode::kInvalidArgument);
    CHECK(v.error().message == "KubeRay version \"" + text +
                                   "\" is invalid; expected MAJOR.MINOR such as 1.6 or v1.5.0");
  }
}

TEST_CASE("Terms/host name: <g>-<r>-<h> and <g>-<r>-<h>.<svc>", "[topology][names]") {
  auto [group, replica, host, svc, name] =
      GENERATE(table<std::string, int, int, std::string, std::string>({
          {"v6e-16", 0, 3, "c-headless", "v6e-16-0-3"},
          {"tpu-group", 0, 0, "raycluster-tpu-v6e-multihost-headless", "tpu-group-0-0"},
          {"g", 12, 105, "s", "g-12-105"},
      }));
  CAPTURE(group, replica, host);
  CHECK(topology::host_name(group, replica, host) == name);
  CHECK(topology::host_dns_name(group, replica, host, svc) == name + "." + svc);
}

TEST_CASE("M4: is_dns1123_label decides what may be spec.hostname and spec.subdomain",
          "[topology][names]") {
  auto [name, ok] = GENERATE(table<std::string, bool>({
      {"a", true},
      {"0", true},
      {"a-b", true},
      {"tpu-group-0-3", true},
      {"raycluster-tpu-v6e-multihost-headless", true},
      {"1-2", true},
      {"a--b", true},
      {std::string(63, 'a'), true},
      {std::string(62, 'a') + "9", true},
      // Bad rows.
      {"", false},
      {std::string(64, 'a'), false},
      {"-a", false},
      {"a-", false},
      {"-", false},
      {"A", false},
      {"tpu-Group", false},
      {"a_b", false},
      {"a.b", false},
      {"a b", false},
      {"\xc3\xa4", false},  // "ä"
  }));
  CAPTURE(name);
  CHECK(topology::is_dns1123_label(name) == ok);
}
