// -----------------------------------------------------------------------------
// File: kvroute/sync/redis/detail/counters.hpp
// -----------------------------------------------------------------------------
//
// Not API. The replicator's counters: written by its thread, read by
// stats() from any thread (relaxed atomics: each is a metric on its own,
// no two are read as one).
//
// Thread safety: thread-safe.

#ifndef KVROUTE_SYNC_REDIS_DETAIL_COUNTERS_HPP_
#define KVROUTE_SYNC_REDIS_DETAIL_COUNTERS_HPP_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "kvroute/config.hpp"
#include "kvroute/detail/mutex.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {
namespace redis_detail {

using Counter = std::atomic<std::uint64_t>;

// Unix time in milliseconds (wall clock: compared across machines).
inline std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline std::int64_t unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline void bump(Counter& c, std::uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }
inline std::uint64_t value(const Counter& c) { return c.load(std::memory_order_relaxed); }

struct Counters {
  std::atomic<bool> connected{false};
  std::atomic<bool> caught_up{false};
  std::atomic<std::uint64_t> models{0};
  std::atomic<std::uint64_t> sources{0};
  Counter batches_sent{0}, changes_sent{0}, load_reports_sent{0}, bytes_sent{0};
  Counter pending_batches{0};
  Counter batches_applied{0}, changes_applied{0}, changes_ignored{0}, load_reports_applied{0};
  Counter decode_errors{0};
  Counter reconnects{0}, connect_failures{0}, command_errors{0};
  Counter snapshots_written{0}, snapshots_restored{0}, snapshot_errors{0};
  Counter catch_ups{0}, gaps{0};
  // When the newest batch applied was applied, less when it was sent; -1: none.
  std::atomic<std::int64_t> lag_ns{-1};
  // Unix ms; 0: never.
  std::atomic<std::int64_t> snapshot_written_ms{0};
  std::atomic<std::int64_t> snapshot_restored_ms{0};  // when its writer wrote it

  void set_error(absl::string_view what) {
    detail::MutexLock lock(&mu_);
    last_error_.assign(what.data(), what.size());
  }
  std::string last_error() const {
    detail::MutexLock lock(&mu_);
    return last_error_;
  }

 private:
  mutable detail::Mutex mu_;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace redis_detail
}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_REDIS_DETAIL_COUNTERS_HPP_
