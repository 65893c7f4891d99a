#pragma once
// List, then watch, one kind of object, as client-go's reflector does (tools/cache/reflector.go):
// a paged list (limit/continue, read item by item), then a watch from the list's resourceVersion
// with bookmarks and a server-side timeout; a watch that ends is resumed from the last
// resourceVersion seen, a broken one after an exponential backoff with jitter, and 410 Gone (as
// an HTTP status or an ERROR event) or an oversized object starts a fresh list.
//
//   kube::Reflector pods(client, {"pods", "/api/v1/pods", kube::kPodSelector}, sink, clock, log,
//                        {});
//   std::jthread t([&](std::stop_token st) { pods.run(st); });
//   ...
//   t.request_stop(); pods.cancel();    // ends a request in flight at once
//
// The Sink hears every change; it is called from the reflector's thread only.

#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>

#include "base/status/result.h"
#include "kube/api_client.h"
#include "kube/clock.h"
#include "kube/log.h"
#include "kube/sink.h"

namespace kube {

// The label selectors of the watched objects (the table of docs/legacy-placement.md "What the
// webhook watches").
inline constexpr std::string_view kPodSelector =
    "ray.io/node-type=worker,app.kubernetes.io/created-by=kuberay-operator";
inline constexpr std::string_view kNodeSelector = "cloud.google.com/gke-tpu-accelerator";
inline constexpr std::string_view kServiceSelector = "ray.io/headless-worker-svc";

struct Resource {
  std::string name;            // "pods", for messages and metrics
  std::string path;            // "/api/v1/pods" (all namespaces)
  std::string label_selector;  // as in kubectl -l
};

// One line of a watch stream, decoded: `{"type": "ADDED", "object": {...}}`.
struct WatchEvent {
  enum class Kind { kObject, kBookmark, kError, kOther };
  Kind kind = Kind::kOther;
  EventType type = EventType::kAdded;  // kObject: ADDED, MODIFIED or DELETED
  nlohmann::json object;               // the object (for ERROR: the Status)
  std::string resource_version;        // object.metadata.resourceVersion, "" when absent
  int error_code = 0;  // ERROR: the Status code (410: the resourceVersion is too old)
};

// Decodes one watch line. InvalidArgument when it is not a JSON object with a string "type".
// Unknown types decode as kOther (skipped by the reflector).
webhook::Result<WatchEvent> decode_watch_event(std::string_view line);

struct ReflectorOptions {
  int page_size = 500;                                   // limit= of each list page
  std::size_t max_object_bytes = 4 << 20;                // one list item or watch event
  Duration min_watch_timeout = std::chrono::minutes(5);  // timeoutSeconds in [min, 2 min)
  Duration list_timeout = std::chrono::seconds(60);      // read timeout of a list request
  Duration read_slack = std::chrono::seconds(30);  // a watch's read timeout past timeoutSeconds
  BackoffOptions backoff;
  std::uint64_t seed = 0;  // 0: random
};

// Counters, read by metrics while the reflector runs.
struct ReflectorCounters {
  std::atomic<std::uint64_t> lists{0};           // complete lists (the first one and relists)
  std::atomic<std::uint64_t> relists{0};         // lists after the first (410 Gone, oversize...)
  std::atomic<std::uint64_t> watches{0};         // watch streams established
  std::atomic<std::uint64_t> watch_restarts{0};  // watches that broke and were resumed
  std::atomic<std::uint64_t> gone{0};            // 410 Gone answers
  std::atomic<std::uint64_t> api_errors{0};      // failed requests (transport or HTTP status)
  std::atomic<std::uint64_t> oversized{0};       // objects refused for their size
  std::atomic<std::uint64_t> events{0};          // ADDED/MODIFIED/DELETED applied
  std::atomic<std::uint64_t> bookmarks{0};
};

class Reflector {
 public:
  // Everything passed must outlive the reflector.
  Reflector(ApiClient& client, Resource resource, Sink& sink, Clock& clock, Logger log,
            ReflectorOptions options);

  // Lists and watches until `stop` is requested. Call once.
  void run(std::stop_token stop);
  // Ends the request in flight; with a stop request, makes run() return promptly.
  void cancel() { call_.cancel(); }

  // True once a list has completed.
  bool synced() const { return synced_.load(std::memory_order_acquire); }
  const ReflectorCounters& counters() const { return counters_; }
  const Resource& resource() const { return resource_; }

 private:
  enum class WatchEnd { kClosed, kGone, kRelist, kFailed };
  struct WatchState;
  // run()'s state between lists and watches.
  struct RunState {
    std::string resource_version;
    bool need_list = true;
    bool stopped = false;      // a pause was cut short by the stop request
    int relists_in_a_row = 0;  // without a watch that ran to its timeout in between
  };

  bool relist(RunState& r, std::stop_token stop);
  bool pause(std::stop_token stop);
  webhook::Result<std::string> list();
  webhook::Result<std::string> list_once(bool& expired);
  WatchEnd watch(std::string& resource_version, std::stop_token stop);
  webhook::Status watch_line(std::string_view line, WatchState& w, std::string& resource_version);
  WatchEnd watch_end(const WatchState& w, const webhook::Result<int>& status,
                     const std::string& resource_version);
  std::string http_error(int status, const std::string& body) const;
  void log(LogLevel level, const std::string& line) const;

  ApiClient& client_;
  Resource resource_;
  Sink& sink_;
  Clock& clock_;
  Logger log_;
  ReflectorOptions options_;
  Backoff backoff_;
  std::uint64_t rng_state_;
  Call call_;
  std::atomic<bool> synced_{false};
  ReflectorCounters counters_;
};

}  // namespace kube
