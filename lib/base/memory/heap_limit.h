#pragma once
// A ceiling on the heap one thread may take for one piece of work (docs/server.md "Connections
// and limits": the in-flight budget charges each request a fixed factor of its body).
//
//   webhook::HeapLimit limit(admission::parse_memory_bound(body.size()));
//   try {
//     parse(body);
//   } catch (const std::bad_alloc&) {
//     if (!limit.refused()) throw;  // the machine's memory, not the ceiling
//     ...answer that the body costs too much to parse
//   }
//
// While a HeapLimit lives, the process's operator new and delete (heap_limit.cpp) count on its
// thread what the allocator holds for each allocation: its usable size (malloc_usable_size) and,
// under glibc's malloc, two header words, the most it keeps beside a chunk. An allocation that would take the
// count above the ceiling is refused with std::bad_alloc before it is made, so the work never
// holds more than the ceiling. Only the first is refused: the code that unwinds may still
// allocate (a destructor cannot fail), and it is counted.
//
// One HeapLimit at a time per thread. Memory allocated under it and freed after it, or on
// another thread, is not subtracted, which only overstates what the work holds.

#include <cstddef>

namespace webhook {

class HeapLimit {
 public:
  explicit HeapLimit(std::size_t ceiling_bytes);
  ~HeapLimit();
  HeapLimit(const HeapLimit&) = delete;
  HeapLimit& operator=(const HeapLimit&) = delete;

  // Whether an allocation was refused.
  bool refused() const { return refused_; }
  // The most bytes held at once so far, above what was held when the limit began.
  std::size_t peak() const { return peak_; }

  // What a replacement of the global operator new and delete calls: heap_limit.cpp's, or a
  // test's that counts allocations itself (test/unit/parse_memory). Each is one thread-local load
  // and a branch when no HeapLimit lives on the thread.
  // Before allocating n bytes: throws std::bad_alloc when they cannot fit under the ceiling.
  static void before_allocate(std::size_t n);
  // After allocating p, and before freeing it.
  static void allocated(void* p) noexcept;
  static void freed(void* p) noexcept;

 private:
  std::size_t ceiling_;
  std::size_t held_ = 0;
  std::size_t peak_ = 0;
  bool refused_ = false;
};

}  // namespace webhook
