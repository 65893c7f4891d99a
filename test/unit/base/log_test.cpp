// lib/base/log/log.h: the Logger interface's helpers and line_logger, which carries lib/kube's
// text lines into a Logger. The server's Logger (server::Log) is tested in server/log_test.cpp.
#include "base/log/log.h"

#include <catch2/catch.hpp>
#include <string>
#include <variant>
#include <vector>

namespace {

// Each line as "LEVEL msg k=v ...", for lines up to --v `verbosity`.
class Recorder : public webhook::Logger {
 public:
  explicit Recorder(int verbosity) : verbosity_(verbosity) {}
  bool enabled(int v) const override { return v <= verbosity_; }
  void write(webhook::LogLevel level, std::string_view msg,
             std::span<const webhook::LogField> fields) const override {
    static constexpr const char* kNames[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
    std::string line = std::string(kNames[static_cast<int>(level)]) + " " + std::string(msg);
    for (const webhook::LogField& f : fields) {
      line += " " + std::string(f.key) + "=";
      if (const auto* s = std::get_if<std::string_view>(&f.value)) {
        line += *s;
      } else if (const auto* n = std::get_if<std::int64_t>(&f.value)) {
        line += std::to_string(*n);
      } else {
        line += std::get<bool>(f.value) ? "true" : "false";
      }
    }
    lines.push_back(line);
  }
  void flush() const override { ++flushes; }

  mutable std::vector<std::string> lines;
  mutable int flushes = 0;

 private:
  int verbosity_;
};

}  // namespace

TEST_CASE("Logger: info, warn, error and debug(v) write at their level", "[base][log]") {
  Recorder log(/*verbosity=*/1);
  log.info("starting", {{"version", "0.3.0"}, {"threads", 4}});
  log.warn("slow", {{"ok", false}});
  log.error("cannot start");
  log.debug(1, "connection", {{"peer", "10.0.0.1"}});
  log.debug(2, "request");  // above --v: dropped
  CHECK(log.lines == std::vector<std::string>{"INFO starting version=0.3.0 threads=4",
                                              "WARNING slow ok=false", "ERROR cannot start",
                                              "DEBUG connection peer=10.0.0.1"});
}

TEST_CASE("Logger: line_logger writes each line as `what` with an event field", "[base][log]") {
  Recorder quiet(/*verbosity=*/0);
  webhook::LineLogger kube = webhook::line_logger(quiet, "kube");
  kube(webhook::LogLevel::kInfo, "pods watch: synced at resourceVersion 7");
  kube(webhook::LogLevel::kWarning, "pods watch: connection lost");
  kube(webhook::LogLevel::kError, "list: HTTP 403");
  kube(webhook::LogLevel::kDebug, "a new certificate is trusted");  // verbosity 1: dropped at 0
  CHECK(quiet.lines ==
        std::vector<std::string>{"INFO kube event=pods watch: synced at resourceVersion 7",
                                 "WARNING kube event=pods watch: connection lost",
                                 "ERROR kube event=list: HTTP 403"});

  Recorder verbose(/*verbosity=*/1);
  webhook::line_logger(verbose, "certificate")(webhook::LogLevel::kDebug, "renewal due");
  CHECK(verbose.lines == std::vector<std::string>{"DEBUG certificate event=renewal due"});
}
