#include "server/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "base/json/write.h"
#include "base/thread/name.h"

namespace server {
namespace {

constexpr std::size_t kFlushBytes = std::size_t{64} * 1024;
constexpr auto kFlushInterval = std::chrono::milliseconds(200);
// What may wait for the flusher before lines are dropped (and counted in a line of their own).
constexpr std::size_t kMaxPendingBytes = std::size_t{8} << 20;

// The bytes of the character starting at s[i]: a UTF-8 lead byte and the continuation bytes after
// it (at most three), else the one byte.
std::size_t character_at(std::string_view s, std::size_t i) {
  std::size_t n = 1;
  if ((static_cast<unsigned char>(s[i]) & 0xc0) == 0xc0) {
    while (n < 4 && i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xc0) == 0x80) {
      ++n;
    }
  }
  return n;
}

// `s`, escaped for a JSON string or as it is, whole characters while they fit in
// kMaxLogValueBytes; then the cut mark with the size of `s`.
void append_bounded(std::string& out, std::string_view s, bool escape) {
  std::size_t start = out.size();
  std::size_t i = 0;
  auto as_is = [escape](char ch) {  // ASCII written as it is
    auto c = static_cast<unsigned char>(ch);
    return c < 0x80 && !(escape && webhook::json_escaped(c, {.del = true}));
  };
  auto cut = [&] { out += "\xe2\x80\xa6(cut, " + std::to_string(s.size()) + " bytes)"; };  // …
  while (i < s.size()) {
    std::size_t run = i;  // bytes written as they are: appended at once, as far as they fit
    while (run < s.size() && as_is(s[run])) {
      ++run;
    }
    if (run > i) {
      std::size_t room = kMaxLogValueBytes - (out.size() - start);
      if (run - i > room) {
        out.append(s.data() + i, room);
        cut();
        return;
      }
      out.append(s.data() + i, run - i);
      i = run;
      continue;
    }
    std::size_t n = character_at(s, i);
    std::size_t before = out.size();
    for (std::size_t k = 0; k < n; ++k) {
      auto c = static_cast<unsigned char>(s[i + k]);
      if (escape && webhook::json_escaped(c, {.del = true})) {
        webhook::append_json_escape(out, c);
      } else {
        out.push_back(s[i + k]);
      }
    }
    if (out.size() - start > kMaxLogValueBytes) {
      out.resize(before);
      cut();
      return;
    }
    i += n;
  }
}

// `s` as a bounded JSON string: escaped as webhook::append_json_string escapes (and DEL too),
// but non-ASCII bytes as they are and the value cut as append_bounded cuts it.
void append_log_string(std::string& out, std::string_view s) {
  out.push_back('"');
  append_bounded(out, s, /*escape=*/true);
  out.push_back('"');
}

bool needs_quotes(std::string_view s) {
  if (s.empty() || s.size() > kMaxLogValueBytes) {
    return true;  // a value cut gets a mark with spaces
  }
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f) {
      return true;
    }
  }
  return false;
}

void append_text_value(std::string& out, std::string_view s) {
  if (needs_quotes(s)) {
    append_log_string(out, s);  // logfmt quoting: the same escapes as a JSON string
  } else {
    out.append(s);
  }
}

// Cloud Logging's LogSeverity name for a level: GKE's logging agent reads a JSON line's
// `severity` member into the entry's severity, and files a stderr line without one as ERROR.
std::string_view cloud_logging_severity(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return "DEBUG";
    case spdlog::level::info:
      return "INFO";
    case spdlog::level::warn:
      return "WARNING";
    case spdlog::level::err:
      return "ERROR";
    case spdlog::level::critical:
      return "CRITICAL";
    default:
      return "DEFAULT";
  }
}

// The pattern flag %* : the line's Cloud Logging severity.
class SeverityFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm& /*time*/,
              spdlog::memory_buf_t& dest) override {
    std::string_view name = cloud_logging_severity(msg.level);
    dest.append(name.data(), name.data() + name.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<SeverityFlag>();
  }
};

