// -----------------------------------------------------------------------------
// File: kvroute/policy.hpp
// -----------------------------------------------------------------------------
//
// The `Policy` concept: what a routing policy must provide for
// `select_worker` (select_worker.hpp) to call it, and `ClusterView`, the
// state a policy decides over.
//
// A type `P` models `kvroute::Policy` if, for `P& p`, `const RequestView& r`
// and `const ClusterView& c`:
//   1. `p.name()` is `noexcept` and returns something convertible to
//      `std::string_view`: the policy's name for metrics ("round_robin").
//   2. `p.choose(r, c)` is `noexcept` and returns `Decision`.
//
// Semantic requirements (not checked by the compiler):
//   * `choose` returns a worker from `c.eligible()` (a policy that walks
//     `c.members()` tests `c.is_eligible(w)`), or no worker with a branch
//     saying why. It never names a removed, unhealthy or excluded worker.
//   * `choose` never blocks on I/O, never sleeps, never logs and never
//     throws; it may take short internal locks. It does not allocate on the
//     steady-state path (first sight of a model or key may allocate).
//   * `choose` may be called concurrently on the same object from any number
//     of threads; all mutable state is atomic or internally locked.
//   * Given equal inputs, equal seeds and one calling thread, `choose`
//     returns equal results.
//   * Ties between equally good workers are broken at random (seeded) or by
//     a documented rule that spreads load, never towards the first worker
//     (`TieBreaker`, tie_break.hpp, is that rule).
//   * The decision names its branch: a shipped Branch, or a label of the
//     policy's own (`Decision::custom(worker, "my_branch")`), which metrics
//     count like any other.
//
// Optional hooks, detected with `requires` and called by `Router` when
// present:
//   * `p.on_worker_added(const Worker&)`: a worker joined.
//   * `p.on_worker_removed(WorkerId)`: a worker left; drop its state.
//   * `p.on_workers_changed(const WorkerSnapshot&)`: after any worker was
//     added or removed, the new membership, so that a policy can set up
//     per-model state (a tree, buckets) before the model's first request.
//   * `p.maintain()`: periodic work is due or the host asks for it now
//     (eviction, TTL sweeps, re-balancing). Policies also run it lazily from
//     `choose` when their interval has passed on their clock.
//
// Thread safety: ClusterView is a value over immutable snapshot data and a
// thread-safe LoadTracker.
//
// Example (a complete policy):
//
//   struct FirstEligible {
//     std::string_view name() const noexcept { return "first_eligible"; }
//     kvroute::Decision choose(const kvroute::RequestView&,
//                              const kvroute::ClusterView& c) noexcept {
//       if (c.eligible().empty()) return c.no_worker();
//       return kvroute::Decision::custom(c.eligible().front(), "first");
//     }
//   };
//   static_assert(kvroute::Policy<FirstEligible>);
//
// (It always takes the first worker, which the tie rule above forbids for
// a real policy; tie_break.hpp shows one that keeps it.)

#ifndef KVROUTE_POLICY_HPP_
#define KVROUTE_POLICY_HPP_

#include <concepts>
#include <cstdint>
#include <span>
#include <string_view>

#include "kvroute/config.hpp"
#include "kvroute/decision.hpp"
#include "kvroute/load_tracker.hpp"
#include "kvroute/request.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN

namespace detail {
struct ClusterViewAccess;  // select_worker's exclusions (select_worker.hpp)
}  // namespace detail

// The cluster as one selection sees it: the request model's group inside one
// snapshot, and the live load counters. Built by select_worker; a
// default-constructed view has no workers.
class ClusterView {
 public:
  ClusterView() noexcept = default;
  // The group `group` of `snapshot` (snapshot.group(model)), with the loads
  // in `load` (null: every load reads 0). All three must outlive the view.
  ClusterView(const WorkerSnapshot& snapshot, const ModelGroup& group,
              const LoadTracker* load) noexcept
      : snapshot_(&snapshot), group_(&group), load_(load) {}

