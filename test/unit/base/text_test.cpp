// webhook::quote and its bounded variants (lib/base/text/text.h): how messages show user values.
#include "base/text/text.h"

#include <catch2/catch.hpp>
#include <string>

TEST_CASE("quote puts a value in double quotes", "[base][text]") {
  CHECK(webhook::quote("4x") == "\"4x\"");
  CHECK(webhook::quote("") == "\"\"");
}

TEST_CASE("bounded and quote_bounded show a name of at most 253 bytes whole", "[base][text]") {
  std::string longest(253, 'n');
  CHECK(webhook::bounded("rc") == "rc");
  CHECK(webhook::bounded("") == "");
  CHECK(webhook::bounded(longest) == longest);
  CHECK(webhook::quote_bounded("rc") == "\"rc\"");
  CHECK(webhook::quote_bounded(longest) == "\"" + longest + "\"");
}

TEST_CASE("bounded and quote_bounded cut a longer name, with a marker giving its length",
          "[base][text]") {
  std::string name = std::string(253, 'n') + std::string(1 << 20, 'x');
  CHECK(webhook::bounded(std::string(254, 'n')) == std::string(253, 'n') + "\u2026(254 bytes)");
  CHECK(webhook::bounded(name) == std::string(253, 'n') + "\u2026(1048829 bytes)");
  CHECK(webhook::quote_bounded(name) == "\"" + std::string(253, 'n') + "\"\u2026(1048829 bytes)");
}

TEST_CASE("bounded never cuts inside a UTF-8 sequence", "[base][text]") {
  // "é" is 2 bytes (C3 A9): 252 'a' then "é" puts its second byte at offset 253, past the cut.
  std::string two = std::string(252, 'a') + "\u00e9" + "bbb";
  CHECK(webhook::bounded(two) == std::string(252, 'a') + "\u2026(257 bytes)");
  // "€" is 3 bytes (E2 82 AC), starting at offset 251 or 252: cut before it.
  std::string three = std::string(251, 'a') + "\u20ac" + "b";
  CHECK(webhook::bounded(three) == std::string(251, 'a') + "\u2026(255 bytes)");
  std::string ends = std::string(250, 'a') + "\u20ac" + "b";  // ends at 253: kept whole
  CHECK(webhook::bounded(ends) == std::string(250, 'a') + "\u20ac" + "\u2026(254 bytes)");
  CHECK(webhook::quote_bounded(three) == "\"" + std::string(251, 'a') + "\"\u2026(255 bytes)");
}
