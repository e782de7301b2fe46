// -----------------------------------------------------------------------------
// File: kvroute/policies/manual.hpp
// -----------------------------------------------------------------------------
//
// `kvroute::Manual`: sticky routing by an explicit key. A request carrying an
// `x-smg-routing-key` header goes to the worker that key was pinned to, so
// one conversation (or tenant, or session) keeps its KV cache on one server.
//
// Per (model, routing key) the policy remembers up to two candidate workers
// in insertion order and the time of the last access:
//   * no key (or an empty value): a worker by the assignment mode, nothing
//     stored -> kNoRoutingId;
//   * a new key: a worker by the mode, stored -> kVacant;
//   * a known key: the first candidate that is a healthy member of the
//     request's group -> kOccupiedHit; if none is, a worker by the mode is
//     appended (the oldest candidate dropped when there are already two)
//     -> kOccupiedMiss. So after a failover and recovery the original worker
//     wins again; after two failovers it is forgotten.
// Assignment modes: kRandom (uniform over the healthy workers), kMinLoad
// (least in-flight requests) and kMinGroup (least distinct routing keys in
// flight, LoadTracker::active_keys); ties are broken uniformly at random.
//
// Idle entries expire: an entry idle for max_idle or longer counts as absent
// at once (the TTL is exact), and a sweep removes such entries every
// eviction_interval, run lazily from `choose` (one caller wins the sweep) or
// whenever the host calls `maintain()`. There is no background thread.
//
// Differences from the gateway's manual policy (sgl-model-gateway):
//   * Entries are scoped by the request's model as well as the key (the
//     gateway keys by the raw header value only, so two models sharing a key
//     evict each other's pins). Prefill and decode legs use separate policy
//     instances and so never share entries.
//   * A header value is opaque bytes: a non-UTF-8 value is a key like any
//     other (the gateway treats it as absent).
//   * Candidates are stable WorkerIds, not URLs, and `on_worker_removed`
//     drops a removed worker from every candidate list, so a dead worker
//     does not keep one of the two slots.
//   * TTL expiry is exact rather than sweep-granular, and the sweep has no
//     thread of its own. max_idle <= 0 disables expiry altogether;
//     eviction_interval <= 0 disables only the lazy sweep (expired entries
//     still count as absent, are overwritten when their key returns and are
//     removed by `maintain()`).
//   * min_load / min_group read the LoadTracker, so their loads are right at
//     decision time on every path (the gateway's regular HTTP router tracks
//     load only for cache_aware and manual).
//
// Memory: one entry per live (model, key); a key is copied once, when it is
// first stored. There is no bound other than the TTL, as in the gateway.
//
// Thread safety: thread-safe. The map is split into 32 shards, each behind
// its own detail::Mutex held for one lookup (and the O(healthy workers) pick on
// a miss); `choose` on a known key does not allocate.
//
// Example:
//
//   kvroute::Router<kvroute::Manual> router(kvroute::Manual::Options{
//       .mode = kvroute::Manual::AssignmentMode::kMinGroup});
//   kvroute::Header h[] = {{"x-smg-routing-key", "session-17"}};
//   auto s = router.select({.headers = h});   // kVacant, then kOccupiedHit
//   auto guard = router.dispatch(s, {.routing_key = "session-17"});

#ifndef KVROUTE_POLICIES_MANUAL_HPP_
#define KVROUTE_POLICIES_MANUAL_HPP_

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "kvroute/clock.hpp"
#include "kvroute/config.hpp"
#include "kvroute/decision.hpp"
#include "kvroute/detail/mutex.hpp"
#include "kvroute/detail/pick.hpp"
#include "kvroute/detail/pin_list.hpp"
#include "kvroute/detail/rng.hpp"
#include "kvroute/detail/stable_hash.hpp"
#include "kvroute/detail/sync/manual_snapshot.hpp"
#include "kvroute/load_tracker.hpp"
#include "kvroute/policy.hpp"
#include "kvroute/policy_config.hpp"
#include "kvroute/request.hpp"
#include "kvroute/sync/change.hpp"
#include "kvroute/sync/snapshot.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN

