// -----------------------------------------------------------------------------
// File: kvroute/detail/striped.hpp
// -----------------------------------------------------------------------------
//
// Not API. What keeps threads that share a structure from writing the same
// cache lines for bookkeeping:
//
//   * kCacheLine, the line size the layouts below (and the radix tree's
//     members) are padded to;
//   * thread_ordinal(): the n-th thread to ask gets n, so that threads
//     spread over per-thread slots (the epoch domain's, the stripes here);
//   * StripedCounters<N>: N counters kept as one stripe per thread group,
//     each stripe on its own line. add() writes the caller's stripe only
//     (add_to_stripe() also returns it: the tree's recency steps count a
//     thread's own stamps); load() sums the stripes. The radix tree's node,
//     claim, symbol and byte counts are updated on every insert by every
//     thread: as plain atomics on one line, two inserting threads took that
//     line from each other several times per request.
//
// Thread safety: add() and load() may run concurrently from any threads.
// load() is the sum of relaxed reads, not a snapshot: while adds run it may
// count some of them and not others (as a single relaxed atomic would).
// Unsigned arithmetic wraps, so a stripe that only ever sees subtractions
// still sums to the right total.
//
//   detail::StripedCounters<2> c;
//   c.add(0, 5);
//   c.sub(0, 2);
//   std::size_t n = c.load(0);  // 3

#ifndef KVROUTE_DETAIL_STRIPED_HPP_
#define KVROUTE_DETAIL_STRIPED_HPP_

#include <atomic>
#include <cstddef>

#include "kvroute/config.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

inline constexpr std::size_t kCacheLine = 64;

// 0 for the first thread that calls it, 1 for the next, and so on; fixed
// for a thread's lifetime.
inline std::size_t thread_ordinal() noexcept {
  static std::atomic<std::size_t> next{0};
  thread_local const std::size_t kMine = next.fetch_add(1, std::memory_order_relaxed);
  return kMine;
}

template <std::size_t N>
class StripedCounters {
 public:
  // More stripes than a router has busy threads, as a rule; threads beyond
  // share stripes (still correct: the stripes are atomics).
  static constexpr std::size_t kStripes = 16;

  void add(std::size_t field, std::size_t delta) noexcept {
    mine().v[field].fetch_add(delta, std::memory_order_relaxed);
  }
  // add(), returning the caller's stripe after it (not the total).
  std::size_t add_to_stripe(std::size_t field, std::size_t delta) noexcept {
    return mine().v[field].fetch_add(delta, std::memory_order_relaxed) + delta;
  }
  void sub(std::size_t field, std::size_t delta) noexcept {
    mine().v[field].fetch_sub(delta, std::memory_order_relaxed);
  }
  std::size_t load(std::size_t field) const noexcept {
    std::size_t sum = 0;
    for (const Stripe& s : stripes_) sum += s.v[field].load(std::memory_order_relaxed);
    return sum;
  }

 private:
  struct alignas(kCacheLine) Stripe {
    std::atomic<std::size_t> v[N] = {};
  };
  Stripe& mine() noexcept { return stripes_[thread_ordinal() % kStripes]; }

  Stripe stripes_[kStripes];
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_STRIPED_HPP_
