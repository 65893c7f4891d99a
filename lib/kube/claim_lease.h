#pragma once
// The slot claims' format in the API (docs/legacy-placement.md, "Shared claims"): one
// coordination.k8s.io/v1 Lease per worker group, named from the group (claim_object_name), whose
// annotation kuberay-tpu-webhook/claims holds the group's claims as JSON and whose
// kuberay-tpu-webhook/group names the group.
//
//   std::string text = kube::encode_claims(claims);   // the annotation's value
//   webhook::Result<std::vector<kube::Claim>> back = kube::decode_claims(text);
//   webhook::Result<kube::LeaseState> state = kube::lease_state(lease_object);

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status/result.h"
#include "kube/api_client.h"
#include "kube/rfc3339.h"
#include "podpatch/sources.h"

namespace kube {

// One slot handed out for a Pod the Pod watch may not have shown yet.
struct Claim {
  podpatch::Slot slot;
  WallTime expires{};
  std::string pod;     // the Pod's generateName (or name)
  std::string holder;  // the replica that claimed it (its Pod name)
  std::string id;      // unique per admission: the AdmissionRequest's uid

  friend bool operator==(const Claim&, const Claim&) = default;
};

// The Lease of a group's claims: "kuberay-tpu-slots-" and 24 hex digits of SHA-256 over the
// namespace, cluster and group (a valid object name whatever the group is called).
std::string claim_object_name(const podpatch::GroupKey& key);

// The claims annotation's value: a JSON array of {"replica", "host", "expires" (RFC 3339, UTC,
// milliseconds), "pod", "holder", "id"}. decode_claims is strict: InvalidArgument naming what is
// wrong.
std::string encode_claims(const std::vector<Claim>& claims);
webhook::Result<std::vector<Claim>> decode_claims(std::string_view text);

inline constexpr std::string_view kClaimsAnnotation = "kuberay-tpu-webhook/claims";
inline constexpr std::string_view kClaimGroupAnnotation = "kuberay-tpu-webhook/group";
// The labels every claim Lease carries; the janitor lists by them.
inline constexpr std::string_view kClaimSelector =
    "app.kubernetes.io/managed-by=kuberay-tpu-webhook,app.kubernetes.io/component=slot-claims";

// What a claim Lease holds: its resourceVersion and its claims.
struct LeaseState {
  std::string version;
  std::vector<Claim> claims;
};
// InvalidArgument when the object has no metadata or its claims do not decode.
webhook::Result<LeaseState> lease_state(const nlohmann::json& lease);

// The group a claim Lease is for, from its kuberay-tpu-webhook/group annotation
// ("<ns>/<cluster>/<group>"); nullopt unless the Lease's name is that group's.
std::optional<podpatch::GroupKey> lease_group(const nlohmann::json& lease);

// An API answer for messages: "HTTP 403: <the Status message, cut after 200 bytes>".
std::string describe_status(const ApiClient::Reply& r);
// The reason of a Status body ("Conflict", "AlreadyExists", ...), or "" when there is none.
std::string status_reason(const std::string& body);

}  // namespace kube
