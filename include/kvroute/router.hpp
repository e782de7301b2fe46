// -----------------------------------------------------------------------------
// File: kvroute/router.hpp
// -----------------------------------------------------------------------------
//
// `Router<P>` composes the pieces a host needs for the whole request loop: a
// WorkerSet, a LoadTracker and one policy, with the policy told about worker
// changes. It adds nothing the pieces cannot do on their own; hosts with
// their own worker registry call `select_worker` directly.
//
// The loop: select, dispatch (hold the guard), forward, release.
//
// Thread safety: thread-safe. `select` and `dispatch` may run on any number
// of threads while others add, remove or re-flag workers; a selection that
// started before a removal completes against the snapshot it read, so the
// worker it returns may already be gone from later snapshots (forwarding to
// it fails like any dead server would, and the host retries).
//
// Example:
//
//   kvroute::Router<kvroute::RoundRobin> router;
//   router.add_worker({.url = "http://10.0.0.1:30000"}).IgnoreError();
//   kvroute::Selection s = router.select({.text = prompt});
//   if (!s) return reply_503(kvroute::to_string(s.decision.branch));
//   kvroute::LoadGuard guard = router.dispatch(s);
//   forward(s.worker().url);   // guard.release() when the response ends

#ifndef KVROUTE_ROUTER_HPP_
#define KVROUTE_ROUTER_HPP_

#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kvroute/config.hpp"
#include "kvroute/decision.hpp"
#include "kvroute/load_tracker.hpp"
#include "kvroute/policy.hpp"
#include "kvroute/select_worker.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN

// A decision together with the snapshot it points into.
struct Selection {
  std::shared_ptr<const WorkerSnapshot> snapshot;
  Decision decision;

  explicit operator bool() const noexcept { return static_cast<bool>(decision); }
  // Requires *this.
  const Worker& worker() const noexcept { return *decision.worker; }
};

template <Policy P>
class Router {
 public:
  // Constructs the policy in place from `args`.
  template <class... Args>
  explicit Router(Args&&... args) : policy_(std::forward<Args>(args)...) {}

  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // See WorkerSet::add.
  absl::StatusOr<WorkerId> add_worker(WorkerSpec spec) {
    auto id = workers_.add(std::move(spec));
    if (id.ok()) announce({&*id, 1});
    return id;
  }
  absl::StatusOr<std::vector<WorkerId>> add_workers(std::span<const WorkerSpec> specs) {
    auto ids = workers_.add(specs);
    if (ids.ok()) announce(*ids);
    return ids;
  }
  // See WorkerSet::remove. The policy drops the worker's state afterwards.
  absl::Status remove_worker(WorkerId id) {
    absl::Status s = workers_.remove(id);
    if (s.ok()) {
      notify_worker_removed(policy_, id);
      notify_workers_changed(policy_, *workers_.snapshot());
    }
    return s;
  }
  // See WorkerSet::set_healthy. Health flips keep the policy's state (a
  // worker that is briefly unhealthy keeps its cache history).
  absl::Status set_healthy(WorkerId id, bool healthy) { return workers_.set_healthy(id, healthy); }

  // One routing decision over the current snapshot, never choosing a
  // worker in `excluded` (for a retry). Never throws.
  Selection select(const RequestView& request, std::span<const WorkerId> excluded = {}) noexcept {
    Selection s{workers_.snapshot(), {}};
    s.decision = select_worker(policy_, request, *s.snapshot, load_, excluded);
    return s;
  }

  // Starts the chosen worker's load; inactive guard when `s` chose nothing.
  // The load lasts as long as the guard: keep it until the response ends.
  [[nodiscard]] LoadGuard dispatch(const Selection& s, DispatchInfo info = {}) noexcept {
    if (!s) return LoadGuard{};
    return load_.dispatch(s.decision.worker->id, info);
  }

  // Runs the policy's periodic work now.
  void maintain() { run_maintenance(policy_); }

  P& policy() noexcept { return policy_; }
  const P& policy() const noexcept { return policy_; }
  // The workers, to read (snapshot()). Changes go through this router, so
  // that the policy hears of them.
  const WorkerSet& workers() const noexcept { return workers_; }
  // For a circuit breaker (Breakers): holds workers out of selection and
  // lets them back in; nothing else.
  CircuitSwitch circuits() noexcept { return CircuitSwitch(workers_); }
  LoadTracker& load() noexcept { return load_; }
  const LoadTracker& load() const noexcept { return load_; }

 private:
  void announce(std::span<const WorkerId> ids) {
    auto snap = workers_.snapshot();
    for (WorkerId id : ids) {
      load_.reserve(id);
      if (const Worker* w = snap->find(id)) notify_worker_added(policy_, *w);
    }
    notify_workers_changed(policy_, *snap);
  }

  WorkerSet workers_;
  LoadTracker load_;
  P policy_;
};

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_ROUTER_HPP_
