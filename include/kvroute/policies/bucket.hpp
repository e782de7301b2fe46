// -----------------------------------------------------------------------------
// File: kvroute/policies/bucket.hpp
// -----------------------------------------------------------------------------
//
// `kvroute::Bucket`: length-bucketed placement, meant for the prefill leg of
// prefill/decode disaggregation. Each worker owns a range of request lengths
// (L = Unicode code points of the request text), so short and long prompts
// batch with their own kind; when the characters routed in a recent window
// are unbalanced, the least-loaded worker takes the request instead.
//
// Per model (ClusterView::model(), state created when the model's workers
// register, on_workers_changed, or on first use):
//   * Buckets: the members in ascending id order own contiguous inclusive
//     ranges. Initially [0, initial_max_length) is split evenly (gap =
//     initial_max_length / n, worker i gets [i*gap, (i+1)*gap - 1], the last
//     worker open-ended to kMaxLength); for 3 workers [0,1364], [1365,2729],
//     [2730,MAX]. A membership change (not a health flip) re-applies this
//     split over the new members.
//   * Window: every routed request's (time, L, worker) for the last
//     adjust_interval; a request counts while now - t <= adjust_interval.
//   * Decision: over the healthy members' windowed characters, the pool is
//     imbalanced iff (max - min) > balance_abs_threshold and
//     max > balance_rel_threshold * min (both strict). Imbalanced -> the
//     healthy member with the fewest windowed characters, ties uniformly at
//     random (kBucketImbalanced). Balanced -> the owner of the bucket that
//     contains L (kBucketHit) or, when that owner is unhealthy, the nearest
//     bucket with a healthy owner, walking outward and taking the lower
//     bucket at equal distance (kBucketNeighbor). L is then recorded under
//     the chosen worker.
//   * Adjustment, once per adjust_interval: with a non-empty window,
//     per_bucket = window chars / n; unless this is the first adjustment
//     since (re)initialisation or per_bucket changed more than 2x since the
//     last one, nothing happens; otherwise the ranges are recomputed by
//     `rebucket` over the window's sorted lengths (see there).
//
// Differences from the gateway's bucket policy (sgl-model-gateway), fixing
// the weaknesses its spec lists:
//   * Re-initialisation keeps initial_max_length: the gateway overwrites
//     l_max with usize::MAX after the first split, so every later worker add
//     or remove put practically every length into bucket 0.
//   * Imbalance ties are broken uniformly at random (seeded), not by HashMap
//     iteration order.
//   * The bucket owner is health-checked: an unhealthy owner hands the
//     request to the nearest healthy bucket. The gateway returns the
//     unhealthy worker's URL, which maps to no index, and the request fails
//     with 503.
//   * The imbalance test reads only healthy members (an unhealthy worker's
//     stale window would otherwise force or block rebalancing).
//   * No thread: window expiry and adjustment run lazily from `choose` and
//     from `maintain()`. A late adjustment is computed over the window as it
//     stood at its scheduled tick, so results equal those of a timer (the
//     gateway's adjuster thread never stops, even when the policy is
//     dropped).
//   * The adjustment gate resets on re-initialisation, so the next tick
//     re-buckets for the new member count instead of keeping the even split
//     until load changes 2x.
//   * `rebucket` is a pure static function and is tested directly (the
//     gateway's boundary tests read the wrong model key and pass
//     vacuously).
// A snapshot older than the state (a selection that started before a
// membership change) never re-initialises it back; its decision is resolved
// against that snapshot's healthy workers and falls back to a random healthy
// worker (kRandomFallback) if no bucket owner is among them. Memory
// exhaustion also degrades to kRandomFallback.
//
// Thread safety: thread-safe. Each model's state is behind its own
// detail::Mutex, held for O(workers) per `choose`; the adjustment copies the
// window's lengths under that lock and sorts them outside it. The steady
// state does not allocate: the window is a ring buffer that only grows, and
// only an adjustment that changes the boundaries allocates (its n ranges).
// One policy instance serves one WorkerSet.
//
// Example:
//
//   kvroute::Bucket prefill_policy(kvroute::Bucket::Options{
//       .balance_abs_threshold = 64, .balance_rel_threshold = 1.5});
//   auto d = kvroute::select_worker(prefill_policy, {.text = prompt},
//                                   *prefill_workers.snapshot(), load);
//   // 3 fresh workers: a 100-character prompt goes to the first, a
//   // 3000-character one to the third (d.branch == Branch::kBucketHit).

