// webhook::HeapLimit (lib/base/memory/heap_limit.h) through the process's operator new that
// heap_limit.cpp provides: what it refuses, what it counts, and what it leaves alone. It is what
// keeps decoding within its share of the in-flight memory budget (docs/security.md "The in-flight
// memory budget").
#include "base/memory/heap_limit.h"

#include <catch2/catch.hpp>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace {

// A heap allocation of n bytes the optimizer cannot remove.
std::unique_ptr<char[]> take(std::size_t n) {
  std::unique_ptr<char[]> p(new char[n]);
  static_cast<volatile char*>(p.get())[0] = 1;
  return p;
}

}  // namespace

TEST_CASE(
    "HeapLimit refuses the allocation that would pass its ceiling, before making it (security.md "
    "in-flight budget)",
    "[heap_limit]") {
  webhook::HeapLimit limit(100000);
  std::unique_ptr<char[]> first = take(60000);
  CHECK_FALSE(limit.refused());
  CHECK(limit.peak() >= 60000);
  CHECK(limit.peak() < 60000 + 60000 / 4 + 64);
  CHECK_THROWS_AS(take(60000), std::bad_alloc);
  CHECK(limit.refused());
  CHECK(limit.peak() < 100000);  // the refused one was never made
}

TEST_CASE(
    "HeapLimit subtracts what is freed, so the ceiling bounds what is held at once (security.md "
    "in-flight budget)",
    "[heap_limit]") {
  webhook::HeapLimit limit(100000);
  for (int i = 0; i < 50; ++i) {
    std::unique_ptr<char[]> p = take(40000);  // 2 MB in all, 40 KB at a time
  }
  CHECK_FALSE(limit.refused());
  CHECK(limit.peak() >= 40000);
  CHECK(limit.peak() < 60000);
}

TEST_CASE(
    "after one refusal HeapLimit counts but refuses no more, so unwinding can allocate "
    "(security.md in-flight budget)",
    "[heap_limit]") {
  webhook::HeapLimit limit(1000);
  CHECK_THROWS_AS(take(4000), std::bad_alloc);
  REQUIRE(limit.refused());
  std::unique_ptr<char[]> after = take(4000);
  CHECK(limit.peak() >= 4000);
}

TEST_CASE(
    "HeapLimit counts only its own thread, and nothing once it ends (security.md in-flight budget)",
    "[heap_limit]") {
  {
    webhook::HeapLimit limit(1000);
    std::thread other([] { std::unique_ptr<char[]> p = take(1 << 20); });
    other.join();  // the thread's own allocations (its stack aside) are not this limit's
    CHECK_FALSE(limit.refused());
  }
  std::unique_ptr<char[]> unlimited = take(1 << 20);  // no limit lives on this thread any more
  CHECK(unlimited != nullptr);
}

TEST_CASE(
    "containers and strings are counted through the array, sized and nothrow forms (security.md "
    "in-flight budget)",
    "[heap_limit]") {
  webhook::HeapLimit limit(1 << 20);
  {
    std::vector<std::string> v(100, std::string(1000, 'x'));  // 100 KB of strings and a vector
    CHECK(limit.peak() >= 100 * 1000 + 100 * sizeof(std::string));
  }
  std::size_t after_vector = limit.peak();
  char* p = new (std::nothrow) char[300000];
  CHECK(p != nullptr);
  CHECK(limit.peak() >= 300000);
  delete[] p;
  CHECK(limit.peak() >= after_vector);
  char* refused = new (std::nothrow) char[2 << 20];  // the nothrow form answers null
  CHECK(refused == nullptr);
  CHECK(limit.refused());
}
