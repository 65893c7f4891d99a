#pragma once
// POST /mutate and POST /validate as HTTP, in named stages: check the envelope (docs/spec.md
// Envelope) -> decode -> the Handler -> record (the one place that writes the admission's log
// line and metrics). The transport routes the two paths here directly; every other path goes to
// other(). No sockets here, so tests drive it directly.
//
//   server::AdmissionService service(handler, metrics, log, 7 << 20);
//   server::HttpReply reply = service.admit(server::Webhook::kMutate,
//                                           {.method = "POST", .path = "/mutate",
//                                            .content_type = "application/json", .body = body});
//   // reply.status == 200, reply.body is the AdmissionReview answer
//
// Checks, in order: method (405, Allow: POST), body size (413), a body that did not arrive in
// time (408) or was cut short (400), Content-Type application/json (415), then admission::decode
// (400, or 413 for nesting). Any other path is 404.
// Each failure is an AdmissionReview denial carrying that code when a request.uid can be read
// from the body (HTTP 200, as kube-apiserver expects), else an HTTP error whose body is one line
// of JSON (a metav1 Status). GET / answers "kuberay-tpu-webhook" (the Go webhook's probe path).

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "admission/handler.h"
#include "server/log.h"
#include "server/metrics.h"

namespace server {

struct HttpRequestView {
  std::string_view method;
  std::string_view path;
  std::string_view content_type;
  // The body as read: whole, or its first bytes when too_large or incomplete.
  std::string_view body;
  bool too_large = false;   // longer than max_body_bytes (declared or read)
  bool incomplete = false;  // the client stopped sending before the end
  bool timed_out = false;   // incomplete because --read-timeout passed (the connection closes)
};

// The answer to a request that did not arrive within --read-timeout (HTTP 408, or a denial
// with that code when its uid could be read).
inline constexpr std::string_view kReadTimeoutMessage =
    "the request did not arrive within --read-timeout; send it whole, without pauses";

struct HttpReply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  bool allow_post_header = false;  // "Allow: POST" (405)
  bool close = false;              // the body was not read whole: close after responding
};

class AdmissionService {
 public:
  AdmissionService(const admission::Handler& handler, Metrics& metrics, const Log& log,
                   std::size_t max_body_bytes)
      : handler_(handler), metrics_(metrics), log_(log), max_body_bytes_(max_body_bytes) {}

  // `webhook` is kMutate or kValidate: the path the transport routed.
  HttpReply admit(Webhook webhook, const HttpRequestView& request) const;
  // Any other path: GET / answers "kuberay-tpu-webhook", anything else is 404.
  HttpReply other(const HttpRequestView& request) const;
  std::size_t max_body_bytes() const { return max_body_bytes_; }

 private:
  struct Exchange;
  webhook::Status check_envelope(const HttpRequestView& request) const;
  admission::Response handle(Webhook webhook, const admission::Request& request) const;
  void record(Webhook webhook, const Exchange& exchange, std::chrono::nanoseconds latency) const;

  const admission::Handler& handler_;
  Metrics& metrics_;
  const Log& log_;
  std::size_t max_body_bytes_;
};

// Whether a Content-Type names application/json (parameters such as charset allowed).
bool is_json_content_type(std::string_view content_type);

// One line of JSON: a metav1 Status with `code` and `message`, for errors without a uid.
std::string status_json(int code, std::string_view message);

}  // namespace server