  // The workers the policy may choose: the request model's members that are
  // healthy, not held out by a circuit breaker, and not excluded by this
  // selection (a retry avoiding the worker that just failed); ascending id
  // order.
  std::span<const Worker* const> eligible() const noexcept {
    if (!excluded_.empty()) return eligible_;
    return group_ ? group_->available() : std::span<const Worker* const>{};
  }
  // Whether member `w` may be chosen (for policies that walk members(),
  // such as a hash ring).
  bool is_eligible(const Worker& w) const noexcept {
    if (!w.available()) return false;
    for (WorkerId x : excluded_) {
      if (x == w.id) return false;
    }
    return true;
  }
  // All members, eligible or not, ascending id order.
  std::span<const Worker* const> members() const noexcept {
    return group_ ? group_->members() : std::span<const Worker* const>{};
  }
  // The model whose group this is ("" for all workers).
  std::string_view model() const noexcept { return group_ ? group_->model() : std::string_view{}; }
  // In-flight requests on `w` (0 without a tracker).
  std::int64_t in_flight(const Worker& w) const noexcept {
    return load_ ? load_->in_flight(w.id) : 0;
  }
  // The "no worker" decision for an empty group or one with no eligible
  // worker.
  Decision no_worker() const noexcept {
    return Decision::none(members().empty() ? Branch::kNoWorkers : Branch::kNoHealthyWorkers);
  }

  // The pieces, for policies that need more than the above (null in a
  // default-constructed view; load() also when the host gave none).
  const LoadTracker* load() const noexcept { return load_; }
  const ModelGroup* group() const noexcept { return group_; }
  const WorkerSnapshot* snapshot() const noexcept { return snapshot_; }

  // The names before 0.2; removed in the next release.
  [[deprecated("use eligible()")]] std::span<const Worker* const> healthy() const noexcept {
    return eligible();
  }
  [[deprecated("use is_eligible(w)")]] bool eligible(const Worker& w) const noexcept {
    return is_eligible(w);
  }

 private:
  friend struct detail::ClusterViewAccess;

  const WorkerSnapshot* snapshot_ = nullptr;
  const ModelGroup* group_ = nullptr;
  const LoadTracker* load_ = nullptr;
  std::span<const WorkerId> excluded_{};
  std::span<const Worker* const> eligible_{};  // the group's available minus excluded_
};

template <class P>
concept Policy = requires(P& p, const RequestView& r, const ClusterView& c) {
  { p.name() }
  noexcept->std::convertible_to<std::string_view>;
  { p.choose(r, c) }
  noexcept->std::same_as<Decision>;
};

namespace detail {
template <class P>
concept HasWorkerAdded = requires(P& p, const Worker& w) {
  p.on_worker_added(w);
};
template <class P>
concept HasWorkerRemoved = requires(P& p, WorkerId id) {
  p.on_worker_removed(id);
};
template <class P>
concept HasWorkersChanged = requires(P& p, const WorkerSnapshot& s) {
  p.on_workers_changed(s);
};
template <class P>
concept HasMaintain = requires(P& p) {
  p.maintain();
};
}  // namespace detail

// Calls the optional hooks when `P` has them; no-ops otherwise.
template <Policy P>
void notify_worker_added(P& p, const Worker& w) {
  if constexpr (detail::HasWorkerAdded<P>) p.on_worker_added(w);
}
template <Policy P>
void notify_worker_removed(P& p, WorkerId id) {
  if constexpr (detail::HasWorkerRemoved<P>) p.on_worker_removed(id);
}
template <Policy P>
void notify_workers_changed(P& p, const WorkerSnapshot& s) {
  if constexpr (detail::HasWorkersChanged<P>) p.on_workers_changed(s);
}
template <Policy P>
void run_maintenance(P& p) {
  if constexpr (detail::HasMaintain<P>) p.maintain();
}

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_POLICY_HPP_