class Manual {
 public:
  // How a worker is chosen for a key without a usable candidate
  // (policy_config.hpp): kRandom, uniform over the healthy workers; kMinLoad,
  // least in-flight requests; kMinGroup, least distinct routing keys in
  // flight.
  using AssignmentMode = kvroute::AssignmentMode;

  // Candidates remembered per key (the gateway's MAX_CANDIDATE_WORKERS).
  static constexpr std::size_t kMaxCandidates = 2;

  struct Options {
    AssignmentMode mode = AssignmentMode::kRandom;
    // An entry idle this long or longer is gone. <= 0: entries never expire.
    std::chrono::nanoseconds max_idle = std::chrono::seconds(14400);
    // How often `choose` sweeps expired entries out. <= 0: never (only
    // `maintain()` sweeps).
    std::chrono::nanoseconds eviction_interval = std::chrono::seconds(120);
    // Must outlive the policy.
    const Clock* clock = &Clock::steady();
    std::uint64_t seed = detail::kDefaultSeed;
  };

  // One entry as `entry()` reports it.
  struct EntryInfo {
    std::vector<WorkerId> candidates{};  // oldest first
    std::chrono::nanoseconds last_access{};
  };

  Manual() noexcept : Manual(Options{}) {}
  explicit Manual(Options o) noexcept
      : mode_(o.mode),
        clock_(o.clock != nullptr ? o.clock : &Clock::steady()),
        max_idle_ns_(o.max_idle.count()),
        interval_ns_(o.eviction_interval.count()),
        rng_(o.seed),
        next_sweep_ns_(sat_add(clock_->now().count(), interval_ns_)) {}

  Manual(const Manual&) = delete;
  Manual& operator=(const Manual&) = delete;

  std::string_view name() const noexcept { return "manual"; }

  Decision choose(const RequestView& r, const ClusterView& c) noexcept {
    const std::span<const Worker* const> healthy = c.eligible();
    if (healthy.empty()) return c.no_worker();
    const std::int64_t now = clock_->now().count();
    maybe_sweep(now);
    const std::optional<std::string_view> key = r.header(kRoutingKeyHeader);
    if (!key.has_value() || key->empty()) {
      return Decision::pick(assign(c), Branch::kNoRoutingId);
    }

    const KeyView kv{r.model, *key};
    const std::size_t h = KeyHash{}(kv);
    Shard& s = shard_for(h);
    detail::MutexLock lock(&s.mu);
    auto it = s.map.find(kv);
    if (it != s.map.end()) {
      Entry& e = it->second;
      if (!expired(e, now)) {
        e.last_access_ns = std::max(e.last_access_ns, now);
        for (std::uint8_t i = 0; i < e.pins.count; ++i) {
          if (const Worker* w = find_healthy(healthy, e.pins.at[i].id)) {
            return Decision::pick(w, Branch::kOccupiedHit);
          }
        }
        const Worker* w = assign(c);
        pin(kv, e, *w, now, /*reset=*/false);
        return Decision::pick(w, Branch::kOccupiedMiss);
      }
      // Idle for max_idle or longer: the key is new again.
      const Worker* w = assign(c);
      pin(kv, e, *w, now, /*reset=*/true);
      return Decision::pick(w, Branch::kVacant);
    }
    const Worker* w = assign(c);
    try {
      auto [fresh, unused] =
          s.map.emplace(OwnedKey{std::string(kv.model), std::string(kv.key)}, Entry{});
      size_.fetch_add(1, std::memory_order_relaxed);
      pin(kv, fresh->second, *w, now, /*reset=*/true);
    } catch (...) {
      // Out of memory: route this request statelessly; the key stays new.
    }
    return Decision::pick(w, Branch::kVacant);
  }

