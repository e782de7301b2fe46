// -----------------------------------------------------------------------------
// File: kvroute/policies/consistent_hashing.hpp
// -----------------------------------------------------------------------------
//
// `kvroute::ConsistentHashing`: session affinity from request headers. The
// first rule that applies decides:
//
//   1. `x-smg-target-worker` present: it names one worker, by exact URL or
//      else by decimal `WorkerId` value. A healthy member of the request's
//      model group is returned (`target_worker_hit`); anything else (no such
//      worker, another model's worker, unhealthy, unparsable, empty) returns
//      no worker (`target_worker_miss`, reason kPolicyMiss). Strict: there is
//      no fallback, so a host that wants one calls select_worker again with
//      another policy.
//   2. `x-smg-routing-key` present and non-empty: ring lookup of its value
//      (`routing_key_hit`).
//   3. The first of `authorization`, `x-forwarded-for`, `cookie` that is
//      present: ring lookup of its raw value (`implicit_key_hit`). When that
//      first present header is empty, the later ones are not consulted and
//      rule 4 applies.
//   4. Otherwise a uniformly random healthy worker (`random_fallback`).
//
// Ring lookup: the model group's ring (ModelGroup::ring(), 150 points per
// member at xxh64("<url>#<i>")) covers every member, healthy or not, and the
// key sits at xxh64(key). The walk goes clockwise to the first healthy
// member. Points depend only on URLs, so a health flip moves only the keys of
// the flipped worker (and they come back when it recovers), and removing one
// of N workers moves only the keys it owned; no key moves between survivors.
//
// Optional bounded load (Options::bounded_load_factor > 0): with `total` the
// in-flight requests over the n healthy members, a worker is over its bound
// when in_flight(w) > factor * (total + 1) / n (the +1 is the incoming
// request). An over-bound ring owner is skipped and the walk continues to
// the first healthy member within its bound (`bounded_load_spill`), which is
// the same worker for every key of that owner, so the spill keeps affinity.
// When no healthy member is within bound (possible only with a factor below
// 1 or under racing load updates), or total is 0, the owner is kept with the
// ordinary hit branch. The bound applies to routing and implicit keys alike,
// never to an explicit target worker.
//
// Differences from the gateway (spec section 9): the target worker is a URL
// or a stable WorkerId, never a position in an arbitrarily ordered slice;
// the ring always exists (built per model group over its members), so there
// is no hash-mod-n fallback that reshuffles keys on membership changes;
// header values are opaque bytes, so a non-UTF-8 implicit key is a key like
// any other (the gateway skips it).
//
// Thread safety: thread-safe; lock-free apart from the one-time ring build.
// Never allocates after the group's ring exists; the first lookup on a new
// membership builds it (ModelGroup::ring()).
//
// Example:
//
//   kvroute::Router<kvroute::ConsistentHashing> router(
//       kvroute::ConsistentHashing::Options{.bounded_load_factor = 1.25});
//   kvroute::Header h[] = {{"x-smg-routing-key", "session-17"}};
//   auto s = router.select({.headers = h});   // same worker for session-17
//                                             // until its owner is removed,
//                                             // unhealthy or over its bound

#ifndef KVROUTE_POLICIES_CONSISTENT_HASHING_HPP_
#define KVROUTE_POLICIES_CONSISTENT_HASHING_HPP_

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>

#include "kvroute/config.hpp"
#include "kvroute/decision.hpp"
#include "kvroute/detail/hash_ring.hpp"
#include "kvroute/detail/rng.hpp"
#include "kvroute/policy.hpp"
#include "kvroute/request.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN

class ConsistentHashing {
 public:
  struct Options {
    // Seed of the random fallback.
    std::uint64_t seed = detail::kDefaultSeed;
    // 0 (or any value that is not > 0): no load bound, the ring owner always
    // wins. Typical values are 1.25 to 2.
    double bounded_load_factor = 0.0;
  };

  // The implicit key headers, in priority order.
  static constexpr std::array<std::string_view, 3> kImplicitKeyHeaders = {
      "authorization", "x-forwarded-for", "cookie"};

  ConsistentHashing() noexcept : ConsistentHashing(Options{}) {}
  explicit ConsistentHashing(Options o) noexcept
      : rng_(o.seed), bounded_load_factor_(o.bounded_load_factor) {}

