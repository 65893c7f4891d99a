#include "server/admission_service.h"

#include <chrono>
#include <exception>
#include <vector>

#include "admission/review.h"
#include "base/json/access.h"
#include "podpatch/keys.h"
#include "podpatch/reasons.h"

namespace server {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// A label of the reviewed object, "" when it has none (or there is no request).
std::string_view object_label(const admission::Request* req, std::string_view key) {
  if (req == nullptr) {
    return {};
  }
  return webhook::string_member(webhook::member(req->object, "metadata", "labels"), key)
      .value_or(std::string_view());
}

}  // namespace

bool is_json_content_type(std::string_view content_type) {
  std::string_view media = content_type.substr(0, content_type.find(';'));
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) {
    media.remove_suffix(1);
  }
  constexpr std::string_view kJson = "application/json";
  if (media.size() != kJson.size()) {
    return false;
  }
  for (std::size_t i = 0; i < media.size(); ++i) {
    char c = media[i];
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
    if (c != kJson[i]) {
      return false;
    }
  }
  return true;
}

std::string status_json(int code, std::string_view message) {
  json status = {{"apiVersion", "v1"},
                 {"kind", "Status"},
                 {"status", "Failure"},
                 {"code", code},
                 {"message", message}};
  return webhook::dump_json(status);
}

// A refusal the transport found (HttpRequestView::refused), on any path.
webhook::Status AdmissionService::check_transport_refusal(const HttpRequestView& request) const {
  using webhook::ErrorCode;
  namespace reasons = podpatch::reasons;
  if (request.refused == Refused::kTooLarge) {
    return webhook::Error{ErrorCode::kResourceExhausted,
                          "request body is larger than " + std::to_string(max_body_bytes_) +
                              " bytes (" + body_limit_why_ + ")",
                          reasons::kBodyTooLarge};
  }
  if (request.refused == Refused::kBusy) {
    return webhook::Error{ErrorCode::kUnavailable,
                          "the webhook is busy with other large requests (its in-flight memory "
                          "budget, three quarters of --memory-limit, stayed full); retry",
                          reasons::kServerBusy};
  }
  if (request.refused == Refused::kTimedOut) {
    return webhook::Error{ErrorCode::kDeadlineExceeded, std::string(kReadTimeoutMessage),
                          reasons::kRequestTimeout};
  }
  return {};
}

// Stage 1: the HTTP envelope, before the body is parsed.
webhook::Status AdmissionService::check_envelope(const HttpRequestView& request) const {
  using webhook::ErrorCode;
  namespace reasons = podpatch::reasons;
  if (request.method != "POST") {
    return webhook::Error{ErrorCode::kMethodNotAllowed,
                          "method " + std::string(request.method) + " is not allowed; send POST",
                          reasons::kMethodNotAllowed};
  }
  RETURN_IF_ERROR(check_transport_refusal(request));
  if (!is_json_content_type(request.content_type)) {
    std::string given = request.content_type.empty()
                            ? std::string("missing")
                            : "\"" + std::string(request.content_type) + "\"";
    return webhook::Error{ErrorCode::kUnsupportedMediaType,
                          "Content-Type is " + given + "; expected application/json",
                          reasons::kUnsupportedMediaType};
  }
  return {};
}

// Stage 3: the Handler. An exception from a library it calls is a denial, not a crash.
admission::Response AdmissionService::handle(Webhook webhook,
                                             const admission::Request& request) const {
  try {
    return webhook == Webhook::kMutate ? handler_.mutate(request) : handler_.validate(request);
  } catch (const std::exception& e) {
    return admission::denied(
        request.uid,
        webhook::Error{webhook::ErrorCode::kInternal,
                       std::string("internal error while answering the review: ") + e.what(),
                       podpatch::reasons::kInternalError});
  }
}

// What one admission was: the request as decoded (or why it was refused) and the answer.
struct AdmissionService::Exchange {
  webhook::Result<admission::Request> request;
  admission::Response response;
};

