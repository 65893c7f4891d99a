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
    sink->set_formatter(std::make_unique<spdlog::pattern_formatter>(
        server::log_pattern(format), spdlog::pattern_time_type::utc));
    logger = std::make_shared<spdlog::logger>("test", sink);
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
  CHECK(j["level"] == "error");
  CHECK(j["uid"] == "a\"b\nc\\d\x01");
  CHECK(j["latency_us"] == 143);
  CHECK(j["time"].get<std::string>().ends_with("Z"));
}

TEST_CASE("verbosity gates debug lines", "[log]") {
  Captured quiet(server::LogFormat::kText, 0);
  quiet.log->debug(1, "connection closed");
  CHECK(quiet.out.str().empty());
  Captured loud(server::LogFormat::kText, 2);
  loud.log->debug(1, "connection closed");
  loud.log->debug(3, "patch");
  CHECK_THAT(loud.out.str(), Catch::Contains("connection closed"));
  CHECK(loud.out.str().find("patch") == std::string::npos);
}
