// Checks of the router fuzz driver (router_driver.hpp) that need nothing but
// their arguments: the branches each policy documents, each policy's own
// rule where the driver can tell what it must choose (manual's entries,
// consistent_hashing's strict target header, cache_aware's balance test,
// least_prefill's least predicted work), a tree's invariants and documented
// memory bound, bucket's ranges, and error messages free of raw bytes.
#ifndef KVROUTE_TESTS_FUZZ_ROUTER_CHECKS_HPP_
#define KVROUTE_TESTS_FUZZ_ROUTER_CHECKS_HPP_

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "kvroute/decision.hpp"
#include "kvroute/detail/utf8.hpp"
#include "kvroute/load_tracker.hpp"
#include "kvroute/policies/bucket.hpp"
#include "kvroute/policies/manual.hpp"
#include "kvroute/policy_config.hpp"
#include "kvroute/radix_tree.hpp"
#include "kvroute/request.hpp"
#include "reliability/memory_bound.hpp"

namespace kvfuzz {

// A request's model group by worker id: every member, and those a
// selection may choose (healthy, circuit closed, not excluded).
struct Group {
  std::vector<std::uint32_t> members;
  std::vector<std::uint32_t> eligible;
  bool eligible_has(std::uint32_t id) const {
    return std::find(eligible.begin(), eligible.end(), id) != eligible.end();
  }
  bool has(std::uint32_t id) const {
    return std::find(members.begin(), members.end(), id) != members.end();
  }
};

// What manual must answer, and with which worker for a hit.
struct ManualExpectation {
  kvroute::Branch branch = kvroute::Branch::kNoRoutingId;
  std::optional<std::uint32_t> worker;
};

// Whether `b` is a branch policy `kind` documents (besides kNoWorkers and
// kNoHealthyWorkers, which select_worker reports itself).
inline bool documented_branch(kvroute::PolicyKind kind, kvroute::Branch b) {
  using kvroute::Branch;
  using K = kvroute::PolicyKind;
  auto one_of = [b](std::initializer_list<Branch> bs) {
    return std::find(bs.begin(), bs.end(), b) != bs.end();
  };
  switch (kind) {
    case K::kRoundRobin:
      return b == Branch::kRoundRobin;
    case K::kRandom:
      return b == Branch::kRandom;
    case K::kPowerOfTwo:
      return one_of({Branch::kPowerOfTwo, Branch::kSingleWorker});
    case K::kConsistentHashing:
      return one_of({Branch::kTargetWorkerHit, Branch::kTargetWorkerMiss, Branch::kRoutingKeyHit,
                     Branch::kImplicitKeyHit, Branch::kBoundedLoadSpill, Branch::kRandomFallback});
    case K::kPrefixHash:
      return one_of({Branch::kRingHit, Branch::kLoadBalanceWalk, Branch::kRandomFallback});
    case K::kManual:
      return one_of(
          {Branch::kNoRoutingId, Branch::kVacant, Branch::kOccupiedHit, Branch::kOccupiedMiss});
    case K::kBucket:
      return one_of({Branch::kBucketHit, Branch::kBucketNeighbor, Branch::kBucketImbalanced,
                     Branch::kRandomFallback});
    case K::kCacheAware:
      return one_of({Branch::kCacheHit, Branch::kCacheMiss, Branch::kImbalanced});
    case K::kLeastPrefill:
      return one_of({Branch::kCacheHit, Branch::kCacheMiss, Branch::kLeastPrefill});
  }
  return false;
}

// Manual's documented branch for `r`, read from its entry before the
// selection (at `now`; entries idle for max_idle or longer count as absent
// when max_idle > 0), and the worker of a hit: the first candidate that is
// eligible. Requires g.eligible to be non-empty.
inline ManualExpectation expect_manual(const kvroute::Manual& m, const kvroute::RequestView& r,
                                       const Group& g, std::int64_t now, std::int64_t max_idle) {
  const std::optional<std::string_view> key = r.header(kvroute::kRoutingKeyHeader);
  if (!key || key->empty()) return {kvroute::Branch::kNoRoutingId, {}};
  const auto e = m.entry(r.model, *key);
  if (!e || (max_idle > 0 && now - e->last_access.count() >= max_idle)) {
    return {kvroute::Branch::kVacant, {}};
  }
  for (kvroute::WorkerId c : e->candidates) {
    if (g.eligible_has(c.value)) return {kvroute::Branch::kOccupiedHit, c.value};
  }
  return {kvroute::Branch::kOccupiedMiss, {}};
}

// The selection took the expected branch (and worker), and a keyed one
// left an entry holding the chosen worker, last used now.
inline std::string check_manual(const kvroute::Manual& m, const kvroute::RequestView& r,
                                const ManualExpectation& want, const kvroute::Decision& d,
                                std::int64_t now) {
  if (d.branch != want.branch) {
    return "manual: " + std::string(to_string(d.branch)) + ", expected " +
           std::string(to_string(want.branch));
  }
  if (want.worker && d.id().value != *want.worker) {
    return "manual: hit on " + std::to_string(d.id().value) + ", first eligible candidate " +
           std::to_string(*want.worker);
  }
  if (want.branch == kvroute::Branch::kNoRoutingId) return "";
  const auto e = m.entry(r.model, *r.header(kvroute::kRoutingKeyHeader));
  if (!e || e->last_access.count() != now ||
      std::find(e->candidates.begin(), e->candidates.end(), d.id()) == e->candidates.end()) {
    return "manual: the entry does not hold the chosen worker as of now";
  }
  return "";
}

// consistent_hashing's x-smg-target-worker is strict: the worker it names
// (the URL of a worker in the snapshot, else a member's decimal id) when
// that one is eligible, else no worker (kTargetWorkerMiss). `urls` are the
// live workers'. Other policies: "".
inline std::string check_target(kvroute::PolicyKind kind, const kvroute::RequestView& r,
                                const Group& g, const kvroute::Decision& d,
                                const std::vector<std::pair<std::uint32_t, std::string>>& urls) {
  if (kind != kvroute::PolicyKind::kConsistentHashing || g.eligible.empty()) return "";
  const std::optional<std::string_view> target = r.header(kvroute::kTargetWorkerHeader);
  const bool target_branch = d.branch == kvroute::Branch::kTargetWorkerHit ||
                             d.branch == kvroute::Branch::kTargetWorkerMiss;
  if (!target) return target_branch ? "a target branch without the header" : "";
  std::optional<std::uint32_t> named;
  bool by_url = false;
  for (const auto& [id, url] : urls) {
    if (url != *target) continue;
    by_url = true;
    if (g.has(id)) named = id;
  }
  if (!by_url) {
    std::uint32_t id = 0;
    const char* end = target->data() + target->size();
    const auto [p, ec] = std::from_chars(target->data(), end, id);
    if (!target->empty() && ec == std::errc{} && p == end && g.has(id)) named = id;
  }
  if (named && g.eligible_has(*named)) {
    if (d.id().value == *named && d.branch == kvroute::Branch::kTargetWorkerHit) return "";
    return "target names eligible worker " + std::to_string(*named) + ", decision " +
           std::to_string(d.id().value) + " " + std::string(to_string(d.branch));
  }
  if (d.worker == nullptr && d.branch == kvroute::Branch::kTargetWorkerMiss) return "";
  return "target names no eligible worker, yet " + std::string(to_string(d.branch));
}

// cache_aware's balance rule over the eligible workers' in-flight counts
// (max - min > abs and max > min x rel, in f32 as documented): imbalanced
// pools take the `imbalanced` branch and others never do, and the
// imbalanced and miss branches take a least-loaded worker.
inline std::string check_balance(const kvroute::PolicyConfig& cfg, const Group& g,
                                 const kvroute::LoadTracker& load, const kvroute::Decision& d) {
  if (cfg.policy != kvroute::PolicyKind::kCacheAware || d.worker == nullptr) return "";
  std::int64_t lo = std::numeric_limits<std::int64_t>::max();
  std::int64_t hi = std::numeric_limits<std::int64_t>::min();
  for (std::uint32_t id : g.eligible) {
    lo = std::min(lo, load.in_flight(kvroute::WorkerId{id}));
    hi = std::max(hi, load.in_flight(kvroute::WorkerId{id}));
  }
  const bool imbalanced =
      static_cast<std::uint64_t>(hi - lo) > cfg.balance_abs_threshold &&
      static_cast<float>(hi) >
          static_cast<float>(lo) * static_cast<float>(cfg.balance_rel_threshold);
  if (imbalanced != (d.branch == kvroute::Branch::kImbalanced)) {
    return "in-flight " + std::to_string(lo) + " to " + std::to_string(hi) + " is " +
           (imbalanced ? "" : "not ") + "imbalanced, branch " + std::string(to_string(d.branch));
  }
  if (d.branch != kvroute::Branch::kCacheHit && load.in_flight(d.worker->id) != lo) {
    return std::string(to_string(d.branch)) + " took a worker with " +
           std::to_string(load.in_flight(d.worker->id)) + " in flight, the least is " +
           std::to_string(lo);
  }
  return "";
}

// least_prefill's prediction for each eligible worker, taken before the
// selection: its match (peek_for_tenant, which stamps nothing, as the
// policy's own walk does not) and score (queue_weight x queued tokens +
// uncached characters / chars_per_token).
struct PrefillView {
  std::vector<double> score;
  std::vector<std::size_t> matched;
  std::vector<std::uint64_t> ticket;
  std::size_t best_match = 0;
};

inline PrefillView view_least_prefill(const kvroute::PolicyConfig& cfg,
                                      kvroute::ApproxRadixTree* tree, const kvroute::RequestView& r,
                                      const Group& g, const kvroute::LoadTracker& load) {
  PrefillView v;
  const std::size_t input = kvroute::detail::utf8_count(r.text);
  for (std::uint32_t id : g.eligible) {
    kvroute::TenantMatch m;
    if (tree != nullptr) m = tree->peek_for_tenant(r.text, id);
    const std::size_t len = m.found ? m.matched : 0;
    const std::int64_t queued =
        std::max<std::int64_t>(load.in_flight_tokens(kvroute::WorkerId{id}), 0);
    v.score.push_back(*cfg.queue_weight * static_cast<double>(queued) +
                      static_cast<double>(input - std::min(len, input)) / cfg.chars_per_token);
    v.matched.push_back(len);
    v.ticket.push_back(m.found ? m.previous_recency : 0);
    v.best_match = std::max(v.best_match, len);
  }
  return v;
}

// The chosen worker has the least score; its match is the claim, its
// deepest claim's recency the ticket; the branch says whether it held the
// longest match.
inline std::string check_least_prefill(const PrefillView& v, const Group& g,
                                       const kvroute::Decision& d) {
  if (d.worker == nullptr) return "";
  const auto at = std::find(g.eligible.begin(), g.eligible.end(), d.worker->id.value);
  const auto i = static_cast<std::size_t>(at - g.eligible.begin());
  const double least = *std::min_element(v.score.begin(), v.score.end());
  if (!(v.score[i] == least)) {
    return "least_prefill chose a score of " + std::to_string(v.score[i]) + ", the least is " +
           std::to_string(least);
  }
  if (d.claimed != v.matched[i]) {
    return "claimed " + std::to_string(d.claimed) + ", the worker matches " +
           std::to_string(v.matched[i]);
  }
  if (v.matched[i] > 0 && d.ticket != v.ticket[i]) return "the ticket is not the claim's recency";
  using kvroute::Branch;
  const Branch want = v.best_match == 0              ? Branch::kCacheMiss
                      : v.matched[i] == v.best_match ? Branch::kCacheHit
                                                     : Branch::kLeastPrefill;
  return d.branch == want ? "" : "branch " + std::string(to_string(d.branch));
}

// memory_bound (reliability/memory_bound.hpp), saturating instead of
// overflowing for budgets near 2^64.
inline std::size_t saturating_memory_bound(std::uint64_t budget, std::size_t tenants) {
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  if (tenants != 0 && budget >= kMax / 2 / tenants / kvtest::kBytesPerUnit) return kMax;
  return kvtest::memory_bound(budget, tenants);
}

// A policy's tree: invariants, sizes, only live workers, each within
// `budget`, and stats().bytes within the documented bound for the workers
// it has held (`ever`, which this adds to: per-tenant state is kept for the
// tree's life).
template <class IsLive>
std::string check_tree(const kvroute::ApproxRadixTree& t, std::uint64_t budget,
                       std::set<kvroute::TenantId>& ever, IsLive&& live) {
  if (std::string e = t.check_invariants(); !e.empty()) return "check_invariants: " + e;
  const std::vector<kvroute::TenantSize> sizes = t.tenant_sizes();
  if (t.recount_sizes() != sizes) return "recount_sizes differs from tenant_sizes";
  for (const kvroute::TenantSize& s : sizes) {
    const std::string who = "worker " + std::to_string(s.tenant);
    if (!live(s.tenant)) return who + " is removed but still in the tree";
    if (s.size > budget) {
      return who + " holds " + std::to_string(s.size) + " characters, over max_tree_size " +
             std::to_string(budget);
    }
    ever.insert(s.tenant);
  }
  const kvroute::RadixTreeStats st = t.stats();
  if (st.tenants != sizes.size()) return "stats().tenants differs from tenant_sizes";
  const std::size_t bound = saturating_memory_bound(budget, ever.size());
  if (st.bytes > bound) {
    return "stats().bytes " + std::to_string(st.bytes) + " over the documented bound " +
           std::to_string(bound) + " (" + std::to_string(ever.size()) + " workers, budget " +
           std::to_string(budget) + ")";
  }
  return "";
}

// Bucket's ranges, ascending worker ids, cover [0, kMaxLength] without gap
// or overlap (a range that saturated at kMaxLength ends the cover).
inline std::string check_bucket_ranges(
    const std::vector<std::pair<kvroute::WorkerId, kvroute::Bucket::Range>>& b) {
  if (b.empty()) return "";
  if (b.front().second.lo != 0 || b.back().second.hi != kvroute::Bucket::kMaxLength) {
    return "bucket: the ranges do not span every length";
  }
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (b[i].second.hi < b[i].second.lo) return "bucket: an empty range";
    if (i == 0) continue;
    if (!(b[i - 1].first < b[i].first)) return "bucket: worker ids not ascending";
    const std::uint64_t prev_hi = b[i - 1].second.hi;
    if (prev_hi != kvroute::Bucket::kMaxLength && b[i].second.lo != prev_hi + 1) {
      return "bucket: ranges " + std::to_string(i - 1) + " and " + std::to_string(i) +
             " leave a gap or overlap";
    }
  }
  return "";
}

// True when `s` is printable ASCII: error messages show other bytes escaped.
inline bool printable(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c >= 0x20 && c < 0x7F;
  });
}

}  // namespace kvfuzz

#endif  // KVROUTE_TESTS_FUZZ_ROUTER_CHECKS_HPP_
