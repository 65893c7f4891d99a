#pragma once
// What the transport (server::HttpServer) hands a route and what the route answers: plain data,
// no sockets, so routes are tested without a network.

#include <cstddef>
#include <string>
#include <string_view>

namespace server {

// A refusal the transport found before a request was whole, which the route words
// (HttpServerOptions::refuse); the connection closes after its answer.
enum class Refused {
  kNo,
  kTooLarge,  // the body is longer than max_body_bytes (declared or read)
  kTimedOut,  // not whole when --read-timeout passed
  kBusy,      // the in-flight memory budget stayed full until the deadline
};

struct HttpRequestView {
  std::string_view method;
  std::string_view path;
  std::string_view content_type;
  // The body as read: whole, or its first bytes when refused.
  std::string_view body;
  Refused refused = Refused::kNo;
};

struct HttpReply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  bool allow_post_header = false;  // "Allow: POST" (405)
  bool close = false;              // the body was not read whole: close after responding
  // The code the request metrics count: the AdmissionReview's status code when the answer is a
  // review (HTTP 200 carrying a denial), else 0 for `status`.
  int metric_code = 0;
};

// The answer to a request that did not arrive within --read-timeout (HTTP 408, or a denial
// with that code when its uid could be read).
inline constexpr std::string_view kReadTimeoutMessage =
    "the request did not arrive within --read-timeout; send it whole, without pauses";

// One line of JSON: a metav1 Status with `code` and `message`, for errors without a uid.
std::string status_json(int code, std::string_view message);

}  // namespace server
