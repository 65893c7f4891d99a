#pragma once
// Small text helpers shared by every room.

#include <string>
#include <string_view>

namespace webhook {

// `s` in double quotes, as messages show user values: quote("4x") == "\"4x\"".
inline std::string quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  out.append(s);
  out.push_back('"');
  return out;
}

}  // namespace webhook
