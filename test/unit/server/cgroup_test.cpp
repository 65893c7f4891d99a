// server::cgroup_memory_limit and server::cgroup_cpu_limit on cgroup trees written here, as the
// kubelet writes them for a container's limits (v2 cpu.max "QUOTA PERIOD", v1 CFS files).
#include "server/cgroup.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

// A scratch cgroup root of its own (mkdtemp: test processes run side by side).
struct Tree {
  Tree() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "cgroup-test-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    root = tmpl;
    std::filesystem::create_directories(root / "cpu");
    std::filesystem::create_directories(root / "memory");
  }
  ~Tree() { std::filesystem::remove_all(root); }
  Tree(const Tree&) = delete;
  Tree& operator=(const Tree&) = delete;
  void write(const std::string& file, const std::string& text) const {
    std::ofstream(root / file) << text;
  }
  std::string path() const { return root.string(); }
  std::filesystem::path root;
};

}  // namespace

TEST_CASE("cgroup v2 cpu.max: the quota over its period, rounded up; max is no limit",
          "[server][cgroup]") {
  Tree t;
  CHECK(server::cgroup_cpu_limit(t.path()) == 0);  // no file: no limit
  t.write("cpu.max", "max 100000\n");
  CHECK(server::cgroup_cpu_limit(t.path()) == 0);
  t.write("cpu.max", "100000 100000\n");  // limits.cpu: 1
  CHECK(server::cgroup_cpu_limit(t.path()) == 1);
  t.write("cpu.max", "50000 100000\n");  // 500m
  CHECK(server::cgroup_cpu_limit(t.path()) == 1);
  t.write("cpu.max", "150000 100000\n");  // 1500m
  CHECK(server::cgroup_cpu_limit(t.path()) == 2);
  t.write("cpu.max", "400000 100000\n");
  CHECK(server::cgroup_cpu_limit(t.path()) == 4);
  t.write("cpu.max", "100000 0\n");  // a broken period
  CHECK(server::cgroup_cpu_limit(t.path()) == 0);
  t.write("cpu.max", "100000\n");  // no period
  CHECK(server::cgroup_cpu_limit(t.path()) == 0);
}

TEST_CASE("cgroup v1 CFS files: a quota of -1 is no limit", "[server][cgroup]") {
  Tree t;
  t.write("cpu/cpu.cfs_period_us", "100000\n");
  t.write("cpu/cpu.cfs_quota_us", "-1\n");
  CHECK(server::cgroup_cpu_limit(t.path()) == 0);
  t.write("cpu/cpu.cfs_quota_us", "250000\n");
  CHECK(server::cgroup_cpu_limit(t.path()) == 3);
  t.write("cpu.max", "100000 100000\n");  // v2 read first
  CHECK(server::cgroup_cpu_limit(t.path()) == 1);
}

TEST_CASE("cgroup memory limit: v2 memory.max, else v1; max and v1's huge value are none",
          "[server][cgroup]") {
  Tree t;
  CHECK(server::cgroup_memory_limit(t.path()) == 0);
  t.write("memory.max", "max\n");
  CHECK(server::cgroup_memory_limit(t.path()) == 0);
  t.write("memory/memory.limit_in_bytes", "9223372036854771712\n");
  CHECK(server::cgroup_memory_limit(t.path()) == 0);
  t.write("memory/memory.limit_in_bytes", "268435456\n");
  CHECK(server::cgroup_memory_limit(t.path()) == 268435456);
  t.write("memory.max", "536870912\n");
  CHECK(server::cgroup_memory_limit(t.path()) == 536870912);
}
