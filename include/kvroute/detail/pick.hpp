// -----------------------------------------------------------------------------
// File: kvroute/detail/pick.hpp
// -----------------------------------------------------------------------------
//
// Not API. `pick_min`: the worker with the least key, ties broken uniformly
// at random. Every "least loaded" choice in kvroute goes through it, so no
// policy can fall into the tie-to-first-worker collapse (all loads 0 -> every
// new prefix to worker 0 -> the tree reinforces it).
//
// Thread safety: pure apart from one draw from the shared generator.

#ifndef KVROUTE_DETAIL_PICK_HPP_
#define KVROUTE_DETAIL_PICK_HPP_

#include <cstdint>
#include <span>

#include "kvroute/config.hpp"
#include "kvroute/detail/rng.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

// Returns the element of `ws` with the smallest `key(*w)` (any totally
// ordered type), choosing uniformly among ties; null when `ws` is empty or
// `accept(*w)` rejects every element. One atomic draw per call; reservoir
// sampling over the ties uses a local stream seeded by it.
template <class Key, class Accept>
const Worker* pick_min(std::span<const Worker* const> ws, Key&& key, Accept&& accept,
                       SharedRng& rng) noexcept {
  const Worker* best = nullptr;
  decltype(key(*ws.front())) best_key{};
  std::uint64_t ties = 0;
  std::uint64_t local = 0;
  bool drawn = false;
  for (const Worker* w : ws) {
    if (!accept(*w)) continue;
    auto k = key(*w);
    if (best == nullptr || k < best_key) {
      best = w;
      best_key = k;
      ties = 1;
    } else if (!(best_key < k)) {
      ++ties;
      if (!drawn) {
        local = rng.next();
        drawn = true;
      }
      local = splitmix64(local);
      if (static_cast<std::uint64_t>((static_cast<Uint128>(local) * ties) >> 64) == 0) {
        best = w;
      }
    }
  }
  return best;
}

template <class Key>
const Worker* pick_min(std::span<const Worker* const> ws, Key&& key, SharedRng& rng) noexcept {
  return pick_min(
      ws, key, [](const Worker&) { return true; }, rng);
}

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_PICK_HPP_
