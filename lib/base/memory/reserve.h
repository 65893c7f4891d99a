#pragma once
// Growing the memory grant of the request this thread is answering. The server grants each
// request memory in proportion to its body before reading it; what an answer needs beyond that
// (the address lists of a very large slice) is reserved here by the code that is about to build
// it, once it knows the size. The transport installs the reserver around its call of the route;
// elsewhere (the CLI, tests) there is none and every reservation succeeds.
//
//   if (!webhook::memory::reserve(bytes)) { return busy; }   // waits within the deadline
//
//   webhook::memory::ScopedReserver r(&grow, &connection);   // the transport, around a call

#include <cstddef>

namespace webhook::memory {

// Adds `bytes` to the current grant; false when they do not fit before the request's deadline.
using ReserveFn = bool (*)(void* context, std::size_t bytes);

namespace detail {
struct Reserver {
  ReserveFn fn = nullptr;
  void* context = nullptr;
};
inline thread_local Reserver current;
}  // namespace detail

// True when granted, or when no reserver is installed on this thread.
inline bool reserve(std::size_t bytes) {
  const detail::Reserver& r = detail::current;
  return r.fn == nullptr || r.fn(r.context, bytes);
}

class ScopedReserver {
 public:
  ScopedReserver(ReserveFn fn, void* context) : saved_(detail::current) {
    detail::current = {fn, context};
  }
  ~ScopedReserver() { detail::current = saved_; }
  ScopedReserver(const ScopedReserver&) = delete;
  ScopedReserver& operator=(const ScopedReserver&) = delete;

 private:
  detail::Reserver saved_;
};

}  // namespace webhook::memory
