#pragma once
// Every denial reason the webhook answers with, named once: the `reason` of an admission denial
// (webhook::Error::reason), the `reason` label of kuberay_tpu_webhook_denials_total and the
// `reason` field of the admission log line. docs/server.md "Denial reasons" lists them; a test
// checks that list against this table.
//
//   return webhook::invalid_argument("...").with_reason(podpatch::reasons::kMissingLabel);

#include <array>
#include <string_view>

namespace podpatch::reasons {

// The admission envelope (docs/spec.md Envelope), checked before any rule runs.
inline constexpr std::string_view kMethodNotAllowed = "method_not_allowed";
inline constexpr std::string_view kBodyTooLarge = "body_too_large";
inline constexpr std::string_view kRequestTimeout = "request_timeout";
inline constexpr std::string_view kServerBusy = "server_busy";
inline constexpr std::string_view kUnsupportedMediaType = "unsupported_media_type";
inline constexpr std::string_view kMalformedRequest = "malformed_request";
inline constexpr std::string_view kJsonTooCostly = "json_too_costly";
inline constexpr std::string_view kInternalError = "internal_error";

// Both webhooks: a review for a kind the endpoint does not handle (M1, V1).
inline constexpr std::string_view kWrongKind = "wrong_kind";
// An object that is not the shape its kind requires.
inline constexpr std::string_view kMalformedObject = "malformed_object";

// Pods (/mutate, docs/spec.md M1-M7).
inline constexpr std::string_view kMalformedPod = "malformed_pod";
inline constexpr std::string_view kMissingLabel = "missing_label";
inline constexpr std::string_view kMissingTopology = "missing_topology";
inline constexpr std::string_view kInvalidTopology = "invalid_topology";
inline constexpr std::string_view kInvalidChips = "invalid_chips";
inline constexpr std::string_view kInvalidName = "invalid_name";
inline constexpr std::string_view kSubsliceAmbiguous = "subslice_ambiguous";
inline constexpr std::string_view kInvalidIndexLabel = "invalid_index_label";
inline constexpr std::string_view kSlotConflict = "slot_conflict";
inline constexpr std::string_view kPlacementUnavailable = "placement_unavailable";
// A value the webhook would write that no container can exec (M8.1), a Pod over the size
// budget (M8.3); validation gives them too (V5).
inline constexpr std::string_view kEnvTooLong = "env_too_long";
inline constexpr std::string_view kPodTooLarge = "pod_too_large";

// RayClusters, RayJobs and RayServices (/validate, docs/spec.md V1-V5).
inline constexpr std::string_view kNoContainers = "no_containers";
inline constexpr std::string_view kInvalidResources = "invalid_resources";
inline constexpr std::string_view kMissingNumOfHosts = "missing_num_of_hosts";
inline constexpr std::string_view kInvalidNumOfHosts = "invalid_num_of_hosts";
inline constexpr std::string_view kHostsMismatch = "hosts_mismatch";
inline constexpr std::string_view kSubsliceInvalid = "subslice_invalid";
inline constexpr std::string_view kSubsliceUnplaceable = "subslice_unplaceable";

inline constexpr std::array kAll = {
    kMethodNotAllowed,    kBodyTooLarge,         kRequestTimeout,    kUnsupportedMediaType,
    kMalformedRequest,    kInternalError,        kWrongKind,         kMalformedObject,
    kMalformedPod,        kMissingLabel,         kMissingTopology,   kInvalidTopology,
    kInvalidChips,        kInvalidName,          kSubsliceAmbiguous, kInvalidIndexLabel,
    kSlotConflict,        kPlacementUnavailable, kNoContainers,      kInvalidResources,
    kMissingNumOfHosts,   kInvalidNumOfHosts,    kHostsMismatch,     kSubsliceInvalid,
    kSubsliceUnplaceable, kServerBusy,           kJsonTooCostly,     kEnvTooLong,
    kPodTooLarge,
};

}  // namespace podpatch::reasons
