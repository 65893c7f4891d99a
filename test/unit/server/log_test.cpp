// lib/server/log: text (logfmt) and JSON lines with escaped values (docs/server.md "Logs").
#include "server/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/ostream_sink.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

namespace {

struct Captured {
  explicit Captured(server::LogFormat format, int verbosity = 0) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
    sink->set_formatter(server::make_log_formatter(format));
    logger = std::make_shared<spdlog::logger>("test", sink);
    logger->set_level(spdlog::level::debug);  // as make_stderr_logger's: --v gates debug lines
    log = std::make_unique<server::Log>(logger, format, verbosity);
  }
  std::ostringstream out;
  std::shared_ptr<spdlog::logger> logger;
  std::unique_ptr<server::Log> log;
};

}  // namespace

TEST_CASE("text lines are logfmt with quoted values where needed", "[log]") {
  Captured c(server::LogFormat::kText);
  c.log->info("admission", {{"uid", "abc-1"},
                            {"generateName", "w orker\"-"},
                            {"empty", ""},
                            {"replica", 2},
                            {"dryRun", false}});
  std::string line = c.out.str();
  CAPTURE(line);
  CHECK_THAT(
      line,
      Catch::Contains(
          R"( I admission uid=abc-1 generateName="w orker\"-" empty="" replica=2 dryRun=false)"));
  CHECK(line.find('\n') == line.size() - 1);
}

TEST_CASE("JSON lines parse, with hostile values escaped", "[log]") {
  Captured c(server::LogFormat::kJson);
  c.log->error("boom", {{"uid", "a\"b\nc\\d\x01"}, {"latency_us", 143}});
  std::string line = c.out.str();
  CAPTURE(line);
  REQUIRE(line.find('\n') == line.size() - 1);
  nlohmann::json j = nlohmann::json::parse(line);
  CHECK(j["msg"] == "boom");
  CHECK(j["severity"] == "ERROR");
  CHECK(j["level"] == "error");
  CHECK(j["uid"] == "a\"b\nc\\d\x01");
  CHECK(j["latency_us"] == 143);
  CHECK(j["time"].get<std::string>().ends_with("Z"));
}

TEST_CASE("JSON lines escape as the JSON writer does, and DEL too", "[log]") {
  Captured c(server::LogFormat::kJson);
  c.log->info("x", {{"v", std::string("\b\f\x7f\t\x1f") + "\xc3\xa9"}});
  std::string line = c.out.str();
  CAPTURE(line);
  // The short escapes JSON has, \u00xx for the other control bytes and DEL, UTF-8 as it is.
  CHECK(line.find(R"("v":"\b\f\u007f\t\u001f)"
                  "\xc3\xa9"
                  R"(")") != std::string::npos);
  CHECK(line.find('\x7f') == std::string::npos);
}

TEST_CASE("verbosity gates debug lines", "[log]") {
  Captured quiet(server::LogFormat::kText, 0);
  quiet.log->debug(1, "connection closed");
  CHECK(quiet.out.str().empty());
  Captured loud(server::LogFormat::kText, 2);
  loud.log->debug(1, "connection closed");
  loud.log->debug(3, "patch");
  CHECK_THAT(loud.out.str(), Catch::Contains("Z D connection closed"));
  CHECK(loud.out.str().find("patch") == std::string::npos);
}

// Cloud Logging's LogSeverity names (cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry
// #LogSeverity), which GKE's logging agent reads from a JSON line's `severity`: each level a line
// can have, written by hand.
TEST_CASE("JSON lines carry Cloud Logging's severity for every level", "[log]") {
  Captured c(server::LogFormat::kJson, /*verbosity=*/1);
  c.log->debug(1, "connection closed", {{"reason", "idle"}});
  c.log->info("admission");
  c.log->warn("kube");
  c.log->error("certificate reload failed");
  // What the Log API does not write but a logger with this formatter could (main makes it
  // spdlog's default logger): trace and critical.
  c.logger->set_level(spdlog::level::trace);
  c.logger->trace("trace line");
  c.logger->critical("critical line");
  struct Want {
    const char* msg;
    const char* severity;
    const char* level;
  };
  const Want want[] = {{"connection closed", "DEBUG", "debug"},
                       {"admission", "INFO", "info"},
                       {"kube", "WARNING", "warning"},
                       {"certificate reload failed", "ERROR", "error"}};
  std::istringstream lines(c.out.str());
  std::string line;
  std::size_t i = 0;
  for (; i < std::size(want) && std::getline(lines, line); ++i) {
    CAPTURE(line);
    nlohmann::json j = nlohmann::json::parse(line);
    CHECK(j["msg"] == want[i].msg);
    CHECK(j["severity"] == want[i].severity);
    CHECK(j["level"] == want[i].level);
    CHECK(j["time"].get<std::string>().size() == std::string("2025-05-20T10:00:00.123456Z").size());
  }
  CHECK(i == std::size(want));
  // The raw spdlog lines have a body that is not JSON members; their start is still the pattern's.
  REQUIRE(std::getline(lines, line));
  CHECK_THAT(line, Catch::Contains(R"("severity":"DEBUG","level":"trace",trace line)"));
  REQUIRE(std::getline(lines, line));
  CHECK_THAT(line, Catch::Contains(R"("severity":"CRITICAL","level":"critical",critical line)"));
}

TEST_CASE("text lines name the level by its letter", "[log]") {
  Captured c(server::LogFormat::kText, /*verbosity=*/1);
  c.log->debug(1, "a");
  c.log->info("b");
  c.log->warn("c");
  c.log->error("d");
  std::string out = c.out.str();
  CAPTURE(out);
  CHECK_THAT(out, Catch::Contains("Z D a\n") && Catch::Contains("Z I b\n") &&
                      Catch::Contains("Z W c\n") && Catch::Contains("Z E d\n"));
}

namespace {

constexpr std::string_view kEllipsis = "\xe2\x80\xa6";  // U+2026, which starts the cut mark

std::string cut_mark(std::size_t size) {
  return std::string(kEllipsis) + "(cut, " + std::to_string(size) + " bytes)";
}

}  // namespace

TEST_CASE("JSON lines cut long values and messages, and stay JSON", "[log]") {
  Captured c(server::LogFormat::kJson);
  std::string uid(std::size_t{6} << 20, 'u');  // a 6 MiB request.uid
  std::string message(5000, 'm');
  c.log->info(message, {{"uid", uid}, {"reason", "json_too_costly"}, {"latency_us", 7}});
  std::string line = c.out.str();
  CHECK(line.size() < 3000);
  REQUIRE(line.find('\n') == line.size() - 1);
  nlohmann::json j = nlohmann::json::parse(line);
  CHECK(j["uid"] == std::string(1024, 'u') + cut_mark(6291456));
  CHECK(j["msg"] == std::string(1024, 'm') + cut_mark(5000));
  CHECK(j["reason"] == "json_too_costly");
  CHECK(j["latency_us"] == 7);
}

TEST_CASE("a value of exactly the bound is kept whole; one byte more is cut", "[log]") {
  Captured c(server::LogFormat::kJson);
  c.log->info("x", {{"whole", std::string(server::kMaxLogValueBytes, 'a')},
                    {"cut", std::string(server::kMaxLogValueBytes + 1, 'b')}});
  nlohmann::json j = nlohmann::json::parse(c.out.str());
  CHECK(j["whole"] == std::string(1024, 'a'));
  CHECK(j["cut"] == std::string(1024, 'b') + cut_mark(1025));
}

TEST_CASE("values are cut between UTF-8 characters, escapes counted", "[log]") {
  std::string e_acute = "\xc3\xa9";      // é, 2 bytes
  std::string snowman = "\xe2\x98\x83";  // 3 bytes
  std::string odd = "x";                 // 1 + 2k: the 512th é would end past the bound
  std::string thirds;                    // 3k: the 342nd snowman would end past it
  std::string escapes(300, '\x01');      // each written as the 6 bytes \u0001
  for (int i = 0; i < 600; ++i) {
    odd += e_acute;
    thirds += snowman;
  }
  std::string odd_kept = "x";
  std::string thirds_kept;
  for (int i = 0; i < 511; ++i) {
    odd_kept += e_acute;
  }
  for (int i = 0; i < 341; ++i) {
    thirds_kept += snowman;
  }
  Captured c(server::LogFormat::kJson);
  c.log->info("x", {{"odd", odd}, {"thirds", thirds}, {"escapes", escapes}});
  std::string line = c.out.str();
  CAPTURE(line);
  nlohmann::json j = nlohmann::json::parse(line);  // throws on a split character
  CHECK(j["odd"] == odd_kept + cut_mark(1201));
  CHECK(j["thirds"] == thirds_kept + cut_mark(1800));
  CHECK(j["escapes"] == std::string(170, '\x01') + cut_mark(300));  // 170 x 6 = 1020 bytes
}

TEST_CASE("text lines cut long values, quoted, and long messages", "[log]") {
  Captured c(server::LogFormat::kText);
  std::string uid(std::size_t{6} << 20, 'u');
  c.log->info(std::string(2000, 'm'), {{"uid", uid}, {"name", "w-1"}, {"replica", 3}});
  std::string line = c.out.str();
  CAPTURE(line.substr(0, 200));
  CHECK(line.size() < 3000);
  CHECK(line.find('\n') == line.size() - 1);
  CHECK_THAT(line, Catch::Contains(" I " + std::string(1024, 'm') + cut_mark(2000) + " uid=\"" +
                                   std::string(1024, 'u') + cut_mark(6291456) +
                                   "\" name=w-1 replica=3\n"));
}

TEST_CASE("no number of long fields makes a line more than a few KiB per field", "[log]") {
  for (server::LogFormat format : {server::LogFormat::kText, server::LogFormat::kJson}) {
    Captured c(format);
    std::string big(std::size_t{1} << 20, '"');  // every byte escaped
    c.log->warn("admission", {{"uid", big},
                              {"namespace", big},
                              {"name", big},
                              {"generateName", big},
                              {"kind", big},
                              {"operation", big},
                              {"message", big}});
    std::string line = c.out.str();
    CHECK(line.size() < 7 * 1100 + 200);
    if (format == server::LogFormat::kJson) {
      CHECK(nlohmann::json::parse(line)["message"] == std::string(512, '"') + cut_mark(1048576));
    }
  }
}
