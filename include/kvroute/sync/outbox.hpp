// -----------------------------------------------------------------------------
// File: kvroute/sync/outbox.hpp
// -----------------------------------------------------------------------------
//
// `Outbox`: a StateSink that keeps the changes a policy emits in a bounded
// buffer until the host's transport takes them (drain). When the buffer is
// full, a new change is dropped and counted, never waited for: the
// select_worker path stays bounded in time and memory whatever the
// transport does. A dropped placement costs the other replicas one hint
// (their trees learn the text when it next reaches them); the counter lets
// an operator see it (the router's /metrics).
//
// Thread safety: thread-safe. One short mutex per change and per drain.
//
// Example:
//
//   kvroute::sync::Outbox outbox({.max_bytes = 8 << 20});
//   router.policy().set_state_sink(&outbox);
//   ...
//   std::vector<kvroute::sync::Change> batch;
//   outbox.drain(batch);  // on the host's sender thread

#ifndef KVROUTE_SYNC_OUTBOX_HPP_
#define KVROUTE_SYNC_OUTBOX_HPP_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "kvroute/config.hpp"
#include "kvroute/detail/mutex.hpp"
#include "kvroute/sync/change.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {

class Outbox final : public StateSink {
 public:
  struct Options {
    // The buffer's bound: the bytes of the changes held (model, worker and
    // eight per key, plus a fixed overhead per change).
    std::size_t max_bytes = std::size_t{8} << 20;
  };
  Outbox() noexcept : Outbox(Options{}) {}
  explicit Outbox(Options o) noexcept : max_bytes_(o.max_bytes) {}

  void placed(std::string_view model, std::string_view worker, std::uint32_t first,
              std::span<const std::uint64_t> keys) noexcept override {
    push(model, worker, first, keys, /*forget=*/false);
  }
  void forgot(std::string_view model, std::string_view worker, std::uint32_t first,
              std::span<const std::uint64_t> keys) noexcept override {
    push(model, worker, first, keys, /*forget=*/true);
  }
  void worker_gone(std::string_view worker) noexcept override {
    const std::size_t cost = kOverhead + worker.size();
    detail::MutexLock lock(&mu_);
    if (!room(cost)) return;
    try {
      held_.emplace_back(WorkerGone{std::string(worker)});
      bytes_ += cost;
      accepted_.fetch_add(1, std::memory_order_relaxed);
    } catch (...) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  void pinned(std::string_view model, std::string_view key, std::string_view worker,
              std::int64_t stamp, bool reset) noexcept override {
    const std::size_t cost = kOverhead + model.size() + key.size() + worker.size();
    detail::MutexLock lock(&mu_);
    if (!room(cost)) return;
    try {
      held_.emplace_back(
          Pin{std::string(model), std::string(key), std::string(worker), stamp, reset});
      bytes_ += cost;
      accepted_.fetch_add(1, std::memory_order_relaxed);
    } catch (...) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // Moves every held change to the end of `out` (in the order emitted) and
  // empties the buffer. Returns how many.
  std::size_t drain(std::vector<Change>& out) {
    std::vector<Change> taken;
    {
      detail::MutexLock lock(&mu_);
      taken.swap(held_);
      bytes_ = 0;
    }
    const std::size_t n = taken.size();
    if (out.empty()) {
      out = std::move(taken);
    } else {
      for (Change& c : taken) out.push_back(std::move(c));
    }
    return n;
  }

  // Changes dropped because the buffer was full (or memory ran out).
  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  // Changes accepted since construction.
  std::uint64_t accepted() const noexcept { return accepted_.load(std::memory_order_relaxed); }
  std::size_t held_bytes() const {
    detail::MutexLock lock(&mu_);
    return bytes_;
  }

 private:
  static constexpr std::size_t kOverhead = 64;

  void push(std::string_view model, std::string_view worker, std::uint32_t first,
            std::span<const std::uint64_t> keys, bool forget) noexcept {
    const std::size_t cost = kOverhead + model.size() + worker.size() + 8 * keys.size();
    detail::MutexLock lock(&mu_);
    if (!room(cost)) return;
    try {
      Placement p{std::string(model), std::string(worker), first,
                  std::vector<std::uint64_t>(keys.begin(), keys.end())};
      if (forget) {
        held_.emplace_back(
            Forget{std::move(p.model), std::move(p.worker), p.first, std::move(p.keys)});
      } else {
        held_.emplace_back(std::move(p));
      }
      bytes_ += cost;
      accepted_.fetch_add(1, std::memory_order_relaxed);
    } catch (...) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // Whether a change of `cost` bytes fits; counts it as dropped if not.
  bool room(std::size_t cost) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (bytes_ + cost <= max_bytes_) return true;
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }

  const std::size_t max_bytes_;
  mutable detail::Mutex mu_;
  std::vector<Change> held_ ABSL_GUARDED_BY(mu_);
  std::size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> accepted_{0};
};

}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_OUTBOX_HPP_
