// -----------------------------------------------------------------------------
// File: kvroute/policies/random.hpp
// -----------------------------------------------------------------------------
//
// `kvroute::Random`: a uniformly random healthy worker, ignoring load and
// text. Seedable: from one thread, equal seeds give equal sequences.
//
// Thread safety: thread-safe; lock-free.
//
// Example:
//
//   kvroute::Router<kvroute::Random> router(kvroute::Random::Options{.seed = 7});

#ifndef KVROUTE_POLICIES_RANDOM_HPP_
#define KVROUTE_POLICIES_RANDOM_HPP_

#include <cstdint>
#include <string_view>

#include "kvroute/config.hpp"
#include "kvroute/decision.hpp"
#include "kvroute/detail/rng.hpp"
#include "kvroute/policy.hpp"
#include "kvroute/request.hpp"

KVROUTE_NAMESPACE_BEGIN

class Random {
 public:
  struct Options {
    std::uint64_t seed = detail::kDefaultSeed;
  };

  Random() noexcept : Random(Options{}) {}
  explicit Random(Options o) noexcept : rng_(o.seed) {}

  std::string_view name() const noexcept { return "random"; }

  Decision choose(const RequestView&, const ClusterView& c) noexcept {
    const auto healthy = c.eligible();
    if (healthy.empty()) return c.no_worker();
    return Decision::pick(healthy[rng_.below(healthy.size())], Branch::kRandom);
  }

 private:
  detail::SharedRng rng_;
};

static_assert(Policy<Random>);

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_POLICIES_RANDOM_HPP_
