#pragma once
// A kube-apiserver stand-in on 127.0.0.1 for the lib/kube tests, the legacy benchmark and the
// fake-kube-apiserver process. Reads: list and watch of pods, nodes and services
// (GET /api/v1/<resource>) as the real one speaks them — label selectors, resourceVersion,
// limit/continue (or a whole list when `ignore_limit`, as the watch cache does), chunked
// JSON-lines watches with bookmarks and timeoutSeconds, 410 Gone for a compacted resourceVersion
// (an ERROR event, or an HTTP 410 when `gone_as_status`), bearer-token checks.
//
// Also written: v1 Secrets (namespaced; data base64, type immutable, kubernetes.io/tls needs
// tls.crt and tls.key) and the cluster-scoped admissionregistration.k8s.io/v1
// Mutating/ValidatingWebhookConfigurations under /apis/admissionregistration.k8s.io/v1/<resource>
// [/{name}], with the same write semantics as Leases below but for create-on-update (none) and
// unconditional updates (allowed). forbid_writes() makes writes of one resource answer 403.
//
// Also read (not written): ray.io/v1 RayClusters and discovery.k8s.io/v1 EndpointSlices, listed
// per namespace or cluster-wide. RBAC for tests: forbid() makes one resource answer 403 as kube's
// authorizer words it.
//
// Namespaced objects: pods and services under /api/v1/namespaces/{ns}/<resource>[/{name}] and
// coordination.k8s.io/v1 Leases under /apis/coordination.k8s.io/v1/namespaces/{ns}/leases[/{name}]
// (also listed and watched cluster-wide at /apis/coordination.k8s.io/v1/leases) with
// kube-apiserver's write semantics: GET of one object, POST (generateName, uid, resourceVersion,
// creationTimestamp; 409 AlreadyExists), PUT (optimistic concurrency: 409 Conflict on a stale
// resourceVersion; a Lease needs one — 422 without — and a PUT of a missing Lease creates it, as
// the Lease strategy allows), PATCH (merge-patch+json, json-patch+json), DELETE (DeleteOptions
// preconditions), a write that changes nothing keeping its resourceVersion, and ADDED/MODIFIED/
// DELETED watch events. Errors are Status objects with kube's reasons and messages.
//
// Faults for tests: dropped watches, failing reads and writes, slow writes, partitioned clients.
//
//   testing::FakeApiServer api({});                       // plain HTTP; .tls_cert/.tls_key: HTTPS
//   api.create("pods", pod_json);                         // name from generateName, uid, rv
//   api.drop_watches();                                   // cut every watch without a last chunk
//   api.compact();                                        // older resourceVersions: 410 Gone
//   api.fail_next_writes("leases", 409, 2);               // the next two Lease writes: Conflict
//   api.partition("token-b");                             // that client's requests: 503

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace testing {

// A status code and the JSON body answered with it.
struct FakeApiReply {
  int status;
  nlohmann::json body;
};

class FakeApiServer {
 public:
  struct Options {
    std::string tls_cert_file;  // both set: HTTPS
    std::string tls_key_file;
    // With HTTPS: every client must present a certificate signed by this CA (as kube-apiserver's
    // --client-ca-file), and a request with one is authenticated without a token.
    std::string tls_client_ca_file;
    std::set<std::string> tokens;  // accepted bearer tokens; empty: no check
    bool ignore_limit = false;     // serve every list whole
    bool gone_as_status = false;   // a compacted resourceVersion gets HTTP 410, not an ERROR event
    bool record_events = true;     // false: create() adds objects without watch events (bulk)
    int port = 0;                  // 0: any free port
    // Called before the API's own routes are added: more handlers on the same server (the
    // fake-kube-apiserver process's /fake/ control endpoints). They bypass the token check.
    std::function<void(httplib::Server&, FakeApiServer&)> extra_routes;
  };

  // Per resource, what writes (POST, PUT, PATCH, DELETE over HTTP) were asked and answered;
  // create(), update() and remove() are not counted.
  struct WriteStats {
    int attempts = 0;        // every write request received, whatever its answer
    int writes = 0;          // answered 2xx
    int creates = 0;         // 2xx POSTs, and PUTs that created
    int updates = 0;         // 2xx PUTs and PATCHes that updated (no-op ones included)
    int deletes = 0;         // 2xx DELETEs
    int conflicts = 0;       // answered 409 Conflict (stale resourceVersion, failed precondition,
                             // or injected)
    int already_exists = 0;  // answered 409 AlreadyExists
  };

  explicit FakeApiServer(Options options);
  ~FakeApiServer();
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  int port() const { return port_; }

  // The C++ side, for any resource, without the HTTP checks and not counted in write_stats().
  // Adds an object (metadata.name from generateName when unset; uid, resourceVersion, the
  // resource's kind and apiVersion and, but for nodes, a namespace of "default" when missing) and
  // records an ADDED event; an object of that namespace/name is replaced. Returns it.
  nlohmann::json create(const std::string& resource, nlohmann::json object);
  // Replaces an existing object (MODIFIED); false when there is none of that namespace/name.
  bool update(const std::string& resource, nlohmann::json object);
  // Deletes it (DELETED); false when absent.
  bool remove(const std::string& resource, const std::string& ns, const std::string& name);
  std::vector<nlohmann::json> objects(const std::string& resource) const;
  // One object; `ns` empty for cluster-scoped resources.
  std::optional<nlohmann::json> get(const std::string& resource, const std::string& ns,
                                    const std::string& name) const;
  std::int64_t resource_version() const;

  // Faults.
  void drop_watches();    // every open watch ends without its terminating chunk
  void compact();         // resourceVersions before now are gone: watches from them get 410
  void send_bookmarks();  // a BOOKMARK on every open watch
  // The next `count` requests for `resource` (list or watch) answer `status` with a Status body.
  void fail_next(const std::string& resource, int status, int count = 1);
  // Every later read (list, watch, get) of `resource` answers 403 Forbidden as RBAC does,
  // naming `user`: a client whose role does not grant that resource.
  void forbid(const std::string& resource,
              const std::string& user = "system:serviceaccount:default:reader");
  // Every later write (POST, PUT, PATCH, DELETE) of `resource` answers 403 as RBAC does.
  void forbid_writes(const std::string& resource,
                     const std::string& user = "system:serviceaccount:default:reader");
  // The same for watch requests only.
  void fail_next_watch(const std::string& resource, int status, int count = 1);
  // The next `count` writes (POST, PUT, PATCH, DELETE) of `resource` answer `status` with a
  // Status body (409 Conflict, 500 InternalError, 503 ServiceUnavailable, 429 TooManyRequests,
  // 504 Timeout, ...) and change nothing.
  void fail_next_writes(const std::string& resource, int status, int count = 1);
  // Every write waits this long before it is processed, as with a slow etcd (0: none).
  void set_write_delay(std::chrono::milliseconds delay);
  // Every request bearing bearer token `token` answers 503 at once and every open watch opened
  // with it ends without its terminating chunk, until heal(). Several tokens may be partitioned.
  void partition(const std::string& token);
  void heal();  // lifts every partition
  void set_tokens(std::set<std::string> tokens);
  void set_ignore_limit(bool ignore);
  // Starts (or stops) recording watch events, e.g. after a bulk load made with it off.
  void set_record_events(bool record);

  // What was asked.
  int lists(const std::string& resource) const;
  int watches(const std::string& resource) const;
  int open_watches() const;
  std::vector<std::string> queries() const;   // path?query of every read (GET), in order
  std::set<std::string> tokens_seen() const;  // bearer tokens received
  // The subject CNs of the client certificates requests were authenticated with.
  std::set<std::string> client_subjects_seen() const;
  WriteStats write_stats(const std::string& resource) const;
  std::map<std::string, WriteStats> write_stats() const;  // every resource written to
  int writes(const std::string& resource) const { return write_stats(resource).writes; }
  int write_attempts(const std::string& resource) const { return write_stats(resource).attempts; }
  int creates(const std::string& resource) const { return write_stats(resource).creates; }
  int updates(const std::string& resource) const { return write_stats(resource).updates; }
  int deletes(const std::string& resource) const { return write_stats(resource).deletes; }
  int conflicts(const std::string& resource) const { return write_stats(resource).conflicts; }

 private:
  struct Event {
    std::int64_t rv;
    std::string resource;
    std::string type;
    nlohmann::json object;
  };
  struct Watch;
  using Reply = FakeApiReply;

  void handle_read(const std::string& resource, const std::string& ns, const std::string& name,
                   const httplib::Request& req, httplib::Response& res);
  void handle_write(const std::string& resource, const std::string& ns, const std::string& name,
                    const httplib::Request& req, httplib::Response& res);
  void serve_list(const std::string& resource, const std::string& ns, const httplib::Request& req,
                  httplib::Response& res);
  void serve_watch(const std::string& resource, const std::string& ns, const std::string& token,
                   const httplib::Request& req, httplib::Response& res);
  // The write verbs, with mu_ held.
  Reply create_locked(const std::string& resource, const std::string& ns, const std::string& body);
  Reply replace_locked(const std::string& resource, const std::string& ns, const std::string& name,
                       const std::string& body);
  Reply patch_locked(const std::string& resource, const std::string& ns, const std::string& name,
                     const std::string& content_type, const std::string& body);
  Reply delete_locked(const std::string& resource, const std::string& ns, const std::string& name,
                      const std::string& body);
  // Stores `object` (already checked) as the new state of an existing object: a new
  // resourceVersion and a MODIFIED event, or nothing when it is unchanged.
  Reply checked_update_locked(const std::string& resource, bool unconditional,
                              nlohmann::json& stored, const std::string& name,
                              nlohmann::json object);
  Reply commit_update_locked(const std::string& resource, nlohmann::json& stored,
                             nlohmann::json object);
  Reply store_new_locked(const std::string& resource, const std::string& ns, nlohmann::json object);
  std::string random_suffix_locked();
  std::string random_uid_locked();
  void record(const std::string& resource, const std::string& type, const nlohmann::json& object);
  // Whether the request is authenticated (a token accepted, or a verified client certificate),
  // with mu_ held.
  bool authenticated_locked(const httplib::Request& req, const std::string& token);

  Options options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::map<std::string, nlohmann::json>> objects_;  // resource -> ns/name
  std::deque<Event> events_;
  std::int64_t rv_ = 100;
  std::int64_t compacted_ = 0;
  std::uint64_t drop_generation_ = 0;
  std::uint64_t bookmark_generation_ = 0;
  bool stopping_ = false;
  std::uint64_t next_uid_ = 1;
  std::map<std::string, std::deque<int>> failures_;
  std::map<std::string, int> lists_;
  std::map<std::string, int> watches_;
  int open_watches_ = 0;
  std::vector<std::string> queries_;
  std::set<std::string> tokens_seen_;
  std::set<std::string> client_subjects_seen_;
  std::map<std::string, std::deque<int>> write_failures_;
  std::map<std::string, WriteStats> write_stats_;
  std::chrono::milliseconds write_delay_{0};
  std::set<std::string> partitioned_;
  std::map<std::string, std::string> forbidden_;         // resource -> the user RBAC names
  std::map<std::string, std::string> forbidden_writes_;  // the same for writes
  std::map<std::string, std::uint64_t> partition_cuts_;  // token -> times partitioned
  std::mt19937_64 random_{std::random_device{}()};
};

// Whether `labels` (a metadata.labels object, or null) satisfy a selector such as
// "a=b,c" (equality and existence terms only).
bool selector_matches(const std::string& selector, const nlohmann::json* labels);

}  // namespace testing
