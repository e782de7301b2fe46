// -----------------------------------------------------------------------------
// File: kvroute/tie_break.hpp
// -----------------------------------------------------------------------------
//
// `TieBreaker`: the tie-break rule the Policy concept demands (policy.hpp),
// for policies of a host's own. It picks the worker with the least key and
// breaks ties uniformly at random from a seeded stream, never towards the
// first worker: with every load at 0, "the first least loaded" would send
// every new prefix to one worker, and a cache-aware tree would then keep
// them there. Every shipped policy breaks its ties this way.
//
// Thread safety: thread-safe (one atomic draw per call with a tie). From
// one thread, equal seeds give equal choices, as the Policy concept's
// determinism requirement asks.
//
// Example:
//
//   struct LeastLoaded {
//     kvroute::TieBreaker ties{/*seed=*/42};
//     std::string_view name() const noexcept { return "least_loaded"; }
//     kvroute::Decision choose(const kvroute::RequestView&,
//                              const kvroute::ClusterView& c) noexcept {
//       const kvroute::Worker* w = ties.least(
//           c.eligible(), [&](const kvroute::Worker& x) { return c.in_flight(x); });
//       return w ? kvroute::Decision::custom(w, "least_loaded") : c.no_worker();
//     }
//   };

#ifndef KVROUTE_TIE_BREAK_HPP_
#define KVROUTE_TIE_BREAK_HPP_

#include <cstdint>
#include <span>
#include <utility>

#include "kvroute/config.hpp"
#include "kvroute/detail/pick.hpp"
#include "kvroute/detail/rng.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN

class TieBreaker {
 public:
  explicit TieBreaker(std::uint64_t seed = detail::kDefaultSeed) noexcept : rng_(seed) {}

  // The worker of `workers` with the least `key(worker)` (any totally
  // ordered type), ties uniformly at random; null when `workers` is empty.
  // key is called once per worker. Never allocates.
  template <class Key>
  const Worker* least(std::span<const Worker* const> workers, Key&& key) noexcept {
    return detail::pick_min(workers, std::forward<Key>(key), rng_);
  }
  // The same among the workers `accept(worker)` takes; null when it takes
  // none.
  template <class Key, class Accept>
  const Worker* least(std::span<const Worker* const> workers, Key&& key, Accept&& accept) noexcept {
    return detail::pick_min(workers, std::forward<Key>(key), std::forward<Accept>(accept), rng_);
  }

 private:
  detail::SharedRng rng_;
};

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_TIE_BREAK_HPP_
