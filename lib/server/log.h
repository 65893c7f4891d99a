#pragma once
// Structured log lines for the server, written through the spdlog logger main creates (lib/ has
// no logger of its own and never uses spdlog's default logger: main hands one `Log` to everything
// that logs, and tests hand it a logger that writes to a string).
//
//   auto logger = server::make_stderr_logger(server::LogFormat::kJson);
//   server::Log log(logger, server::LogFormat::kJson, /*verbosity=*/0);
//   log.info("admission", {{"uid", uid}, {"latency_us", 143}});
//   // json: {"time":"2025-05-20T10:00:00.123456Z","severity":"INFO","level":"info",
//   //        "msg":"admission","uid":"...","latency_us":143}   (one line)
//   // text: 2025-05-20T10:00:00.123456Z I admission uid=... latency_us=143
//
// A JSON line's `severity` is Cloud Logging's LogSeverity name for its level (DEBUG, INFO,
// WARNING, ERROR, CRITICAL), which GKE's logging agent reads from a JSON line on stdout or stderr
// into the entry's severity; `level` is spdlog's name, kept for readers of earlier lines.
//
// Values are escaped (JSON strings, or logfmt quoting for text), so a hostile uid cannot forge a
// line, and bounded: the message and each key and string value are cut after kMaxLogValueBytes
// of written (escaped) text, at a UTF-8 character's start, and marked `…(cut, N bytes)` with the
// value's full size, so no request makes a line of more than a few KiB and a JSON line stays
// JSON. Certificate material is never passed in. Thread-safe; the sink make_stderr_logger builds
// buffers lines and writes them in batches off the request path (warnings and errors are written
// at once).

#include <spdlog/formatter.h>
#include <spdlog/logger.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/log/log.h"
#include "server/flags.h"

namespace server {

// The most bytes a message, a key or a string value takes in a line, escapes included (the
// quotes and the cut mark aside).
inline constexpr std::size_t kMaxLogValueBytes = 1024;

using LogField = webhook::LogField;
using LogLevel = webhook::LogLevel;

// The process's Logger (base/log/log.h): info, warn, error, debug(v) and flush are its.
class Log : public webhook::Logger {
 public:
  // `verbosity` is --v: debug(v, ...) lines with v above it are dropped.
  Log(std::shared_ptr<spdlog::logger> logger, LogFormat format, int verbosity);

  bool enabled(int v) const override { return v <= verbosity_; }
  // A debug line is written at debug level (text `D`, JSON severity DEBUG); the spdlog logger's
  // own level must let debug lines through (make_stderr_logger's does: --v alone decides).
  void write(LogLevel level, std::string_view msg, std::span<const LogField> fields) const override;
  void flush() const override;

  // The line body (without time and level) for `msg` and `fields` in this log's format: text
  // `msg k=v k="v w"`, or JSON members `"msg":"...","k":"v"`. Exposed for tests.
  std::string render(std::string_view msg, std::span<const LogField> fields) const;

 private:
  void render_into(std::string& out, std::string_view msg, std::span<const LogField> fields) const;
  std::shared_ptr<spdlog::logger> logger_;
  LogFormat format_;
  int verbosity_;
};

// A logger named "kuberay-tpu-webhook" writing `format` lines (UTC times) to standard error
// through a buffered sink: lines are batched and written at least every 200 ms, warnings and
// errors at once. Its formatter is make_log_formatter's, and its level lets debug lines through.
std::shared_ptr<spdlog::logger> make_stderr_logger(LogFormat format);

// The formatter for `format`, UTC times: text `TIME L body`, or JSON
// `{"time":"TIME","severity":"SEVERITY","level":"level",body}`. Tests give it to their own sinks.
std::unique_ptr<spdlog::formatter> make_log_formatter(LogFormat format);

}  // namespace server
