#include "kube/reflector.h"

#include <random>

#include "kube/stream.h"

namespace kube {
namespace {

std::uint64_t pick_seed(std::uint64_t seed) { return seed != 0 ? seed : std::random_device{}(); }

// The message of a metav1.Status object; "" when it has none.
std::string status_message(const nlohmann::json& status) {
  if (status.is_object()) {
    if (auto it = status.find("message"); it != status.end() && it->is_string()) {
      return it->get<std::string>().substr(0, 500);
    }
  }
  return "";
}

// The message of a metav1.Status body, else the body's start.
std::string status_message(const std::string& body) {
  std::string m = status_message(nlohmann::json::parse(body, nullptr, false));
  return m.empty() ? body.substr(0, 200) : m;
}

std::string resource_version_of(const nlohmann::json& object) {
  auto md = object.find("metadata");
  if (md == object.end() || !md->is_object()) {
    return "";
  }
  auto rv = md->find("resourceVersion");
  return rv != md->end() && rv->is_string() ? rv->get<std::string>() : "";
}

}  // namespace

Reflector::Reflector(ApiClient& client, Resource resource, Sink& sink, Clock& clock, Logger log,
                     ReflectorOptions options)
    : client_(client),
      resource_(std::move(resource)),
      sink_(sink),
      clock_(clock),
      log_(std::move(log)),
      options_(options),
      backoff_(options.backoff, pick_seed(options.seed)),
      rng_state_(pick_seed(options.seed) ^ 0x9e3779b97f4a7c15ULL) {}

void Reflector::log(LogLevel level, const std::string& line) const {
  if (log_) {
    log_(level, resource_.name + " " + line);
  }
}

std::string Reflector::http_error(int status, const std::string& body) const {
  std::string hint;
  if (status == 401) {
    hint = " (the token was refused; it is re-read before the next attempt)";
  } else if (status == 403) {
    hint = " (the webhook's service account needs get, list and watch on " + resource_.name +
           " in all namespaces: see the chart's ClusterRole)";
  }
  return "HTTP " + std::to_string(status) + ": " + status_message(body) + hint;
}

webhook::Result<std::string> Reflector::list_once(bool& expired) {
  std::string continue_token;
  std::string resource_version;
  sink_.list_begin();
  do {
    std::string query = resource_.path + "?labelSelector=" + url_encode(resource_.label_selector) +
                        "&limit=" + std::to_string(options_.page_size);
    if (!continue_token.empty()) {
      query += "&continue=" + url_encode(continue_token);
    }
    webhook::Status body_error;
    ListScanner scan(options_.max_object_bytes, [&](nlohmann::json item) {
      sink_.listed(item);
      return webhook::Status();
    });
    std::string error_body;
    webhook::Result<int> status = client_.get(
        query,
        [&](std::string_view bytes) {
          body_error = scan.feed(bytes);
          return body_error.ok();
        },
        options_.list_timeout, call_, &error_body);
    if (!body_error.ok()) {
      sink_.list_abort();
      return body_error.error();
    }
    if (!status) {
      sink_.list_abort();
      return status.error();
    }
    if (*status == 410 && !continue_token.empty()) {
      expired = true;  // the continue token expired: list again from the start
      sink_.list_abort();
      return webhook::Error{webhook::ErrorCode::kUnavailable, "continue token expired"};
    }
    if (*status != 200) {
      sink_.list_abort();
      return webhook::Error{webhook::ErrorCode::kUnavailable, http_error(*status, error_body)};
    }
    if (webhook::Status s = scan.finish(); !s) {
      sink_.list_abort();
      return s.error();
    }
    continue_token = scan.continue_token();
    resource_version = scan.resource_version();
  } while (!continue_token.empty());
  sink_.list_end();
  return resource_version;
}

webhook::Result<std::string> Reflector::list() {
  bool expired = false;
  webhook::Result<std::string> rv = list_once(expired);
  if (!rv && expired) {
    ++counters_.gone;
    log(LogLevel::kInfo, "list: the continue token expired (410); listing again from the start");
    expired = false;
    rv = list_once(expired);
  }
  return rv;
}

webhook::Result<WatchEvent> decode_watch_event(std::string_view line) {
  nlohmann::json ev = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!ev.is_object() || !ev.contains("type") || !ev["type"].is_string()) {
    return webhook::invalid_argument("a watch event is not a JSON object with a type");
  }
  WatchEvent out;
  const auto& type = ev["type"].get_ref<const std::string&>();
  if (type == "ADDED" || type == "MODIFIED" || type == "DELETED") {
    out.kind = WatchEvent::Kind::kObject;
    out.type = type == "ADDED"      ? EventType::kAdded
               : type == "MODIFIED" ? EventType::kModified
                                    : EventType::kDeleted;
  } else {
    out.kind = type == "BOOKMARK" ? WatchEvent::Kind::kBookmark
               : type == "ERROR"  ? WatchEvent::Kind::kError
                                  : WatchEvent::Kind::kOther;
  }
  if (auto found = ev.find("object"); found != ev.end()) {
    out.object = std::move(*found);
  }
  if (out.kind == WatchEvent::Kind::kError) {
    const nlohmann::json& o = out.object;
    out.error_code = o.is_object() && o.contains("code") && o["code"].is_number_integer()
                         ? o["code"].get<int>()
                         : 0;
  } else {
    out.resource_version = resource_version_of(out.object);
  }
  return out;
}

