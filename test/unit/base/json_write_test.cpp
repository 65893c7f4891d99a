// lib/base/json/write.h: JSON strings written straight into a buffer, byte for byte as the JSON
// library dumps them.
#include <catch2/catch.hpp>

#include "base/json/write.h"

namespace {

std::string written(std::string_view s) {
  std::string out = "x";  // appended, never replaced
  webhook::append_json_string(out, s);
  return out.substr(1);
}

}  // namespace

TEST_CASE("append_json_string: JSON's escapes, DEL and printable bytes as they are",
          "[base][json_write]") {
  CHECK(written("") == R"("")");
  CHECK(written("plain text") == R"("plain text")");
  CHECK(written("a\"b\\c") == R"("a\"b\\c")");
  CHECK(written("\b\f\n\r\t") == R"("\b\f\n\r\t")");
  CHECK(written(std::string("\x00\x01\x1f", 3)) == R"("\u0000\u0001\u001f")");
  CHECK(written("\x7f~") == "\"\x7f~\"");
}

TEST_CASE("append_json_string: every ASCII byte as nlohmann::json dumps it", "[base][json_write]") {
  for (int c = 0; c < 0x80; ++c) {
    std::string s = "a" + std::string(1, static_cast<char>(c)) + "b";
    CAPTURE(c);
    CHECK(written(s) == nlohmann::json(s).dump());
  }
}

TEST_CASE("append_json_string: every byte at every place of a longer string as nlohmann dumps it",
          "[base][json_write]") {
  // The copy goes eight bytes at a time where none needs care: a byte that does, at each of the
  // places of a word, in the first word, the last whole one and the tail, changes the text.
  std::string plain = "0123456789abcdefghijklmnopq";  // 27 bytes: three words and a tail of 3
  for (int c = 0; c < 0x100; ++c) {
    for (std::size_t at = 0; at < plain.size(); ++at) {
      std::string s = plain;
      s[at] = static_cast<char>(c);
      CAPTURE(c, at);
      REQUIRE(written(s) ==
              nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
  }
  CHECK(written(plain + "\"" + plain) == "\"" + plain + "\\\"" + plain + "\"");
}

TEST_CASE("append_json_string: UTF-8 as it is, invalid bytes replaced", "[base][json_write]") {
  CHECK(written("caf\xc3\xa9") == "\"caf\xc3\xa9\"");
  CHECK(written("a\xff") == "\"a\xef\xbf\xbd\"");  // U+FFFD
}

TEST_CASE("json_escaped: DEL only when asked", "[base][json_write]") {
  CHECK(webhook::json_escaped('\x1f'));
  CHECK(webhook::json_escaped('"'));
  CHECK_FALSE(webhook::json_escaped(' '));
  CHECK_FALSE(webhook::json_escaped(0x7f));
  CHECK(webhook::json_escaped(0x7f, {.del = true}));
  std::string out;
  webhook::append_json_escape(out, 0x7f);
  CHECK(out == R"(\u007f)");
}
