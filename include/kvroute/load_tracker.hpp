// -----------------------------------------------------------------------------
// File: kvroute/load_tracker.hpp
// -----------------------------------------------------------------------------
//
// `kvroute::LoadTracker` counts, per worker, the requests in flight, the
// tokens they carry, the distinct routing keys active on it and the requests
// ever dispatched to it, and answers "how loaded is worker w" in O(1) without
// taking a lock. It also keeps the last load a host probed from the worker
// itself (for example the token count of SGLang's /get_load), which
// power_of_two prefers when it is known for both candidates.
//
// The in-flight count is raised by `dispatch()` and lowered by the returned
// `LoadGuard` on every end path: `release()` on completion, or the guard's
// destructor on error, cancellation, an exception or a client disconnect. A
// load signal that is right at decision time is what keeps min-load policies
// from sending everything to one worker.
//
// Counters are indexed by WorkerId and live as long as the tracker (ids are
// never reused), so a guard outliving its worker's removal stays valid.
//
// Thread safety: thread-safe. Reads and the in-flight updates are lock-free
// atomics; only `dispatch` with a routing key takes a short, sharded lock to
// maintain the distinct-key counts. The tracker must outlive its guards.
//
// Example:
//
//   kvroute::LoadTracker load;
//   {
//     kvroute::LoadGuard g = load.dispatch(kvroute::WorkerId{2}, {.tokens = 512});
//     // load.in_flight(WorkerId{2}) == 1, load.in_flight_tokens(...) == 512
//   }  // guard destroyed: back to 0
//   // load.processed(WorkerId{2}) == 1

#ifndef KVROUTE_LOAD_TRACKER_HPP_
#define KVROUTE_LOAD_TRACKER_HPP_

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "kvroute/config.hpp"
#include "kvroute/detail/mutex.hpp"
#include "kvroute/detail/stable_hash.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN

class LoadTracker;

// What a dispatch carries besides the request itself.
struct DispatchInfo {
  // Tokens the request adds to the worker's queue (for example its uncached
  // prompt tokens); 0 when the host does not count tokens.
  std::int64_t tokens = 0;
  // The request's routing key (x-smg-routing-key), counted once per worker
  // while any request with it is in flight; empty for none.
  std::string_view routing_key{};
};

// A load probe's answer, as power_of_two reads it.
struct ReportedLoad {
  enum class State : std::uint8_t { kUnknown, kKnown, kFailed };
  State state = State::kUnknown;
  std::int64_t value = 0;  // meaningful when state == kKnown
};

// Holds one in-flight request on one worker. Move-only. Lowers the counts it
// raised exactly once: at `release()` or destruction, whichever comes first.
// [[nodiscard]]: a guard dropped where it is made ends the load at once.
class [[nodiscard]] LoadGuard {
 public:
  LoadGuard() noexcept = default;
  LoadGuard(const LoadGuard&) = delete;
  LoadGuard& operator=(const LoadGuard&) = delete;
  LoadGuard(LoadGuard&& o) noexcept { *this = std::move(o); }
  LoadGuard& operator=(LoadGuard&& o) noexcept;
  ~LoadGuard() { release(); }

  // Ends the request's load. Idempotent. Never throws.
  void release() noexcept;

  // Ends only the request's token load (say, when prefill completes and the
  // tokens no longer queue), keeping it in flight. Idempotent.
  void release_tokens() noexcept;

  // Replaces the token load this guard carries with `tokens` (say, when the
  // server reports how much of the prompt it really had to prefill), keeping
  // the request in flight. No-op on an inactive guard. Never throws.
  void set_tokens(std::int64_t tokens) noexcept;

  // The tokens this guard currently carries (0 once released).
  std::int64_t tokens() const noexcept { return tokens_; }

  // True until released (false for a default-constructed guard, or for a
  // dispatch to an id the tracker cannot hold).
  bool active() const noexcept { return tracker_ != nullptr; }
  WorkerId worker() const noexcept { return id_; }

 private:
  friend class LoadTracker;
  LoadTracker* tracker_ = nullptr;
  WorkerId id_;
  std::int64_t tokens_ = 0;
  std::string key_;  // id-prefixed routing key, empty for none
};

class LoadTracker {
 public:
  LoadTracker() noexcept = default;
  LoadTracker(const LoadTracker&) = delete;
  LoadTracker& operator=(const LoadTracker&) = delete;
  ~LoadTracker() {
    for (auto& c : chunks_) delete[] c.load(std::memory_order_relaxed);
  }

  // Allocates `id`'s counters ahead of time so that the first dispatch does
  // not. Returns false for an invalid id or when memory runs out.
  bool reserve(WorkerId id) noexcept { return slot_for_write(id) != nullptr; }