// What one watch request met, for watch_end to judge.
struct Reflector::WatchState {
  explicit WatchState(std::size_t max_line) : lines(max_line) {}
  LineSplitter lines;
  webhook::Status body_error;  // what made the body stop: a bad line, an ERROR event
  bool gone = false;           // an ERROR event with code 410
  bool connected = false;
  std::uint64_t seen = 0;  // lines
  TimePoint started;
  std::string error_body;
};

Reflector::WatchEnd Reflector::watch(std::string& resource_version, std::stop_token stop) {
  std::mt19937_64 rng(rng_state_++);
  auto min_s = std::max<std::int64_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(options_.min_watch_timeout).count());
  std::int64_t timeout_s = std::uniform_int_distribution<std::int64_t>(min_s, 2 * min_s - 1)(rng);
  std::string query =
      resource_.path + "?labelSelector=" + url_encode(resource_.label_selector) +
      "&watch=1&allowWatchBookmarks=true&resourceVersion=" + url_encode(resource_version) +
      "&timeoutSeconds=" + std::to_string(timeout_s);
  WatchState w(options_.max_object_bytes);
  w.started = clock_.now();
  auto on_line = [&](std::string_view line) { return watch_line(line, w, resource_version); };
  webhook::Result<int> status = client_.get(
      query,
      [&](std::string_view bytes) {
        w.body_error = w.lines.feed(bytes, on_line);
        return w.body_error.ok() && !stop.stop_requested();
      },
      Duration(std::chrono::seconds(timeout_s)) + options_.read_slack, call_, &w.error_body,
      [&](int code) {
        if (code == 200) {
          w.connected = true;
          sink_.watch_connected(true);
          ++counters_.watches;
        }
      });
  if (w.connected) {
    sink_.watch_connected(false);
  }
  if (stop.stop_requested()) {
    return WatchEnd::kClosed;
  }
  return watch_end(w, status, resource_version);
}

// One line of the watch stream: an event applied to the sink, a bookmark, or an ERROR event
// (which ends the stream).
webhook::Status Reflector::watch_line(std::string_view line, WatchState& w,
                                      std::string& resource_version) {
  ++w.seen;
  webhook::Result<WatchEvent> ev = decode_watch_event(line);
  if (!ev) {
    return ev.error();
  }
  switch (ev->kind) {
    case WatchEvent::Kind::kError:
      w.gone = w.gone || ev->error_code == 410;
      return webhook::Error{webhook::ErrorCode::kUnavailable,
                            "ERROR event: " + status_message(ev->object)};
    case WatchEvent::Kind::kBookmark:
      ++counters_.bookmarks;
      break;
    case WatchEvent::Kind::kObject:
      sink_.event(ev->type, ev->object);
      ++counters_.events;
      break;
    case WatchEvent::Kind::kOther:
      break;
  }
  if (!ev->resource_version.empty()) {
    resource_version = std::move(ev->resource_version);
  }
  return {};
}

