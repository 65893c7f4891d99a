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
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
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
      default:
        if (c < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 0xf]);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

}  // namespace webhook
