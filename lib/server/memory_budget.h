#pragma once
// The in-flight memory budget of the HTTP server (docs/server.md "Connections and limits"): a
// request takes its share once its body's declared length is known and gives it back when its
// answer is written; one that does not fit waits its turn.
//
//   server::MemoryBudget budget(64 << 20);
//   if (!budget.try_acquire(n)) {
//     std::uint64_t ticket = budget.enqueue(n, [&] { /* granted: n is counted */ });
//     ...
//     if (budget.withdraw(ticket)) { /* gave up before the grant: nothing counted */ }
//   }
//   if (budget.release(n)) { server::release_free_memory(); }  // emptied after 8 MiB or more
//
// A coroutine on an event loop waits with server::wait_for_budget (server/budget_wait.h).

#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <vector>

namespace server {

// Requests in flight share this many bytes (bodies and their parse); thread-safe. A request that
// does not fit queues; releases grant the queue in arrival order.
class MemoryBudget {
 public:
  explicit MemoryBudget(std::uint64_t capacity) : capacity_(capacity) {}
  std::uint64_t capacity() const { return capacity_; }
  std::uint64_t in_use() const;
  std::size_t waiting() const;  // requests queued for room
  // True and counted when `bytes` fit now and nobody waits before them.
  bool try_acquire(std::uint64_t bytes);
  // Queues a request for `bytes`; `granted` runs (on the thread that released room, or on this
  // one) once they are counted. Returns a ticket for withdraw().
  std::uint64_t enqueue(std::uint64_t bytes, std::function<void()> granted);
  // Takes a queued request back; false when it was granted meanwhile (its bytes are counted).
  bool withdraw(std::uint64_t ticket);
  // Returns `bytes`; true when nothing is held any more and the budget has held 8 MiB or more at
  // once since it was last empty (time to give freed memory back to the system).
  bool release(std::uint64_t bytes);

 private:
  struct Waiter {
    std::uint64_t ticket;
    std::uint64_t bytes;
    std::function<void()> granted;
  };
  void grant_waiting(std::vector<std::function<void()>>& ready);

  const std::uint64_t capacity_;
  mutable std::mutex mu_;
  std::uint64_t used_ = 0;
  std::uint64_t peak_since_idle_ = 0;
  std::uint64_t next_ticket_ = 1;
  std::list<Waiter> waiting_;
};

// Gives memory freed by a burst back to the system (the allocator's purge).
void release_free_memory();

}  // namespace server
