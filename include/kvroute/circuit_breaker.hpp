// -----------------------------------------------------------------------------
// File: kvroute/circuit_breaker.hpp
// -----------------------------------------------------------------------------
//
// `kvroute::CircuitBreaker`, one worker's breaker, a pure state machine on an
// injectable clock, and `kvroute::Breakers`, which keeps one per worker and
// holds workers whose circuit is open out of selection (through
// WorkerSet::set_circuit_open), so `select_worker` never picks them.
//
//   closed --(failure_threshold failures within window)--> open
//   open --(open_timeout elapsed; noticed lazily)--> half-open
//   half-open --(success_threshold successes)--> closed
//   half-open --(any failure)--> open
//
// Defaults are the gateway's (10 failures, 60 s open, 3 successes), plus what
// it lacks: its failure window is configured but unused (any 10 consecutive
// failures open the circuit, however far apart); here the failures must fall
// within `window` of the first of the run. And its half-open state admits
// every request; here at most `half_open_max_probes` run at once, so a
// recovering server is not flooded.
//
// Time only moves on calls: an open circuit turns half-open when the next
// `acquire` or `refresh` sees that open_timeout has passed. No thread.
//
// Thread safety: thread-safe; each breaker has its own small mutex, held for
// a few comparisons.
//
// Example:
//
//   kvroute::Breakers breakers(router.circuits());       // defaults
//   kvroute::Selection s = router.select(req);
//   kvroute::CircuitBreaker::Permit p = breakers.acquire(s.worker().id);
//   if (!p) { /* half-open and saturated: select again, excluding it */ }
//   bool ok = forward(s.worker().url);                   // status < 500 ...
//   breakers.record(s.worker().id, p, ok);               // may open the circuit

#ifndef KVROUTE_CIRCUIT_BREAKER_HPP_
#define KVROUTE_CIRCUIT_BREAKER_HPP_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kvroute/clock.hpp"
#include "kvroute/config.hpp"
#include "kvroute/detail/mutex.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN

class CircuitBreaker {
 public:
  enum class State : std::uint8_t { kClosed = 0, kOpen = 1, kHalfOpen = 2 };

  struct Options {
    std::uint32_t failure_threshold = 10;
    std::uint32_t success_threshold = 3;
    std::chrono::nanoseconds open_timeout = std::chrono::seconds(60);
    std::chrono::nanoseconds window = std::chrono::seconds(120);
    std::uint32_t half_open_max_probes = 1;
    // Must outlive the breaker.
    const Clock* clock = &Clock::steady();

    // Returns OK, or InvalidArgument naming the bad field and value.
    absl::Status validate() const {
      auto bad = [](std::string_view field, auto v, std::string_view why) {
        return absl::InvalidArgumentError(
            absl::StrCat("circuit breaker ", absl::string_view(field.data(), field.size()), ": ", v,
                         " ", absl::string_view(why.data(), why.size())));
      };
      if (failure_threshold == 0) return bad("failure_threshold", 0, "must be > 0");
      if (success_threshold == 0) return bad("success_threshold", 0, "must be > 0");
      if (open_timeout.count() <= 0) {
        return bad("open_timeout", open_timeout.count(), "ns must be > 0");
      }
      if (window.count() <= 0) return bad("window", window.count(), "ns must be > 0");
      if (half_open_max_probes == 0) {
        return bad("half_open_max_probes", 0, "must be > 0");
      }
      return absl::OkStatus();
    }
    // NOLINTNEXTLINE(readability-identifier-naming): the name before 0.2
    [[deprecated("use validate()")]] absl::Status Validate() const { return validate(); }
  };

  // The right to send one request. Falsy when the breaker refused.
  struct Permit {
    bool admitted = false;
    bool probe = false;  // counted against half_open_max_probes
    explicit operator bool() const noexcept { return admitted; }
  };

  CircuitBreaker() noexcept : CircuitBreaker(Options{}) {}
  // Requires o.validate().ok() (out-of-range values are clamped to 1).
  explicit CircuitBreaker(Options o) noexcept
      : opt_(o), clock_(o.clock != nullptr ? o.clock : &Clock::steady()) {
    if (opt_.failure_threshold == 0) opt_.failure_threshold = 1;
    if (opt_.success_threshold == 0) opt_.success_threshold = 1;
    if (opt_.half_open_max_probes == 0) opt_.half_open_max_probes = 1;
  }

  // Asks to send a request now.
  Permit acquire() noexcept {
    detail::MutexLock lock(&mu_);
    advance();
    switch (state_) {
      case State::kClosed:
        return {true, false};
      case State::kOpen:
        return {false, false};
      case State::kHalfOpen:
        if (probes_ >= opt_.half_open_max_probes) return {false, false};
        ++probes_;
        return {true, true};
    }
    return {false, false};
  }

  // Records the outcome of a request sent with `p`.
  void record(const Permit& p, bool success) noexcept {
    detail::MutexLock lock(&mu_);
    if (p.probe && probes_ > 0) --probes_;
    advance();
    if (success) {
      failures_ = 0;
      if (state_ == State::kHalfOpen && ++successes_ >= opt_.success_threshold) {
        enter(State::kClosed);
      }
      return;
    }
    successes_ = 0;
    const std::int64_t now = clock_->now().count();
    switch (state_) {
      case State::kClosed:
        if (failures_ == 0 || now - first_failure_ns_ > opt_.window.count()) {
          failures_ = 0;
          first_failure_ns_ = now;
        }
        if (++failures_ >= opt_.failure_threshold) enter(State::kOpen);
        break;
      case State::kHalfOpen:
        enter(State::kOpen);
        break;
      case State::kOpen:
        break;  // a request admitted before the circuit opened
    }
  }

