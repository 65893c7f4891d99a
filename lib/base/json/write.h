#pragma once
// JSON text written straight into a buffer, byte for byte as webhook::dump_json writes the same
// value, so that text built piece by piece and a dumped json value can be compared.
//
//   std::string out = "{\"name\":";
//   webhook::append_json_string(out, name);   // == dump_json(json(name))

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "base/json/access.h"

namespace webhook {

// Which bytes a JSON string escapes beyond JSON's own ('"', '\\' and those below 0x20).
struct JsonEscapes {
  // DEL (0x7f) as \u007f: a log line shown on a terminal then carries no control byte. Off
  // where the text must equal dump_json's, which writes DEL as it is.
  bool del = false;
};

// True when `c` is written escaped in a JSON string.
inline bool json_escaped(unsigned char c, JsonEscapes escapes = {}) {
  return c < 0x20 || c == '"' || c == '\\' || (c == 0x7f && escapes.del);
}

// The escape of one byte for which json_escaped is true, as dump_json writes it: \" \\ \b \f
// \n \r \t, the other control bytes (and DEL) as \u00xx.
inline void append_json_escape(std::string& out, unsigned char c) {
  switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default: {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
}

// True when one of the eight bytes of `w` is below 0x20, '"', '\\' or not ASCII: a word of
// `s` that append_json_string copies as it is unless this says otherwise. (Byte tricks: a byte
// below n borrows into its top bit when n is subtracted from it; x ^ c is zero where x is c.)
inline bool word_needs_care(std::uint64_t w) {
  constexpr std::uint64_t kOnes = 0x0101010101010101;
  constexpr std::uint64_t kHighs = 0x8080808080808080;
  auto below = [](std::uint64_t x, std::uint64_t n) { return (x - kOnes * n) & ~x; };
  return ((below(w, 0x20) | below(w ^ (kOnes * '"'), 1) | below(w ^ (kOnes * '\\'), 1) | w) &
          kHighs) != 0;
}

// `s` as a JSON string, quotes included, escaped as json_escaped says, the other bytes as they
// are. Text that is not ASCII goes through dump_json, which also replaces invalid UTF-8 with
// U+FFFD. (server::Log writes bounded values with the same two functions above.) One pass,
// eight bytes at a time where none of them needs an escape.
inline void append_json_string(std::string& out, std::string_view s) {
  const std::size_t start = out.size();
  out.push_back('"');
  std::size_t run = 0;  // the start of the bytes not yet appended, which need no escape
  std::size_t i = 0;
  while (i < s.size()) {
    std::uint64_t word = 0;
    if (s.size() - i >= sizeof word) {
      std::memcpy(&word, s.data() + i, sizeof word);
      if (!word_needs_care(word)) {
        i += sizeof word;
        continue;
      }
    }
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      out.resize(start);
      out += dump_json(json(std::string(s)));
      return;
    }
    if (json_escaped(c)) {
      out.append(s.data() + run, i - run);
      run = i + 1;
      append_json_escape(out, c);
    }
    ++i;
  }
  out.append(s.data() + run, s.size() - run);
  out.push_back('"');
}

}  // namespace webhook