#ifndef KVROUTE_POLICIES_BUCKET_HPP_
#define KVROUTE_POLICIES_BUCKET_HPP_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "kvroute/clock.hpp"
#include "kvroute/config.hpp"
#include "kvroute/decision.hpp"
#include "kvroute/detail/mutex.hpp"
#include "kvroute/detail/pick.hpp"
#include "kvroute/detail/rng.hpp"
#include "kvroute/detail/utf8.hpp"
#include "kvroute/policy.hpp"
#include "kvroute/request.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN

class Bucket {
 public:
  // The open upper end of the last bucket.
  static constexpr std::uint64_t kMaxLength = std::numeric_limits<std::uint64_t>::max();

  // An inclusive range of request lengths in code points.
  struct Range {
    std::uint64_t lo = 0;
    std::uint64_t hi = 0;
    friend constexpr bool operator==(const Range&, const Range&) = default;
  };

  struct Options {
    // Imbalanced iff (max - min) > abs and max > rel * min, over windowed
    // characters. The gateway's BucketConfig defaults; its CLI passes the
    // shared --balance-abs-threshold / --balance-rel-threshold flags.
    std::uint64_t balance_abs_threshold = 32;
    double balance_rel_threshold = 1.0001;
    // Window length and adjustment period. Requires > 0 (a non-positive
    // value is replaced by the default).
    std::chrono::nanoseconds adjust_interval = std::chrono::seconds(5);
    // The initial split covers [0, initial_max_length).
    std::uint64_t initial_max_length = 4096;
    // Must outlive the policy.
    const Clock* clock = &Clock::steady();
    std::uint64_t seed = detail::kDefaultSeed;
  };

  Bucket() noexcept : Bucket(Options{}) {}
  explicit Bucket(Options o) noexcept
      : abs_threshold_(o.balance_abs_threshold),
        rel_threshold_(o.balance_rel_threshold),
        interval_ns_(o.adjust_interval.count() > 0
                         ? o.adjust_interval.count()
                         : std::chrono::nanoseconds(std::chrono::seconds(5)).count()),
        initial_max_length_(o.initial_max_length),
        clock_(o.clock != nullptr ? o.clock : &Clock::steady()),
        rng_(o.seed) {
    KVROUTE_ASSERT(o.adjust_interval.count() > 0, "Bucket: adjust_interval must be positive");
  }

  Bucket(const Bucket&) = delete;
  Bucket& operator=(const Bucket&) = delete;

  std::string_view name() const noexcept { return "bucket"; }

  Decision choose(const RequestView& r, const ClusterView& c) noexcept {
    const std::span<const Worker* const> healthy = c.eligible();
    if (healthy.empty()) return c.no_worker();
    const std::uint64_t len = detail::utf8_count(r.text);
    const std::int64_t now = clock_->now().count();
    ModelState* st = state_for(c, now);
    if (st == nullptr) return random_fallback(healthy);
    maybe_adjust(*st, now);

    detail::MutexLock lock(&st->mu);
    if (!sync_membership(*st, c)) return random_fallback(healthy);
    expire(*st, now);
    const Worker* w = nullptr;
    Branch branch = Branch::kBucketHit;
    if (imbalanced(*st, healthy)) {
      const std::span<const WorkerId> ids = st->workers;
      const std::span<const std::uint64_t> chars = st->chars;
      w = detail::pick_min(
          healthy, [ids, chars](const Worker& x) { return chars_in(ids, chars, x.id); }, rng_);
      branch = Branch::kBucketImbalanced;
    } else {
      w = bucket_owner(*st, healthy, len, branch);
      if (w == nullptr) {
        const Decision d = random_fallback(healthy);
        w = d.worker;
        branch = d.branch;
      }
    }
    record(*st, now, len, w->id);
    return Decision::pick(w, branch);
  }

  // Forgets `id`'s windowed characters in every model. Its requests stay in
  // the window as length samples; its bucket passes to a neighbour until the
  // membership change re-initialises the buckets.
  void on_worker_removed(WorkerId id) noexcept {
    detail::ReaderMutexLock models(&models_mu_);
    auto drop = [id](ModelState& st) {
      detail::MutexLock lock(&st.mu);
      const std::size_t i = index_of(st, id);
      if (i < st.chars.size()) st.chars[i] = 0;
      for (std::size_t k = 0; k < st.window.size(); ++k) {
        if (st.window[k].worker == id) st.window[k].worker = WorkerId{};
      }
    };
    for (auto& [model, st] : models_) drop(*st);
    if (wildcard_ != nullptr) drop(*wildcard_);
  }

