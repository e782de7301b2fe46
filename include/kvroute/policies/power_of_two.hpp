// -----------------------------------------------------------------------------
// File: kvroute/policies/power_of_two.hpp
// -----------------------------------------------------------------------------
//
// `kvroute::PowerOfTwo`: draw two distinct healthy workers at random and take
// the less loaded one; equal loads keep the first draw.
//
// Load is the worker's probed load (LoadTracker::report_load, for example
// the token count of SGLang's /get_load) when it is known for *both*
// candidates, else the in-flight request count of both: the two units are
// never compared with each other. A failed probe is not a load: it makes the
// comparison fall back to in-flight counts, and on a tie the candidate whose
// probe failed loses. (The gateway stores a failed probe as load -1, so the
// failing worker looks least loaded and wins.)
//
// Thread safety: thread-safe; lock-free.
//
// Example:
//
//   kvroute::Router<kvroute::PowerOfTwo> router;
//   router.load().report_load(id, /*tokens=*/52000);   // from a load probe

#ifndef KVROUTE_POLICIES_POWER_OF_TWO_HPP_
#define KVROUTE_POLICIES_POWER_OF_TWO_HPP_

#include <cstdint>
#include <string_view>

#include "kvroute/config.hpp"
#include "kvroute/decision.hpp"
#include "kvroute/detail/rng.hpp"
#include "kvroute/load_tracker.hpp"
#include "kvroute/policy.hpp"
#include "kvroute/request.hpp"

KVROUTE_NAMESPACE_BEGIN

class PowerOfTwo {
 public:
  struct Options {
    std::uint64_t seed = detail::kDefaultSeed;
  };

  PowerOfTwo() noexcept : PowerOfTwo(Options{}) {}
  explicit PowerOfTwo(Options o) noexcept : rng_(o.seed) {}

  std::string_view name() const noexcept { return "power_of_two"; }

  Decision choose(const RequestView&, const ClusterView& c) noexcept {
    const auto healthy = c.eligible();
    if (healthy.empty()) return c.no_worker();
    const std::uint64_t n = healthy.size();
    if (n == 1) return Decision::pick(healthy[0], Branch::kSingleWorker);
    const std::uint64_t i1 = rng_.below(n);
    const std::uint64_t i2 = (i1 + 1 + rng_.below(n - 1)) % n;
    const Worker* a = healthy[i1];
    const Worker* b = healthy[i2];
    return Decision::pick(better(*a, *b, c), Branch::kPowerOfTwo);
  }

 private:
  // `a` is the first draw.
  static const Worker* better(const Worker& a, const Worker& b, const ClusterView& c) noexcept {
    if (c.load() == nullptr) return &a;
    const ReportedLoad ra = c.load()->reported(a.id);
    const ReportedLoad rb = c.load()->reported(b.id);
    std::int64_t la, lb;
    if (ra.state == ReportedLoad::State::kKnown && rb.state == ReportedLoad::State::kKnown) {
      la = ra.value;
      lb = rb.value;
    } else {
      la = c.in_flight(a);
      lb = c.in_flight(b);
    }
    if (la != lb) return la < lb ? &a : &b;
    const bool fa = ra.state == ReportedLoad::State::kFailed;
    const bool fb = rb.state == ReportedLoad::State::kFailed;
    return (fa && !fb) ? &b : &a;
  }

  detail::SharedRng rng_;
};

static_assert(Policy<PowerOfTwo>);

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_POLICIES_POWER_OF_TWO_HPP_
