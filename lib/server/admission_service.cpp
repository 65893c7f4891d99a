#include "server/admission_service.h"

#include <chrono>
#include <exception>
#include <vector>

#include "admission/review.h"
#include "base/json/access.h"

namespace server {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Stops at request.uid of a top-level object; everything else is skipped unparsed into values.
class UidSniffer final : public nlohmann::json_sax<json> {
 public:
  std::string uid;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool string(string_t& s) override {
    if (depth_ == 2 && in_request_ && key_ == "uid") {
      uid = s;
      return false;  // found: stop parsing
    }
    return value();
  }
  bool start_object(std::size_t) override {
    if (depth_ == 1 && key_ == "request") {
      in_request_ = true;
    }
    ++depth_;
    key_.clear();
    return true;
  }
  bool end_object() override {
    --depth_;
    if (depth_ == 1) {
      in_request_ = false;
    }
    return depth_ > 0;  // the top-level object ended without a uid
  }
  bool start_array(std::size_t) override {
    ++depth_;
    key_.clear();
    return depth_ > 1;  // a top-level array is not a review
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ <= 2) {
      key_ = k;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  bool value() {
    if (depth_ <= 2) {
      key_.clear();
    }
    return depth_ > 0;
  }

  int depth_ = 0;
  bool in_request_ = false;
  std::string key_;
};

// An envelope failure: an AdmissionReview denial when the uid is known, else an HTTP error.
struct Failure {
  int code;
  std::string message;
  std::string reason;
};

std::string_view generate_name(const admission::Request& r) {
  return webhook::string_member(webhook::member(r.object, "metadata"), "generateName")
      .value_or("");
}

std::string_view name_of(const admission::Request& r) {
  if (!r.name.empty()) {
    return r.name;
  }
  return webhook::string_member(webhook::member(r.object, "metadata"), "name").value_or("");
}

std::string_view outcome_of(const admission::Response& r) {
  if (!r.allowed) {
    return "denied";
  }
  return r.patch.is_array() && !r.patch.empty() ? "patched" : "allowed";
}

}  // namespace

std::string sniff_uid(std::string_view text) {
  UidSniffer sniffer;
  json::sax_parse(text.begin(), text.end(), &sniffer, nlohmann::detail::input_format_t::json,
                  /*strict=*/false);
  return sniffer.uid;
}

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

HttpReply AdmissionService::serve(const HttpRequestView& request) const {
  Clock::time_point start = Clock::now();
  Webhook webhook = request.path == "/mutate"     ? Webhook::kMutate
                    : request.path == "/validate" ? Webhook::kValidate
                                                  : Webhook::kOther;
  HttpReply reply;
  reply.close = request.too_large || request.incomplete || request.timed_out;
  if (webhook == Webhook::kOther) {
    if (request.path == "/" && (request.method == "GET" || request.method == "HEAD")) {
      reply.content_type = "text/plain";
      reply.body = "kuberay-tpu-webhook";
    } else {
      reply.status = 404;
      reply.body = status_json(404, "no such path " + std::string(request.path) +
                                        "; the webhook serves POST /mutate and POST /validate");
    }
    metrics_.request_started(webhook);
    metrics_.request_finished(webhook, reply.status, Clock::now() - start);
    log_.debug(2, "http", {{"method", request.method}, {"path", request.path},
                           {"code", reply.status}});
    return reply;
  }

  metrics_.request_started(webhook);
  std::optional<Failure> failure;
  if (request.method != "POST") {
    failure = Failure{405, "method " + std::string(request.method) + " is not allowed; send POST",
                      "method_not_allowed"};
    reply.allow_post_header = true;
  } else if (request.too_large) {
    failure = Failure{413,
                      "request body is larger than " + std::to_string(max_body_bytes_) +
                          " bytes (--max-body-bytes)",
                      "body_too_large"};
  } else if (request.timed_out) {
    failure = Failure{408, std::string(kReadTimeoutMessage), "request_timeout"};
  } else if (request.incomplete) {
    failure = Failure{400, "request body ended before its declared length", "malformed_request"};
  } else if (!is_json_content_type(request.content_type)) {
    failure = Failure{415,
                      "Content-Type is " +
                          (request.content_type.empty()
                               ? std::string("missing")
                               : "\"" + std::string(request.content_type) + "\"") +
                          "; expected application/json",
                      "unsupported_media_type"};
  }

  admission::Decoded decoded;
  if (!failure) {
    decoded = admission::decode(request.body);
    if (!decoded.request) {
      failure = Failure{webhook::http_code(decoded.error.code), decoded.error.message,
                        "malformed_request"};
    }
  }

  admission::Response response;
  std::string uid;
  if (failure) {
    uid = !decoded.uid.empty() ? decoded.uid : sniff_uid(request.body);
    response.uid = uid;
    response.allowed = false;
    response.code = failure->code;
    response.message = failure->message;
    response.reason = failure->reason;
    if (uid.empty()) {
      reply.status = failure->code;
      reply.body = status_json(failure->code, failure->message);
    } else {
      reply.body = admission::encode(response);
    }
  } else {
    const admission::Request& req = *decoded.request;
    uid = req.uid;
    try {
      response = handler_.handle(
          webhook == Webhook::kMutate ? admission::Endpoint::kMutate : admission::Endpoint::kValidate,
          req);
    } catch (const std::exception& e) {
      response = admission::denied(
          req.uid,
          webhook::Error{webhook::ErrorCode::kInternal,
                         std::string("internal error while answering the review: ") + e.what()},
          "internal_error");
    }
    reply.body = admission::encode(response);
  }

  int code = response.allowed ? 200 : response.code;
  auto latency = Clock::now() - start;
  metrics_.request_finished(webhook, code, latency);
  if (!response.allowed) {
    metrics_.denial(webhook, response.reason);
  }
  if (response.placement) {
    metrics_.placement(podpatch::path_name(response.placement->path));
  }

  const admission::Request* req = decoded.request ? &*decoded.request : nullptr;
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(latency).count();
  std::string_view outcome = failure ? "rejected" : outcome_of(response);
  std::int64_t replica = response.placement ? response.placement->slot.replica : -1;
  std::int64_t host = response.placement ? response.placement->slot.host : -1;
  std::vector<LogField> fields = {
      {"webhook", webhook_name(webhook)},
      {"uid", uid},
      {"namespace", req ? std::string_view(req->ns) : ""},
      {"name", req ? name_of(*req) : ""},
      {"generateName", req ? generate_name(*req) : ""},
      {"kind", req ? std::string_view(req->kind) : ""},
      {"operation", req ? std::string_view(req->operation) : ""},
      {"dryRun", req ? req->dry_run : false},
      {"outcome", outcome}};
  if (response.allowed) {
    fields.insert(fields.end(),
                  {{"replica", replica},
                   {"host", host},
                   {"warnings", static_cast<std::int64_t>(response.warnings.size())}});
  } else {
    fields.insert(fields.end(), {{"code", code},
                                 {"reason", response.reason},
                                 {"message", response.message}});
  }
  fields.emplace_back("latency_us", static_cast<std::int64_t>(us));
  log_.info("admission", fields);
  if (log_.enabled(2)) {
    for (const std::string& w : response.warnings) {
      log_.debug(2, "admission warning", {{"uid", uid}, {"warning", w}});
    }
  }
  if (log_.enabled(3) && response.patch.is_array() && !response.patch.empty()) {
    log_.debug(3, "admission patch", {{"uid", uid}, {"patch", webhook::dump_json(response.patch)}});
  }
  return reply;
}

}  // namespace server
