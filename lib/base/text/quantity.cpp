#include "base/text/quantity.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <system_error>

#include "base/text/numbers.h"

namespace webhook {
namespace {

constexpr std::size_t kMaxDigits = 1000;
constexpr int kMaxExponent = 10000;
constexpr int kNanoScale = -9;
constexpr std::string_view kMaxInt64 = "9223372036854775807";

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string strip_leading_zeros(std::string s) {
  std::size_t first = s.find_first_not_of('0');
  return first == std::string::npos ? "0" : s.substr(first);
}

// Whether the decimal digit strings (no leading zeros) compare a > b.
bool greater(std::string_view a, std::string_view b) {
  return a.size() != b.size() ? a.size() > b.size() : a > b;
}

// digits x m, for a small m.
std::string multiply(const std::string& digits, unsigned m) {
  std::string out(digits.size(), '0');
  unsigned carry = 0;
  for (std::size_t i = digits.size(); i-- > 0;) {
    unsigned v = static_cast<unsigned>(digits[i] - '0') * m + carry;
    out[i] = static_cast<char>('0' + v % 10);
    carry = v / 10;
  }
  for (; carry > 0; carry /= 10) {
    out.insert(out.begin(), static_cast<char>('0' + carry % 10));
  }
  return strip_leading_zeros(std::move(out));
}

// digits + 1.
std::string increment(std::string digits) {
  for (std::size_t i = digits.size(); i-- > 0;) {
    if (digits[i] != '9') {
      ++digits[i];
      return digits;
    }
    digits[i] = '0';
  }
  return "1" + digits;
}

// The suffix's base (10 or 2) and exponent, as Kubernetes' suffixer interprets it: the decimal SI
// and binary SI tables first (so "E" is exa, not an exponent), then e<int> / E<int>.
struct Suffix {
  int base = 10;
  int exponent = 0;
};

std::optional<Suffix> interpret_suffix(std::string_view s) {
  static constexpr std::array<std::pair<std::string_view, Suffix>, 16> kTable{{
      {"", {10, 0}},
      {"n", {10, -9}},
      {"u", {10, -6}},
      {"m", {10, -3}},
      {"k", {10, 3}},
      {"M", {10, 6}},
      {"G", {10, 9}},
      {"T", {10, 12}},
      {"P", {10, 15}},
      {"E", {10, 18}},
      {"Ki", {2, 10}},
      {"Mi", {2, 20}},
      {"Gi", {2, 30}},
      {"Ti", {2, 40}},
      {"Pi", {2, 50}},
      {"Ei", {2, 60}},
  }};
  for (const auto& [name, suffix] : kTable) {
    if (s == name) {
      return suffix;
    }
  }
  if (s.size() < 2 || (s[0] != 'e' && s[0] != 'E')) {
    return std::nullopt;
  }
  // Go's strconv.ParseInt: an optional sign, then digits only.
  std::string_view e = s.substr(1);
  bool negative = e[0] == '-';
  if (e[0] == '+' || e[0] == '-') {
    e.remove_prefix(1);
  }
  if (e.empty() || !std::all_of(e.begin(), e.end(), is_digit)) {
    return std::nullopt;
  }
  int exponent = 0;
  auto [end, ec] = std::from_chars(e.data(), e.data() + e.size(), exponent);
  if (ec != std::errc() || end != e.data() + e.size() || exponent > kMaxExponent) {
    return std::nullopt;
  }
  return Suffix{10, negative ? -exponent : exponent};
}

// The number's parts as Kubernetes' scanner splits them: the integer digits without leading
// zeros ("0" when none are left), the fraction digits, whether any digit or a point was written,
// and the suffix after them.
struct Number {
  std::string num;
  std::string denom;
  bool has_digit = false;
  bool has_point = false;
  std::string_view suffix;
};

Number split_number(std::string_view text) {
  Number n;
  std::size_t pos = 0;
  while (pos < text.size() && text[pos] == '0') {
    ++pos;
    n.has_digit = true;
  }
  std::size_t start = pos;
  while (pos < text.size() && is_digit(text[pos])) {
    ++pos;
  }
  n.num = pos == start ? "0" : std::string(text.substr(start, pos - start));
  n.has_digit = n.has_digit || pos > start;
  if (pos < text.size() && text[pos] == '.') {
    n.has_point = true;
    start = ++pos;
    while (pos < text.size() && is_digit(text[pos])) {
      ++pos;
    }
    n.denom = std::string(text.substr(start, pos - start));
    n.has_digit = n.has_digit || pos > start;
  }
  n.suffix = text.substr(pos);
  return n;
}

// Kubernetes keeps a quantity as an int64 (value, scale) when it fits with at most 18 digits
// and no finer than nano; otherwise as an arbitrary-precision decimal rounded up to exactly nano
// scale. The two keep different unscaled values for one number ("1.5Gi" is 1610612736000000000
// x 10^-9), and AsApproximateFloat64 reads the unscaled value, so both are modelled.
std::optional<Quantity> fast_path(const Number& n, Suffix suffix) {
  auto length = static_cast<int>(n.num.size() + n.denom.size());
  if (suffix.base == 10) {
    int scale = suffix.exponent - static_cast<int>(n.denom.size());
    if (length > 18 || scale < kNanoScale) {
      return std::nullopt;
    }
    return Quantity{strip_leading_zeros(n.num + n.denom), scale};
  }
  // 1Mi has about 6 decimal digits, so Kubernetes budgets exponent*3/10 digits for the suffix.
  if (!n.denom.empty() || 14 - length - suffix.exponent * 3 / 10 < 0) {
    return std::nullopt;
  }
  std::string digits = n.num;
  for (int i = 0; i < suffix.exponent; i += 10) {
    digits = multiply(digits, 1024);
  }
  if (greater(digits, kMaxInt64)) {
    return std::nullopt;  // int64Multiply overflows
  }
  return Quantity{std::move(digits), 0};
}

Quantity slow_path(const Number& n, Suffix suffix) {
  Quantity q;
  q.digits = strip_leading_zeros(n.num + n.denom);
  q.scale = (suffix.base == 10 ? suffix.exponent : 0) - static_cast<int>(n.denom.size());
  for (int i = 0; suffix.base == 2 && i < suffix.exponent; i += 10) {
    q.digits = multiply(q.digits, 1024);
  }
  if (q.is_zero()) {
    return q;
  }
  // Round (up, away from zero) to nano: "0.9n" is 1n.
  if (q.scale < kNanoScale) {
    auto drop = static_cast<std::size_t>(kNanoScale - q.scale);
    bool fraction = false;
    if (drop >= q.digits.size()) {
      fraction = true;  // non-zero, all below nano
      q.digits = "0";
    } else {
      std::string_view dropped = std::string_view(q.digits).substr(q.digits.size() - drop);
      fraction = dropped.find_first_not_of('0') != std::string_view::npos;
      q.digits.resize(q.digits.size() - drop);
    }
    if (fraction) {
      q.digits = increment(strip_leading_zeros(std::move(q.digits)));
    }
  } else {
    q.digits.append(static_cast<std::size_t>(q.scale - kNanoScale), '0');
  }
  q.scale = kNanoScale;
  if (suffix.base == 2 && greater(q.digits, std::string(kMaxInt64) + "000000000")) {
    return Quantity{std::string(kMaxInt64), 0};  // binary SI is capped at 2^63-1
  }
  return q;
}

}  // namespace

std::optional<Quantity> parse_quantity(std::string_view text) {
  if (text.empty() || text[0] == '-') {
    return std::nullopt;
  }
  if (text[0] == '+') {
    text.remove_prefix(1);
  }
  Number n = split_number(text);
  std::optional<Suffix> suffix = interpret_suffix(n.suffix);
  if (!suffix || n.num.size() + n.denom.size() > kMaxDigits) {
    return std::nullopt;
  }
  if (std::optional<Quantity> fast = fast_path(n, *suffix)) {
    return fast;
  }
  if (!n.has_digit) {
    return std::nullopt;  // the decimal parser wants a digit: "Pi" and "+.Pi" fail
  }
  return slow_path(n, *suffix);
}

std::optional<std::int64_t> Quantity::value() const {
  std::string whole = digits;
  bool fraction = false;
  if (scale >= 0) {
    if (!is_zero()) {
      if (digits.size() + static_cast<std::size_t>(scale) > kMaxInt64.size()) {
        return std::nullopt;
      }
      whole.append(static_cast<std::size_t>(scale), '0');
    }
  } else {
    auto cut = static_cast<std::size_t>(-scale);
    if (cut >= digits.size()) {
      whole = "0";
      fraction = !is_zero();
    } else {
      fraction = digits.find_first_not_of('0', digits.size() - cut) != std::string::npos;
      whole = strip_leading_zeros(digits.substr(0, digits.size() - cut));
    }
  }
  if (fraction) {
    whole = increment(whole);
  }
  if (greater(whole, kMaxInt64)) {
    return std::nullopt;
  }
  std::int64_t out = 0;
  std::from_chars(whole.data(), whole.data() + whole.size(), out);
  return out;
}

double Quantity::approximate() const {
  double base = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), base);
  if (ec == std::errc::result_out_of_range) {
    base = std::numeric_limits<double>::infinity();  // as big.Float's Float64 answers
  }
  return scale == 0 ? base : base * go_pow10(scale);
}

