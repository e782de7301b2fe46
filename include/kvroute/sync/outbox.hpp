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
// The buffer is one byte log: a change is appended as a flat record (one
// copy, no allocation once the log has grown to its working size), and
// drain() turns the records into Change values on the caller's thread, the
// transport's, so that building them costs the selections nothing.
//
// Thread safety: thread-safe. One short mutex per change; drain() takes it
// once to swap the log out.
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
#include <cstring>
#include <initializer_list>
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
    // The buffer's bound, in bytes of the log: per change its model,
    // worker (and key) strings, eight bytes per chunk key, the text a
    // placement carries, and a fixed record header.
    std::size_t max_bytes = std::size_t{8} << 20;
  };
  Outbox() noexcept : Outbox(Options{}) {}
  explicit Outbox(Options o) noexcept : max_bytes_(o.max_bytes) {}

  void placed(std::string_view model, std::string_view worker, std::uint32_t first,
              std::span<const std::uint64_t> keys) noexcept override {
    append({.kind = kPlaced, .first = first, .keys = keys.size()}, model, worker, {}, keys);
  }
  void placed_text(std::string_view model, std::string_view worker, std::uint32_t first,
                   std::uint64_t anchor, std::string_view text) noexcept override {
    append({.kind = kPlacedText, .first = first, .stamp = static_cast<std::int64_t>(anchor)}, model,
           worker, text, {});
  }
  void forgot(std::string_view model, std::string_view worker, std::uint32_t first,
              std::span<const std::uint64_t> keys) noexcept override {
    append({.kind = kForgot, .first = first, .keys = keys.size()}, model, worker, {}, keys);
  }
  void cut(std::string_view model, std::string_view worker, std::uint64_t back) noexcept override {
    append({.kind = kCut, .stamp = static_cast<std::int64_t>(back)}, model, worker, {}, {});
  }
  void worker_gone(std::string_view worker) noexcept override {
    append({.kind = kWorkerGone}, {}, worker, {}, {});
  }
  void pinned(std::string_view model, std::string_view key, std::string_view worker,
              std::int64_t stamp, bool reset) noexcept override {
    append({.kind = kPinned, .reset = reset, .stamp = stamp}, model, worker, key, {});
  }

  // Moves every held change to the end of `out` (in the order emitted) and
  // empties the buffer. Returns how many. Allocates (the Change values).
  std::size_t drain(std::vector<Change>& out) {
    detail::MutexLock drain_lock(&drain_mu_);
    taken_.clear();
    {
      detail::MutexLock lock(&mu_);
      log_.swap(taken_);  // the log keeps the capacity the last drain left
    }
    std::size_t n = 0;
    for (std::size_t at = 0; at < taken_.size(); ++n) out.push_back(read(at));
    return n;
  }

  // Changes dropped because the buffer was full (or memory ran out).
  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  // Changes accepted since construction.
  std::uint64_t accepted() const noexcept { return accepted_.load(std::memory_order_relaxed); }
  std::size_t held_bytes() const {
    detail::MutexLock lock(&mu_);
    return log_.size();
  }

 private:
  enum Kind : std::uint8_t { kPlaced, kForgot, kWorkerGone, kPinned, kPlacedText, kCut };
  // A record: this header, then the model, worker and key bytes, then the
  // chunk keys. In process memory only: the wire format is wire.hpp's. A
  // placed text keeps its text in `key`, its anchor in `stamp`; a cut its
  // `back` in `stamp`.
  struct Record {
    Kind kind = kPlaced;
    bool reset = false;
    std::uint32_t first = 0;
    std::size_t keys = 0;
    std::int64_t stamp = 0;
    std::uint32_t model_len = 0, worker_len = 0, key_len = 0;
  };

  void append(Record r, std::string_view model, std::string_view worker, std::string_view key,
              std::span<const std::uint64_t> keys) noexcept {
    r.model_len = static_cast<std::uint32_t>(model.size());
    r.worker_len = static_cast<std::uint32_t>(worker.size());
    r.key_len = static_cast<std::uint32_t>(key.size());
    const std::size_t size =
        sizeof(Record) + model.size() + worker.size() + key.size() + 8 * keys.size();
    detail::MutexLock lock(&mu_);
    if (log_.size() + size > max_bytes_ || key.size() > UINT32_MAX) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    const std::size_t at = log_.size();
    try {
      // Appended piece by piece: a text is copied once, never zeroed first.
      log_.reserve(at + size);
      log_.append(reinterpret_cast<const char*>(&r), sizeof r);
      for (std::string_view part : {model, worker, key}) log_.append(part);
      if (!keys.empty()) log_.append(reinterpret_cast<const char*>(keys.data()), 8 * keys.size());
    } catch (...) {
      log_.resize(at);
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    accepted_.fetch_add(1, std::memory_order_relaxed);
  }

  // The record at `at` of taken_, as a Change; moves `at` past it.
  Change read(std::size_t& at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(drain_mu_) {
    Record r;
    std::memcpy(&r, taken_.data() + at, sizeof r);
    const char* p = taken_.data() + at + sizeof r;
    auto next = [&p](std::size_t n) {
      std::string s(p, n);
      p += n;
      return s;
    };
    std::string model = next(r.model_len);
    std::string worker = next(r.worker_len);
    std::string key = next(r.key_len);
    std::vector<std::uint64_t> keys(r.keys);
    if (r.keys > 0) std::memcpy(keys.data(), p, 8 * r.keys);
    at = static_cast<std::size_t>(p - taken_.data()) + 8 * r.keys;
    switch (r.kind) {
      case kPlaced:
        return Placement{std::move(model), std::move(worker), r.first, std::move(keys)};
      case kForgot:
        return Forget{std::move(model), std::move(worker), r.first, std::move(keys)};
      case kWorkerGone:
        return WorkerGone{std::move(worker)};
      case kPlacedText:
        return Placement{.model = std::move(model),
                         .worker = std::move(worker),
                         .first = r.first,
                         .text = std::move(key),
                         .anchor = static_cast<std::uint64_t>(r.stamp)};
      case kCut:
        return Cut{std::move(model), std::move(worker), static_cast<std::uint64_t>(r.stamp)};
      case kPinned:
        break;
    }
    return Pin{std::move(model), std::move(key), std::move(worker), r.stamp, r.reset};
  }

  const std::size_t max_bytes_;
  mutable detail::Mutex mu_;
  std::string log_ ABSL_GUARDED_BY(mu_);
  detail::Mutex drain_mu_;  // one drain at a time: taken_ is its scratch
  std::string taken_ ABSL_GUARDED_BY(drain_mu_);
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> accepted_{0};
};

}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_OUTBOX_HPP_
