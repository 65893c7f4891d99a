#pragma once
// Telling the server that this thread is about to wait on something slow. A server worker takes
// several ready connections from epoll at once and answers them in turn; before a request waits
// (legacy placement talks to the Kubernetes API, a large answer waits for memory), the worker
// hands the connections it has not started back to epoll, so that other workers answer them
// instead of letting them wait behind this one. The transport installs the hook around its
// loop; elsewhere (the CLI, tests, the watch threads) there is none and the call does nothing.
//
//   webhook::blocking::about_to_block();                    // code that may wait
//
//   webhook::blocking::ScopedHook hook(&give_back, &batch);  // the transport, per worker

namespace webhook::blocking {

using HookFn = void (*)(void* context);

namespace detail {
struct Hook {
  HookFn fn = nullptr;
  void* context = nullptr;
};
inline thread_local Hook current;
}  // namespace detail

inline void about_to_block() {
  const detail::Hook& h = detail::current;
  if (h.fn != nullptr) {
    h.fn(h.context);
  }
}

class ScopedHook {
 public:
  ScopedHook(HookFn fn, void* context) : saved_(detail::current) {
    detail::current = {fn, context};
  }
  ~ScopedHook() { detail::current = saved_; }
  ScopedHook(const ScopedHook&) = delete;
  ScopedHook& operator=(const ScopedHook&) = delete;

 private:
  detail::Hook saved_;
};

}  // namespace webhook::blocking
