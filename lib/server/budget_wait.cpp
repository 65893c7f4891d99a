#include "server/budget_wait.h"

#include <memory>
#include <system_error>

namespace server {

asio::awaitable<bool> wait_for_budget(MemoryBudget& budget, std::uint64_t bytes,
                                      std::chrono::steady_clock::time_point deadline) {
  // The grant's notice runs on this coroutine's executor; it may still be on its way after the
  // deadline ended the wait, so what it touches is shared with it.
  struct Wait {
    explicit Wait(const asio::any_io_executor& ex) : wake(ex) {}
    asio::steady_timer wake;
    bool granted = false;
  };
  asio::any_io_executor ex = co_await asio::this_coro::executor;
  auto w = std::make_shared<Wait>(ex);
  w->wake.expires_at(deadline);
  std::uint64_t ticket = budget.enqueue(bytes, [ex, w] {
    asio::post(ex, [w] {
      w->granted = true;
      w->wake.cancel();
    });
  });
  std::error_code ec;
  co_await w->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  if (!w->granted && budget.withdraw(ticket)) {
    co_return false;
  }
  while (!w->granted) {  // granted as the deadline passed: the notice is on its way
    w->wake.expires_at(std::chrono::steady_clock::time_point::max());
    co_await w->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return true;
}

}  // namespace server
