#pragma once
// The one log interface of lib/: a room that logs takes a `const webhook::Logger&` (or, for the
// lib/kube classes whose threads report one line at a time, a LineLogger made from one) and never
// logs through a global logger. The process makes the only implementation there is,
// server::Log (spdlog, text or JSON lines on stderr), and hands it to everything that logs; tests
// hand in one that writes to a string, or a LineLogger of their own.
//
//   void open(const webhook::Logger& log) {
//     log.info("slot claims", {{"namespace", ns}, {"replica", holder}});
//     log.debug(2, "request", {{"uid", uid}});  // written when --v is 2 or more
//   }
//   kube::LiveClusterOptions options;
//   options.log = webhook::line_logger(log, "kube");  // a line → `kube event="<line>"`

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <variant>

namespace webhook {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// One key=value of a line. The key and a string value are views: they must outlive the call.
struct LogField {
  LogField(std::string_view k, std::string_view v) : key(k), value(v) {}
  LogField(std::string_view k, const char* v) : key(k), value(std::string_view(v)) {}
  LogField(std::string_view k, const std::string& v) : key(k), value(std::string_view(v)) {}
  LogField(std::string_view k, std::int64_t v) : key(k), value(v) {}
  LogField(std::string_view k, int v) : key(k), value(std::int64_t{v}) {}
  LogField(std::string_view k, std::uint64_t v) : key(k), value(static_cast<std::int64_t>(v)) {}
  LogField(std::string_view k, bool v) : key(k), value(v) {}

  std::string_view key;
  std::variant<std::string_view, std::int64_t, bool> value;
};

// Structured lines: a message and fields at a level. Thread-safe in every implementation.
class Logger {
 public:
  virtual ~Logger() = default;

  // Whether debug(v, ...) lines are written (v at most the process's --v).
  virtual bool enabled(int v) const = 0;
  // Writes one line; debug lines reach it only through debug(), which checks enabled(v).
  virtual void write(LogLevel level, std::string_view msg,
                     std::span<const LogField> fields) const = 0;
  // Writes buffered lines out.
  virtual void flush() const = 0;

  void info(std::string_view msg, std::initializer_list<LogField> fields = {}) const {
    write(LogLevel::kInfo, msg, fields);
  }
  void info(std::string_view msg, std::span<const LogField> fields) const {
    write(LogLevel::kInfo, msg, fields);
  }
  void warn(std::string_view msg, std::initializer_list<LogField> fields = {}) const {
    write(LogLevel::kWarning, msg, fields);
  }
  void error(std::string_view msg, std::initializer_list<LogField> fields = {}) const {
    write(LogLevel::kError, msg, fields);
  }
  void debug(int v, std::string_view msg, std::initializer_list<LogField> fields = {}) const {
    if (enabled(v)) {
      write(LogLevel::kDebug, msg, fields);
    }
  }
};

// One line of text at a level, from any thread; an empty function drops every line.
using LineLogger = std::function<void(LogLevel, const std::string&)>;

// The lines of a LineLogger written to `log` (which must outlive it) as `what` with the line in
// the field `event`, at their level; debug lines at verbosity 1.
LineLogger line_logger(const Logger& log, std::string what);

}  // namespace webhook
