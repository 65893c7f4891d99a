#pragma once
// Strict number parsing in the manner of absl::SimpleAtoi: the whole text must be digits.

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace webhook {

// Parses a non-negative decimal integer such as "16". Rejects an empty text, signs, spaces,
// any other character, and values above `max`. Returns nullopt on any of these.
inline std::optional<std::int64_t> parse_non_negative(std::string_view text,
                                                      std::int64_t max = INT64_MAX) {
  if (text.empty()) {
    return std::nullopt;
  }
  for (char c : text) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
  }
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value > max) {
    return std::nullopt;
  }
  return value;
}

}  // namespace webhook