double go_pow10(int n) {
  static constexpr std::array<double, 32> kTab{1e00, 1e01, 1e02, 1e03, 1e04, 1e05, 1e06, 1e07,
                                               1e08, 1e09, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                               1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23,
                                               1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31};
  static constexpr std::array<double, 10> kPos32{1e00,  1e32,  1e64,  1e96,  1e128,
                                                 1e160, 1e192, 1e224, 1e256, 1e288};
  static constexpr std::array<double, 11> kNeg32{1e-00,  1e-32,  1e-64,  1e-96,  1e-128, 1e-160,
                                                 1e-192, 1e-224, 1e-256, 1e-288, 1e-320};
  if (n >= 0 && n <= 308) {
    auto u = static_cast<std::size_t>(n);
    return kPos32[u / 32] * kTab[u % 32];
  }
  if (n < 0 && n >= -323) {
    auto u = static_cast<std::size_t>(-n);
    return kNeg32[u / 32] / kTab[u % 32];
  }
  return n > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

std::optional<std::uint64_t> parse_byte_count(std::string_view text) {
  static constexpr std::array<std::string_view, 9> kByteSuffixes{"",   "k",  "M",  "G", "T",
                                                                 "Ki", "Mi", "Gi", "Ti"};
  Number n = split_number(text);
  if (!n.has_digit || n.has_point ||
      std::find(kByteSuffixes.begin(), kByteSuffixes.end(), n.suffix) == kByteSuffixes.end()) {
    return std::nullopt;
  }
  std::optional<Suffix> suffix = interpret_suffix(n.suffix);
  std::optional<std::int64_t> count = parse_non_negative(n.num);
  if (!suffix || !count) {
    return std::nullopt;
  }
  std::uint64_t factor = 1;
  for (int i = 0; i < suffix->exponent; ++i) {
    factor *= static_cast<std::uint64_t>(suffix->base);
  }
  if (static_cast<std::uint64_t>(*count) > std::numeric_limits<std::uint64_t>::max() / factor) {
    return std::nullopt;
  }
  return static_cast<std::uint64_t>(*count) * factor;
}

}  // namespace webhook