  // Registers one request in flight on `id` and returns the guard that ends
  // it. Never throws; for an invalid id (or out of memory) the guard is
  // inactive and nothing is counted. Allocates only to copy a routing key.
  [[nodiscard]] LoadGuard dispatch(WorkerId id, DispatchInfo info = {}) noexcept {
    LoadGuard g;
    Slot* s = slot_for_write(id);
    if (s == nullptr) return g;
    s->in_flight.fetch_add(1, std::memory_order_relaxed);
    s->processed.fetch_add(1, std::memory_order_relaxed);
    if (info.tokens != 0) {
      s->tokens.fetch_add(info.tokens, std::memory_order_relaxed);
    }
    g.tracker_ = this;
    g.id_ = id;
    g.tokens_ = info.tokens;
    if (!info.routing_key.empty()) add_key(id, *s, info.routing_key, g.key_);
    return g;
  }

  // Requests in flight on `id` (0 for an id never dispatched to): this
  // tracker's own, plus what other routers report (set_remote).
  std::int64_t in_flight(WorkerId id) const noexcept {
    const Slot* s = slot_for_read(id);
    return s ? s->in_flight.load(std::memory_order_relaxed) +
                   s->remote_in_flight.load(std::memory_order_relaxed)
             : 0;
  }
  // Tokens carried by the requests in flight on `id`, this tracker's and
  // other routers'.
  std::int64_t in_flight_tokens(WorkerId id) const noexcept {
    const Slot* s = slot_for_read(id);
    return s ? s->tokens.load(std::memory_order_relaxed) +
                   s->remote_tokens.load(std::memory_order_relaxed)
             : 0;
  }
  // This tracker's own requests and tokens in flight on `id`, without other
  // routers' (what a router reports to the others).
  std::int64_t local_in_flight(WorkerId id) const noexcept {
    const Slot* s = slot_for_read(id);
    return s ? s->in_flight.load(std::memory_order_relaxed) : 0;
  }
  std::int64_t local_in_flight_tokens(WorkerId id) const noexcept {
    const Slot* s = slot_for_read(id);
    return s ? s->tokens.load(std::memory_order_relaxed) : 0;
  }

  // Sets what other routers have in flight on `id` (their sum; see
  // sync/shared_load.hpp), which in_flight and in_flight_tokens add to this
  // tracker's own. Negative values count as 0.
  void set_remote(WorkerId id, std::int64_t in_flight, std::int64_t tokens) noexcept {
    if (Slot* s = slot_for_write(id)) {
      s->remote_in_flight.store(std::max<std::int64_t>(in_flight, 0), std::memory_order_relaxed);
      s->remote_tokens.store(std::max<std::int64_t>(tokens, 0), std::memory_order_relaxed);
    }
  }
  // Requests ever dispatched to `id`.
  std::uint64_t processed(WorkerId id) const noexcept {
    const Slot* s = slot_for_read(id);
    return s ? s->processed.load(std::memory_order_relaxed) : 0;
  }
  // Distinct routing keys with a request in flight on `id`.
  std::int64_t active_keys(WorkerId id) const noexcept {
    const Slot* s = slot_for_read(id);
    return s ? s->active_keys.load(std::memory_order_relaxed) : 0;
  }

  // Records a load probe's answer for `id` (negative values clamp to 0).
  void report_load(WorkerId id, std::int64_t value) noexcept {
    if (Slot* s = slot_for_write(id)) {
      s->reported.store(std::max<std::int64_t>(value, 0), std::memory_order_relaxed);
    }
  }
  // Records that probing `id` failed: its reported load is then unusable,
  // which is different from zero.
  void report_load_failed(WorkerId id) noexcept {
    if (Slot* s = slot_for_write(id)) {
      s->reported.store(kReportFailed, std::memory_order_relaxed);
    }
  }
  // Forgets `id`'s reported load.
  void clear_report(WorkerId id) noexcept {
    if (Slot* s = slot_for_write(id)) {
      s->reported.store(kReportUnknown, std::memory_order_relaxed);
    }
  }
  ReportedLoad reported(WorkerId id) const noexcept {
    const Slot* s = slot_for_read(id);
    const std::int64_t v = s ? s->reported.load(std::memory_order_relaxed) : kReportUnknown;
    if (v == kReportUnknown) return {ReportedLoad::State::kUnknown, 0};
    if (v == kReportFailed) return {ReportedLoad::State::kFailed, 0};
    return {ReportedLoad::State::kKnown, v};
  }

  // Minimum, maximum and sum of the in-flight counts over `workers`.
  struct Stats {
    std::int64_t min = 0;
    std::int64_t max = 0;
    std::int64_t sum = 0;
  };
  Stats stats(std::span<const Worker* const> workers) const noexcept {
    Stats st;
    if (workers.empty()) return st;
    st.min = std::numeric_limits<std::int64_t>::max();
    st.max = std::numeric_limits<std::int64_t>::min();
    for (const Worker* w : workers) {
      const std::int64_t v = in_flight(w->id);
      st.min = std::min(st.min, v);
      st.max = std::max(st.max, v);
      st.sum += v;
    }
    return st;
  }

