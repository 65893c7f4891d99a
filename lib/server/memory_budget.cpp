#include "server/memory_budget.h"

#include <dlfcn.h>
#include <malloc.h>

#include <algorithm>

namespace server {

namespace {

// A burst that held this much is worth giving back to the system once nothing is held.
constexpr std::uint64_t kLargeGrant = std::uint64_t{8} << 20;

}  // namespace

std::uint64_t MemoryBudget::in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

std::size_t MemoryBudget::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_.size();
}

bool MemoryBudget::try_acquire(std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!waiting_.empty() || bytes > capacity_ - used_) {
    return false;
  }
  used_ += bytes;
  peak_since_idle_ = std::max(peak_since_idle_, used_);
  return true;
}

std::uint64_t MemoryBudget::enqueue(std::uint64_t bytes, std::function<void()> granted) {
  std::vector<std::function<void()>> ready;
  std::uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket = next_ticket_++;
    waiting_.push_back({ticket, bytes, std::move(granted)});
    grant_waiting(ready);
  }
  for (auto& f : ready) {
    f();
  }
  return ticket;
}

bool MemoryBudget::withdraw(std::uint64_t ticket) {
  std::vector<std::function<void()>> ready;
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(waiting_.begin(), waiting_.end(),
                           [&](const Waiter& w) { return w.ticket == ticket; });
    found = it != waiting_.end();
    if (found) {
      waiting_.erase(it);
      grant_waiting(ready);  // it may have been the one the others queued behind
    }
  }
  for (auto& f : ready) {
    f();
  }
  return found;
}

bool MemoryBudget::release(std::uint64_t bytes) {
  std::vector<std::function<void()>> ready;
  bool idle = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    used_ -= std::min(used_, bytes);
    grant_waiting(ready);
    if (used_ == 0 && peak_since_idle_ >= kLargeGrant) {
      peak_since_idle_ = 0;
      idle = true;
    }
  }
  for (auto& f : ready) {
    f();
  }
  return idle;
}

// Under mu_: grants waiters, oldest first, while the first fits.
void MemoryBudget::grant_waiting(std::vector<std::function<void()>>& ready) {
  while (!waiting_.empty() && waiting_.front().bytes <= capacity_ - used_) {
    used_ += waiting_.front().bytes;
    peak_since_idle_ = std::max(peak_since_idle_, used_);
    ready.push_back(std::move(waiting_.front().granted));
    waiting_.pop_front();
  }
}

void release_free_memory() {
  // jemalloc when the binary links it (purge every arena: MALLCTL_ARENAS_ALL is 4096), else
  // glibc's malloc.
  using Mallctl = int (*)(const char*, void*, std::size_t*, void*, std::size_t);
  static auto* mallctl = reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"));
  if (mallctl != nullptr) {
    mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);
  } else {
    malloc_trim(0);
  }
}

}  // namespace server
