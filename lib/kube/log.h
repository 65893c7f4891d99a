#pragma once
// How lib/kube reports what it does: a line of text at a level, through the LineLogger the caller
// owns (base/log/log.h; lib/ never logs through a global logger). The server makes one from its
// Logger with webhook::line_logger; tests and tools pass a function of their own.
//
//   kube::Logger log = [&](kube::LogLevel level, const std::string& line) { ... };
//   log(kube::LogLevel::kWarning, "pods watch: connection lost; reconnecting in 1.2s");

#include "base/log/log.h"

namespace kube {

using LogLevel = webhook::LogLevel;

// Called from the watch threads; must be thread-safe. An empty function drops every line.
using Logger = webhook::LineLogger;

}  // namespace kube
