#include "kube/clock.h"

#include <algorithm>
#include <cmath>

namespace kube {

bool SystemClock::sleep_for(Duration d, std::stop_token stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  return !cv.wait_for(lock, stop, d, [] { return false; }) && !stop.stop_requested();
}

Backoff::Backoff(BackoffOptions options, std::uint64_t seed) : options_(options), rng_(seed) {}

Duration Backoff::next() {
  double base = static_cast<double>(options_.initial.count()) *
                std::pow(options_.factor, static_cast<double>(std::min(failures_, 62)));
  base = std::min(base, static_cast<double>(options_.max.count()));
  ++failures_;
  std::uniform_real_distribution<double> spread(1.0, 1.0 + std::max(options_.jitter, 0.0));
  double jittered = options_.jitter > 0 ? base * spread(rng_) : base;
  return Duration(static_cast<Duration::rep>(jittered));
}

}  // namespace kube
