#pragma once
// Kubernetes resource quantities ("24", "500m", "250Gi", "1e3"), one grammar for every room:
//  - parse_quantity reads one as KubeRay does when it writes a worker's `ray start` command
//    (webhook-dryrun): the exact value, Quantity.Value() (rounded up to an integer) and
//    Quantity.AsApproximateFloat64() (the number Ray's --resources JSON carries);
//  - parse_byte_count reads the whole byte counts a flag such as --memory-limit takes.
//
//   std::optional<webhook::Quantity> q = webhook::parse_quantity("250Gi");
//   q->value();        // 268435456000
//   q->approximate();  // 268435456000.0
//   webhook::parse_quantity("500m")->value();  // 1: Value() rounds up
//   webhook::parse_byte_count("256Mi");         // 268435456
//
// The grammar is Kubernetes' (<digits>[.<digits>] then one of n u m "" k M G T P E, Ki Mi Gi Ti
// Pi Ei, or e<int> / E<int>), with its quirks: "1." and ".5" parse, a bare "." or "+" is zero,
// a value finer than 1n rounds up to 1n, a binary-suffixed value is capped at 2^63-1 ("8Ei").
// Unlike Kubernetes a negative quantity is refused (no Ray resource is negative), and so is one
// with more than 1000 significant digits or an exponent beyond +-10000 (Kubernetes accepts
// them; no real limit is near).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace webhook {

// value = digits x 10^scale, exactly. `digits` has no leading zeros ("0" for zero) and keeps the
// trailing zeros the text had ("1.50" is 150 x 10^-2), as Kubernetes' unscaled value does: the
// float conversion depends on it.
struct Quantity {
  std::string digits = "0";
  int scale = 0;

  bool is_zero() const { return digits == "0"; }
  // Kubernetes' Value(): the value rounded up to the next integer. nullopt when that is above
  // INT64_MAX (where Kubernetes' own answer wraps).
  std::optional<std::int64_t> value() const;
  // Kubernetes' AsApproximateFloat64(): double(digits) x Go's math.Pow10(scale), with Go's
  // rounding, so "0.5" is 0.5 and "1.5Gi" 1610612736. May be +Inf, or NaN for "0e400".
  double approximate() const;
};

// Parses `text` as Kubernetes' ParseQuantity does (see the header comment for what differs).
// nullopt when it is not a quantity.
std::optional<Quantity> parse_quantity(std::string_view text);

// Go's math.Pow10(n), bit for bit: exact table entries below 1e32, one multiplication or division
// beyond; +Inf above 308, 0 below -323.
double go_pow10(int n);

// A whole number of bytes in the same grammar, narrowed: digits (at most 2^63-1) and then nothing
// or one of k, M, G, T (1000-based) and Ki, Mi, Gi, Ti (1024-based), such as "268435456" or
// "256Mi". No sign, point, exponent or other suffix; nullopt for those and when the bytes do not
// fit in 64 bits.
std::optional<std::uint64_t> parse_byte_count(std::string_view text);

}  // namespace webhook
