#pragma once
// How lib/kube reports what it does: through a callback the caller owns (lib/ never logs through
// a global logger; main hands in a function that writes to its own logger).
//
//   kube::Logger log = [&](kube::LogLevel level, const std::string& line) { ... };
//   log(kube::LogLevel::kWarning, "pods watch: connection lost; reconnecting in 1.2s");

#include <functional>
#include <string>

namespace kube {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// Called from the watch threads; must be thread-safe. An empty function drops every line.
using Logger = std::function<void(LogLevel, const std::string&)>;

}  // namespace kube
