#pragma once
// Time for lib/kube, behind an interface so tests run watch backoff and reservation expiry
// without sleeping (client-go's reflector takes a clock the same way).
//
//   kube::SystemClock clock;
//   std::stop_source stop;
//   if (!clock.sleep_for(std::chrono::seconds(1), stop.get_token())) { /* stop requested */ }
//
//   kube::Backoff backoff({.initial = 800ms, .max = 30s}, /*seed=*/42);
//   clock.sleep_for(backoff.next(), stop.get_token());   // 800ms..1.6s, then doubling, capped
//   backoff.reset();                                      // after a healthy connection
//
//   kube::FakeClock fake;                                 // tests: sleeps return at once
//   fake.advance(std::chrono::seconds(11));               // and time moves when told

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <random>
#include <stop_token>
#include <string>

namespace kube {

using Duration = std::chrono::nanoseconds;
using TimePoint = std::chrono::steady_clock::time_point;

// `d` in whole milliseconds, as messages and logs give a duration: "1500ms".
std::string millis(Duration d);

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
  // Wall-clock time, for what other processes read (a claim's expiry). Moves with now() in tests.
  virtual std::chrono::system_clock::time_point wall_now() const {
    return std::chrono::system_clock::now();
  }
  // Waits `d`, or less when `stop` is requested. False when it returned because of `stop`.
  virtual bool sleep_for(Duration d, std::stop_token stop) = 0;
};

// The steady clock; sleeps wake at once on a stop request.
class SystemClock : public Clock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
  bool sleep_for(Duration d, std::stop_token stop) override;
};

// Real time plus an offset, steady and wall clock alike: sleeps add to the offset and return
// after at most 2 ms, so backoff and timeouts cost nothing; advance() moves time forward (a
// claim's expiry). For tests, and for state that is fed once and never waits (ListedCluster).
class FakeClock : public Clock {
 public:
  TimePoint now() const override;
  std::chrono::system_clock::time_point wall_now() const override;
  bool sleep_for(Duration d, std::stop_token stop) override;
  void advance(Duration d);
  int sleeps() const;      // sleep_for calls so far
  Duration slept() const;  // their total

 private:
  mutable std::mutex mu_;
  Duration offset_{0};
  Duration slept_{0};
  int sleeps_ = 0;
};

struct BackoffOptions {
  Duration initial = std::chrono::milliseconds(800);
  Duration max = std::chrono::seconds(30);
  double factor = 2.0;
  // Each delay is the base times a random factor in [1, 1 + jitter).
  double jitter = 1.0;
};

// Exponential backoff with jitter between reconnects (client-go's defaults: 800ms doubling to
// 30s, jitter 1.0). Not thread-safe: one per watch thread.
class Backoff {
 public:
  explicit Backoff(BackoffOptions options = {}, std::uint64_t seed = std::random_device{}());
  // The next delay: initial × factor^failures (capped at max), times the jitter factor.
  Duration next();
  // After a success: the next delay starts from `initial` again.
  void reset() { failures_ = 0; }
  int failures() const { return failures_; }

 private:
  BackoffOptions options_;
  std::mt19937_64 rng_;
  int failures_ = 0;
};

}  // namespace kube
