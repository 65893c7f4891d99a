// lib/topology/shape: parse_shape, docs/spec.md M2 "the topology must parse" and every invalid
// input of docs/topology.md §3.
#include "topology/shape.h"

#include <array>
#include <catch2/catch.hpp>
#include <string>

namespace {

constexpr std::string_view kExpected = "expected 2 or 3 positive integers joined by 'x'";

}  // namespace

TEST_CASE("M2: parse_shape accepts 2 or 3 positive dims", "[topology][shape]") {
  auto [text, d0, d1, d2, rank, chips] = GENERATE(table<std::string, int, int, int, int, int>({
      {"1x1", 1, 1, 1, 2, 1},
      {"2x2", 2, 2, 1, 2, 4},
      {"2x4", 2, 4, 1, 2, 8},
      {"4x4", 4, 4, 1, 2, 16},
      {"16x16", 16, 16, 1, 2, 256},
      {"1x1x1", 1, 1, 1, 3, 1},
      {"2x2x1", 2, 2, 1, 3, 4},
      {"2x2x2", 2, 2, 2, 3, 8},
      {"2x2x4", 2, 2, 4, 3, 16},
      {"4x4x4", 4, 4, 4, 3, 64},
      {"8x16x16", 8, 16, 16, 3, 2048},
      {"16x16x24", 16, 16, 24, 3, 6144},
      // Exactly the cap (kMaxChips = 9216, a full TPU7x pod) is still a slice.
      {"16x24x24", 16, 24, 24, 3, 9216},
      {"96x96", 96, 96, 1, 2, 9216},
      {"9216x1", 9216, 1, 1, 2, 9216},
      {"1x1x9216", 1, 1, 9216, 3, 9216},
  }));
  CAPTURE(text);
  webhook::Result<topology::Shape> s = topology::parse_shape(text);
  REQUIRE(s.has_value());
  CHECK(s->dims3() == std::array<int, 3>{d0, d1, d2});
  CHECK(s->rank == rank);
  CHECK(s->chips() == chips);
  CHECK(s->text() == text);  // round trip
}

TEST_CASE("M2: a 2-D shape and its 3-D twin differ only in rank", "[topology][shape]") {
  topology::Shape two = *topology::parse_shape("2x4");
  topology::Shape three = *topology::parse_shape("2x4x1");
  CHECK(two.dims3() == three.dims3());
  CHECK(two.chips() == three.chips());
  CHECK_FALSE(two == three);
  CHECK(two == *topology::parse_shape("2x4"));
  CHECK(two.text() == "2x4");
  CHECK(three.text() == "2x4x1");
}

// Bad rows: docs/topology.md §3, each one. `token` is what the message must name so the user can
// find the mistake; `what` is the reason.
TEST_CASE(
    "M2: parse_shape rejects every invalid topology of docs/topology.md §3, naming the "
    "offending token",
    "[topology][shape]") {
  auto [text, token, what] = GENERATE(table<std::string, std::string, std::string>({
      // Empty or missing dims: Go Atoi fails upstream; we reject.
      {"4x", "dimension 2", "is empty"},
      {"x4", "dimension 1", "is empty"},
      {"4xx4", "dimension 2", "is empty"},
      {"4x4x", "dimension 3", "is empty"},
      {"abc", "\"abc\"", "1 dimension"},
      // Zero, signs: upstream accepted these (0 chips -> 1 host; -2x-2 -> 4 chips).
      {"0x4", "dimension 1 \"0\"", "must be greater than 0"},
      {"4x0", "dimension 2 \"0\"", "must be greater than 0"},
      {"2x2x0", "dimension 3 \"0\"", "must be greater than 0"},
      {"-2x-2", "dimension 1 \"-2\"", "is not a positive integer"},
      {"+4x4", "dimension 1 \"+4\"", "is not a positive integer"},
      {"4x+4", "dimension 2 \"+4\"", "is not a positive integer"},
      // Rank: only 2 or 3 dims.
      {"4x4x4x4", "\"4x4x4x4\"", "4 dimensions"},
      {"2x2x2x2x2", "\"2x2x2x2x2\"", "more than 4 dimensions"},
      {"4", "\"4\"", "1 dimension"},
      // Spaces and case: rejected, not trimmed (our documented choice).
      {" 4x4", "dimension 1 \" 4\"", "is not a positive integer"},
      {"4 x 4", "dimension 1 \"4 \"", "is not a positive integer"},
      {"4x4 ", "dimension 2 \"4 \"", "is not a positive integer"},
      {"4X4", "\"4X4\"", "use a lowercase 'x'"},
      {"4x4\n", "dimension 2 \"4\n\"", "is not a positive integer"},
      {"4.0x4", "dimension 1 \"4.0\"", "is not a positive integer"},
      {"1e3x1", "dimension 1 \"1e3\"", "is not a positive integer"},
      {"0x10x1", "dimension 1 \"0\"", "must be greater than 0"},
      // Huge dims: checked, never overflowing.
      {"99999999999x99999999999", "dimension 1 \"99999999999\"",
       "larger than the largest TPU slice (9216 chips)"},
      {"4x99999999999999999999999", "dimension 2 \"99999999999999999999999\"",
       "larger than the largest TPU slice"},
      {"9217x1", "dimension 1 \"9217\"", "larger than the largest TPU slice"},
      // Products above 9216 chips, each dim small.
      {"96x97", "\"96x97\"", "more chips than the largest TPU slice (9216)"},
      {"16x24x25", "\"16x24x25\"", "more chips than the largest TPU slice (9216)"},
      {"9216x2", "\"9216x2\"", "more chips than the largest TPU slice (9216)"},
      {"100x100x100", "\"100x100x100\"", "more chips than the largest TPU slice (9216)"},
  }));
  CAPTURE(text);
  webhook::Result<topology::Shape> s = topology::parse_shape(text);
  REQUIRE_FALSE(s.has_value());
  const webhook::Error& e = s.error();
  CAPTURE(e.message);
  CHECK(e.code == webhook::ErrorCode::kInvalidArgument);
  // The whole value, quoted, so it can be found in the manifest.
  CHECK_THAT(e.message, Catch::Contains("topology \"" + text + "\" is invalid"));
  CHECK_THAT(e.message, Catch::Contains(token));
  CHECK_THAT(e.message, Catch::Contains(what));
  CHECK_THAT(e.message, Catch::Contains(std::string(kExpected)));
}

TEST_CASE("M2: an empty topology says it is empty", "[topology][shape]") {
  webhook::Result<topology::Shape> s = topology::parse_shape("");
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == webhook::ErrorCode::kInvalidArgument);
  CHECK_THAT(s.error().message, Catch::StartsWith("topology is empty"));
  CHECK_THAT(s.error().message, Catch::Contains(std::string(kExpected)));
}

TEST_CASE("M2: a very long topology is rejected without scanning it all", "[topology][shape]") {
  std::string text;
  for (int i = 0; i < 10000; ++i) {
    text += "2x";
  }
  text += "2";
  webhook::Result<topology::Shape> s = topology::parse_shape(text);
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().code == webhook::ErrorCode::kInvalidArgument);
  CHECK_THAT(s.error().message, Catch::Contains("more than 4 dimensions"));
}
