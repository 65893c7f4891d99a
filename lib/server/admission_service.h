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
// Checks, in order: method (405, Allow: POST), body size (413), the in-flight budget (503), a
// body that did not arrive in time (408), Content-Type application/json (415), then
// admission::decode (400, or 413 for nesting). Any other path is 404 (a refusal the transport
// found there keeps its own code).
// Each failure is an AdmissionReview denial carrying that code when a request.uid can be read
// from the body (HTTP 200, as kube-apiserver expects), else an HTTP error whose body is one line
// of JSON (a metav1 Status). GET / answers "kuberay-tpu-webhook" (the Go webhook's probe path).

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "admission/handler.h"
#include "server/http_message.h"
#include "server/log.h"
#include "server/metrics.h"

namespace server {

class AdmissionService {
 public:
  AdmissionService(const admission::Handler& handler, Metrics& metrics, const Log& log,
                   std::size_t max_body_bytes)
      : handler_(handler), metrics_(metrics), log_(log), max_body_bytes_(max_body_bytes) {}

  // `webhook` is kMutate or kValidate: the path the transport routed.
  HttpReply admit(Webhook webhook, const HttpRequestView& request) const;
  // Any other path: GET / answers "kuberay-tpu-webhook", anything else is 404; a refusal the
  // transport found (HttpRequestView::refused) is a metav1 Status of its own code (413, 503,
  // 408), never an answer to the path.
  HttpReply other(const HttpRequestView& request) const;
  std::size_t max_body_bytes() const { return max_body_bytes_; }
  // Lowers the largest body accepted below --max-body-bytes, `why` saying what sets it and how
  // to raise it (the 413 denial's message names it). Before serving: not thread-safe.
  void limit_body(std::size_t bytes, std::string why) {
    max_body_bytes_ = bytes;
    body_limit_why_ = std::move(why);
  }

 private:
  struct Exchange;
  webhook::Status check_envelope(const HttpRequestView& request) const;
  webhook::Status check_transport_refusal(const HttpRequestView& request) const;
  admission::Response handle(Webhook webhook, const admission::Request& request) const;
  void record(Webhook webhook, const Exchange& exchange, std::chrono::nanoseconds latency) const;

  const admission::Handler& handler_;
  Metrics& metrics_;
  const Log& log_;
  std::size_t max_body_bytes_;
  std::string body_limit_why_ = "--max-body-bytes";
};

// Whether a Content-Type names application/json (parameters such as charset allowed).
bool is_json_content_type(std::string_view content_type);

}  // namespace server
