#pragma once
// The admission.k8s.io/v1 AdmissionReview envelope (docs/spec.md Envelope).
//
//   webhook::Result<admission::Request> req = admission::decode(body);
//   admission::Response r = req ? handler.mutate(*req)
//                               : admission::denied(admission::request_uid(body), req.error());
//   std::string out = admission::encode(r);   // response.uid == request.uid on every path

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status/result.h"
#include "podpatch/limits.h"
#include "podpatch/placement.h"

namespace admission {

using json = nlohmann::json;

// Nesting deeper than this is refused before parsing: a Pod or RayCluster is ~15 levels deep,
// and recursion over unbounded depth (diff, dump) would exhaust the stack.
inline constexpr int kMaxJsonDepth = 100;

// The heap one review may take to decode: decode parses under a webhook::HeapLimit of
// parse_memory_bound(body size) (base/memory/heap_limit.h), which refuses the first allocation
// that would take it past the bound; decode then answers with reason json_too_costly (413). So
// whatever decode accepts or refuses holds at most that many bytes, counted as the allocator holds
// them: json::parse, the fields decode copies, and destroying the result (Request's destructor
// empties containers children first, which allocates nothing); request_uid stays below it as
// well. test/unit/parse_memory counts every allocation, under glibc's malloc and jemalloc, to
// check it. A server can charge each request its body plus this bound against a memory budget.
// Genuine reviews (a Pod or RayCluster as the API server sends it) take 3-9 bytes per body byte;
// a body of tiny values such as [{},{},...] would take about 39, and is refused.
inline constexpr std::size_t kParseMemoryPerBodyByte = 16;
// What the bound allows whatever the size: the parser's stacks, the text of an error, and the
// values of a body too short to be a threat (a 5-byte [1,2] takes 16 bytes per byte already).
inline constexpr std::size_t kParseMemoryFixedBytes = 8192;
constexpr std::size_t parse_memory_bound(std::size_t body_bytes) {
  return kParseMemoryPerBodyByte * body_bytes + kParseMemoryFixedBytes;
}

// The heap one whole admission may take per body byte, the body itself not included: the decoded
// request and up to two working copies of what the Handler may change, each at most the parse
// bound, so 3 x kParseMemoryPerBodyByte; the patch and the encoded answer fit in what that leaves.
// (The server's Handler makes no copy: it writes the patch from the changes it decided; webhook-
// dryrun makes one, the mutated parts it shows. The bound keeps room for both.) The server grants
// each request body x (1 + this) + 64 KiB against its in-flight memory budget.
// test/unit/parse_memory measures it, as the server runs an admission, on every fixture, on the
// costliest shapes decode accepts in the parts the Handler ignores, checks or copies, and on
// values the Handler repeats in its messages (names are cut to webhook::kMaxShownBytes there,
// lists are not split beyond what the slice can use): genuine reviews take up to 12 bytes per
// body byte, the costliest accepted shapes up to 16 (fixed costs included). It does NOT
// cover the answer for a large slice, whose patch lists every host and chip address (M5): that
// grows with the slice, not with the body, and is bounded by answer_memory_bound.
inline constexpr std::size_t kAdmissionMemoryPerBodyByte = 3 * kParseMemoryPerBodyByte;

// What the answer for a TPU Pod lists, as the Handler knows it once the slice, the Pod's TPU
// containers and the names are read (docs/spec.md M5.2, M5.3).
struct AnswerShape {
  std::size_t hosts = 1;           // the slice's hosts; 1 lists no hostnames
  std::size_t devices = 0;         // chips x chiplets: one slicebuilder address each
  std::size_t tpu_containers = 0;  // each gets its own copy of every list
  bool tpu7x = false;              // TPU_PROCESS_ADDRESSES: hosts x containers addresses
  std::size_t group_bytes = 0;     // the worker group's name, the start of each hostname
  std::size_t service_bytes = 0;   // the headless Service's name, the end of each hostname
  // The most bytes per entry of a TPU container's literal TPU_WORKER_HOSTNAMES, (length + 1) /
  // entries rounded up: M5.3 may build the slicebuilder list from it instead. 0 when none.
  std::size_t literal_entry_bytes = 0;
};

// The copies the answer makes of a list, measured on the largest slices by test/unit/parse_memory
// (up to 4.8): the mutated env and the patch's value, the patch's JSON text, its base64 in the
// encoded response; a list kept from the Pod spec is shown in a warning instead, which makes
// fewer. Plus one for margin.
inline constexpr std::size_t kAnswerListCopies = 6;
// The bytes of one host entry ("<group>-<replica>-<host>.<service>", replica as an int of up to
// 10 digits) and of one address ("<entry>:<port>,", the port an int of up to 11 characters).
constexpr std::size_t answer_host_entry_bytes(const AnswerShape& s) {
  std::size_t host_digits = 1;
  for (std::size_t h = s.hosts; h >= 10; h /= 10) {
    ++host_digits;
  }
  return s.hosts > 1 ? s.group_bytes + s.service_bytes + 3 + 10 + host_digits : 9;  // localhost
}

// An upper bound of the heap the Handler's answer for a TPU Pod takes beyond
// kAdmissionMemoryPerBodyByte x body: every TPU container's TPU_WORKER_HOSTNAMES (hosts
// entries), TPU_PROCESS_ADDRESSES (TPU7x: hosts x containers addresses) and
// TORCH_TPU_SLICEBUILDER_ADDRESSES (one address per device, at most one environment string:
// longer, it is left out, spec M8.2), kAnswerListCopies times, plus the
// lists and host names the mutation computes once. A few KiB for an ordinary slice (a v6e 4x4,
// a TPU7x 2x2x2), tens of MiB for the largest. The server does not charge it to the in-flight
// budget; its handler pool bounds how many answers are built at once (docs/server.md).
constexpr std::size_t answer_memory_bound(const AnswerShape& s) {
  const std::size_t entry = answer_host_entry_bytes(s);
  const std::size_t address = entry + 13;
  const std::size_t literal_address =
      (s.literal_entry_bytes > entry ? s.literal_entry_bytes : entry) + 13;
  const bool multi_host = s.hosts > 1;
  const std::size_t hostnames = multi_host ? s.hosts * (entry + 1) : 0;
  const std::size_t processes =
      s.tpu7x && (multi_host || s.tpu_containers > 1) ? s.hosts * s.tpu_containers * address : 0;
  // The slicebuilder list is never made longer than one environment string (spec M8.2).
  const std::size_t cap = podpatch::kMaxEnvStringBytes;
  const std::size_t slicebuilder_full = s.devices * (multi_host ? literal_address : address);
  const std::size_t slicebuilder = slicebuilder_full < cap ? slicebuilder_full : cap;
  const std::size_t per_container = hostnames + processes + slicebuilder;
  // Computed once: each host name as a std::string (its object and malloc chunk) and the lists.
  const std::size_t computed = s.devices * address;
  const std::size_t shared =
      s.hosts * (entry + 64) + hostnames + processes + (computed < cap ? computed : cap);
  return kAnswerListCopies * s.tpu_containers * per_container + shared;
}

// Kubernetes sends a UUID (36 bytes) as request.uid; a longer one is refused, never echoed.
inline constexpr std::size_t kMaxUidBytes = 128;

struct Request {
  std::string uid;
  std::string kind;       // request.kind.kind, e.g. "Pod"
  std::string group;      // request.kind.group, "" for core
  std::string version;    // request.kind.version
  std::string operation;  // CREATE, UPDATE, DELETE, CONNECT
  bool dry_run = false;
  std::string ns;
  std::string name;           // request.name
  std::string object_name;    // request.object.metadata.name
  std::string generate_name;  // request.object.metadata.generateName
  json object;                // request.object (null for DELETE)
  json old_object;            // request.oldObject (UPDATE and DELETE), else null
  // The AdmissionReview's bytes as received, an upper bound of request.object's JSON (docs/spec.md
  // M8.3); 0 for a request built in memory, whose object is then measured.
  std::size_t body_bytes = 0;