  // The state now (an open circuit whose timeout passed turns half-open).
  State state() noexcept {
    detail::MutexLock lock(&mu_);
    advance();
    return state_;
  }

  // Whether a selection may pick the worker now: closed, or half-open with a
  // free probe.
  bool admits() noexcept {
    detail::MutexLock lock(&mu_);
    advance();
    return state_ == State::kClosed ||
           (state_ == State::kHalfOpen && probes_ < opt_.half_open_max_probes);
  }

  // Counts transitions, for metrics.
  std::uint64_t transitions() noexcept {
    detail::MutexLock lock(&mu_);
    return transitions_;
  }
  std::uint32_t consecutive_failures() noexcept {
    detail::MutexLock lock(&mu_);
    return failures_;
  }

 private:
  void advance() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (state_ == State::kOpen && clock_->now().count() - opened_ns_ >= opt_.open_timeout.count()) {
      enter(State::kHalfOpen);
    }
  }
  void enter(State s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    state_ = s;
    ++transitions_;
    failures_ = 0;
    successes_ = 0;
    probes_ = 0;
    if (s == State::kOpen) opened_ns_ = clock_->now().count();
  }

  Options opt_;
  const Clock* const clock_;
  detail::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kClosed;
  std::uint32_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint32_t successes_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint32_t probes_ ABSL_GUARDED_BY(mu_) = 0;
  std::int64_t first_failure_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::int64_t opened_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t transitions_ ABSL_GUARDED_BY(mu_) = 0;
};

constexpr std::string_view to_string(CircuitBreaker::State s) noexcept {
  switch (s) {
    case CircuitBreaker::State::kClosed:
      return "closed";
    case CircuitBreaker::State::kOpen:
      return "open";
    case CircuitBreaker::State::kHalfOpen:
      return "half_open";
  }
  return "unknown";
}

// One breaker per worker, kept in step with a WorkerSet: a worker is held out
// of selection (WorkerSet::set_circuit_open) while its breaker does not admit
// requests. A new snapshot is published only when a worker's admission
// changes, so the common path takes no WorkerSet lock. Two threads racing on
// one worker's transition may publish its flag out of order for a moment;
// the next acquire, record or refresh for it sets it right, so call
// refresh() periodically (it is what lets open circuits back in anyway).
class Breakers {
 public:
  // `circuits` (a WorkerSet, or Router::circuits()) must outlive this
  // object.
  explicit Breakers(CircuitSwitch circuits, CircuitBreaker::Options o = {}) noexcept
      : workers_(circuits), opt_(o) {}

  // Asks to send a request to `id` (a worker the selection just returned).
  CircuitBreaker::Permit acquire(WorkerId id) noexcept {
    std::shared_ptr<Entry> e = entry(id);
    if (e == nullptr) return {true, false};  // out of memory: fail open
    const CircuitBreaker::Permit p = e->breaker.acquire();
    sync(id, *e);
    return p;
  }

  // Records the outcome of the request sent to `id` with `p`.
  void record(WorkerId id, const CircuitBreaker::Permit& p, bool success) noexcept {
    std::shared_ptr<Entry> e = entry(id);
    if (e == nullptr) return;
    e->breaker.record(p, success);
    sync(id, *e);
  }

  // Lets workers whose open timeout has passed back into selection (as
  // half-open), and re-publishes every worker's admission. Cost O(breakers).
  void refresh() noexcept {
    std::vector<std::pair<WorkerId, std::shared_ptr<Entry>>> all;
    {
      detail::ReaderMutexLock lock(&mu_);
      try {
        all.reserve(entries_.size());
        for (auto& [id, e] : entries_) all.emplace_back(WorkerId{id}, e);
      } catch (...) {
        return;
      }
    }
    for (auto& [id, e] : all) {
      e->published_open.store(!e->breaker.admits(), std::memory_order_relaxed);
      workers_.set_circuit_open(id, e->published_open.load(std::memory_order_relaxed))
          .IgnoreError();
    }
  }

  // The breaker's state; kClosed for a worker never seen.
  CircuitBreaker::State state(WorkerId id) noexcept {
    std::shared_ptr<Entry> e = find(id);
    return e == nullptr ? CircuitBreaker::State::kClosed : e->breaker.state();
  }

  // Forgets a removed worker's breaker.
  void forget(WorkerId id) noexcept {
    detail::MutexLock lock(&mu_);
    entries_.erase(id.value);
  }

 private:
  struct Entry {
    explicit Entry(const CircuitBreaker::Options& o) : breaker(o) {}
    CircuitBreaker breaker;
    std::atomic<bool> published_open{false};
  };

  std::shared_ptr<Entry> find(WorkerId id) noexcept {
    detail::ReaderMutexLock lock(&mu_);
    auto it = entries_.find(id.value);
    return it == entries_.end() ? nullptr : it->second;
  }
  std::shared_ptr<Entry> entry(WorkerId id) noexcept {
    if (auto e = find(id)) return e;
    try {
      detail::MutexLock lock(&mu_);
      auto& slot = entries_[id.value];
      if (!slot) slot = std::make_shared<Entry>(opt_);
      return slot;
    } catch (...) {
      return nullptr;
    }
  }
  // Publishes a change of admission only.
  void sync(WorkerId id, Entry& e) noexcept {
    const bool open = !e.breaker.admits();
    if (e.published_open.exchange(open, std::memory_order_relaxed) != open) {
      workers_.set_circuit_open(id, open).IgnoreError();  // NotFound: removed
    }
  }

  CircuitSwitch workers_;
  const CircuitBreaker::Options opt_;
  detail::Mutex mu_;
  absl::flat_hash_map<std::uint32_t, std::shared_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
};

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_CIRCUIT_BREAKER_HPP_
