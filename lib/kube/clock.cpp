#include "kube/clock.h"

#include <algorithm>
#include <cmath>
#include <thread>

namespace kube {

std::string millis(Duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + "ms";
}

bool SystemClock::sleep_for(Duration d, std::stop_token stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  return !cv.wait_for(lock, stop, d, [] { return false; }) && !stop.stop_requested();
}

TimePoint FakeClock::now() const {
  std::lock_guard lock(mu_);
  return std::chrono::steady_clock::now() + offset_;
}

std::chrono::system_clock::time_point FakeClock::wall_now() const {
  std::lock_guard lock(mu_);
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(offset_);
}

bool FakeClock::sleep_for(Duration d, std::stop_token stop) {
  {
    std::lock_guard lock(mu_);
    offset_ += d;
    slept_ += d;
    ++sleeps_;
  }
  std::this_thread::sleep_for(std::min<Duration>(d, std::chrono::milliseconds(2)));
  return !stop.stop_requested();
}

void FakeClock::advance(Duration d) {
  std::lock_guard lock(mu_);
  offset_ += d;
}

int FakeClock::sleeps() const {
  std::lock_guard lock(mu_);
  return sleeps_;
}

Duration FakeClock::slept() const {
  std::lock_guard lock(mu_);
  return slept_;
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
