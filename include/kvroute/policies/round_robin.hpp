// -----------------------------------------------------------------------------
// File: kvroute/policies/round_robin.hpp
// -----------------------------------------------------------------------------
//
// `kvroute::RoundRobin`: the healthy workers in turn, ignoring load and text.
// One atomic cursor per policy; the i-th call takes healthy[i mod n], so when
// the healthy set changes size the sequence continues from the new position
// (the gateway's behaviour).
//
// Thread safety: thread-safe; lock-free.
//
// Example:
//
//   kvroute::Router<kvroute::RoundRobin> router;
//   // three healthy workers: selections go 0, 1, 2, 0, 1, ...

#ifndef KVROUTE_POLICIES_ROUND_ROBIN_HPP_
#define KVROUTE_POLICIES_ROUND_ROBIN_HPP_

#include <atomic>
#include <cstdint>
#include <string_view>

#include "kvroute/config.hpp"
#include "kvroute/decision.hpp"
#include "kvroute/policy.hpp"
#include "kvroute/request.hpp"

KVROUTE_NAMESPACE_BEGIN

class RoundRobin {
 public:
  struct Options {};

  RoundRobin() noexcept = default;
  explicit RoundRobin(Options) noexcept {}

  std::string_view name() const noexcept { return "round_robin"; }

  Decision choose(const RequestView&, const ClusterView& c) noexcept {
    const auto healthy = c.eligible();
    if (healthy.empty()) return c.no_worker();
    const std::uint64_t i = cursor_.fetch_add(1, std::memory_order_relaxed);
    return Decision::pick(healthy[i % healthy.size()], Branch::kRoundRobin);
  }

  // Starts the sequence again from the first healthy worker.
  void reset() noexcept { cursor_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> cursor_{0};
};

static_assert(Policy<RoundRobin>);

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_POLICIES_ROUND_ROBIN_HPP_