// Buffers formatted lines for its own thread to write: the request path formats a line and
// appends it under a short lock, and never makes a syscall for it. The flusher writes what is
// pending every 200 ms, or as soon as 64 KiB are, outside that lock; flush() (warnings and errors
// flush at once, and the last lines at exit) writes under it.
class BufferedFdSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  BufferedFdSink(int fd, LogFormat format)
      : fd_(fd), format_(format), flusher_(webhook::named_thread("log-flush", [this] { run(); })) {}
  ~BufferedFdSink() override {
    {
      std::lock_guard<std::mutex> lock(stop_mu_);
      stop_ = true;
    }
    stop_cv_.notify_one();
    flusher_.join();
    flush();
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    formatted_.clear();  // kept from line to line (under the sink's lock)
    formatter_->format(msg, formatted_);
    if (pending_.size() + formatted_.size() > kMaxPendingBytes) {
      ++dropped_;  // the flusher cannot keep up: drop rather than block the server
      return;
    }
    pending_.append(formatted_.data(), formatted_.size());
    if (pending_.size() >= kFlushBytes && !woken_) {
      woken_ = true;
      stop_cv_.notify_one();
    }
  }

  void flush_() override {
    write_all(pending_);
    pending_.clear();
  }

 private:
  void write_all(const std::string& text) const {
    std::size_t off = 0;
    while (off < text.size()) {
      ssize_t n = ::write(fd_, text.data() + off, text.size() - off);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        break;  // nowhere to write: drop rather than block the server
      }
      off += static_cast<std::size_t>(n);
    }
  }

  void run() {
    std::string batch;
    std::unique_lock<std::mutex> lock(stop_mu_);
    while (!stop_) {
      stop_cv_.wait_for(lock, kFlushInterval);
      {
        std::lock_guard<std::mutex> lock_sink(mutex_);
        batch.swap(pending_);
        woken_ = false;
        if (dropped_ > 0) {
          append_dropped_line(batch, dropped_);
          dropped_ = 0;
        }
      }
      write_all(batch);
      batch.clear();
    }
  }

  // A warning line of the sink's format saying that `dropped` lines were dropped. Under mutex_
  // (the formatter's lock).
  void append_dropped_line(std::string& out, std::size_t dropped) const {
    bool as_json = format_ == LogFormat::kJson;
    std::string body =
        as_json ? R"("msg":"log lines dropped","dropped":)" : "log lines dropped dropped=";
    body += std::to_string(dropped);
    body += as_json ? R"(,"reason":"the log output did not keep up")"
                    : R"( reason="the log output did not keep up")";
    spdlog::details::log_msg msg("kuberay-tpu-webhook", spdlog::level::warn,
                                 spdlog::string_view_t(body.data(), body.size()));
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    out.append(formatted.data(), formatted.size());
  }

  int fd_;
  LogFormat format_;
  std::string pending_;
  spdlog::memory_buf_t formatted_;  // under mutex_: the line being formatted
  bool woken_ = false;              // under mutex_: the flusher was told 64 KiB are pending
  std::size_t dropped_ = 0;         // under mutex_
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread flusher_;
};

}  // namespace

Log::Log(std::shared_ptr<spdlog::logger> logger, LogFormat format, int verbosity)
    : logger_(std::move(logger)), format_(format), verbosity_(verbosity) {}

std::string Log::render(std::string_view msg, std::span<const LogField> fields) const {
  std::string out;
  render_into(out, msg, fields);
  return out;
}

void Log::render_into(std::string& out, std::string_view msg,
                      std::span<const LogField> fields) const {
  bool json = format_ == LogFormat::kJson;
  if (json) {
    out += "\"msg\":";
    append_log_string(out, msg);
  } else {
    append_bounded(out, msg, /*escape=*/false);  // the program's own words
  }
  for (const LogField& f : fields) {
    if (json) {
      out.push_back(',');
      append_log_string(out, f.key);
      out.push_back(':');
    } else {
      out.push_back(' ');
      append_bounded(out, f.key, /*escape=*/false);
      out.push_back('=');
    }
    if (const auto* s = std::get_if<std::string_view>(&f.value)) {
      json ? append_log_string(out, *s) : append_text_value(out, *s);
    } else if (const auto* n = std::get_if<std::int64_t>(&f.value)) {
      out += std::to_string(*n);
    } else {
      out += std::get<bool>(f.value) ? "true" : "false";
    }
  }
}

void Log::write(LogLevel level, std::string_view msg, std::span<const LogField> fields) const {
  spdlog::level::level_enum to = spdlog::level::info;
  switch (level) {
    case LogLevel::kDebug:
      to = spdlog::level::debug;
      break;
    case LogLevel::kInfo:
      break;
    case LogLevel::kWarning:
      to = spdlog::level::warn;
      break;
    case LogLevel::kError:
      to = spdlog::level::err;
      break;
  }
  if (!logger_->should_log(to)) {
    return;
  }
  thread_local std::string body;  // kept from line to line: no allocation once it is grown
  body.clear();
  render_into(body, msg, fields);
  logger_->log(to, spdlog::string_view_t(body.data(), body.size()));
}

void Log::flush() const { logger_->flush(); }

std::unique_ptr<spdlog::formatter> make_log_formatter(LogFormat format) {
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  formatter->add_flag<SeverityFlag>('*');
  formatter->set_pattern(format == LogFormat::kJson
                             ? R"({"time":"%Y-%m-%dT%H:%M:%S.%fZ","severity":"%*","level":"%l",%v})"
                             : "%Y-%m-%dT%H:%M:%S.%fZ %L %v");
  return formatter;
}

std::shared_ptr<spdlog::logger> make_stderr_logger(LogFormat format) {
  auto sink = std::make_shared<BufferedFdSink>(STDERR_FILENO, format);
  sink->set_formatter(make_log_formatter(format));
  auto logger = std::make_shared<spdlog::logger>("kuberay-tpu-webhook", std::move(sink));
  logger->set_level(spdlog::level::debug);  // --v gates debug lines
  logger->flush_on(spdlog::level::warn);
  return logger;
}

}  // namespace server
