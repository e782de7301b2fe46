// -----------------------------------------------------------------------------
// File: kvroute/decision.hpp
// -----------------------------------------------------------------------------
//
// `Decision`, what a selection returns: the chosen worker, or why there is
// none, together with the decision branch taken. "No eligible worker" is a
// value here, never an exception, and every branch has a stable snake_case
// name (`to_string`) for metrics: a host counts decisions per policy and
// branch without parsing anything.
//
// Thread safety: values.
//
// Example:
//
//   kvroute::Decision d = router.select(req).decision;
//   if (!d) {
//     // d.reason() is kNoWorkers, kNoHealthyWorkers or kPolicyMiss
//     return reply_503(kvroute::to_string(d.branch));
//   }
//   forward_to(d.worker->url);

#ifndef KVROUTE_DECISION_HPP_
#define KVROUTE_DECISION_HPP_

#include <array>
#include <cstdint>
#include <string_view>

#include "kvroute/config.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN

// Every decision branch of every policy. Names follow the gateway's branch
// labels where it has one.
enum class Branch : std::uint8_t {
  // No decision possible.
  kNoWorkers,         // the request's model has no workers
  kNoHealthyWorkers,  // it has workers, none healthy
  // round_robin, random, power_of_two.
  kRoundRobin,
  kRandom,
  kPowerOfTwo,
  kSingleWorker,  // power_of_two with one healthy worker
  // consistent_hashing; prefix_hash shares the last three. kRandomFallback
  // is also any policy's stateless fallback (no key, no text, out of memory).
  kTargetWorkerHit,
  kTargetWorkerMiss,  // strict: the named worker is absent or unhealthy
  kRoutingKeyHit,
  kImplicitKeyHit,    // authorization / x-forwarded-for / cookie
  kBoundedLoadSpill,  // ring owner over its load bound, next one taken
  kRandomFallback,
  // prefix_hash.
  kRingHit,
  kLoadBalanceWalk,
  // manual.
  kNoRoutingId,
  kVacant,
  kOccupiedHit,
  kOccupiedMiss,
  // bucket.
  kBucketHit,
  kBucketNeighbor,  // the bucket's owner is unhealthy, nearest healthy one
  kBucketImbalanced,
  // cache_aware and least_prefill.
  kCacheHit,
  kCacheMiss,
  kImbalanced,
  kLeastPrefill,
  // A policy of the host's own: the branch's name is Decision::label.
  kCustom,
};

inline constexpr std::array<Branch, 26> kAllBranches = {
    Branch::kNoWorkers,       Branch::kNoHealthyWorkers, Branch::kRoundRobin,
    Branch::kRandom,          Branch::kPowerOfTwo,       Branch::kSingleWorker,
    Branch::kTargetWorkerHit, Branch::kTargetWorkerMiss, Branch::kRoutingKeyHit,
    Branch::kImplicitKeyHit,  Branch::kBoundedLoadSpill, Branch::kRandomFallback,
    Branch::kRingHit,         Branch::kLoadBalanceWalk,  Branch::kNoRoutingId,
    Branch::kVacant,          Branch::kOccupiedHit,      Branch::kOccupiedMiss,
    Branch::kBucketHit,       Branch::kBucketNeighbor,   Branch::kBucketImbalanced,
    Branch::kCacheHit,        Branch::kCacheMiss,        Branch::kImbalanced,
    Branch::kLeastPrefill,    Branch::kCustom,
};

static_assert(static_cast<std::size_t>(Branch::kCustom) + 1 == kAllBranches.size(),
              "kAllBranches must list every Branch");

