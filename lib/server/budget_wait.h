#pragma once
// Waiting for room in a MemoryBudget from a coroutine on an Asio event loop: the transport's
// budget step (docs/security.md "The in-flight memory budget").
//
//   bool counted = budget.try_acquire(n);
//   if (!counted) {
//     counted = co_await server::wait_for_budget(budget, n, deadline);  // false: nothing counted
//   }

#include <asio.hpp>
#include <chrono>
#include <cstdint>

#include "server/memory_budget.h"

namespace server {

// Queues for `bytes` behind earlier waiters and waits, on the calling coroutine's executor, until
// they are counted (true) or `deadline` passes first (false: nothing is counted, and the queue
// goes on without this request). The executor must run one handler at a time (an io_context run
// by one thread, or a strand): the grant's notice and the wait's end are ordered on it.
asio::awaitable<bool> wait_for_budget(MemoryBudget& budget, std::uint64_t bytes,
                                      std::chrono::steady_clock::time_point deadline);

}  // namespace server