HttpReply AdmissionService::admit(Webhook webhook, const HttpRequestView& http) const {
  Clock::time_point start = Clock::now();
  webhook::Status envelope = check_envelope(http);
  Exchange x{!envelope                     ? webhook::Result<admission::Request>(envelope.error())
             : webhook == Webhook::kMutate ? admission::decode_for_mutation(http.body)
                                           : admission::decode(http.body),
             {}};
  x.response = x.request ? handle(webhook, *x.request)
                         : admission::denied(admission::request_uid(http.body), x.request.error());
  x.response.audit = webhook == Webhook::kMutate;
  record(webhook, x, Clock::now() - start);

  HttpReply reply;
  reply.close = http.refused != Refused::kNo;
  reply.metric_code = x.response.allowed ? 200 : x.response.code;
  reply.allow_post_header =
      !envelope && envelope.error().code == webhook::ErrorCode::kMethodNotAllowed;
  if (!x.request && x.response.uid.empty()) {  // nothing to echo: an HTTP error
    reply.status = x.response.code;
    reply.body = status_json(x.response.code, x.response.message);
  } else {
    reply.body = admission::encode(x.response);
  }
  return reply;
}

HttpReply AdmissionService::other(const HttpRequestView& request) const {
  HttpReply reply;
  reply.close = request.refused != Refused::kNo;
  if (webhook::Status refused = check_transport_refusal(request); !refused) {
    reply.status = webhook::http_code(refused.error().code);
    reply.body = status_json(reply.status, refused.error().message);
  } else if (request.path == "/" && (request.method == "GET" || request.method == "HEAD")) {
    reply.content_type = "text/plain";
    reply.body = "kuberay-tpu-webhook";
  } else {
    reply.status = 404;
    reply.body = status_json(404, "no such path " + std::string(request.path) +
                                      "; the webhook serves POST /mutate and POST /validate");
  }
  log_.debug(2, "http",
             {{"method", request.method}, {"path", request.path}, {"code", reply.status}});
  return reply;
}

// Stage 4: the one place that writes an admission's metrics and log line.
void AdmissionService::record(Webhook webhook, const Exchange& x,
                              std::chrono::nanoseconds latency) const {
  const admission::Response& response = x.response;
  int code = response.allowed ? 200 : response.code;
  if (!response.allowed) {
    metrics_.denial(webhook, response.reason);
  }
  if (response.placement) {
    metrics_.placement(podpatch::path_name(response.placement->path));
  }
  if (!response.omitted.empty()) {
    metrics_.slicebuilder_omitted();  // the only variable ever left out (M8.2)
  }
  const admission::Request* req = x.request ? &*x.request : nullptr;
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(latency).count();
  std::vector<LogField> fields;
  fields.reserve(16);  // every field of the line: one allocation, not a regrowth
  fields.insert(
      fields.end(),
      {{"webhook", webhook_name(webhook)},
       {"uid", response.uid},
       {"namespace", req ? std::string_view(req->ns) : ""},
       {"name", req ? std::string_view(req->name.empty() ? req->object_name : req->name) : ""},
       {"generateName", req ? std::string_view(req->generate_name) : ""},
       {"kind", req ? std::string_view(req->kind) : ""},
       {"operation", req ? std::string_view(req->operation) : ""},
       {"dryRun", req ? req->dry_run : false},
       {"cluster", object_label(req, podpatch::keys::kClusterLabel)},
       {"group", object_label(req, podpatch::keys::kGroupLabel)},
       {"outcome", req ? admission::outcome(response) : "rejected"}});
  if (response.allowed) {
    const std::optional<podpatch::Placement>& placed = response.placement;
    fields.insert(fields.end(),
                  {{"placement", placed ? podpatch::path_detail(placed->path) : ""},
                   {"replica", placed ? std::int64_t{placed->slot.replica} : -1},
                   {"host", placed ? std::int64_t{placed->slot.host} : -1},
                   {"warnings", static_cast<std::int64_t>(response.warnings.size())}});
  } else {
    fields.insert(fields.end(),
                  {{"code", code}, {"reason", response.reason}, {"message", response.message}});
  }
  fields.emplace_back("latency_us", static_cast<std::int64_t>(us));
  log_.info("admission", fields);
  if (log_.enabled(2)) {
    for (const std::string& w : response.warnings) {
      log_.debug(2, "admission warning", {{"uid", response.uid}, {"warning", w}});
    }
  }
  if (log_.enabled(3) && admission::has_patch(response)) {
    log_.debug(3, "admission patch", {{"uid", response.uid}, {"patch", response.patch}});
  }
}

}  // namespace server