  // Replicas (sync/change.hpp): emits every pin (a key's new or added
  // candidate) to `sink` (null: stop), and merges pins from other replicas
  // (detail/pin_list.hpp: replicas that merged the same pins agree on each
  // key's candidates and their order). Each replica keeps its own access
  // times: an entry expires where it was idle. A hit is not a pin and is not
  // shared, so a key used only on one replica for max_idle expires on the
  // others, and a request for it there pins it afresh for every replica.
  void set_state_sink(sync::StateSink* sink) noexcept {
    sink_.store(sink, std::memory_order_release);
  }
  sync::Applied apply_change(const sync::Change& change, const WorkerSnapshot& snapshot) noexcept {
    if (const auto* gone = std::get_if<sync::WorkerGone>(&change)) {
      const Worker* w = snapshot.find_url(gone->worker);
      if (w == nullptr) return sync::Applied::kUnknownWorker;
      drop_candidate(w->id);
      return sync::Applied::kApplied;
    }
    const auto* p = std::get_if<sync::Pin>(&change);
    if (p == nullptr) return sync::Applied::kNotShared;  // the tree policies'
    const Worker* w = snapshot.find_url(p->worker);
    if (w == nullptr || (!w->model.empty() && w->model != p->model)) {
      return sync::Applied::kUnknownWorker;
    }
    const KeyView kv{p->model, p->key};
    Shard& s = shard_for(KeyHash{}(kv));
    const std::int64_t now = clock_->now().count();
    detail::MutexLock lock(&s.mu);
    try {
      auto [it, inserted] = s.map.try_emplace(OwnedKey{p->model, p->key});
      if (inserted) size_.fetch_add(1, std::memory_order_relaxed);
      Entry& e = it->second;
      if (!inserted && expired(e, now)) e = Entry{};
      e.pins.merge(w->id, p->stamp, detail::xxh64(w->url), p->reset);
      e.last_access_ns = std::max(e.last_access_ns, now);
    } catch (...) {
      return sync::Applied::kOutOfMemory;
    }
    return sync::Applied::kApplied;
  }

  // Snapshots (sync/snapshot.hpp): one model's sticky table, each key with
  // its candidates (worker URL and pin stamp), its list's epoch and how
  // long before the save it was last used. Candidates `workers` does not
  // have and expired keys are left out. Restoring merges every candidate
  // as a pin from another replica (idempotent, in agreement with the
  // replicas' pins) and sets a key's last access to now - its saved age
  // (or keeps the live entry's, if later).
  std::vector<std::string> models() const;
  absl::StatusOr<std::string> save_state(std::string_view model,
                                         const WorkerSnapshot& workers) const noexcept;
  absl::StatusOr<sync::RestoreResult> restore_state(std::string_view bytes,
                                                    const WorkerSnapshot& workers) noexcept;

  // Drops `id` from every candidate list; entries left with no candidate
  // are removed. A selection racing with this call over a snapshot that
  // still holds `id` may append it again; such a stale id is never returned
  // (it is in no later snapshot) and ages out with its entry. With a state
  // sink, the other replicas are told (WorkerGone).
  // Complexity: O(entries).
  void on_worker_removed(WorkerId id) noexcept {
    drop_candidate(id);
    sync::StateSink* sink = sink_.load(std::memory_order_acquire);
    if (sink == nullptr) return;
    std::string url;
    {
      detail::MutexLock lock(&urls_mu_);
      auto it = urls_.find(id.value);
      if (it == urls_.end()) return;
      url = it->second;
    }
    sink->worker_gone(url);
  }

  // Keeps the URL of every worker, to name a removed one to other replicas.
  void on_workers_changed(const WorkerSnapshot& snapshot) noexcept {
    detail::MutexLock lock(&urls_mu_);
    try {
      for (const Worker& w : snapshot.workers()) urls_[w.id.value] = w.url;
    } catch (...) {
    }
  }

  // Removes every expired entry now, whatever eviction_interval says.
  // Complexity: O(entries); locks one shard at a time.
  void maintain() noexcept { sweep(clock_->now().count()); }

