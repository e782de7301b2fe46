// -----------------------------------------------------------------------------
// File: kvroute/clock.hpp
// -----------------------------------------------------------------------------
//
// The injectable clock. kvroute owns no thread: periodic work (tree eviction,
// bucket re-balancing, sticky-key TTL sweeps) runs on the call path when its
// interval has passed on a `Clock`, or when the host calls `maintain()`.
// Tests drive time with `ManualClock`; production uses `Clock::steady()`.
//
// Thread safety: `now()` is thread-safe on both clocks; `ManualClock::set`
// and `advance` may race with `now()` safely.
//
// Example:
//
//   kvroute::ManualClock clock;
//   clock.advance(std::chrono::seconds(121));
//   auto t = clock.now();   // 121 s after the clock's epoch

#ifndef KVROUTE_CLOCK_HPP_
#define KVROUTE_CLOCK_HPP_

#include <atomic>
#include <chrono>
#include <cstdint>

#include "kvroute/config.hpp"

KVROUTE_NAMESPACE_BEGIN

class Clock {
 public:
  virtual ~Clock() = default;
  // Time since this clock's (arbitrary, fixed) epoch. Monotonic.
  virtual std::chrono::nanoseconds now() const noexcept = 0;

  // The process's steady clock.
  static const Clock& steady() noexcept;
};

class SteadyClock final : public Clock {
 public:
  std::chrono::nanoseconds now() const noexcept override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch());
  }
};

inline const Clock& Clock::steady() noexcept {
  static const SteadyClock kClock;
  return kClock;
}

// A clock that moves only when told to.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(std::chrono::nanoseconds start = {}) noexcept : ns_(start.count()) {}
  std::chrono::nanoseconds now() const noexcept override {
    return std::chrono::nanoseconds(ns_.load(std::memory_order_acquire));
  }
  void set(std::chrono::nanoseconds t) noexcept { ns_.store(t.count(), std::memory_order_release); }
  void advance(std::chrono::nanoseconds d) noexcept {
    ns_.fetch_add(d.count(), std::memory_order_acq_rel);
  }

 private:
  std::atomic<std::int64_t> ns_;
};

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_CLOCK_HPP_
