// -----------------------------------------------------------------------------
// File: kvroute/policies/prefix_hash.hpp
// -----------------------------------------------------------------------------
//
// `kvroute::PrefixHash`: prompt-prefix affinity without a tree. The request's
// prefix is hashed to a position on the model group's consistent-hash ring,
// so requests that share a prefix reach the same worker (and its KV cache)
// as long as that worker is healthy and not overloaded.
//
// The prefix:
//   * with token ids (RequestView::tokens non-empty): the first
//     `prefix_token_count` ids, each fed to XXH64 as 4 little-endian bytes;
//   * else the first `prefix_token_count` characters (Unicode code points,
//     not bytes, so CJK text is cut at the same point as Latin text) of
//     RequestView::text, XXH64 of their bytes;
//   * neither: there is no affinity to keep, so a uniformly random healthy
//     worker (`random_fallback`).
// The 64-bit hash is itself the ring position (the gateway formats it as
// hex and hashes that string again; one hash is enough and avoids the
// formatting).
//
// The choice: walk the ring clockwise from that position; the first healthy
// member is the ring pick. With `total` the in-flight requests over the n
// healthy members, a worker is load-ok when total == 0 or
// in_flight(w) <= ((total + 1) / n) * load_factor (floating point; the +1 is
// the incoming request). A load-ok ring pick is returned (`ring_hit`).
// Otherwise the walk continues to the first healthy load-ok member
// (`load_balance_walk`); if none is load-ok (possible only with a factor
// below 1 or under racing load updates) the ring pick is kept, also
// `load_balance_walk`.
//
// Differences from the gateway (spec sections 2.5 and 9): requests without
// token ids are routed by their text instead of getting no worker (which
// made the policy unusable over HTTP); an overloaded ring pick spills to its
// ring successor rather than to the globally least-loaded worker, so every
// request of that prefix spills to the same place and locality survives
// the spill; the ring always exists, so there is no least-load fallback.
//
// Thread safety: thread-safe; lock-free apart from the one-time ring build.
// Never allocates after the group's ring exists; the first lookup on a new
// membership builds it (ModelGroup::ring()).
//
// Example:
//
//   kvroute::Router<kvroute::PrefixHash> router(
//       kvroute::PrefixHash::Options{.prefix_token_count = 128});
//   std::vector<std::uint32_t> ids = tokenize(prompt);
//   auto s = router.select({.text = prompt, .tokens = ids});
//   // prompts sharing their first 128 tokens go to the same worker

#ifndef KVROUTE_POLICIES_PREFIX_HASH_HPP_
#define KVROUTE_POLICIES_PREFIX_HASH_HPP_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "kvroute/config.hpp"
#include "kvroute/decision.hpp"
#include "kvroute/detail/hash_ring.hpp"
#include "kvroute/detail/rng.hpp"
#include "kvroute/detail/stable_hash.hpp"
#include "kvroute/detail/utf8.hpp"
#include "kvroute/policy.hpp"
#include "kvroute/request.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN

class PrefixHash {
 public:
  struct Options {
    // Token ids (or, without ids, characters of text) that form the prefix.
    // Requires > 0 (asserted in debug builds; 0 is read as 1).
    std::size_t prefix_token_count = 256;
    // How far above the mean (counting the incoming request) a worker's
    // in-flight count may go before its prefixes spill to the next ring
    // member. Values below 1 can leave no worker load-ok.
    double load_factor = 1.25;
    // Seed of the random fallback.
    std::uint64_t seed = detail::kDefaultSeed;
  };

  PrefixHash() noexcept : PrefixHash(Options{}) {}
  explicit PrefixHash(Options o) noexcept
      : rng_(o.seed),
        prefix_token_count_(std::max<std::size_t>(o.prefix_token_count, 1)),
        load_factor_(o.load_factor) {
    KVROUTE_ASSERT(o.prefix_token_count > 0, "PrefixHash: prefix_token_count must be > 0");
  }

  std::string_view name() const noexcept { return "prefix_hash"; }

  // Returns true when a worker with `load` requests in flight may take one
  // more, given `total` in flight over `n` healthy workers: total == 0, n ==
  // 0, or load <= ((total + 1) / n) * factor.
  static bool load_ok(std::int64_t load, std::int64_t total, std::size_t n,
                      double factor) noexcept {
    if (total == 0 || n == 0) return true;
    return static_cast<double>(load) <=
           (static_cast<double>(total) + 1.0) / static_cast<double>(n) * factor;
  }

  // Returns the ring position of `r`'s prefix (see the file comment), or
  // nullopt when it has neither token ids nor text.
  std::optional<std::uint64_t> position(const RequestView& r) const noexcept {
    detail::Xxh64 h;
    if (!r.tokens.empty()) {
      const auto ids = r.tokens.first(std::min(r.tokens.size(), prefix_token_count_));
      if constexpr (std::endian::native == std::endian::little) {
        h.update(ids.data(), ids.size_bytes());
      } else {
        for (std::uint32_t id : ids) h.update_u32(id);
      }
      return h.digest();
    }
    if (!r.text.empty()) {
      h.update(r.text.substr(0, detail::utf8_prefix_bytes(r.text, prefix_token_count_)));
      return h.digest();
    }
    return std::nullopt;
  }

  Decision choose(const RequestView& r, const ClusterView& c) noexcept {
    const auto healthy = c.eligible();
    if (healthy.empty()) return c.no_worker();
    const std::optional<std::uint64_t> pos = position(r);
    if (!pos) return random_pick(healthy);

    const auto members = c.members();
    std::int64_t total = 0;
    for (const Worker* w : healthy) total += c.in_flight(*w);
    const std::size_t n = healthy.size();

    std::int64_t pick = -1;
    const std::int64_t got = c.group()->ring().walk(*pos, [&](std::uint32_t m) {
      const Worker* w = members[m];
      if (!c.is_eligible(*w)) return false;
      if (pick < 0) pick = m;
      return load_ok(c.in_flight(*w), total, n, load_factor_);
    });
    // The ring holds every member and one is healthy, so there is a pick;
    // the random one only guards against a ring that disagrees with them.
    if (KVROUTE_UNLIKELY(pick < 0)) return random_pick(healthy);
    if (got == pick) {
      return Decision::pick(members[static_cast<std::size_t>(pick)], Branch::kRingHit);
    }
    const std::int64_t chosen = got < 0 ? pick : got;
    return Decision::pick(members[static_cast<std::size_t>(chosen)], Branch::kLoadBalanceWalk);
  }

 private:
  Decision random_pick(std::span<const Worker* const> healthy) noexcept {
    return Decision::pick(healthy[rng_.below(healthy.size())], Branch::kRandomFallback);
  }

  detail::SharedRng rng_;
  std::size_t prefix_token_count_;
  double load_factor_;
};

static_assert(Policy<PrefixHash>);

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_POLICIES_PREFIX_HASH_HPP_
