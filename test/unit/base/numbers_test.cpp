// lib/base/text/numbers.h: parse_non_negative, the strict parser behind topology dims, index
// labels and google.com/tpu quantities (docs/spec.md M2: digits only, no signs or spaces).
#include "base/text/numbers.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <string>

TEST_CASE("M2: parse_non_negative accepts digits only", "[topology][numbers]") {
  SECTION("good rows") {
    auto [text, max, value] = GENERATE(table<std::string, std::int64_t, std::int64_t>({
        {"0", INT64_MAX, 0},
        {"4", INT64_MAX, 4},
        {"16", INT64_MAX, 16},
        {"007", INT64_MAX, 7},
        {"9223372036854775807", INT64_MAX, INT64_MAX},
        {"1024", 1024, 1024},  // max is inclusive
        {"0", 0, 0},
    }));
    CAPTURE(text, max);
    CHECK(webhook::parse_non_negative(text, max) == std::optional<std::int64_t>(value));
  }
  SECTION("bad rows") {
    auto [text, max] = GENERATE(table<std::string, std::int64_t>({
        {"", INT64_MAX},
        {"-1", INT64_MAX},
        {"+1", INT64_MAX},
        {"-0", INT64_MAX},
        {" 1", INT64_MAX},
        {"1 ", INT64_MAX},
        {"1\n", INT64_MAX},
        {"1.0", INT64_MAX},
        {"1e3", INT64_MAX},
        {"0x10", INT64_MAX},
        {"1,000", INT64_MAX},
        {"4Gi", INT64_MAX},
        {"\xd9\xa1", INT64_MAX},             // Arabic-Indic digit one
        {"9223372036854775808", INT64_MAX},  // INT64_MAX + 1
        {"99999999999999999999999", INT64_MAX},
        {"1025", 1024},  // over max
        {"1", 0},
    }));
    CAPTURE(text, max);
    CHECK(webhook::parse_non_negative(text, max) == std::nullopt);
  }
  SECTION("the default max is INT64_MAX") {
    CHECK(webhook::parse_non_negative("9223372036854775807") == INT64_MAX);
    CHECK(webhook::parse_non_negative("9223372036854775808") == std::nullopt);
  }
}
