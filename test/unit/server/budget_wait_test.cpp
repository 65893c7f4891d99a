// server::wait_for_budget on an event loop: waiters are granted in arrival order as room frees,
// one whose deadline passes first gets false with nothing counted and lets the next one in, and a
// grant that meets the deadline counts. No case depends on timing: deadlines are either already
// past or far away, and each loop runs for at most 10 s.
#include "server/budget_wait.h"

#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

// Waiters on one event loop; what each came to, in the order they ended.
struct Waiters {
  explicit Waiters(server::MemoryBudget& b) : budget(b) {}
  void add(std::string name, std::uint64_t bytes, Clock::time_point deadline) {
    asio::co_spawn(
        io,
        [this, name, bytes, deadline]() -> asio::awaitable<void> {
          bool counted = co_await server::wait_for_budget(budget, bytes, deadline);
          ended.push_back(name + (counted ? " counted" : " not counted"));
        },
        asio::detached);
  }
  server::MemoryBudget& budget;
  asio::io_context io;
  std::vector<std::string> ended;
};

TEST_CASE("waiters are counted in arrival order once room frees", "[budget]") {
  server::MemoryBudget budget(3 * kMiB);
  REQUIRE(budget.try_acquire(2 * kMiB));
  Waiters w(budget);
  w.add("first", 2 * kMiB, Clock::now() + 60s);
  w.add("second", kMiB, Clock::now() + 60s);  // would fit now, but queues behind the first
  w.io.poll();
  CHECK(budget.waiting() == 2);
  CHECK(budget.in_use() == 2 * kMiB);
  CHECK(w.ended.empty());

  budget.release(2 * kMiB);
  w.io.run_for(10s);
  CHECK(w.ended == std::vector<std::string>{"first counted", "second counted"});
  CHECK(budget.in_use() == 3 * kMiB);
  CHECK(budget.waiting() == 0);
}

TEST_CASE("a waiter whose deadline passes counts nothing and lets the next one in", "[budget]") {
  server::MemoryBudget budget(3 * kMiB);
  REQUIRE(budget.try_acquire(2 * kMiB));
  Waiters w(budget);
  w.add("late", 2 * kMiB, Clock::now() - 1ms);
  w.add("next", kMiB, Clock::now() + 60s);
  w.io.run_for(10s);
  CHECK(w.ended == std::vector<std::string>{"late not counted", "next counted"});
  CHECK(budget.in_use() == 3 * kMiB);  // the 2 MiB held throughout and the next one's
  CHECK(budget.waiting() == 0);
}

TEST_CASE("a grant that meets the deadline counts, and the wait says so", "[budget]") {
  server::MemoryBudget budget(3 * kMiB);
  Waiters w(budget);
  w.add("due", kMiB, Clock::now() - 1ms);  // room at once, deadline already past
  w.io.run_for(10s);
  CHECK(w.ended == std::vector<std::string>{"due counted"});
  CHECK(budget.in_use() == kMiB);
  CHECK(budget.release(kMiB) == false);  // a small grant: nothing to give back to the system
  CHECK(budget.in_use() == 0);
}

TEST_CASE("the last release after a large grant asks for memory to be given back", "[budget]") {
  server::MemoryBudget budget(64 * kMiB);
  REQUIRE(budget.try_acquire(6 * kMiB));
  REQUIRE(budget.try_acquire(6 * kMiB));
  CHECK(budget.release(6 * kMiB) == false);  // still held
  CHECK(budget.release(6 * kMiB) == true);   // nothing held after 12 MiB at once
  REQUIRE(budget.try_acquire(kMiB));
  CHECK(budget.release(kMiB) == false);  // the large burst was already answered
}

}  // namespace
