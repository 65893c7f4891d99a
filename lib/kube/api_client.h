#pragma once
// Requests to the Kubernetes API: GET with the body streamed to a callback as it arrives (lists
// and watches), and small requests answered whole (get, create, update, delete of one object).
//
//   auto client = kube::ApiClient::create(config);              // InvalidArgument: bad CA/cert
//   kube::Call call;                                             // another thread may cancel it
//   std::string error_body;
//   webhook::Result<int> status = (*client)->get(
//       "/api/v1/pods?watch=1", [&](std::string_view bytes) { return consume(bytes); },
//       std::chrono::seconds(330), call, &error_body);
//   // status: the HTTP status (the body went to the callback only for 200), or Unavailable
//   // naming the server and what failed (connect, TLS verification, read timeout, cancelled).
//   webhook::Result<kube::ApiClient::Reply> r = (*client)->send(
//       "PUT", "/apis/coordination.k8s.io/v1/namespaces/ray-system/leases/x", body,
//       "application/json", std::chrono::seconds(2));   // r->status, r->body (up to 4 MiB)
//
// HTTPS verifies the server's certificate against the configured CA only (never the system's
// CAs) and its name or IP against the host; the bearer token is re-read from its file when it
// changes, and after a 401. With an exec credential plugin (ClusterConfig::exec) the token or
// client certificate comes from it, cached until it expires; a 401 to send() runs the plugin
// again and sends the request once more. get() opens a connection per request (lists and watches
// are few and long); send() keeps up to four connections alive for the next request.

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status/result.h"
#include "kube/clock.h"
#include "kube/config.h"
#include "kube/exec_credential.h"

namespace httplib {
class ClientImpl;
}

namespace kube {

// A handle on the request a thread is making, so another thread can end it (on shutdown).
class Call {
 public:
  // Ends the request in flight (its socket is shut down) and refuses later ones. Thread-safe.
  void cancel();
  bool cancelled() const;

 private:
  friend class ApiClient;
  bool attach(httplib::ClientImpl* client);  // false when already cancelled
  void detach();

  mutable std::mutex mu_;
  httplib::ClientImpl* active_ = nullptr;
  bool cancelled_ = false;
};

// Percent-encodes a query parameter value (RFC 3986 unreserved characters pass).
std::string url_encode(std::string_view value);

class ApiClient {
 public:
  using BodyFn = std::function<bool(std::string_view bytes)>;  // false: stop reading

  // Checks that the CA and client certificate parse. InvalidArgument naming what does not.
  static webhook::Result<std::unique_ptr<ApiClient>> create(const ClusterConfig& config);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  // GET base_path + `path_query`. For status 200 the body goes to `on_body` (decompressed); for
  // other statuses up to 64 KiB of it go to `error_body` (when not null). Unavailable for a
  // transport failure, a callback that returned false, or a cancelled `call`. A 401 makes the next
  // request re-read the token file.
  // `on_status`, when set, hears the status as soon as the headers arrive (a watch is then
  // established, before any event).
  webhook::Result<int> get(const std::string& path_query, const BodyFn& on_body,
                           Duration read_timeout, Call& call, std::string* error_body,
                           const std::function<void(int)>& on_status = {});

  struct Reply {
    int status = 0;
    std::string body;  // whole, up to 4 MiB (more is Unavailable)
  };
  // One request answered whole: `method` (GET, POST, PUT, PATCH, DELETE) to base_path +
  // `path_query` with `body` of `content_type` ("" = application/json; no body for a GET when
  // empty). `timeout` bounds the whole call: connecting, sending and reading, and the one retry
  // on a new connection when a kept-alive one turns out closed; a `timeout` of zero or less sends
  // nothing. Unavailable for a transport failure, no time or a cancelled `call`; any HTTP status
  // is a Reply.
  webhook::Result<Reply> send(std::string_view method, const std::string& path_query,
                              const std::string& body, std::string_view content_type,
                              Duration timeout, Call* call = nullptr);

  const ClusterConfig& config() const { return config_; }
  // "https://host:port" for messages.
  std::string server() const;
  TokenSource& token() { return token_; }
  // The exec plugin's credential source; null without one.
  ExecCredentialSource* exec_credentials() { return exec_.get(); }

 private:
  struct Tls;
  explicit ApiClient(ClusterConfig config);
  std::unique_ptr<httplib::ClientImpl> connect(const std::string& cert_pem,
                                               const std::string& key_pem) const;
  struct Prepared;  // a connection set up for one request, and its headers
  webhook::Result<Prepared> prepare(Duration timeout, bool connect_now = true);
  webhook::Error transport_error(std::string_view method, const std::string& path_query, int error,
                                 bool cancelled) const;
  // kUnavailable: "<method> <URL without the query>: <what>".
  webhook::Error call_error(std::string_view method, const std::string& path_query,
                            const std::string& what) const;
  void saw_status(int status);
  using SteadyTime = std::chrono::steady_clock::time_point;
  webhook::Result<Reply> send_once(std::string_view method, const std::string& path_query,
                                   const std::string& body, std::string_view content_type,
                                   SteadyTime deadline, Call* call);
  std::unique_ptr<httplib::ClientImpl> take_idle();
  void put_idle(std::unique_ptr<httplib::ClientImpl> client);

  ClusterConfig config_;
  TokenSource token_;
  std::unique_ptr<ExecCredentialSource> exec_;
  std::mutex mu_;
  bool force_token_ = false;
  std::vector<std::unique_ptr<httplib::ClientImpl>> idle_;  // kept-alive connections of send()
};

}  // namespace kube
