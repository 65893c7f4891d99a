#include "base/log/log.h"

#include <utility>

namespace webhook {

LineLogger line_logger(const Logger& log, std::string what) {
  return [&log, what = std::move(what)](LogLevel level, const std::string& line) {
    if (level == LogLevel::kDebug) {
      log.debug(1, what, {{"event", line}});
    } else {
      const LogField event("event", line);
      log.write(level, what, std::span<const LogField>(&event, 1));
    }
  };
}

}  // namespace webhook