// How a watch that was not stopped ended, counted and logged.
Reflector::WatchEnd Reflector::watch_end(const WatchState& w, const webhook::Result<int>& status,
                                         const std::string& resource_version) {
  if (w.gone) {
    ++counters_.gone;
    log(LogLevel::kInfo,
        "watch: resourceVersion " + resource_version + " is too old (410 Gone); listing again");
    return WatchEnd::kGone;
  }
  if (!w.body_error.ok()) {
    ++counters_.api_errors;
    if (w.body_error.error().code == webhook::ErrorCode::kResourceExhausted) {
      ++counters_.oversized;
      log(LogLevel::kError, "watch: " + w.body_error.error().message + "; listing again");
      return WatchEnd::kRelist;
    }
    log(LogLevel::kWarning, "watch: " + w.body_error.error().message);
    return WatchEnd::kFailed;
  }
  if (!status) {
    ++counters_.api_errors;
    log(LogLevel::kWarning, "watch: " + status.error().message);
    return WatchEnd::kFailed;
  }
  if (*status == 410) {
    ++counters_.gone;
    log(LogLevel::kInfo, "watch: 410 Gone; listing again");
    return WatchEnd::kGone;
  }
  if (*status != 200) {
    ++counters_.api_errors;
    log(LogLevel::kWarning, "watch: " + http_error(*status, w.error_body));
    return WatchEnd::kFailed;
  }
  if (w.lines.pending() > 0) {
    ++counters_.api_errors;
    log(LogLevel::kWarning, "watch: the stream ended in the middle of an event");
    return WatchEnd::kFailed;
  }
  if (w.seen == 0 && clock_.now() - w.started < std::chrono::seconds(1)) {
    // As client-go: a watch that ends at once without a line is a failure, not a timeout, or
    // a server answering that way would be asked again in a tight loop.
    ++counters_.api_errors;
    log(LogLevel::kWarning, "watch: the server ended the watch at once without an event");
    return WatchEnd::kFailed;
  }
  return WatchEnd::kClosed;  // the server's timeoutSeconds: resume from resource_version
}

// Lists and watches, resuming each watch from the last resourceVersion; lists again after 410
// Gone or an oversized object, and pauses (with backoff) after failures.
void Reflector::run(std::stop_token stop) {
  RunState r;
  while (!stop.stop_requested()) {
    if (r.need_list && !relist(r, stop)) {
      if (stop.stop_requested() || r.stopped) {
        break;
      }
      continue;
    }
    switch (watch(r.resource_version, stop)) {
      case WatchEnd::kClosed:
        backoff_.reset();
        r.relists_in_a_row = 0;
        break;
      case WatchEnd::kGone:
      case WatchEnd::kRelist:
        r.need_list = true;
        ++r.relists_in_a_row;
        break;
      case WatchEnd::kFailed:
        if (stop.stop_requested()) {
          break;
        }
        ++counters_.watch_restarts;
        if (!pause(stop)) {
          return;
        }
        break;
    }
  }
}

// The backoff's next pause, logged; false when `stop` ended it.
bool Reflector::pause(std::stop_token stop) {
  Duration d = backoff_.next();
  log(LogLevel::kInfo, "retrying in " + millis(d));
  return clock_.sleep_for(d, stop);
}

// The list before a watch. False when there is no list to watch from: it failed (then paused,
// r.stopped when the pause was cut short) or `stop` came.
bool Reflector::relist(RunState& r, std::stop_token stop) {
  if (r.relists_in_a_row >= 2 && !pause(stop)) {
    r.stopped = true;  // a server that answers every watch with 410 is not asked in a tight loop
    return false;
  }
  webhook::Result<std::string> rv = list();
  if (stop.stop_requested()) {
    return false;
  }
  if (!rv) {
    ++counters_.api_errors;
    if (rv.error().code == webhook::ErrorCode::kResourceExhausted) {
      ++counters_.oversized;
    }
    log(synced() ? LogLevel::kWarning : LogLevel::kError, "list: " + rv.error().message);
    r.stopped = !pause(stop);
    return false;
  }
  if (counters_.lists.fetch_add(1) > 0) {
    ++counters_.relists;
  }
  if (!synced()) {
    log(LogLevel::kInfo, "synced at resourceVersion " + *rv);
  }
  synced_.store(true, std::memory_order_release);
  r.resource_version = std::move(*rv);
  r.need_list = false;
  if (r.relists_in_a_row == 0) {
    backoff_.reset();
  }
  return true;
}

}  // namespace kube
