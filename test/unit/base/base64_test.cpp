#include "base/encoding/base64.h"

#include <catch2/catch.hpp>

TEST_CASE("base64 round-trips and matches RFC 4648 vectors", "[admission]") {
  auto [plain, encoded] =
      GENERATE(table<std::string, std::string>({{"", ""},
                                                {"f", "Zg=="},
                                                {"fo", "Zm8="},
                                                {"foo", "Zm9v"},
                                                {"foob", "Zm9vYg=="},
                                                {"fooba", "Zm9vYmE="},
                                                {"foobar", "Zm9vYmFy"},
                                                {std::string("\0\xff", 2), "AP8="}}));
  CAPTURE(plain);
  CHECK(webhook::base64_encode(plain) == encoded);
  CHECK(webhook::base64_decode(encoded) == plain);
}

TEST_CASE("base64_decode refuses malformed text", "[admission]") {
  auto text = GENERATE(as<std::string>{}, "abc", "Zm9v!", "====x===");
  CAPTURE(text);
  CHECK_FALSE(webhook::base64_decode(text).has_value());
}