  // Entries stored, including expired ones not yet swept. Complexity: O(1).
  std::size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }

  // The stored entry for (model, key), expired or not; nullopt when there is
  // none. For tests and debugging: allocates.
  std::optional<EntryInfo> entry(std::string_view model, std::string_view key) const {
    const KeyView kv{model, key};
    const Shard& s = shard_for(KeyHash{}(kv));
    detail::MutexLock lock(&s.mu);
    auto it = s.map.find(kv);
    if (it == s.map.end()) return std::nullopt;
    EntryInfo info;
    for (std::uint8_t i = 0; i < it->second.pins.count; ++i) {
      info.candidates.push_back(it->second.pins.at[i].id);
    }
    info.last_access = std::chrono::nanoseconds(it->second.last_access_ns);
    return info;
  }

 private:
  static constexpr std::size_t kShardBits = 5;
  static constexpr std::size_t kShards = std::size_t{1} << kShardBits;

  struct Entry {
    detail::PinList pins{};  // the candidates, oldest first
    std::int64_t last_access_ns = 0;
  };
  static_assert(detail::PinList::kMax == kMaxCandidates);

  // Lookups use KeyView, so a known key is found without copying it.
  struct KeyView {
    std::string_view model{};
    std::string_view key{};
  };
  struct OwnedKey {
    std::string model{};
    std::string key{};
  };
  static KeyView view(const KeyView& k) noexcept { return k; }
  static KeyView view(const OwnedKey& k) noexcept { return {k.model, k.key}; }

  struct KeyHash {
    using is_transparent = void;
    template <class K>
    std::size_t operator()(const K& k) const noexcept {
      const KeyView v = view(k);
      return absl::Hash<std::pair<absl::string_view, absl::string_view>>{}(
          {absl::string_view(v.model.data(), v.model.size()),
           absl::string_view(v.key.data(), v.key.size())});
    }
  };
  struct KeyEq {
    using is_transparent = void;
    template <class A, class B>
    bool operator()(const A& a, const B& b) const noexcept {
      const KeyView x = view(a);
      const KeyView y = view(b);
      return x.model == y.model && x.key == y.key;
    }
  };

  struct alignas(64) Shard {
    mutable detail::Mutex mu;
    absl::flat_hash_map<OwnedKey, Entry, KeyHash, KeyEq> map ABSL_GUARDED_BY(mu);
  };

  static std::int64_t sat_add(std::int64_t a, std::int64_t b) noexcept {
    if (b > 0 && a > std::numeric_limits<std::int64_t>::max() - b) {
      return std::numeric_limits<std::int64_t>::max();
    }
    return a + b;
  }

  // Pins `w` for the key (appended, the oldest candidate dropped when the
  // list is full; `reset`: in place of every candidate) and shares the pin.
  // Local pins merge as remote ones do, so that every replica holds the
  // same list.
  void pin(const KeyView& kv, Entry& e, const Worker& w, std::int64_t now, bool reset) noexcept {
    const std::int64_t stamp = e.pins.next_stamp(now);
    e.pins.pin_newest(w.id, stamp, detail::xxh64(w.url), reset);
    e.last_access_ns = std::max(e.last_access_ns, now);
    if (sync::StateSink* sink = sink_.load(std::memory_order_acquire)) {
      sink->pinned(kv.model, kv.key, w.url, stamp, reset);
    }
  }

  // Merges one validated snapshot entry (detail/sync/manual_state-inl.hpp);
  // false when it restored nothing (no candidate is a worker here, or all
  // are older than the live list's epoch).
  bool restore_entry(std::string_view model, const detail::ManualSnapshotView& v,
                     const detail::ManualSnapshotView::Entry& e,
                     const std::vector<const Worker*>& workers, std::int64_t now,
                     sync::RestoreResult& res);

  // Drops `id` from every candidate list; removes entries left empty.
  void drop_candidate(WorkerId id) noexcept {
    for (Shard& s : shards_) {
      detail::MutexLock lock(&s.mu);
      const std::size_t erased = absl::erase_if(s.map, [id](auto& kv) {
        kv.second.pins.remove(id);
        return kv.second.pins.count == 0;
      });
      size_.fetch_sub(erased, std::memory_order_relaxed);
    }
  }

  // The healthy worker with `id`, or null. `healthy` is in ascending id
  // order. Complexity: O(log n).
  static const Worker* find_healthy(std::span<const Worker* const> healthy, WorkerId id) noexcept {
    auto it = std::lower_bound(healthy.begin(), healthy.end(), id,
                               [](const Worker* w, WorkerId v) { return w->id < v; });
    return (it != healthy.end() && (*it)->id == id) ? *it : nullptr;
  }

  bool expired(const Entry& e, std::int64_t now) const noexcept {
    return max_idle_ns_ > 0 && now - e.last_access_ns >= max_idle_ns_;
  }

  // A worker by the assignment mode. Requires !c.eligible().empty().
  const Worker* assign(const ClusterView& c) noexcept {
    const std::span<const Worker* const> healthy = c.eligible();
    switch (mode_) {
      case AssignmentMode::kMinLoad:
        return detail::pick_min(
            healthy, [&c](const Worker& w) { return c.in_flight(w); }, rng_);
      case AssignmentMode::kMinGroup:
        return detail::pick_min(
            healthy,
            [&c](const Worker& w) {
              return c.load() != nullptr ? c.load()->active_keys(w.id) : std::int64_t{0};
            },
            rng_);
      case AssignmentMode::kRandom:
        break;
    }
    return healthy[rng_.below(healthy.size())];
  }

  Shard& shard_for(std::size_t h) noexcept { return shards_[shard_index(h)]; }
  const Shard& shard_for(std::size_t h) const noexcept { return shards_[shard_index(h)]; }
  // The top bits of a re-mixed hash, so that the shard choice does not thin
  // out the bits each shard's table probes with.
  static std::size_t shard_index(std::size_t h) noexcept {
    return static_cast<std::size_t>(detail::splitmix64(static_cast<std::uint64_t>(h)) >>
                                    (64 - kShardBits));
  }

  // Sweeps when the interval has passed; one caller wins each interval.
  void maybe_sweep(std::int64_t now) noexcept {
    if (interval_ns_ <= 0 || max_idle_ns_ <= 0) return;
    std::int64_t next = next_sweep_ns_.load(std::memory_order_relaxed);
    if (now < next) return;
    if (!next_sweep_ns_.compare_exchange_strong(next, sat_add(now, interval_ns_),
                                                std::memory_order_relaxed)) {
      return;
    }
    sweep(now);
  }

  void sweep(std::int64_t now) noexcept {
    if (max_idle_ns_ <= 0) return;
    for (Shard& s : shards_) {
      detail::MutexLock lock(&s.mu);
      const std::size_t erased =
          absl::erase_if(s.map, [&](const auto& kv) { return expired(kv.second, now); });
      size_.fetch_sub(erased, std::memory_order_relaxed);
    }
  }

  const AssignmentMode mode_;
  const Clock* const clock_;
  const std::int64_t max_idle_ns_;
  const std::int64_t interval_ns_;
  detail::SharedRng rng_;
  std::atomic<std::int64_t> next_sweep_ns_;
  std::atomic<std::size_t> size_{0};
  std::array<Shard, kShards> shards_;
  std::atomic<sync::StateSink*> sink_{nullptr};
  mutable detail::Mutex urls_mu_;
  absl::flat_hash_map<std::uint32_t, std::string> urls_ ABSL_GUARDED_BY(urls_mu_);
};

static_assert(Policy<Manual>);

KVROUTE_NAMESPACE_END

// Manual's snapshots, the part that knows the format.
#include "kvroute/detail/sync/manual_state-inl.hpp"

#endif  // KVROUTE_POLICIES_MANUAL_HPP_
