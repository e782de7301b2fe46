// -----------------------------------------------------------------------------
// File: kvroute/sync/shared_load.hpp
// -----------------------------------------------------------------------------
//
// `SharedLoad`: the other replicas' load, merged into what this replica's
// policies see. Each replica reports, now and then, the requests and
// prefill tokens it has in flight per worker (local_loads(), carried by
// Batch::loads); SharedLoad keeps the latest report of every source and
// apply() sets, for each worker of the snapshot, the sum over the sources
// heard from within `ttl` as the LoadTracker's remote part
// (LoadTracker::set_remote). A replica that falls silent (crashed, cut
// off) stops counting after ttl, so its last load does not pin workers
// forever; a replica that restarts reports afresh.
//
// Loads are a sum of snapshots, not of events: a lost report is replaced by
// the next one, and applying one twice changes nothing.
//
// Thread safety: thread-safe (one mutex). apply() writes the tracker's
// remote counts, which selections read with relaxed atomics.
//
// Example:
//
//   kvroute::sync::SharedLoad shared({.ttl = std::chrono::seconds(5)});
//   // receiver thread, per batch from another replica:
//   shared.update(batch.source, batch.loads);
//   shared.apply(*router.workers().snapshot(), router.load());
//   // sender thread, per batch this replica sends:
//   batch.loads = kvroute::sync::local_loads(*snapshot, router.load());

#ifndef KVROUTE_SYNC_SHARED_LOAD_HPP_
#define KVROUTE_SYNC_SHARED_LOAD_HPP_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "kvroute/clock.hpp"
#include "kvroute/config.hpp"
#include "kvroute/detail/mutex.hpp"
#include "kvroute/load_tracker.hpp"
#include "kvroute/sync/wire.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {

// This replica's own load per worker of `snapshot`, to report.
inline std::vector<LoadEntry> local_loads(const WorkerSnapshot& snapshot, const LoadTracker& load) {
  std::vector<LoadEntry> out;
  out.reserve(snapshot.size());
  for (const Worker& w : snapshot.workers()) {
    out.push_back({w.url, load.local_in_flight(w.id), load.local_in_flight_tokens(w.id)});
  }
  return out;
}

class SharedLoad {
 public:
  struct Options {
    // A source not heard from for this long no longer counts.
    std::chrono::nanoseconds ttl = std::chrono::seconds(5);
    // Must outlive this object.
    const Clock* clock = &Clock::steady();
  };
  SharedLoad() : SharedLoad(Options{}) {}
  explicit SharedLoad(Options o)
      : ttl_ns_(o.ttl.count()), clock_(o.clock != nullptr ? o.clock : &Clock::steady()) {}

  // `source`'s load is now `entries` (replacing what it reported before).
  void update(std::string_view source, std::span<const LoadEntry> entries) {
    detail::MutexLock lock(&mu_);
    Source& s = sources_[std::string(source)];
    s.heard_ns = clock_->now().count();
    s.loads.clear();
    for (const LoadEntry& e : entries) s.loads[e.worker] = {e.in_flight, e.tokens};
  }

  // Forgets `source` (it said goodbye, or is this replica itself).
  void forget(std::string_view source) {
    detail::MutexLock lock(&mu_);
    sources_.erase(std::string(source));
  }

  // Sets every worker's remote load in `load`: the sum over live sources.
  // Sources silent for ttl are dropped.
  void apply(const WorkerSnapshot& snapshot, LoadTracker& load) {
    const std::int64_t now = clock_->now().count();
    detail::MutexLock lock(&mu_);
    for (auto it = sources_.begin(); it != sources_.end();) {
      if (now - it->second.heard_ns >= ttl_ns_) {
        sources_.erase(it++);
      } else {
        ++it;
      }
    }
    for (const Worker& w : snapshot.workers()) {
      std::int64_t in_flight = 0, tokens = 0;
      for (const auto& [name, s] : sources_) {
        if (auto l = s.loads.find(w.url); l != s.loads.end()) {
          in_flight += l->second.in_flight;
          tokens += l->second.tokens;
        }
      }
      load.set_remote(w.id, in_flight, tokens);
    }
  }

  // Sources heard from within ttl at the last apply (or since).
  std::size_t sources() const {
    detail::MutexLock lock(&mu_);
    return sources_.size();
  }

 private:
  struct Load {
    std::int64_t in_flight = 0;
    std::int64_t tokens = 0;
  };
  struct Source {
    std::int64_t heard_ns = 0;
    absl::flat_hash_map<std::string, Load> loads;
  };

  const std::int64_t ttl_ns_;
  const Clock* clock_;
  mutable detail::Mutex mu_;
  absl::flat_hash_map<std::string, Source> sources_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_SHARED_LOAD_HPP_
