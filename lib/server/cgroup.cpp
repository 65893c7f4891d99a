#include "server/cgroup.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <optional>

#include "base/text/numbers.h"

namespace server {
namespace {

// The first two whitespace-separated words of a file, each as an integer (missing, "max", "-1"
// and anything else not a non-negative number: nullopt).
std::array<std::optional<std::int64_t>, 2> numbers_in(const std::string& path) {
  std::ifstream f(path);
  std::array<std::optional<std::int64_t>, 2> out;
  std::string word;
  for (std::optional<std::int64_t>& n : out) {
    if (!(f >> word)) {
      break;
    }
    n = webhook::parse_non_negative(word);
  }
  return out;
}

}  // namespace

std::uint64_t cgroup_memory_limit(const std::string& root) {
  for (const char* file : {"/memory.max", "/memory/memory.limit_in_bytes"}) {
    std::optional<std::int64_t> n = numbers_in(root + file)[0];
    if (n && *n > 0 && *n < (std::int64_t{1} << 50)) {  // v1 writes ~2^63 for "no limit"
      return static_cast<std::uint64_t>(*n);
    }
  }
  return 0;
}

int cgroup_cpu_limit(const std::string& root) {
  // v2: "QUOTA PERIOD" or "max PERIOD"; v1: a quota of -1 (not a non-negative number) is none.
  auto [quota, period] = numbers_in(root + "/cpu.max");
  if (!quota) {
    quota = numbers_in(root + "/cpu/cpu.cfs_quota_us")[0];
    period = numbers_in(root + "/cpu/cpu.cfs_period_us")[0];
  }
  if (!quota || !period || *quota <= 0 || *period <= 0) {
    return 0;
  }
  std::int64_t cpus = (*quota + *period - 1) / *period;
  return static_cast<int>(std::min<std::int64_t>(cpus, 1 << 20));
}

}  // namespace server
