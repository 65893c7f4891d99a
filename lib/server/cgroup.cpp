#include "server/cgroup.h"

#include <algorithm>
#include <fstream>
#include <optional>

#include "base/text/numbers.h"

namespace server {
namespace {

// The first whitespace-separated words of a file, as integers ("max" and anything else not a
// number: nullopt).
std::optional<std::int64_t> number_in(const std::string& path, int word = 0) {
  std::ifstream f(path);
  std::string text;
  for (int i = 0; i <= word; ++i) {
    if (!(f >> text)) {
      return std::nullopt;
    }
  }
  return webhook::parse_non_negative(text);
}

}  // namespace

std::uint64_t cgroup_memory_limit(const std::string& root) {
  for (const char* file : {"/memory.max", "/memory/memory.limit_in_bytes"}) {
    std::optional<std::int64_t> n = number_in(root + file);
    if (n && *n > 0 && *n < (std::int64_t{1} << 50)) {  // v1 writes ~2^63 for "no limit"
      return static_cast<std::uint64_t>(*n);
    }
  }
  return 0;
}

int cgroup_cpu_limit(const std::string& root) {
  // v2: "QUOTA PERIOD" or "max PERIOD"; v1: a quota of -1 (not a non-negative number) is none.
  std::optional<std::int64_t> quota = number_in(root + "/cpu.max");
  std::optional<std::int64_t> period = number_in(root + "/cpu.max", 1);
  if (!quota) {
    quota = number_in(root + "/cpu/cpu.cfs_quota_us");
    period = number_in(root + "/cpu/cpu.cfs_period_us");
  }
  if (!quota || !period || *quota <= 0 || *period <= 0) {
    return 0;
  }
  std::int64_t cpus = (*quota + *period - 1) / *period;
  return static_cast<int>(std::min<std::int64_t>(cpus, 1 << 20));
}

}  // namespace server
