// -----------------------------------------------------------------------------
// File: kvroute/sync/redis/detail/backoff.hpp
// -----------------------------------------------------------------------------
//
// Not API. `Backoff`: how long to wait before the next attempt to reach
// Redis. The bound doubles from `min` after each failure up to `max`, and
// each wait is drawn uniformly between half the bound and the bound, so
// that replicas that lost Redis together do not all come back in the same
// millisecond. reset() after a success.
//
// Thread safety: thread-compatible.

#ifndef KVROUTE_SYNC_REDIS_DETAIL_BACKOFF_HPP_
#define KVROUTE_SYNC_REDIS_DETAIL_BACKOFF_HPP_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

#include "kvroute/config.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {
namespace redis_detail {

class Backoff {
 public:
  Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max, std::uint64_t seed)
      : min_(min), max_(std::max(min, max)), bound_(min), rng_(seed) {}

  // The wait before the next attempt; doubles the bound for the one after.
  std::chrono::milliseconds next() {
    const std::int64_t hi = bound_.count();
    const std::int64_t lo = std::max<std::int64_t>(hi / 2, 1);
    const std::int64_t wait =
        std::uniform_int_distribution<std::int64_t>(lo, std::max(lo, hi))(rng_);
    bound_ = std::min(max_, bound_ * 2);
    return std::chrono::milliseconds(wait);
  }
  void reset() { bound_ = min_; }
  std::chrono::milliseconds bound() const { return bound_; }

 private:
  std::chrono::milliseconds min_;
  std::chrono::milliseconds max_;
  std::chrono::milliseconds bound_;
  std::mt19937_64 rng_;
};

}  // namespace redis_detail
}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_REDIS_DETAIL_BACKOFF_HPP_
