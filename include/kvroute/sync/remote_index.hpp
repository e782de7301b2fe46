// -----------------------------------------------------------------------------
// File: kvroute/sync/remote_index.hpp
// -----------------------------------------------------------------------------
//
// `RemoteIndex`: what other replicas placed in one model's tree, known by
// chunk keys (chunk_key.hpp) until a request here carries the text behind
// them. A placement from elsewhere records each of its keys with the worker
// that holds the text up to that chunk. A selection here scans its own
// text's chunks from the last one down; at the first key the index knows,
// the text up to the end of that chunk is inserted into the local tree
// under each worker recorded there (the text comes from the request
// itself), and the index forgets the key. From then on the tree answers
// for that prefix as for a local placement.
//
// The bound this gives: once the changes are delivered, a replica's match
// for a text is the sender's to within one chunk (the bytes after the last
// whole chunk of the placed text, which do not travel), for the worker
// that holds the deepest chunk. Two approximations, both documented in
// docs/replicas.md: a worker that holds only a shorter prefix of the text
// is credited when a request reaches its own deepest chunk, not before;
// and two different prefixes that end in the same chunk at the same offset
// are taken for one (the key names the chunk, not the whole prefix).
//
// Bounded: at most max_keys keys in two generations (when the newer one
// fills, the older is dropped whole), and kMaxHolders workers per key.
//
// Thread safety: thread-safe; one mutex, held per batch of probes and per
// change. empty() reads an atomic.

#ifndef KVROUTE_SYNC_REMOTE_INDEX_HPP_
#define KVROUTE_SYNC_REMOTE_INDEX_HPP_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "kvroute/config.hpp"
#include "kvroute/detail/mutex.hpp"
#include "kvroute/sync/chunk_key.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {

class RemoteIndex {
 public:
  static constexpr std::size_t kMaxHolders = 8;
  using Holders = absl::InlinedVector<std::uint32_t, 2>;
  // What take_deepest returns: never allocates.
  using Taken = absl::InlinedVector<std::uint32_t, kMaxHolders>;

  explicit RemoteIndex(std::size_t max_keys = std::size_t{1} << 20) noexcept
      : half_(std::max<std::size_t>(max_keys / 2, 1)) {}
  RemoteIndex(const RemoteIndex&) = delete;
  RemoteIndex& operator=(const RemoteIndex&) = delete;

  // Worker `w` (a tenant id) holds the text up to the end of each chunk
  // whose key is in `keys`. False when out of memory (part recorded).
  bool add(std::uint32_t w, std::span<const std::uint64_t> keys) noexcept {
    detail::MutexLock lock(&mu_);
    try {
      for (std::uint64_t k : keys) {
        Holders& h = slot(k);
        if (std::find(h.begin(), h.end(), w) != h.end()) continue;
        if (h.size() == kMaxHolders) h.erase(h.begin());  // the oldest holder goes
        h.push_back(w);
      }
    } catch (...) {
      publish_size();
      return false;
    }
    publish_size();
    return true;
  }

  // Worker `w` no longer holds the text up to these chunks.
  void remove(std::uint32_t w, std::span<const std::uint64_t> keys) noexcept {
    detail::MutexLock lock(&mu_);
    for (std::uint64_t k : keys) {
      erase_holder(cur_, k, w);
      erase_holder(old_, k, w);
    }
    publish_size();
  }

  // Forgets worker `w` everywhere. Complexity: O(keys).
  void remove_worker(std::uint32_t w) noexcept {
    detail::MutexLock lock(&mu_);
    for (auto* m : {&cur_, &old_}) {
      for (auto it = m->begin(); it != m->end();) {
        Holders& h = it->second;
        h.erase(std::remove(h.begin(), h.end(), w), h.end());
        if (h.empty()) {
          m->erase(it++);
        } else {
          ++it;
        }
      }
    }
    publish_size();
  }

  bool empty() const noexcept { return size_.load(std::memory_order_relaxed) == 0; }
  std::size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }

  // The deepest chunk of `chunks`, at index lo or above, whose key this
  // index holds: takes its holders into `*out` (and forgets the key) and
  // returns the chunk's index; -1 when none (or when computing keys ran
  // out of memory). Keys are computed outside the lock, a batch at a time.
  std::ptrdiff_t take_deepest(TextChunks& chunks, std::size_t lo, Taken* out) noexcept {
    constexpr std::size_t kBatch = 8;
    std::size_t hi = chunks.size();
    while (hi > lo) {
      const std::size_t from = hi - std::min(hi - lo, kBatch);
      if (!chunks.compute_from(from)) return -1;
      detail::MutexLock lock(&mu_);
      for (std::size_t i = hi; i-- > from;) {
        if (take(chunks.key(i), out)) {
          publish_size();
          return static_cast<std::ptrdiff_t>(i);
        }
      }
      hi = from;
    }
    return -1;
  }

 private:
  using Map = absl::flat_hash_map<std::uint64_t, Holders>;

  // The holders of `k` in the newer generation (moved there from the older
  // one if it was known), making room first. May throw.
  Holders& slot(std::uint64_t k) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (auto it = cur_.find(k); it != cur_.end()) return it->second;
    if (cur_.size() >= half_) {
      old_ = std::move(cur_);
      cur_ = Map();
    }
    Holders moved;
    if (auto it = old_.find(k); it != old_.end()) {
      moved = std::move(it->second);
      old_.erase(it);
    }
    return cur_.emplace(k, std::move(moved)).first->second;
  }

  bool take(std::uint64_t k, Taken* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    bool found = false;
    for (auto* m : {&cur_, &old_}) {
      auto it = m->find(k);
      if (it == m->end()) continue;
      for (std::uint32_t w : it->second) {
        if (out->size() < kMaxHolders && std::find(out->begin(), out->end(), w) == out->end()) {
          out->push_back(w);
        }
      }
      m->erase(it);
      found = true;
    }
    return found;
  }

  static void erase_holder(Map& m, std::uint64_t k, std::uint32_t w) {
    auto it = m.find(k);
    if (it == m.end()) return;
    Holders& h = it->second;
    h.erase(std::remove(h.begin(), h.end(), w), h.end());
    if (h.empty()) m.erase(it);
  }

  void publish_size() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    size_.store(cur_.size() + old_.size(), std::memory_order_relaxed);
  }

  const std::size_t half_;
  mutable detail::Mutex mu_;
  Map cur_ ABSL_GUARDED_BY(mu_);
  Map old_ ABSL_GUARDED_BY(mu_);
  std::atomic<std::size_t> size_{0};
};

}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_REMOTE_INDEX_HPP_
