#pragma once
// A kube-apiserver stand-in on 127.0.0.1 for the lib/kube tests and the legacy benchmark: list
// and watch of pods, nodes and services (GET /api/v1/<resource>) as the real one speaks them —
// label selectors, resourceVersion, limit/continue (or a whole list when `ignore_limit`, as the
// watch cache does), chunked JSON-lines watches with bookmarks and timeoutSeconds, 410 Gone for a
// compacted resourceVersion (an ERROR event, or an HTTP 410 when `gone_as_status`), bearer-token
// checks — plus faults for tests: dropped watches, failing requests.
//
//   testing::FakeApiServer api({});                       // plain HTTP; .tls_cert/.tls_key: HTTPS
//   api.create("pods", pod_json);                         // name from generateName, uid, rv
//   api.drop_watches();                                   // cut every watch without a last chunk
//   api.compact();                                        // older resourceVersions: 410 Gone

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace httplib {
class Server;
struct Request;
struct Response;
}

namespace testing {

class FakeApiServer {
 public:
  struct Options {
    std::string tls_cert_file;  // both set: HTTPS
    std::string tls_key_file;
    std::set<std::string> tokens;  // accepted bearer tokens; empty: no check
    bool ignore_limit = false;     // serve every list whole
    bool gone_as_status = false;   // a compacted resourceVersion gets HTTP 410, not an ERROR event
    bool record_events = true;     // false: create() adds objects without watch events (bulk)
  };

  explicit FakeApiServer(Options options);
  ~FakeApiServer();
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  int port() const { return port_; }

  // Adds an object (metadata.name from generateName when unset; uid, resourceVersion and, for
  // pods, a namespace of "default" when missing) and records an ADDED event. Returns it.
  nlohmann::json create(const std::string& resource, nlohmann::json object);
  // Replaces an existing object (MODIFIED); false when there is none of that namespace/name.
  bool update(const std::string& resource, nlohmann::json object);
  // Deletes it (DELETED); false when absent.
  bool remove(const std::string& resource, const std::string& ns, const std::string& name);
  std::vector<nlohmann::json> objects(const std::string& resource) const;
  std::int64_t resource_version() const;

  // Faults.
  void drop_watches();    // every open watch ends without its terminating chunk
  void compact();         // resourceVersions before now are gone: watches from them get 410
  void send_bookmarks();  // a BOOKMARK on every open watch
  // The next `count` requests for `resource` (list or watch) answer `status` with a Status body.
  void fail_next(const std::string& resource, int status, int count = 1);
  // The same for watch requests only.
  void fail_next_watch(const std::string& resource, int status, int count = 1);
  void set_tokens(std::set<std::string> tokens);
  void set_ignore_limit(bool ignore);

  // What was asked.
  int lists(const std::string& resource) const;
  int watches(const std::string& resource) const;
  int open_watches() const;
  std::vector<std::string> queries() const;   // path?query of every request, in order
  std::set<std::string> tokens_seen() const;  // bearer tokens received

 private:
  struct Event {
    std::int64_t rv;
    std::string resource;
    std::string type;
    nlohmann::json object;
  };
  struct Watch;

  void serve_list(const std::string& resource, const httplib::Request& req,
                  httplib::Response& res);
  void serve_watch(const std::string& resource, const httplib::Request& req,
                   httplib::Response& res);
  void record(const std::string& resource, const std::string& type, const nlohmann::json& object);

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
};

// Whether `labels` (a metadata.labels object, or null) satisfy a selector such as
// "a=b,c" (equality and existence terms only).
bool selector_matches(const std::string& selector, const nlohmann::json* labels);

}  // namespace testing
