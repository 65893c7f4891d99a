#include "base/memory/heap_limit.h"

#include <malloc.h>

#include <cassert>
#include <cstdlib>
#include <new>

// jemalloc's control function: null unless jemalloc is the process's allocator.
extern "C" [[gnu::weak]] int mallctl(const char* name, void* oldp, std::size_t* oldlenp, void* newp,
                                     std::size_t newlen);

namespace webhook {
namespace {

// No initializer to run: the pointer is usable in any allocation, from a thread's first to the
// last of its exit.
constinit thread_local HeapLimit* t_active = nullptr;

// What the allocator holds beside an allocation's usable size: glibc's malloc keeps a header of
// one word beside a chunk, two beside a mapped one (two are counted); jemalloc keeps its
// metadata apart. (Read only under a HeapLimit, never before main.)
const std::size_t kHeaderBytes = &mallctl != nullptr ? 0 : 2 * sizeof(std::size_t);

// What the allocator holds for p.
std::size_t held(void* p) noexcept { return malloc_usable_size(p) + kHeaderBytes; }

}  // namespace

HeapLimit::HeapLimit(std::size_t ceiling_bytes) : ceiling_(ceiling_bytes) {
  assert(t_active == nullptr);
  t_active = this;
}

HeapLimit::~HeapLimit() { t_active = nullptr; }

void HeapLimit::before_allocate(std::size_t n) {
  HeapLimit* limit = t_active;
  // Most an allocation can hold beyond n: the allocator's rounding (up to a quarter more in
  // jemalloc's size classes, 24 bytes or a page in glibc's chunks) and the header.
  if (limit != nullptr && !limit->refused_ && limit->held_ + n + n / 4 + 32 > limit->ceiling_) {
    limit->refused_ = true;
    throw std::bad_alloc();
  }
}

void HeapLimit::allocated(void* p) noexcept {
  if (HeapLimit* limit = t_active) {
    limit->held_ += held(p);
    limit->peak_ = limit->held_ > limit->peak_ ? limit->held_ : limit->peak_;
  }
}

void HeapLimit::freed(void* p) noexcept {
  if (HeapLimit* limit = t_active; limit != nullptr && p != nullptr) {
    std::size_t n = held(p);
    limit->held_ = n < limit->held_ ? limit->held_ - n : 0;
  }
}

}  // namespace webhook

// The process's allocation functions: malloc and free, the thread's HeapLimit told of each. Weak,
// so that a test's own replacement (which tells the HeapLimit as well) takes their place. Every
// form that a sanitizer's runtime also defines is replaced, so that nothing allocated by one
// side is freed by the other; over-aligned allocations are left to the runtime and not counted
// (nothing under a HeapLimit makes them).
namespace {

void* allocate(std::size_t n) {
  webhook::HeapLimit::before_allocate(n);
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) {
    throw std::bad_alloc();
  }
  webhook::HeapLimit::allocated(p);
  return p;
}

void release(void* p) noexcept {
  webhook::HeapLimit::freed(p);
  std::free(p);
}

void* allocate_or_null(std::size_t n) noexcept {
  try {
    return allocate(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

}  // namespace

[[gnu::weak]] void* operator new(std::size_t n) { return allocate(n); }
[[gnu::weak]] void* operator new[](std::size_t n) { return allocate(n); }
[[gnu::weak]] void operator delete(void* p) noexcept { release(p); }
[[gnu::weak]] void operator delete[](void* p) noexcept { release(p); }
[[gnu::weak]] void operator delete(void* p, std::size_t /*size*/) noexcept { release(p); }
[[gnu::weak]] void operator delete[](void* p, std::size_t /*size*/) noexcept { release(p); }
[[gnu::weak]] void* operator new(std::size_t n, const std::nothrow_t& /*tag*/) noexcept {
  return allocate_or_null(n);
}
[[gnu::weak]] void* operator new[](std::size_t n, const std::nothrow_t& /*tag*/) noexcept {
  return allocate_or_null(n);
}
[[gnu::weak]] void operator delete(void* p, const std::nothrow_t& /*tag*/) noexcept { release(p); }
[[gnu::weak]] void operator delete[](void* p, const std::nothrow_t& /*tag*/) noexcept {
  release(p);
}