  // Workers joined or left: every group of the new membership gets its
  // buckets now (boundaries() shows them before the first request).
  void on_workers_changed(const WorkerSnapshot& snapshot) noexcept {
    const std::int64_t now = clock_->now().count();
    snapshot.for_each_group([&](const ModelGroup& g) {
      const ClusterView c(snapshot, g, nullptr);
      if (ModelState* st = state_for(c, now)) {
        detail::MutexLock lock(&st->mu);
        sync_membership(*st, c);
      }
    });
  }

  // Expires every model's window to now and runs any adjustment that is due.
  void maintain() noexcept {
    detail::ReaderMutexLock models(&models_mu_);
    auto run = [this](ModelState& st) {
      const std::int64_t now = clock_->now().count();
      maybe_adjust(st, now);
      detail::MutexLock lock(&st.mu);
      expire(st, now);
    };
    for (auto& [model, st] : models_) run(*st);
    if (wildcard_ != nullptr) run(*wildcard_);
  }

  // The buckets of `model` ("" for the all-workers group), in ascending
  // worker id order; empty before its workers register through a Router
  // (on_workers_changed) or its first request. Allocates.
  std::vector<std::pair<WorkerId, Range>> boundaries(std::string_view model) const {
    std::vector<std::pair<WorkerId, Range>> out;
    detail::ReaderMutexLock models(&models_mu_);
    const ModelState* st = find_named(model);
    if (st == nullptr) return out;
    detail::MutexLock lock(&st->mu);
    for (std::size_t i = 0; i < st->workers.size(); ++i) {
      out.emplace_back(st->workers[i], st->ranges[i]);
    }
    return out;
  }

  // The windowed characters of `model`'s workers as of the last call or
  // `maintain()`, in ascending worker id order. Allocates.
  std::vector<std::pair<WorkerId, std::uint64_t>> window_chars(std::string_view model) const {
    std::vector<std::pair<WorkerId, std::uint64_t>> out;
    detail::ReaderMutexLock models(&models_mu_);
    const ModelState* st = find_named(model);
    if (st == nullptr) return out;
    detail::MutexLock lock(&st->mu);
    for (std::size_t i = 0; i < st->workers.size(); ++i) {
      out.emplace_back(st->workers[i], st->chars[i]);
    }
    return out;
  }

  // The initial split of [0, max_length) over `workers` buckets: gap =
  // max(1, max_length / workers), bucket i is [i*gap, (i+1)*gap - 1] and
  // the last one ends at kMaxLength. Empty for 0 workers.
  static std::vector<Range> initial_split(std::size_t workers, std::uint64_t max_length) {
    std::vector<Range> out(workers);
    if (workers == 0) return out;
    const std::uint64_t gap = std::max<std::uint64_t>(1, max_length / workers);
    for (std::size_t i = 0; i < workers; ++i) {
      out[i].lo = sat_mul(i, gap);
      out[i].hi = sat_add(out[i].lo, gap - 1);
    }
    out.back().hi = kMaxLength;
    return out;
  }

  // Re-buckets `workers` buckets over a window's request lengths (ascending)
  // so that each bucket carries about `per_bucket` characters. Walking the
  // buckets in order from upper = 0: take lengths from the current position
  // until their sum reaches per_bucket (at least one); with `len` the one
  // that completed the sum, the bucket is [upper, end] where end = upper +
  // per_bucket if len <= upper, else len, and upper = end + 1. When the
  // lengths run out first, each remaining bucket gets [upper, upper +
  // per_bucket]. The last bucket always gets [upper, kMaxLength]. Arithmetic
  // saturates at kMaxLength.
  //
  // Example: lengths 5, 10, 15, 20, 24, 26 over 3 buckets with per_bucket
  // 33 (100 / 3) give [0,20], [21,26], [27,MAX].
  static std::vector<Range> rebucket(std::span<const std::uint64_t> sorted_lengths,
                                     std::size_t workers, std::uint64_t per_bucket) {
    std::vector<Range> out(workers);
    std::uint64_t upper = 0;
    std::size_t pos = 0;
    for (std::size_t i = 0; i < workers; ++i) {
      if (i + 1 == workers) {
        out[i] = {upper, kMaxLength};
        break;
      }
      std::uint64_t end = sat_add(upper, per_bucket);
      if (pos < sorted_lengths.size()) {
        std::uint64_t sum = 0;
        std::uint64_t last = 0;
        bool reached = false;
        while (pos < sorted_lengths.size()) {
          last = sorted_lengths[pos++];
          sum = sat_add(sum, last);
          if (sum >= per_bucket) {
            reached = true;
            break;
          }
        }
        if (reached && last > upper) end = last;
      }
      out[i] = {upper, end};
      upper = sat_add(end, 1);
    }
    return out;
  }

