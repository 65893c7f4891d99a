// lib/dryrun/quantity.h: Kubernetes quantities as KubeRay reads them for the ray start command.
// Every expected value is worked out by hand from Kubernetes' rules, never by the parser.
#include "dryrun/quantity.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace {

std::optional<std::int64_t> value_of(const std::string& text) {
  std::optional<dryrun::Quantity> q = dryrun::parse_quantity(text);
  REQUIRE(q);
  return q->value();
}

}  // namespace

TEST_CASE("parse_quantity: Value() of the suffixes, rounded up", "[dryrun][quantity]") {
  auto [text, value] = GENERATE(table<std::string, std::int64_t>({
      {"24", 24},
      {"+4", 4},
      {"007", 7},
      {"0", 0},
      {"000", 0},
      {"500m", 1},  // rounds up, never down
      {"2500m", 3},
      {"1500m", 2},
      {"1000m", 1},
      {"1.5", 2},
      {"1.", 1},
      {".5", 1},
      {"0.9n", 1},
      {"1n", 1},
      {"1u", 1},
      {"1k", 1000},
      {"1M", 1000000},
      {"200G", 200000000000},
      {"1T", 1000000000000},
      {"1P", 1000000000000000},
      {"1E", 1000000000000000000},  // exa, not an exponent
      {"1Ki", 1024},
      {"1.5Ki", 1536},
      {"1Mi", 1048576},
      {"256Mi", 268435456},
      {"16Gi", 17179869184},
      {"250Gi", 268435456000},
      {"1.5Gi", 1610612736},
      {"1Ti", 1099511627776},
      {"1Pi", 1125899906842624},
      {"1Ei", 1152921504606846976},
      {"8Ei", INT64_MAX},  // binary SI is capped at 2^63-1
      {"1e3", 1000},
      {"1E3", 1000},
      {"1e+3", 1000},
      {"1e-3", 1},
      {"25e-1", 3},
      {"1.0000000001", 2},  // finer than nano: rounded up to 1.000000001 first
      {"9223372036854775807", INT64_MAX},
  }));
  CAPTURE(text);
  CHECK(value_of(text) == std::optional<std::int64_t>(value));
}

TEST_CASE("parse_quantity: the exact unscaled value and scale Kubernetes keeps",
          "[dryrun][quantity]") {
  auto [text, digits, scale] = GENERATE(table<std::string, std::string, int>({
      {"24", "24", 0},
      {"500m", "500", -3},
      {"1.50", "150", -2},  // trailing zeros stay: the float conversion reads them
      {"0.5", "5", -1},
      {"1e3", "1", 3},
      {"250Gi", "268435456000", 0},
      // Past the int64 fast path Kubernetes keeps an arbitrary decimal at nano scale.
      {"1.5Gi", "1610612736000000000", -9},
      {"1Pi", "1125899906842624000000000", -9},
      {"1e-10", "1", -9},
      {"8Ei", "9223372036854775807", 0},
      {"1234567890123456789", "1234567890123456789000000000", -9},
  }));
  CAPTURE(text);
  std::optional<dryrun::Quantity> q = dryrun::parse_quantity(text);
  REQUIRE(q);
  CHECK(q->digits == digits);
  CHECK(q->scale == scale);
}

TEST_CASE("parse_quantity: AsApproximateFloat64", "[dryrun][quantity]") {
  auto [text, value] = GENERATE(table<std::string, double>({
      {"8", 8.0},
      {"4", 4.0},
      {"0.5", 0.5},
      {"500m", 0.5},
      {"0.1", 0.1},
      {"1.5Gi", 1610612736.0},
      {"250Gi", 268435456000.0},
      {"1e21", 1e21},
      {"1e-3", 0.001},
  }));
  CAPTURE(text);
  std::optional<dryrun::Quantity> q = dryrun::parse_quantity(text);
  REQUIRE(q);
  CHECK(q->approximate() == value);
}

TEST_CASE("parse_quantity: Kubernetes' quirks are kept", "[dryrun][quantity]") {
  // The scanner reads an empty number as 0, and the int64 path takes it as is...
  for (const char* zero : {".", "+", "m", "Ki", "e3"}) {
    CAPTURE(zero);
    std::optional<dryrun::Quantity> q = dryrun::parse_quantity(zero);
    REQUIRE(q);
    CHECK(q->is_zero());
    CHECK(q->value() == std::optional<std::int64_t>(0));
  }
  // ...but the decimal parser behind the large binary suffixes wants a digit.
  CHECK_FALSE(dryrun::parse_quantity("Pi"));
  CHECK_FALSE(dryrun::parse_quantity("+.Ei"));
  CHECK(dryrun::parse_quantity("0Pi")->is_zero());
}

TEST_CASE("parse_quantity refuses what is not a quantity", "[dryrun][quantity]") {
  auto text =
      GENERATE(as<std::string>{}, "", "-1", "-0", "1K", "1Ki3", "1ki", "abc", "1.2.3", " 1", "1 ",
               "1e", "1e3.5", "1Ee3", "1x", "0x10", "1,5", "1e99999999999", std::string(1001, '1'));
  CAPTURE(text);
  CHECK_FALSE(dryrun::parse_quantity(text));
}

TEST_CASE("parse_quantity: values beyond int64 have no Value()", "[dryrun][quantity]") {
  CHECK(value_of("9223372036854775808") == std::nullopt);
  CHECK(value_of("10E") == std::nullopt);
  CHECK(value_of("1e400") == std::nullopt);
  CHECK(dryrun::parse_quantity("1e400")->approximate() == std::numeric_limits<double>::infinity());
  CHECK(std::isnan(dryrun::parse_quantity("0e400")->approximate()));  // 0 x +Inf, as in Go
}

TEST_CASE("go_pow10 is Go's math.Pow10", "[dryrun][quantity]") {
  CHECK(dryrun::go_pow10(0) == 1.0);
  CHECK(dryrun::go_pow10(3) == 1000.0);
  CHECK(dryrun::go_pow10(22) == 1e22);
  CHECK(dryrun::go_pow10(32) == 1e32);
  CHECK(dryrun::go_pow10(-3) == 1.0 / 1000.0);
  CHECK(dryrun::go_pow10(-40) == 1e-32 / 1e8);
  CHECK(dryrun::go_pow10(308) == 1e288 * 1e20);  // Go's table product, not the literal 1e308
  CHECK(dryrun::go_pow10(309) == std::numeric_limits<double>::infinity());
  CHECK(dryrun::go_pow10(-324) == 0.0);
}