  Request() = default;
  Request(const Request&) = default;
  Request(Request&&) noexcept = default;
  Request& operator=(const Request&) = default;
  Request& operator=(Request&&) noexcept = default;
  // Empties object and old_object children first, so that destroying them allocates nothing
  // (nlohmann::json's destructor stacks the children of a container on the heap, which for a
  // body of small values would take more than parse_memory_bound leaves).
  ~Request();
};

// Parses an AdmissionReview. Fails with reason malformed_request and a message saying what is
// wrong and what is expected on an empty body, bytes that are not JSON, nesting deeper than
// kMaxJsonDepth (ResourceExhausted), a JSON that is not an admission.k8s.io/v1 AdmissionReview,
// or one without `request`, `request.uid` (of at most kMaxUidBytes), `request.kind` or
// `request.operation`; with reason json_too_costly (ResourceExhausted) on a body that takes more
// than parse_memory_bound(body.size()) bytes to parse (the parse stops there).
webhook::Result<Request> decode(std::string_view body);

// The largest body decode_for_mutation reads with simdjson (a worker Pod's review is 4-8 KB as
// kube-apiserver sends it); a larger one goes to decode(). Each thread that decodes keeps a
// parser whose buffers it takes on its first review for a body this large, about 14 bytes per
// body byte: about 230 KiB per thread, a fixed cost of the process rather than of a request.
inline constexpr std::size_t kFastDecodeMaxBytes = std::size_t{16} << 10;

// decode() for POST /mutate, the server's hot path: the review is read with simdjson, and of
// request.object only what the Handler reads of a Pod is built (metadata's name, generateName,
// namespace, deletionTimestamp, and the labels and annotations of podpatch::keys::kPodLabelsRead
// and kPodAnnotationsRead, when every label and annotation is a string; spec's nodeSelector,
// hostname, subdomain, affinity and containers' name, google.com/tpu of resources.requests and
// .limits, and env, where a valueFrom is kept only as `true` and an entry of a variable the
// webhook neither reads nor writes is only podpatch::elided_env_entry()), at their own paths,
// so the Handler's answer is the same as for decode()'s whole object (test/unit/admission checks
// it on every fixture and the odd-Pod corpus). request.oldObject is not read. What it builds is
// held to parse_memory_bound by a HeapLimit as decode() is. Anything else (a body that decode()
// refuses, one larger than kFastDecodeMaxBytes, JSON simdjson does not take, fields that would
// pass the bound) is decode()'s, with its answers.
webhook::Result<Request> decode_for_mutation(std::string_view body);

// request.uid of an AdmissionReview read from the start of `text` without parsing the rest:
// works on a body cut short, malformed or too large to parse, so that a refusal can still name
// the request it answers. "" when none can be read, or when it is longer than kMaxUidBytes.
std::string request_uid(std::string_view text);

// Refuses JSON text nested deeper than `max_depth` (arrays and objects; at most kMaxJsonDepth),
// by a scan of the bytes that skips strings. ResourceExhausted naming the depth; other syntax errors
// are left to the parser.
webhook::Status check_json_depth(std::string_view text, int max_depth);

struct Response {
  std::string uid;
  bool allowed = true;
  int code = 200;
  std::string message;      // denials: what is wrong and how to fix it
  std::string_view reason;  // denials: a name from podpatch/reasons.h, e.g. "invalid_topology"
  // The RFC 6902 operations as JSON text (podpatch::write_patch); "" or "[]" means no patch.
  std::string patch;
  std::vector<std::string> warnings;
  // The slot a Pod was given and how: for logs, metrics and the audit annotations.
  std::optional<podpatch::Placement> placement;
  // A /mutate answer: encoded with auditAnnotations (kAudit* below), which kube-apiserver records
  // in its audit log under "<webhook name>/<key>".
  bool audit = false;
  // Variables left out because they would not fit in one environment string (M8.2), once each:
  // the kAuditOmitted annotation and the env_omitted_total metric.
  std::vector<std::string_view> omitted;
};

// The auditAnnotations keys of a /mutate answer. Every one carries kAuditOutcome (outcome());
// one that placed a Pod also kAuditPlacement (podpatch::path_detail), kAuditReplica and
// kAuditHost; a denial also kAuditReason (the denial's reason); one that left a variable out
// also kAuditOmitted.
inline constexpr std::string_view kAuditOutcome = "outcome";
inline constexpr std::string_view kAuditPlacement = "placement";
inline constexpr std::string_view kAuditReplica = "replica";
inline constexpr std::string_view kAuditHost = "host";
inline constexpr std::string_view kAuditReason = "reason";
// Comma-joined names of the variables left out (M8.2), when any.
inline constexpr std::string_view kAuditOmitted = "omitted";

Response allowed(std::string uid);
// `patch` is the operations' JSON text.
Response patched(std::string uid, std::string patch);
// Whether the response carries operations.
bool has_patch(const Response& response);
// "denied", "patched" (allowed with operations) or "allowed" (allowed unchanged).
std::string_view outcome(const Response& response);
// The operations as a json array (parsed from `patch`); null when there are none.
json patch_ops(const Response& response);
// A denial carrying error.message, the HTTP code of error.code and error.reason.
Response denied(std::string uid, const webhook::Error& error);

// The AdmissionReview JSON the API server expects: uid echoed; patch base64-encoded with
// patchType JSONPatch only when non-empty; status {code, message} on denials; warnings;
// auditAnnotations when response.audit.
std::string encode(const Response& response);

// The same response as a json value (for printing by the CLI).
json to_json(const Response& response);

}  // namespace admission
