// Test support: every shipped policy, with a factory taking a seed, for the
// templated conformance tests.
#ifndef KVROUTE_TESTS_SUPPORT_ALL_POLICIES_HPP_
#define KVROUTE_TESTS_SUPPORT_ALL_POLICIES_HPP_

#include <cstdint>
#include <memory>
#include <tuple>

#include "kvroute/clock.hpp"
#include "kvroute/policies/bucket.hpp"
#include "kvroute/policies/cache_aware.hpp"
#include "kvroute/policies/consistent_hashing.hpp"
#include "kvroute/policies/least_prefill.hpp"
#include "kvroute/policies/manual.hpp"
#include "kvroute/policies/power_of_two.hpp"
#include "kvroute/policies/prefix_hash.hpp"
#include "kvroute/policies/random.hpp"
#include "kvroute/policies/round_robin.hpp"

namespace kvtest {

template <class P>
struct Factory {
  static std::unique_ptr<P> make(std::uint64_t seed, const kvroute::Clock&) {
    return std::make_unique<P>(typename P::Options{.seed = seed});
  }
};
template <>
struct Factory<kvroute::Manual> {
  static std::unique_ptr<kvroute::Manual> make(std::uint64_t seed, const kvroute::Clock& clock) {
    return std::make_unique<kvroute::Manual>(
        kvroute::Manual::Options{.clock = &clock, .seed = seed});
  }
};
template <>
struct Factory<kvroute::Bucket> {
  static std::unique_ptr<kvroute::Bucket> make(std::uint64_t seed, const kvroute::Clock& clock) {
    return std::make_unique<kvroute::Bucket>(
        kvroute::Bucket::Options{.clock = &clock, .seed = seed});
  }
};
template <>
struct Factory<kvroute::CacheAware> {
  static std::unique_ptr<kvroute::CacheAware> make(std::uint64_t seed,
                                                   const kvroute::Clock& clock) {
    return std::make_unique<kvroute::CacheAware>(
        kvroute::CacheAware::Options{.max_tree_size = 4096, .clock = &clock, .seed = seed});
  }
};
template <>
struct Factory<kvroute::RoundRobin> {
  static std::unique_ptr<kvroute::RoundRobin> make(std::uint64_t, const kvroute::Clock&) {
    return std::make_unique<kvroute::RoundRobin>();
  }
};

using AllPolicies = std::tuple<kvroute::RoundRobin, kvroute::Random, kvroute::PowerOfTwo,
                               kvroute::ConsistentHashing, kvroute::PrefixHash, kvroute::Manual,
                               kvroute::Bucket, kvroute::CacheAware, kvroute::LeastPrefill>;

// cache_aware inserts every request into its tree, which allocates for text
// it has not seen under that worker; the others must not allocate at all
// once warm.
template <class P>
inline constexpr bool kAllocationFree = true;
template <>
inline constexpr bool kAllocationFree<kvroute::CacheAware> = false;
template <>
inline constexpr bool kAllocationFree<kvroute::LeastPrefill> = false;

}  // namespace kvtest

#endif  // KVROUTE_TESTS_SUPPORT_ALL_POLICIES_HPP_
