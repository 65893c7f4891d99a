#pragma once
// What the container may use, read from its cgroup, where the kubelet writes the container's
// limits (cgroup v2, else v1): memory.max (v1: memory/memory.limit_in_bytes) and cpu.max, the CFS
// quota and its period (v1: cpu/cpu.cfs_quota_us and cpu/cpu.cfs_period_us). Under a cgroup
// namespace, as in a Kubernetes container, /sys/fs/cgroup is the container's own cgroup.
//
//   std::uint64_t bytes = server::cgroup_memory_limit();   // 0: no limit
//   int cpus = server::cgroup_cpu_limit();                  // 0: no limit; 1500m -> 2

#include <cstdint>
#include <string>

namespace server {

inline const std::string kCgroupRoot = "/sys/fs/cgroup";

// Bytes; 0 when there is no limit or it cannot be read.
std::uint64_t cgroup_memory_limit(const std::string& root = kCgroupRoot);

// CPUs: the quota over its period, rounded up; 0 when there is no limit or it cannot be read.
int cgroup_cpu_limit(const std::string& root = kCgroupRoot);

}  // namespace server