 private:
  struct Sample {
    std::int64_t t_ns = 0;
    std::uint64_t chars = 0;
    WorkerId worker{};  // invalid once its worker was removed
  };

  // A FIFO that reuses its storage; it grows (doubling) and never shrinks.
  class SampleRing {
   public:
    bool empty() const noexcept { return size_ == 0; }
    std::size_t size() const noexcept { return size_; }
    Sample& operator[](std::size_t i) noexcept { return buf_[(head_ + i) % buf_.size()]; }
    const Sample& operator[](std::size_t i) const noexcept {
      return buf_[(head_ + i) % buf_.size()];
    }
    const Sample& front() const noexcept { return buf_[head_]; }
    void pop_front() noexcept {
      head_ = (head_ + 1) % buf_.size();
      --size_;
    }
    // Returns false when growing fails (out of memory).
    bool push_back(const Sample& s) noexcept {
      if (size_ == buf_.size()) {
        try {
          std::vector<Sample> next(std::max<std::size_t>(64, 2 * buf_.size()));
          for (std::size_t i = 0; i < size_; ++i) next[i] = (*this)[i];
          buf_.swap(next);
          head_ = 0;
        } catch (...) {
          return false;
        }
      }
      buf_[(head_ + size_) % buf_.size()] = s;
      ++size_;
      return true;
    }

   private:
    std::vector<Sample> buf_;
    std::size_t head_ = 0;
    std::size_t size_ = 0;
  };

  struct ModelState {
    // Taken before `mu`; serialises adjustments and guards their scratch.
    detail::Mutex adjust_mu;
    std::vector<std::uint64_t> scratch ABSL_GUARDED_BY(adjust_mu);
    // The next scheduled adjustment tick; the caller that advances it runs
    // the adjustment.
    std::atomic<std::int64_t> next_adjust_ns{0};

    mutable detail::Mutex mu;
    bool initialised ABSL_GUARDED_BY(mu) = false;
    std::uint64_t version ABSL_GUARDED_BY(mu) = 0;
    // Parallel, ascending worker id order.
    std::vector<WorkerId> workers ABSL_GUARDED_BY(mu);
    std::vector<Range> ranges ABSL_GUARDED_BY(mu);
    std::vector<std::uint64_t> chars ABSL_GUARDED_BY(mu);
    // Characters of every request in the window, attributed or not.
    std::uint64_t total ABSL_GUARDED_BY(mu) = 0;
    // per_bucket at the last adjustment; 0 = none since (re)initialisation.
    std::uint64_t per_bucket ABSL_GUARDED_BY(mu) = 0;
    SampleRing window ABSL_GUARDED_BY(mu);
  };

