#pragma once
// RFC 3339 times: written in UTC as the slot claims and their Leases carry them, read back
// strictly from a claim, and read in any zone from what others write (an exec plugin's
// credential expiry).
//
//   kube::format_rfc3339(t, 3);                             // "2026-12-01T09:00:00.123Z"
//   kube::parse_rfc3339_utc("2026-12-01T09:00:00.123Z");    // that time point
//   kube::parse_rfc3339_utc("2026-12-01T10:00:00+01:00");   // nullopt: UTC ("Z") only
//   kube::parse_rfc3339("2026-12-01T10:00:00+01:00");       // 09:00 UTC

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace kube {

using WallTime = std::chrono::system_clock::time_point;

// `t` in UTC with `digits` fractional digits: 3 (milliseconds), 6 (microseconds), else none.
std::string format_rfc3339(WallTime t, int digits);

// The inverse of format_rfc3339 for 0..9 fractional digits and the zone "Z"; nullopt for anything
// else.
std::optional<WallTime> parse_rfc3339_utc(std::string_view s);

// Any RFC 3339 time ("2026-12-02T07:00:00Z", "t" and "z" accepted, fractional seconds read and
// dropped, offsets such as "+01:00" applied); nullopt for anything else.
std::optional<WallTime> parse_rfc3339(std::string_view text);

}  // namespace kube
