#pragma once
// Threads named as `top -H`, `ps -L`, /proc/PID/task/TID/comm, gdb and perf show them. Linux keeps
// 15 bytes of a thread's name: a longer one is cut there.
//
//   std::thread t = webhook::named_thread("log-flush", [this] { run(); });
//   webhook::name_this_thread("https-io0");   // a thread made elsewhere (std::jthread, main)

#include <pthread.h>

#include <string>
#include <string_view>
#include <thread>
#include <utility>

namespace webhook {

inline constexpr std::size_t kThreadNameBytes = 15;

inline void name_this_thread(std::string_view name) {
  std::string cut(name.substr(0, kThreadNameBytes));
  pthread_setname_np(pthread_self(), cut.c_str());
}

// A thread that names itself `name`, then runs `fn`.
template <class F>
std::thread named_thread(std::string name, F fn) {
  return std::thread([name = std::move(name), fn = std::move(fn)]() mutable {
    name_this_thread(name);
    fn();
  });
}

}  // namespace webhook