 private:
  friend class LoadGuard;
  static constexpr std::uint32_t kChunkBits = 10;
  static constexpr std::uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr std::uint32_t kChunks = kMaxWorkerIds >> kChunkBits;
  static constexpr std::int64_t kReportUnknown = -1;
  static constexpr std::int64_t kReportFailed = -2;
  static constexpr std::size_t kKeyShards = 16;

  // One cache line per worker, so that threads updating different workers
  // do not contend.
  struct alignas(64) Slot {
    std::atomic<std::int64_t> in_flight{0};
    std::atomic<std::int64_t> tokens{0};
    std::atomic<std::uint64_t> processed{0};
    std::atomic<std::int64_t> active_keys{0};
    std::atomic<std::int64_t> reported{kReportUnknown};
    std::atomic<std::int64_t> remote_in_flight{0};  // other routers' (set_remote)
    std::atomic<std::int64_t> remote_tokens{0};
  };

  struct KeyShard {
    detail::Mutex mu;
    absl::flat_hash_map<std::string, std::int64_t> counts ABSL_GUARDED_BY(mu);
  };

  const Slot* slot_for_read(WorkerId id) const noexcept {
    if (id.value >= kMaxWorkerIds) return nullptr;
    const Slot* c = chunks_[id.value >> kChunkBits].load(std::memory_order_acquire);
    return c ? &c[id.value & (kChunkSize - 1)] : nullptr;
  }

  Slot* slot_for_write(WorkerId id) noexcept {
    if (id.value >= kMaxWorkerIds) return nullptr;
    std::atomic<Slot*>& cell = chunks_[id.value >> kChunkBits];
    Slot* c = cell.load(std::memory_order_acquire);
    if (KVROUTE_UNLIKELY(c == nullptr)) {
      Slot* fresh = new (std::nothrow) Slot[kChunkSize];
      if (fresh == nullptr) return nullptr;
      if (cell.compare_exchange_strong(c, fresh, std::memory_order_acq_rel)) {
        c = fresh;
      } else {
        delete[] fresh;  // another thread won; `c` holds its chunk
      }
    }
    return &c[id.value & (kChunkSize - 1)];
  }

  KeyShard& shard_for(std::string_view k) noexcept {
    return key_shards_[detail::xxh64(k) % kKeyShards];
  }

  void add_key(WorkerId id, Slot& s, std::string_view key, std::string& out) noexcept {
    // An allocation failure here only loses the distinct-key count.
    try {
      out.resize(sizeof(id.value) + key.size());
      std::memcpy(out.data(), &id.value, sizeof(id.value));
      std::memcpy(out.data() + sizeof(id.value), key.data(), key.size());
      KeyShard& sh = shard_for(out);
      detail::MutexLock lock(&sh.mu);
      if (++sh.counts[out] == 1) {
        s.active_keys.fetch_add(1, std::memory_order_relaxed);
      }
    } catch (...) {
      out.clear();
    }
  }

  void remove_key(WorkerId id, const std::string& k) noexcept {
    KeyShard& sh = shard_for(k);
    bool last = false;
    {
      detail::MutexLock lock(&sh.mu);
      auto it = sh.counts.find(absl::string_view(k));
      if (it == sh.counts.end()) return;
      if (--it->second == 0) {
        sh.counts.erase(it);
        last = true;
      }
    }
    if (last) {
      if (Slot* s = slot_for_write(id)) {
        s->active_keys.fetch_sub(1, std::memory_order_relaxed);
      }
    }
  }

  std::array<std::atomic<Slot*>, kChunks> chunks_{};
  std::array<KeyShard, kKeyShards> key_shards_;
};

inline LoadGuard& LoadGuard::operator=(LoadGuard&& o) noexcept {
  if (this != &o) {
    release();
    tracker_ = std::exchange(o.tracker_, nullptr);
    id_ = o.id_;
    tokens_ = std::exchange(o.tokens_, 0);
    key_ = std::move(o.key_);
    o.key_.clear();
  }
  return *this;
}

inline void LoadGuard::release_tokens() noexcept {
  if (tracker_ == nullptr || tokens_ == 0) return;
  if (auto* s = tracker_->slot_for_write(id_)) {
    s->tokens.fetch_sub(tokens_, std::memory_order_relaxed);
  }
  tokens_ = 0;
}

inline void LoadGuard::set_tokens(std::int64_t tokens) noexcept {
  if (tracker_ == nullptr || tokens == tokens_) return;
  if (auto* s = tracker_->slot_for_write(id_)) {
    s->tokens.fetch_add(tokens - tokens_, std::memory_order_relaxed);
  }
  tokens_ = tokens;
}

inline void LoadGuard::release() noexcept {
  if (tracker_ == nullptr) return;
  release_tokens();
  if (auto* s = tracker_->slot_for_write(id_)) {
    s->in_flight.fetch_sub(1, std::memory_order_relaxed);
  }
  if (!key_.empty()) {
    tracker_->remove_key(id_, key_);
    key_.clear();
  }
  tracker_ = nullptr;
}

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_LOAD_TRACKER_HPP_
