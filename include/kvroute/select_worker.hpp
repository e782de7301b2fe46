// -----------------------------------------------------------------------------
// File: kvroute/select_worker.hpp
// -----------------------------------------------------------------------------
//
// `select_worker`: one routing decision. The data flow of a request:
//
//   1. The request's model picks its group in the snapshot: that model's
//      workers plus the model-less ones (every worker for an empty model).
//   2. No members -> Decision{kNoWorkers}; members but none healthy ->
//      Decision{kNoHealthyWorkers}. The policy is not called.
//   3. Otherwise the policy chooses among the group's eligible members, with
//      the live loads from the LoadTracker, and reports the branch it took.
//   4. The host dispatches to the chosen worker through LoadTracker, holding
//      the guard until the response ends (see Router for the whole loop).
//
// Policies do not combine inside one call; a host that wants a fallback
// chain calls select_worker again with another policy when the first returns
// no worker (for example after a strict target-worker miss).
//
// Thread safety: as thread-safe as the policy (every kvroute policy is);
// `snapshot` and `load` may be shared by any number of concurrent calls.
//
// Example:
//
//   kvroute::WorkerSet workers;  kvroute::LoadTracker load;
//   kvroute::RoundRobin rr;
//   workers.add({.url = "http://a:8000"}).IgnoreError();
//   auto snap = workers.snapshot();
//   kvroute::Decision d = kvroute::select_worker(rr, {.text = "hi"}, *snap, load);
//   // d.worker->url == "http://a:8000", d.branch == Branch::kRoundRobin

#ifndef KVROUTE_SELECT_WORKER_HPP_
#define KVROUTE_SELECT_WORKER_HPP_

#include <span>
#include <vector>

#include "kvroute/config.hpp"
#include "kvroute/decision.hpp"
#include "kvroute/load_tracker.hpp"
#include "kvroute/policy.hpp"
#include "kvroute/request.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN

namespace detail {
// Narrows a view to the eligible workers that a retry may still choose.
struct ClusterViewAccess {
  static void exclude(ClusterView& c, std::span<const WorkerId> excluded,
                      std::span<const Worker* const> eligible) noexcept {
    c.excluded_ = excluded;
    c.eligible_ = eligible;
  }
};
}  // namespace detail

// Returns the policy's choice for `request` among the healthy workers of its
// model in `snapshot`, or no worker with the reason as the branch. The
// returned `worker` points into `snapshot`. Never throws, never allocates on
// the steady-state path of the shipped policies.
template <Policy P>
[[nodiscard]] Decision select_worker(P& policy, const RequestView& request,
                                     const WorkerSnapshot& snapshot,
                                     const LoadTracker& load) noexcept {
  const ModelGroup& group = snapshot.group(request.model);
  const ClusterView cluster(snapshot, group, &load);
  if (group.available().empty()) return cluster.no_worker();
  Decision d = policy.choose(request, cluster);
  KVROUTE_ASSERT(d.worker == nullptr || d.worker->available(),
                 "policy chose an unavailable worker");
  return d;
}

// The same, never choosing a worker in `excluded`: a retry's fresh selection
// that avoids the worker that just failed. With no eligible worker left the
// decision names none (kNoHealthyWorkers). Allocates only to grow one
// thread-local buffer to the largest group seen.
template <Policy P>
[[nodiscard]] Decision select_worker(P& policy, const RequestView& request,
                                     const WorkerSnapshot& snapshot, const LoadTracker& load,
                                     std::span<const WorkerId> excluded) noexcept {
  if (excluded.empty()) return select_worker(policy, request, snapshot, load);
  const ModelGroup& group = snapshot.group(request.model);
  ClusterView cluster(snapshot, group, &load);
  detail::ClusterViewAccess::exclude(cluster, excluded, {});
  thread_local std::vector<const Worker*> eligible;
  eligible.clear();
  try {
    for (const Worker* w : group.available()) {
      if (cluster.is_eligible(*w)) eligible.push_back(w);
    }
  } catch (...) {
    return Decision::none(Branch::kNoHealthyWorkers);
  }
  detail::ClusterViewAccess::exclude(cluster, excluded, eligible);
  if (eligible.empty()) return cluster.no_worker();
  Decision d = policy.choose(request, cluster);
  KVROUTE_ASSERT(d.worker == nullptr || cluster.is_eligible(*d.worker),
                 "policy chose an excluded or unavailable worker");
  return d;
}

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SELECT_WORKER_HPP_
