#include "topology/shape.h"

#include <array>

#include "base/text/numbers.h"
#include "base/text/text.h"

namespace topology {
namespace {

constexpr std::string_view kExpected =
    "expected 2 or 3 positive integers joined by 'x', such as 4x4 or 2x2x2";

webhook::Error bad(std::string_view text, const std::string& what) {
  return webhook::invalid_argument("topology " + webhook::quote(text) + " is invalid: " + what +
                                   "; " + std::string(kExpected));
}

// The parts of a topology between its 'x's: up to three dims, and a fourth and the rest to
// report "too many" (huge inputs are not scanned further).
struct Parts {
  std::array<std::string_view, 5> at;
  std::size_t size = 0;
};

Parts split_x(std::string_view text) {
  Parts parts;
  std::size_t start = 0;
  while (true) {
    std::size_t pos = text.find('x', start);
    if (pos == std::string_view::npos) {
      parts.at[parts.size++] = text.substr(start);
      return parts;
    }
    parts.at[parts.size++] = text.substr(start, pos - start);
    start = pos + 1;
    if (parts.size > 3) {
      parts.at[parts.size++] = text.substr(start);
      return parts;
    }
  }
}

}  // namespace

std::string Shape::text() const {
  std::string out = std::to_string(dims[0]) + "x" + std::to_string(dims[1]);
  if (rank == 3) {
    out += 'x';
    out += std::to_string(dims[2]);
  }
  return out;
}

webhook::Result<Shape> parse_shape(std::string_view text) {
  if (text.empty()) {
    return webhook::invalid_argument("topology is empty; " + std::string(kExpected));
  }
  Parts parts = split_x(text);
  if (parts.size < 2 || parts.size > 3) {
    std::string what =
        parts.size < 2
            ? "it has 1 dimension"
            : "it has " + std::string(parts.size > 4 ? "more than 4" : "4") + " dimensions";
    if (parts.size < 2 && text.find('X') != std::string_view::npos) {
      what += " (use a lowercase 'x')";
    }
    return bad(text, what);
  }
  Shape shape;
  shape.rank = static_cast<int>(parts.size);
  long long chips = 1;
  for (std::size_t i = 0; i < parts.size; ++i) {
    std::string_view token = parts.at[i];
    std::string where = "dimension " + std::to_string(i + 1);
    if (token.empty()) {
      return bad(text, where + " is empty");
    }
    std::optional<std::int64_t> value = webhook::parse_non_negative(token, kMaxChips);
    if (!value) {
      bool digits = token.find_first_not_of("0123456789") == std::string_view::npos;
      return bad(text, where + " " + webhook::quote(token) +
                           (digits ? " is larger than the largest TPU slice (" +
                                         std::to_string(kMaxChips) + " chips)"
                                   : " is not a positive integer (digits only: no signs, spaces "
                                     "or other characters)"));
    }
    if (*value == 0) {
      return bad(text, where + " " + webhook::quote(token) + " must be greater than 0");
    }
    shape.dims[i] = static_cast<int>(*value);
    chips *= *value;
    if (chips > kMaxChips) {
      return bad(
          text, "it has more chips than the largest TPU slice (" + std::to_string(kMaxChips) + ")");
    }
  }
  return shape;
}

}  // namespace topology
