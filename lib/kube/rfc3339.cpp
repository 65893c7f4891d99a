#include "kube/rfc3339.h"

#include <cctype>
#include <cstdio>
#include <ctime>

namespace kube {
namespace {

int parse_digits(std::string_view text, std::size_t pos, std::size_t len, bool& ok) {
  int v = 0;
  if (pos + len > text.size()) {
    ok = false;
    return 0;
  }
  for (std::size_t i = pos; i < pos + len; ++i) {
    if (std::isdigit(static_cast<unsigned char>(text[i])) == 0) {
      ok = false;
      return 0;
    }
    v = v * 10 + (text[i] - '0');
  }
  return v;
}

}  // namespace

std::string format_rfc3339(WallTime t, int digits) {
  auto since = t.time_since_epoch();
  auto secs = std::chrono::floor<std::chrono::seconds>(since);
  auto frac = std::chrono::duration_cast<std::chrono::microseconds>(since - secs).count();
  auto tt = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[48];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out(buf);
  if (digits == 3) {
    std::snprintf(buf, sizeof buf, ".%03lld", static_cast<long long>(frac / 1000));
    out += buf;
  } else if (digits == 6) {
    std::snprintf(buf, sizeof buf, ".%06lld", static_cast<long long>(frac));
    out += buf;
  }
  return out + "Z";
}

std::optional<WallTime> parse_rfc3339_utc(std::string_view s) {
  std::tm tm{};
  int year = 0, mon = 0, day = 0, hour = 0, min = 0, sec = 0;
  int used = 0;
  std::string text(s);
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &year, &mon, &day, &hour, &min, &sec,
                  &used) != 6 ||
      used != 19) {
    return std::nullopt;
  }
  std::size_t i = 19;
  long long nanos = 0;
  if (i < text.size() && text[i] == '.') {
    int digits = 0;
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      if (digits++ < 9) {
        nanos = nanos * 10 + (text[i] - '0');
      }
    }
    if (digits == 0 || digits > 9) {
      return std::nullopt;
    }
    for (; digits < 9; ++digits) {
      nanos *= 10;
    }
  }
  if (i + 1 != text.size() || text[i] != 'Z') {
    return std::nullopt;
  }
  if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60) {
    return std::nullopt;
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  std::time_t t = timegm(&tm);
  return WallTime(std::chrono::duration_cast<WallTime::duration>(std::chrono::seconds(t) +
                                                                 std::chrono::nanoseconds(nanos)));
}

std::optional<WallTime> parse_rfc3339(std::string_view t) {
  bool ok = t.size() >= 20 && t[4] == '-' && t[7] == '-' && (t[10] == 'T' || t[10] == 't') &&
            t[13] == ':' && t[16] == ':';
  std::tm tm{};
  tm.tm_year = parse_digits(t, 0, 4, ok) - 1900;
  tm.tm_mon = parse_digits(t, 5, 2, ok) - 1;
  tm.tm_mday = parse_digits(t, 8, 2, ok);
  tm.tm_hour = parse_digits(t, 11, 2, ok);
  tm.tm_min = parse_digits(t, 14, 2, ok);
  tm.tm_sec = parse_digits(t, 17, 2, ok);
  if (!ok || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60) {
    return std::nullopt;
  }
  std::size_t i = 19;
  if (i < t.size() && t[i] == '.') {
    ++i;
    std::size_t start = i;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])) != 0) {
      ++i;
    }
    if (i == start) {
      return std::nullopt;
    }
  }
  long offset = 0;
  std::string_view zone = t.substr(i);
  if (zone == "Z" || zone == "z") {
    offset = 0;
  } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':') {
    int h = parse_digits(zone, 1, 2, ok);
    int m = parse_digits(zone, 4, 2, ok);
    if (!ok || h > 23 || m > 59) {
      return std::nullopt;
    }
    offset = (zone[0] == '+' ? 1 : -1) * (h * 3600L + m * 60L);
  } else {
    return std::nullopt;
  }
  std::time_t secs = ::timegm(&tm);
  return std::chrono::system_clock::from_time_t(secs - offset);
}

}  // namespace kube
