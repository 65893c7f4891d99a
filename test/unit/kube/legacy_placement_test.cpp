// lib/kube/legacy_placement.h: legacy placement as the server starts it from its flags, for the
// cases that need no API server (the live one is exercised by test/integration/server).
#include "kube/legacy_placement.h"

#include <catch2/catch.hpp>
#include <string>
#include <variant>
#include <vector>

#include "kube/slot_allocators.h"

namespace {

// Each line as "LEVEL msg k=v ...".
class Recorder : public webhook::Logger {
 public:
  bool enabled(int) const override { return true; }
  void write(webhook::LogLevel level, std::string_view msg,
             std::span<const webhook::LogField> fields) const override {
    static constexpr const char* kNames[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
    std::string line = std::string(kNames[static_cast<int>(level)]) + " " + std::string(msg);
    for (const webhook::LogField& f : fields) {
      line += " " + std::string(f.key) + "=";
      if (const auto* s = std::get_if<std::string_view>(&f.value)) {
        line += *s;
      } else if (const auto* b = std::get_if<bool>(&f.value)) {
        line += *b ? "true" : "false";
      }
    }
    lines.push_back(line);
  }
  void flush() const override {}

  mutable std::vector<std::string> lines;
};

constexpr const char* kMissingConfig = "/nonexistent/kubeconfig";

// --legacy-indexing=off (enabled false), auto (enabled) or on (enabled, required), with a
// kubeconfig that does not exist.
kube::LegacyPlacementOptions options(bool enabled, bool required) {
  kube::LegacyPlacementOptions o;
  o.enabled = enabled;
  o.required = required;
  o.kube_config_path = kMissingConfig;
  return o;
}

}  // namespace

TEST_CASE("M3.3: --legacy-indexing=off: the disabled sources, and one line saying so",
          "[kube][legacy_placement]") {
  Recorder log;
  webhook::Result<std::unique_ptr<kube::LegacyPlacement>> p =
      kube::LegacyPlacement::open(options(false, false), log);
  REQUIRE(p);
  kube::LegacyPlacement& placement = **p;
  CHECK_FALSE(placement.enabled());
  CHECK(dynamic_cast<kube::DisabledSlotAllocator*>(&placement.pods()) != nullptr);
  CHECK(placement.pods_synced());
  CHECK(placement.metrics_text().empty());
  placement.start();  // nothing to start or stop
  placement.stop();
  CHECK(log.lines == std::vector<std::string>{"INFO legacy placement enabled=false api="});
}

TEST_CASE("M3.3: --legacy-indexing=auto without an API configuration goes without",
          "[kube][legacy_placement]") {
  Recorder log;
  webhook::Result<std::unique_ptr<kube::LegacyPlacement>> p =
      kube::LegacyPlacement::open(options(true, false), log);
  REQUIRE(p);
  CHECK_FALSE((*p)->enabled());
  CHECK(dynamic_cast<kube::DisabledSlotAllocator*>(&(*p)->pods()) != nullptr);
  REQUIRE(log.lines.size() == 2);
  CHECK_THAT(log.lines[0],
             Catch::StartsWith("INFO legacy placement off: no Kubernetes API configuration "
                               "reason=") &&
                 Catch::Contains(kMissingConfig));
  CHECK(log.lines[1] == "INFO legacy placement enabled=false api=");
}

TEST_CASE("M3.3: --legacy-indexing=on without an API configuration cannot start",
          "[kube][legacy_placement]") {
  Recorder log;
  webhook::Result<std::unique_ptr<kube::LegacyPlacement>> p =
      kube::LegacyPlacement::open(options(true, true), log);
  REQUIRE_FALSE(p);
  CHECK_THAT(p.error().message, Catch::Contains(kMissingConfig));
  REQUIRE(log.lines.size() == 1);
  CHECK_THAT(log.lines[0],
             Catch::StartsWith("ERROR cannot start: --legacy-indexing=on needs Kubernetes API "
                               "access error=") &&
                 Catch::Contains(kMissingConfig));
}
