#pragma once
// JSON text written straight into a buffer, byte for byte as webhook::dump_json writes the same
// value, so that text built piece by piece and a dumped json value can be compared.
//
//   std::string out = "{\"name\":";
//   webhook::append_json_string(out, name);   // == dump_json(json(name))

#include <string>
#include <string_view>

#include "base/json/access.h"

namespace webhook {

// `s` as a JSON string: '"' and '\\' escaped, \b \f \n \r \t, other bytes below 0x20 as \u00xx,
// the rest as they are. Text that is not ASCII goes through dump_json, which also replaces
// invalid UTF-8 with U+FFFD.
inline void append_json_string(std::string& out, std::string_view s) {
  for (char ch : s) {
    if (static_cast<unsigned char>(ch) >= 0x80) {
      out += dump_json(json(std::string(s)));
      return;
    }
  }
  out.push_back('"');
  std::size_t run = 0;  // the start of the bytes not yet appended, which need no escape
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') {
      continue;
    }
    out.append(s.data() + run, i - run);
    run = i + 1;
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
  out.append(s.data() + run, s.size() - run);
  out.push_back('"');
}

}  // namespace webhook