  static std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) noexcept {
    return a > kMaxLength - b ? kMaxLength : a + b;
  }
  static std::uint64_t sat_mul(std::uint64_t a, std::uint64_t b) noexcept {
    return (b != 0 && a > kMaxLength / b) ? kMaxLength : a * b;
  }

  // A uniformly random healthy worker. Requires !healthy.empty().
  Decision random_fallback(std::span<const Worker* const> healthy) noexcept {
    return Decision::pick(healthy[rng_.below(healthy.size())], Branch::kRandomFallback);
  }

  // The all-workers group and a named model's group are keyed by model
  // name; the model-less workers' group (an undeclared model) has model ""
  // too, but different members, so it gets a state of its own.
  static bool is_wildcard(const ClusterView& c) noexcept {
    return c.snapshot() != nullptr && c.model().empty() && c.group() != &c.snapshot()->group("");
  }

  // Returns the state for `c`'s group, creating it on first use; null when
  // memory runs out.
  ModelState* state_for(const ClusterView& c, std::int64_t now) noexcept {
    const bool wildcard = is_wildcard(c);
    const std::string_view model = c.model();
    const absl::string_view key(model.data(), model.size());
    {
      detail::ReaderMutexLock lock(&models_mu_);
      if (wildcard) {
        if (wildcard_ != nullptr) return wildcard_.get();
      } else if (auto it = models_.find(key); it != models_.end()) {
        return it->second.get();
      }
    }
    detail::MutexLock lock(&models_mu_);
    try {
      std::unique_ptr<ModelState>* slot = nullptr;
      if (wildcard) {
        slot = &wildcard_;
      } else {
        slot = &models_.try_emplace(std::string(model)).first->second;
      }
      if (*slot == nullptr) {
        *slot = std::make_unique<ModelState>();
        (*slot)->next_adjust_ns.store(sat_add_ns(now, interval_ns_), std::memory_order_relaxed);
      }
      return slot->get();
    } catch (...) {
      return nullptr;
    }
  }

  // The state of the group named `model`, or null.
  const ModelState* find_named(std::string_view model) const
      ABSL_SHARED_LOCKS_REQUIRED(models_mu_) {
    auto it = models_.find(absl::string_view(model.data(), model.size()));
    return it == models_.end() ? nullptr : it->second.get();
  }

  static std::int64_t sat_add_ns(std::int64_t a, std::int64_t b) noexcept {
    return a > std::numeric_limits<std::int64_t>::max() - b
               ? std::numeric_limits<std::int64_t>::max()
               : a + b;
  }

  // Re-initialises the buckets when `c`'s membership is newer than the
  // state's. Returns false when the state is unusable (out of memory before
  // any initialisation).
  bool sync_membership(ModelState& st, const ClusterView& c) noexcept
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu) {
    const std::uint64_t v = c.group()->membership_version();
    if (st.initialised && v <= st.version) return true;
    const std::span<const Worker* const> members = c.members();
    try {
      std::vector<WorkerId> workers;
      workers.reserve(members.size());
      for (const Worker* w : members) workers.push_back(w->id);
      std::vector<Range> ranges = initial_split(workers.size(), initial_max_length_);
      std::vector<std::uint64_t> chars(workers.size(), 0);
      st.workers.swap(workers);
      st.ranges.swap(ranges);
      st.chars.swap(chars);
    } catch (...) {
      return st.initialised;
    }
    for (std::size_t k = 0; k < st.window.size(); ++k) {
      const Sample& s = st.window[k];
      const std::size_t i = index_of(st, s.worker);
      if (i < st.chars.size()) st.chars[i] += s.chars;
    }
    st.version = v;
    st.initialised = true;
    st.per_bucket = 0;
    return true;
  }

  // Position of `id` in st.workers, or st.workers.size().
  static std::size_t index_of(const ModelState& st, WorkerId id) noexcept
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu) {
    auto it = std::lower_bound(st.workers.begin(), st.workers.end(), id);
    if (it == st.workers.end() || *it != id) return st.workers.size();
    return static_cast<std::size_t>(it - st.workers.begin());
  }

  static std::uint64_t chars_of(const ModelState& st, WorkerId id) noexcept
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu) {
    return chars_in(st.workers, st.chars, id);
  }
  // `chars` of the worker `id` in the parallel arrays, 0 when it is absent.
  static std::uint64_t chars_in(std::span<const WorkerId> ids, std::span<const std::uint64_t> chars,
                                WorkerId id) noexcept {
    auto it = std::lower_bound(ids.begin(), ids.end(), id);
    if (it == ids.end() || *it != id) return 0;
    return chars[static_cast<std::size_t>(it - ids.begin())];
  }

  // Drops the samples older than adjust_interval at `now`.
  void expire(ModelState& st, std::int64_t now) const noexcept
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu) {
    while (!st.window.empty() && now - st.window.front().t_ns > interval_ns_) {
      const Sample& s = st.window.front();
      st.total -= std::min(st.total, s.chars);
      const std::size_t i = index_of(st, s.worker);
      if (i < st.chars.size()) st.chars[i] -= std::min(st.chars[i], s.chars);
      st.window.pop_front();
    }
  }

  void record(ModelState& st, std::int64_t now, std::uint64_t len, WorkerId id) noexcept
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu) {
    // Out of memory: the request goes unrecorded.
    if (!st.window.push_back(Sample{now, len, id})) return;
    st.total = sat_add(st.total, len);
    const std::size_t i = index_of(st, id);
    if (i < st.chars.size()) st.chars[i] = sat_add(st.chars[i], len);
  }

  bool imbalanced(const ModelState& st, std::span<const Worker* const> healthy) const noexcept
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu) {
    std::uint64_t mx = 0;
    std::uint64_t mn = kMaxLength;
    for (const Worker* w : healthy) {
      const std::uint64_t v = chars_of(st, w->id);
      mx = std::max(mx, v);
      mn = std::min(mn, v);
    }
    return mx - mn > abs_threshold_ &&
           static_cast<double>(mx) > rel_threshold_ * static_cast<double>(mn);
  }

  static const Worker* find_healthy(std::span<const Worker* const> healthy, WorkerId id) noexcept {
    auto it = std::lower_bound(healthy.begin(), healthy.end(), id,
                               [](const Worker* w, WorkerId v) { return w->id < v; });
    return (it != healthy.end() && (*it)->id == id) ? *it : nullptr;
  }

  // The owner of the bucket containing `len`, or the nearest healthy one;
  // null when no bucket owner is healthy in `healthy`.
  static const Worker* bucket_owner(const ModelState& st, std::span<const Worker* const> healthy,
                                    std::uint64_t len, Branch& branch) noexcept
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu) {
    const std::size_t n = st.ranges.size();
    if (n == 0) return nullptr;
    auto it = std::upper_bound(st.ranges.begin(), st.ranges.end(), len,
                               [](std::uint64_t v, const Range& r) { return v < r.lo; });
    const std::size_t home =
        it == st.ranges.begin() ? 0 : static_cast<std::size_t>(it - st.ranges.begin()) - 1;
    if (const Worker* w = find_healthy(healthy, st.workers[home])) {
      branch = Branch::kBucketHit;
      return w;
    }
    branch = Branch::kBucketNeighbor;
    for (std::size_t d = 1; d < n; ++d) {
      if (home >= d) {
        if (const Worker* w = find_healthy(healthy, st.workers[home - d])) return w;
      }
      if (home + d < n) {
        if (const Worker* w = find_healthy(healthy, st.workers[home + d])) return w;
      }
    }
    return nullptr;
  }

  // Runs the adjustment when its tick has passed; the caller that advances
  // the tick wins. The adjustment sees the window as of the tick.
  void maybe_adjust(ModelState& st, std::int64_t now) noexcept {
    std::int64_t tick = st.next_adjust_ns.load(std::memory_order_relaxed);
    if (now < tick) return;
    // The first tick after `now`.
    const std::int64_t missed = (now - tick) / interval_ns_ + 1;
    const std::int64_t next =
        missed > (std::numeric_limits<std::int64_t>::max() - tick) / interval_ns_
            ? std::numeric_limits<std::int64_t>::max()
            : tick + missed * interval_ns_;
    if (!st.next_adjust_ns.compare_exchange_strong(tick, next, std::memory_order_relaxed)) {
      return;
    }
    adjust(st, tick);
  }

  void adjust(ModelState& st, std::int64_t tick) noexcept ABSL_LOCKS_EXCLUDED(st.mu, st.adjust_mu) {
    detail::MutexLock adjusting(&st.adjust_mu);
    std::uint64_t version = 0;
    std::uint64_t old = 0;
    std::uint64_t per_bucket = 0;
    std::size_t n = 0;
    {
      detail::MutexLock lock(&st.mu);
      if (!st.initialised || st.workers.empty()) return;
      expire(st, tick);
      if (st.window.empty()) return;
      n = st.workers.size();
      per_bucket = st.total / n;
      old = st.per_bucket;
      // Re-bucket the first time, or when per-bucket load changed > 2x.
      if (old != 0 && per_bucket <= 2 * old && old <= 2 * per_bucket) return;
      version = st.version;
      try {
        st.scratch.clear();
        st.scratch.reserve(st.window.size());
      } catch (...) {
        return;
      }
      for (std::size_t k = 0; k < st.window.size(); ++k) {
        st.scratch.push_back(st.window[k].chars);
      }
    }
    std::sort(st.scratch.begin(), st.scratch.end());
    std::vector<Range> ranges;
    try {
      ranges = rebucket(st.scratch, n, per_bucket);
    } catch (...) {
      return;
    }
    detail::MutexLock lock(&st.mu);
    // A re-initialisation in between wins.
    if (st.version != version || st.per_bucket != old || st.workers.size() != n) {
      return;
    }
    st.ranges.swap(ranges);
    st.per_bucket = per_bucket;
  }

  const std::uint64_t abs_threshold_;
  const double rel_threshold_;
  const std::int64_t interval_ns_;
  const std::uint64_t initial_max_length_;
  const Clock* const clock_;
  detail::SharedRng rng_;

  mutable detail::Mutex models_mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<ModelState>> models_ ABSL_GUARDED_BY(models_mu_);
  std::unique_ptr<ModelState> wildcard_ ABSL_GUARDED_BY(models_mu_);
};

static_assert(Policy<Bucket>);

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_POLICIES_BUCKET_HPP_
