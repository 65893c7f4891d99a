// lib/base/text/quantity.h: the one quantity grammar, in its two readings. parse_quantity's
// Kubernetes semantics are pinned by test/unit/dryrun/quantity_test.cpp; here the byte counts of
// --memory-limit and the bounds the grammar sets. Every expected value is worked out by hand.
#include "base/text/quantity.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

TEST_CASE("Quantity: parse_byte_count reads digits and the byte suffixes", "[base][quantity]") {
  auto [text, bytes] = GENERATE(table<std::string, std::uint64_t>({
      {"0", 0},
      {"000", 0},
      {"007", 7},
      {"0Gi", 0},
      {"268435456", 268435456},
      {"1k", 1000},
      {"1M", 1000000},
      {"2G", 2000000000},
      {"1T", 1000000000000},
      {"1Ki", 1024},
      {"32Mi", 33554432},
      {"256Mi", 268435456},
      {"1Gi", 1073741824},
      {"1Ti", 1099511627776},
      {"9223372036854775807", 9223372036854775807ULL},
      // Beyond int64 but within 64 bits: 2^63, and 2^64 - 2^40.
      {"8388608Ti", 9223372036854775808ULL},
      {"16777215Ti", 18446742974197923840ULL},
      {"18446744073709551k", 18446744073709551000ULL},
  }));
  CAPTURE(text);
  CHECK(webhook::parse_byte_count(text) == std::optional<std::uint64_t>(bytes));
}

TEST_CASE("Quantity: parse_byte_count refuses what is not a whole byte count", "[base][quantity]") {
  auto text =
      GENERATE(as<std::string>{}, "", "Mi", "k", "1.5Gi", "1.", ".5", "+1", "-1", "1Pi", "1P", "1E",
               "1Ei", "1e3", "1E3", "1m", "500m", "1n", "1K", "1ki", "1KiB", "1kk", " 1", "1 ",
               "1Mi ", "0x10", "1,5", "1Ki3",
               // the count above 2^63-1, or the bytes above 2^64-1
               "9223372036854775808", "16777216Ti", "18446744073709552k", "99999999999999999999");
  CAPTURE(text);
  CHECK_FALSE(webhook::parse_byte_count(text));
}

TEST_CASE("Quantity: the bounds on digits and exponent", "[base][quantity]") {
  // At most 1000 significant digits (leading zeros do not count)...
  std::optional<webhook::Quantity> long_number = webhook::parse_quantity(std::string(1000, '1'));
  REQUIRE(long_number);
  CHECK(long_number->value() == std::nullopt);
  CHECK(webhook::parse_quantity("000" + std::string(1000, '1')));
  CHECK_FALSE(webhook::parse_quantity(std::string(999, '1') + "." + std::string(2, '1')));
  // ...and an exponent of at most 10000 either way.
  std::optional<webhook::Quantity> big = webhook::parse_quantity("1e10000");
  REQUIRE(big);
  CHECK(big->approximate() == std::numeric_limits<double>::infinity());
  std::optional<webhook::Quantity> tiny = webhook::parse_quantity("1e-10000");
  REQUIRE(tiny);
  CHECK(tiny->value() == std::optional<std::int64_t>(1));  // rounded up to 1n, then to 1
  CHECK_FALSE(webhook::parse_quantity("1e10001"));
  CHECK_FALSE(webhook::parse_quantity("1e-10001"));
}
