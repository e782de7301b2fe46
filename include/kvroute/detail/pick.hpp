// -----------------------------------------------------------------------------
// File: kvroute/detail/pick.hpp
// -----------------------------------------------------------------------------
//
// Not API. `pick_min`: the worker with the least key, ties broken uniformly
// at random (`pick_min_index` for callers that score by position). Every "least loaded" choice in
// kvroute goes through it, so no policy can fall into the tie-to-first-worker collapse (all loads 0
// -> every new prefix to worker 0 -> the tree reinforces it).
//
// Thread safety: pure apart from one draw from the shared generator.

#ifndef KVROUTE_DETAIL_PICK_HPP_
#define KVROUTE_DETAIL_PICK_HPP_

#include <cstddef>
#include <cstdint>
#include <span>

#include "kvroute/config.hpp"
#include "kvroute/detail/rng.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

// Returns the index i in [0, n) with the smallest `key(i)` (any totally
// ordered type) among those `accept(i)` takes, choosing uniformly among ties;
// n when none is taken. key(i) is called once per accepted index, in order.
// One atomic draw per call, at the first tie; reservoir sampling over the
// ties uses a local stream seeded by it.
template <class Key, class Accept>
std::size_t pick_min_index(std::size_t n, Key&& key, Accept&& accept, SharedRng& rng) noexcept {
  std::size_t best = n;
  decltype(key(std::size_t{0})) best_key{};
  std::uint64_t ties = 0;
  std::uint64_t local = 0;
  bool drawn = false;
  for (std::size_t i = 0; i < n; ++i) {
    if (!accept(i)) continue;
    auto k = key(i);
    if (best == n || k < best_key) {
      best = i;
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
        best = i;
      }
    }
  }
  return best;
}

// The element of `ws` with the smallest `key(*w)`, ties uniformly at random
// (pick_min_index over `ws`); null when `ws` is empty or `accept(*w)`
// rejects every element.
template <class Key, class Accept>
const Worker* pick_min(std::span<const Worker* const> ws, Key&& key, Accept&& accept,
                       SharedRng& rng) noexcept {
  const std::size_t i = pick_min_index(
      ws.size(), [&](std::size_t j) { return key(*ws[j]); },
      [&](std::size_t j) { return accept(*ws[j]); }, rng);
  return i < ws.size() ? ws[i] : nullptr;
}

template <class Key>
const Worker* pick_min(std::span<const Worker* const> ws, Key&& key, SharedRng& rng) noexcept {
  return pick_min(
      ws, key, [](const Worker&) { return true; }, rng);
}

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_PICK_HPP_
