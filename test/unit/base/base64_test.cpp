#include "base/encoding/base64.h"

#include <openssl/evp.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

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

// docs/spec.md "Envelope": an answer's patch is base64-encoded (RFC 4648, padded); OpenSSL's
// EVP_EncodeBlock, an implementation of its own, is the oracle.
TEST_CASE("base64 encodes as OpenSSL does, whatever the bytes and the length", "[admission]") {
  std::uint32_t state = 12345;  // a fixed xorshift sequence: every byte value, every remainder
  std::string bytes;
  for (int len = 0; len <= 1100; ++len) {
    std::string want(4 * ((bytes.size() + 2) / 3) + 1, '\0');
    int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(want.data()),
                            reinterpret_cast<const unsigned char*>(bytes.data()),
                            static_cast<int>(bytes.size()));
    want.resize(static_cast<std::size_t>(n));
    std::string got = "prefix:";
    webhook::append_base64(got, bytes);
    REQUIRE(got == "prefix:" + want);
    REQUIRE(webhook::base64_decode(want) == bytes);
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    bytes.push_back(static_cast<char>(state & 0xff));
  }
}