// Returns the branch's metric label, e.g. "routing_key_hit".
constexpr std::string_view to_string(Branch b) noexcept {
  switch (b) {
    case Branch::kNoWorkers:
      return "no_workers";
    case Branch::kNoHealthyWorkers:
      return "no_healthy_workers";
    case Branch::kRoundRobin:
      return "round_robin";
    case Branch::kRandom:
      return "random";
    case Branch::kPowerOfTwo:
      return "power_of_two";
    case Branch::kSingleWorker:
      return "single_worker";
    case Branch::kTargetWorkerHit:
      return "target_worker_hit";
    case Branch::kTargetWorkerMiss:
      return "target_worker_miss";
    case Branch::kRoutingKeyHit:
      return "routing_key_hit";
    case Branch::kImplicitKeyHit:
      return "implicit_key_hit";
    case Branch::kBoundedLoadSpill:
      return "bounded_load_spill";
    case Branch::kRandomFallback:
      return "random_fallback";
    case Branch::kRingHit:
      return "ring_hit";
    case Branch::kLoadBalanceWalk:
      return "load_balance_walk";
    case Branch::kNoRoutingId:
      return "no_routing_id";
    case Branch::kVacant:
      return "vacant";
    case Branch::kOccupiedHit:
      return "occupied_hit";
    case Branch::kOccupiedMiss:
      return "occupied_miss";
    case Branch::kBucketHit:
      return "bucket_hit";
    case Branch::kBucketNeighbor:
      return "bucket_neighbor";
    case Branch::kBucketImbalanced:
      return "bucket_imbalanced";
    case Branch::kCacheHit:
      return "cache_hit";
    case Branch::kCacheMiss:
      return "cache_miss";
    case Branch::kImbalanced:
      return "imbalanced";
    case Branch::kLeastPrefill:
      return "least_prefill";
    case Branch::kCustom:
      return "custom";
  }
  return "unknown";
}

// Why a decision names no worker.
enum class NoWorker : std::uint8_t {
  kNone,              // a worker was chosen
  kNoWorkers,         // no worker serves the request's model
  kNoHealthyWorkers,  // none of them is healthy
  kPolicyMiss,        // the policy declined, e.g. a strict target miss
};

constexpr std::string_view to_string(NoWorker r) noexcept {
  switch (r) {
    case NoWorker::kNone:
      return "none";
    case NoWorker::kNoWorkers:
      return "no_workers";
    case NoWorker::kNoHealthyWorkers:
      return "no_healthy_workers";
    case NoWorker::kPolicyMiss:
      return "policy_miss";
  }
  return "unknown";
}

struct Decision {
  // The chosen worker, pointing into the snapshot the selection read (valid
  // while that snapshot lives); null when there is none.
  const Worker* worker = nullptr;
  Branch branch = Branch::kNoWorkers;
  // Tree-based policies only (0 otherwise): how much of the request the
  // policy's tree claims the chosen worker already holds (characters of
  // text), and the ticket that names that claim when the host later reports
  // what the server really had cached (CacheAware::report_cached). Comparing
  // `claimed` with the server's cached length measures the tree's accuracy.
  std::uint64_t claimed = 0;
  std::uint64_t ticket = 0;
  // The branch's name when `branch` is kCustom (Decision::custom); empty
  // otherwise. It must outlive every use of the decision: a string literal.
  std::string_view label{};

  static constexpr Decision pick(const Worker* w, Branch b) noexcept {
    return Decision{w, b, 0, 0, {}};
  }
  static constexpr Decision none(Branch b) noexcept { return Decision{nullptr, b, 0, 0, {}}; }
  // A decision of a host's own policy, with its own branch name for
  // metrics ("least_loaded"; a string literal, see `label`). `w` may be
  // null: no worker, for the reason the label names.
  static constexpr Decision custom(const Worker* w, std::string_view label) noexcept {
    return Decision{w, Branch::kCustom, 0, 0, label};
  }

  // The branch's metric label: `label` for a custom branch, else
  // to_string(branch).
  constexpr std::string_view branch_name() const noexcept {
    return branch == Branch::kCustom ? label : to_string(branch);
  }

  explicit constexpr operator bool() const noexcept { return worker != nullptr; }
  WorkerId id() const noexcept { return worker ? worker->id : WorkerId{}; }
  constexpr NoWorker reason() const noexcept {
    if (worker != nullptr) return NoWorker::kNone;
    if (branch == Branch::kNoWorkers) return NoWorker::kNoWorkers;
    if (branch == Branch::kNoHealthyWorkers) return NoWorker::kNoHealthyWorkers;
    return NoWorker::kPolicyMiss;
  }
};

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DECISION_HPP_
