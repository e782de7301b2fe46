// -----------------------------------------------------------------------------
// File: kvroute/detail/age_histogram.hpp
// -----------------------------------------------------------------------------
//
// Not API. `AgeHistogram`: weighted ages (in any unit, here a tree's
// recency stamps) in power-of-two buckets, fading with use, and the share
// of the weight at a given age or older. least_prefill records the age of
// each prefix it reuses and asks how much reuse happens at the age of a
// worker's LRU tail or later.
//
// Every 1024 adds halve the weights, so the histogram follows what the
// traffic does now and a bucket's weight stays finite. Bucket 0 holds age
// 0; bucket b >= 1 holds [2^(b-1), 2^b), and a query inside a bucket takes
// the part from the age up on a log scale.
//
// Thread safety: thread-safe, relaxed atomics; a racing add may be lost or
// halved twice, which a share does not mind.

#ifndef KVROUTE_DETAIL_AGE_HISTOGRAM_HPP_
#define KVROUTE_DETAIL_AGE_HISTOGRAM_HPP_

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>

#include "kvroute/config.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

class AgeHistogram {
 public:
  // Adds `weight` (> 0) at `age`.
  void add(std::uint64_t age, double weight) noexcept {
    if (!(weight > 0)) return;
    std::atomic<double>& b = w_[bucket(age)];
    b.store(b.load(std::memory_order_relaxed) + weight, std::memory_order_relaxed);
    if ((adds_.fetch_add(1, std::memory_order_relaxed) + 1) % kHalfLife == 0) {
      for (std::atomic<double>& x : w_) {
        x.store(x.load(std::memory_order_relaxed) / 2, std::memory_order_relaxed);
      }
    }
  }

  // The share of the weight at `age` or older, in [0, 1]; 0 when empty.
  double share_from(std::uint64_t age) const noexcept {
    const int b = bucket(age);
    double total = 0, from = 0;
    for (int i = 0; i < kBuckets; ++i) {
      const double x = w_[i].load(std::memory_order_relaxed);
      total += x;
      if (i > b) from += x;
    }
    if (!(total > 0)) return 0;
    // The part of age's own bucket from age up (bucket 0 is age 0 alone).
    double inside = 1;
    if (b > 0) {
      const double lo = std::ldexp(1.0, b - 1);
      inside = std::clamp(1 - std::log2(static_cast<double>(age) / lo), 0.0, 1.0);
    }
    from += w_[b].load(std::memory_order_relaxed) * inside;
    return std::min(1.0, from / total);
  }

 private:
  static constexpr int kBuckets = 65;
  static constexpr std::uint64_t kHalfLife = 1024;

  static int bucket(std::uint64_t age) noexcept { return static_cast<int>(std::bit_width(age)); }

  std::atomic<double> w_[kBuckets] = {};
  std::atomic<std::uint64_t> adds_{0};
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_AGE_HISTOGRAM_HPP_
