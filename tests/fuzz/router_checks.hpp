// Checks of the router fuzz driver (router_driver.hpp) that need nothing but
// their arguments: the branches each policy documents, consistent_hashing's
// strict target header, a tree's invariants and documented memory bound,
// bucket's ranges, and error messages free of raw bytes.
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
#include "kvroute/policies/bucket.hpp"
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
