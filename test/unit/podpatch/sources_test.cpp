// lib/podpatch/sources.h: the value types behind the cluster seams. Slots and group keys order the
// way docs/spec.md M3.3 assigns ("lowest replica, then lowest host"), so maps keyed by them iterate
// in assignment order.
#include "podpatch/sources.h"

#include <catch2/catch.hpp>
#include <iterator>
#include <map>
#include <set>
#include <utility>
#include <vector>

using podpatch::GroupKey;
using podpatch::Slot;

namespace {

// By field name, so the test pins what each field means whatever order they are declared in.
Slot slot(int replica, int host) {
  Slot s;
  s.replica = replica;
  s.host = host;
  return s;
}

}  // namespace

TEST_CASE("M3.3: Slot orders replica-major, then host", "[podpatch][sources]") {
  auto [a_replica, a_host, b_replica, b_host, less] = GENERATE(table<int, int, int, int, bool>({
      {0, 0, 0, 1, true},
      {0, 3, 1, 0, true},
      {1, 0, 0, 3, false},
      {2, 1, 2, 1, false},
      {0, 10, 1, 0, true},
      {1, 2, 2, 1, true},
  }));
  CAPTURE(a_replica, a_host, b_replica, b_host);
  Slot a = slot(a_replica, a_host);
  Slot b = slot(b_replica, b_host);
  CHECK((a < b) == less);
  CHECK((a == b) == (a_replica == b_replica && a_host == b_host));
}

TEST_CASE("M3.3: a set of Slots iterates in assignment order", "[podpatch][sources]") {
  std::set<Slot> slots = {slot(1, 0), slot(0, 2), slot(0, 0), slot(1, 0), slot(0, 5)};
  std::vector<std::pair<int, int>> order;
  for (const Slot& s : slots) {
    order.emplace_back(s.replica, s.host);
  }
  CHECK(order == std::vector<std::pair<int, int>>{{0, 0}, {0, 2}, {0, 5}, {1, 0}});
  Slot zero;
  CHECK(zero.replica == 0);
  CHECK(zero.host == 0);
}

TEST_CASE("GroupKey: namespace, cluster and group all count", "[podpatch][sources]") {
  GroupKey k{"default", "c", "g"};
  CHECK(k == GroupKey{"default", "c", "g"});
  CHECK_FALSE(k == GroupKey{"other", "c", "g"});
  CHECK_FALSE(k == GroupKey{"default", "c2", "g"});
  CHECK_FALSE(k == GroupKey{"default", "c", "g2"});
  std::map<GroupKey, int> m;
  m[{"a", "c", "g"}] = 1;
  m[{"a", "c", "h"}] = 2;
  m[{"b", "a", "a"}] = 3;
  m[{"a", "c", "g"}] = 4;
  CHECK(m.size() == 3);
  CHECK(m.begin()->second == 4);
  CHECK(std::prev(m.end())->first.ns == "b");
}

TEST_CASE("NodeSource: Labels look up heterogeneously", "[podpatch][sources]") {
  podpatch::Labels labels = {{"cloud.google.com/gke-nodepool", "pool-1"}};
  std::string_view key = "cloud.google.com/gke-nodepool";
  CHECK(labels.find(key) != labels.end());  // std::less<> lets string_view keys look up
  CHECK(labels.contains(key));
}