  std::string_view name() const noexcept { return "consistent_hashing"; }

  Decision choose(const RequestView& r, const ClusterView& c) noexcept {
    const auto healthy = c.eligible();
    if (healthy.empty()) return c.no_worker();

    if (std::optional<std::string_view> target = r.header(kTargetWorkerHeader)) {
      const Worker* w = resolve_target(*target, c);
      if (w != nullptr && c.is_eligible(*w)) {
        return Decision::pick(w, Branch::kTargetWorkerHit);
      }
      return Decision::none(Branch::kTargetWorkerMiss);
    }

    if (std::optional<std::string_view> key = r.header(kRoutingKeyHeader); key && !key->empty()) {
      return ring_lookup(*key, Branch::kRoutingKeyHit, c);
    }

    for (std::string_view name : kImplicitKeyHeaders) {
      std::optional<std::string_view> v = r.header(name);
      if (!v) continue;
      if (v->empty()) break;  // the first present one decides, even if empty
      return ring_lookup(*v, Branch::kImplicitKeyHit, c);
    }

    return random_pick(healthy);
  }

 private:
  // Returns the member of `c`'s group that `value` names, or null. A value
  // that is the URL of any worker in the snapshot names that worker (and
  // misses when it is not a member); otherwise it must be the full decimal
  // spelling of a member's id.
  static const Worker* resolve_target(std::string_view value, const ClusterView& c) noexcept {
    const auto members = c.members();
    if (c.snapshot() != nullptr) {
      if (const Worker* w = c.snapshot()->find_url(value)) {
        return member_by_id(members, w->id);
      }
    } else {
      for (const Worker* w : members) {
        if (w->url == value) return w;
      }
    }
    std::uint32_t id = 0;
    const char* const end = value.data() + value.size();
    const auto [p, ec] = std::from_chars(value.data(), end, id);
    if (value.empty() || ec != std::errc{} || p != end) return nullptr;
    return member_by_id(members, WorkerId{id});
  }

  // `members` is in ascending id order. Complexity: O(log n).
  static const Worker* member_by_id(std::span<const Worker* const> members, WorkerId id) noexcept {
    auto it = std::lower_bound(members.begin(), members.end(), id,
                               [](const Worker* w, WorkerId v) { return w->id < v; });
    return (it != members.end() && (*it)->id == id) ? *it : nullptr;
  }

  Decision ring_lookup(std::string_view key, Branch hit, const ClusterView& c) noexcept {
    const auto members = c.members();
    const auto healthy = c.eligible();
    const detail::HashRing& ring = c.group()->ring();

    bool bounded = false;
    double bound = 0.0;
    if (bounded_load_factor_ > 0.0) {
      std::int64_t total = 0;
      for (const Worker* w : healthy) total += c.in_flight(*w);
      if (total > 0) {
        bounded = true;
        bound = bounded_load_factor_ * (static_cast<double>(total) + 1.0) /
                static_cast<double>(healthy.size());
      }
    }

    std::int64_t owner = -1;
    const std::int64_t got = ring.walk(detail::HashRing::position(key), [&](std::uint32_t m) {
      const Worker* w = members[m];
      if (!c.is_eligible(*w)) return false;
      if (owner < 0) owner = m;
      return !bounded || !(static_cast<double>(c.in_flight(*w)) > bound);
    });
    // The ring holds every member and one is healthy, so there is an owner;
    // the random pick only guards against a ring that disagrees with them.
    if (KVROUTE_UNLIKELY(owner < 0)) return random_pick(healthy);
    if (got < 0 || got == owner) {
      return Decision::pick(members[static_cast<std::size_t>(owner)], hit);
    }
    return Decision::pick(members[static_cast<std::size_t>(got)], Branch::kBoundedLoadSpill);
  }

  Decision random_pick(std::span<const Worker* const> healthy) noexcept {
    return Decision::pick(healthy[rng_.below(healthy.size())], Branch::kRandomFallback);
  }

  detail::SharedRng rng_;
  double bounded_load_factor_;
};

static_assert(Policy<ConsistentHashing>);

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_POLICIES_CONSISTENT_HASHING_HPP_
