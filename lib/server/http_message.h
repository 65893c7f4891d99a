#pragma once
// What the transport (server::HttpServer) hands a route and what the route answers: plain data,
// no sockets, so routes are tested without a network.

#include <cstddef>
#include <string>
#include <string_view>

namespace server {

struct HttpRequestView {
  std::string_view method;
  std::string_view path;
  std::string_view content_type;
  // The body as read: whole, or its first bytes when too_large, timed_out or busy (a refusal
  // the transport found, HttpServerOptions::refuse; the connection closes after it).
  std::string_view body;
  bool too_large = false;  // longer than max_body_bytes (declared or read)
  bool timed_out = false;  // not whole when --read-timeout passed
  bool busy = false;       // the in-flight memory budget stayed full until the deadline
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
