// -----------------------------------------------------------------------------
// File: kvroute/detail/rng.hpp
// -----------------------------------------------------------------------------
//
// Not API. `SharedRng`, the random source every randomised policy uses: a
// SplitMix64 stream over one atomic counter. Lock-free and safe to share
// between threads; from one thread, equal seeds give equal sequences, which
// is what the Policy concept's determinism requirement asks for.
//
// Thread safety: thread-safe.

#ifndef KVROUTE_DETAIL_RNG_HPP_
#define KVROUTE_DETAIL_RNG_HPP_

#include <atomic>
#include <cstdint>

#include "kvroute/config.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

// -Wpedantic rejects the bare spelling; __extension__ marks it deliberate.
__extension__ using Uint128 = unsigned __int128;

inline constexpr std::uint64_t splitmix64(std::uint64_t z) noexcept {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class SharedRng {
 public:
  explicit SharedRng(std::uint64_t seed) noexcept : state_(seed) {}

  // Returns the next 64 random bits.
  std::uint64_t next() noexcept {
    return splitmix64(state_.fetch_add(1, std::memory_order_relaxed));
  }

  // Returns a uniform value in [0, n). Requires n > 0.
  std::uint64_t below(std::uint64_t n) noexcept {
    KVROUTE_ASSERT(n > 0, "SharedRng::below(0)");
    // Lemire's multiply-shift; the bias is below 2^-64 * n, far beneath
    // anything a router can observe.
    return static_cast<std::uint64_t>((static_cast<Uint128>(next()) * n) >> 64);
  }

  // Returns a uniform double in [0, 1).
  double unit() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  void reseed(std::uint64_t seed) noexcept { state_.store(seed, std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> state_;
};

// The seed every policy uses unless its options name another one.
inline constexpr std::uint64_t kDefaultSeed = 0x6b76726f75746531ull;

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RNG_HPP_
