// -----------------------------------------------------------------------------
// File: kvroute/sync/text_store.hpp
// -----------------------------------------------------------------------------
//
// `TextStore`: the recent texts of one model's tree, found by the keys of
// their chunks (chunk_key.hpp), so that a placement whose text travels
// (change.hpp: only the text from chunk `first` on, with the key of chunk
// first - 1 as its anchor) can be put back together: the receiver looks
// the anchor up here and prepends the first `first` chunks of the text it
// finds. The texts come from this replica's placements sent with text and
// from the placements with text it applied: the texts every replica was
// sent whole, so that a sender that finds a prefix here knows the others
// hold it too.
//
// A text is findable by the keys of its chunks from `from` on, the chunks
// it added to what the tree knew; the chunks before are found through the
// texts that brought them. When the text that holds the anchor chunk is
// itself only a prefix of the new one (a chat's previous turn, in whole
// chunks), the new text takes its place, so a session's turns cost one
// copy, not one each. Like RemoteIndex, a key names a chunk at a position,
// and a match on it is a guess that the prefixes are equal too.
//
// Bounded: at most max_bytes bytes of text in two generations (when the
// newer one fills, the older is dropped whole); a text longer than half of
// that is not kept.
//
// Thread safety: thread-safe; one reader-writer mutex, held per call
// (lookups share it). Keys are computed before it is taken, but for a text
// that starts a new generation; a dropped generation is freed after it is
// released. What a selection calls (contains, deepest, try_add) never
// waits for it: while an add() holds it (which can take milliseconds when
// the index grows), the lookups answer as if nothing were kept, and the
// selection sends its whole text; try_add keeps nothing.

#ifndef KVROUTE_SYNC_TEXT_STORE_HPP_
#define KVROUTE_SYNC_TEXT_STORE_HPP_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "kvroute/config.hpp"
#include "kvroute/detail/mutex.hpp"
#include "kvroute/sync/chunk_key.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {
struct TextStoreTestAccess;  // tests hold the store's lock through it
}  // namespace detail
namespace sync {

class TextStore {
 public:
  explicit TextStore(std::size_t max_bytes = std::size_t{1} << 29) noexcept
      : half_(std::max<std::size_t>(max_bytes / 2, 1)) {}
  TextStore(const TextStore&) = delete;
  TextStore& operator=(const TextStore&) = delete;

  // Keeps `chunks.text()`, findable by the keys of its chunks from `from`
  // on (from <= chunks.size()); by all of them when the chunk before
  // `from` is not here. False when the text is not kept (too long, no
  // whole chunk, or out of memory).
  bool add(TextChunks& chunks, std::size_t from) noexcept { return add(chunks, from, true); }

  // add(), but never waits for the store's lock: while another call holds
  // it, false and nothing kept (for a selection's path: the header says
  // why).
  bool try_add(TextChunks& chunks, std::size_t from) noexcept { return add(chunks, from, false); }

  // Appends to `*out` the first `n` whole chunks of a kept text whose
  // chunk n - 1 has key `anchor`. False (and `*out` unchanged) when none
  // is kept, or out of memory.
  bool prefix(std::uint64_t anchor, std::size_t n, std::string* out) const noexcept {
    if (n == 0) return true;
    detail::ReaderMutexLock lock(&mu_);
    const std::string* t = find(anchor, n);
    if (t == nullptr) return false;
    try {
      out->append(*t, 0, n * kChunkBytes);
    } catch (...) {
      return false;
    }
    return true;
  }

  // Whether a kept text's chunk n - 1 has key `anchor` (n > 0). False
  // while a writer holds the store (the header says why).
  bool contains(std::uint64_t anchor, std::size_t n) const noexcept {
    if (!mu_.try_lock_shared()) return false;
    const bool found = find(anchor, n) != nullptr;
    mu_.unlock_shared();
    return found;
  }

  // The most whole chunks n <= `below` of `chunks`' text whose chunk n - 1
  // a kept text has (the key names it, so the chunks before agree too); 0
  // when none, out of memory, or while a writer holds the store. n =
  // `below` is tried first, with one key (a session's next turn extends the
  // text its previous one kept); then keys are computed a batch at a time,
  // outside the lock.
  std::size_t deepest(TextChunks& chunks, std::size_t below) const noexcept {
    constexpr std::size_t kBatch = 64;
    std::size_t hi = std::min(below, chunks.size());
    if (hi == 0) return 0;
    if (contains(chunks.key_at(hi - 1), hi)) return hi;
    --hi;
    while (hi > 0) {
      const std::size_t lo = hi - std::min(hi, kBatch);
      if (!chunks.compute_from(lo) || !mu_.try_lock_shared()) return 0;
      std::size_t n = hi;
      while (n > lo && find(chunks.key(n - 1), n) == nullptr) --n;
      mu_.unlock_shared();
      if (n > lo) return n;
      hi = lo;
    }
    return 0;
  }

  // Bytes of text kept.
  std::size_t bytes() const noexcept {
    detail::ReaderMutexLock lock(&mu_);
    return cur_.bytes + old_.bytes;
  }

 private:
  friend struct detail::TextStoreTestAccess;

  // The kept text whose chunk n - 1 (n > 0) has key `anchor`, or null.
  const std::string* find(std::uint64_t anchor, std::size_t n) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    for (const Generation* g : {&cur_, &old_}) {
      auto it = g->where.find(anchor);
      if (it == g->where.end()) continue;
      const std::string& t = g->texts[it->second];
      if (whole_chunks(t.size()) >= n && chunk_key_at(t, n - 1) == anchor) return &t;
    }
    return nullptr;
  }

  // Whether the newer generation has a chunk with key `key`; none when
  // the caller does not `wait` and another call holds the store.
  std::optional<bool> holds(std::uint64_t key, bool wait) const noexcept {
    if (wait) {
      mu_.lock_shared();
    } else if (!mu_.try_lock_shared()) {
      return std::nullopt;
    }
    const bool found = cur_.where.contains(key);
    mu_.unlock_shared();
    return found;
  }

  struct Generation {
    std::vector<std::string> texts;
    absl::flat_hash_map<std::uint64_t, std::uint32_t> where;  // chunk key -> text
    std::size_t bytes = 0;
  };

  bool add(TextChunks& chunks, std::size_t from, bool wait) noexcept {
    const std::size_t n = chunks.size();
    if (n == 0 || chunks.text().size() > half_) return false;
    from = std::min(from, n);
    if (!chunks.compute_from(from > 0 ? from - 1 : 0)) return false;
    if (from > 0) {
      const std::optional<bool> held = holds(chunks.key(from - 1), wait);
      if (!held.has_value()) return false;  // busy, and the caller does not wait
      if (!*held) {
        // The chunks before are nowhere, or in the generation dropped
        // next: this text brings them.
        from = 0;
        if (!chunks.compute_from(0)) return false;
      }
    }
    Generation dropped;  // freed after the lock is released
    if (wait) {
      mu_.lock();
    } else if (!mu_.try_lock()) {
      return false;
    }
    const bool kept = keep(chunks, from, &dropped);
    mu_.unlock();
    return kept;
  }

  // add()'s work under the lock; a generation it drops goes to `*dropped`.
  bool keep(TextChunks& chunks, std::size_t from, Generation* dropped) noexcept
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::string_view text = chunks.text();
    const std::size_t n = chunks.size();
    try {
      if (cur_.bytes + text.size() > half_) {
        *dropped = std::exchange(old_, std::move(cur_));
        cur_ = Generation();
        // The chunks before `from` are in the generation dropped next now:
        // this text brings them (the keys are computed under the lock, once
        // per generation).
        if (from > 0 && !chunks.compute_from(0)) return false;
        from = 0;
      }
      std::uint32_t slot = 0;
      bool replaced = false;
      if (from > 0) {
        auto it = cur_.where.find(chunks.key(from - 1));
        if (it != cur_.where.end()) {
          std::string& held = cur_.texts[it->second];
          // Held is the new text's prefix in whole chunks: the new one
          // takes its place (its tail after the last whole chunk, never
          // findable, is all that goes).
          if (whole_chunks(held.size()) == from &&
              chunk_key_at(held, from - 1) == chunks.key(from - 1)) {
            slot = it->second;
            cur_.bytes = cur_.bytes - held.size() + text.size();
            held.resize(from * kChunkBytes);
            held.append(text.substr(from * kChunkBytes));
            replaced = true;
          }
        }
      }
      if (!replaced) {
        slot = static_cast<std::uint32_t>(cur_.texts.size());
        cur_.texts.emplace_back(text);
        cur_.bytes += text.size();
      }
      for (std::size_t i = from; i < n; ++i) cur_.where[chunks.key(i)] = slot;
    } catch (...) {
      return false;
    }
    return true;
  }

  const std::size_t half_;
  mutable detail::Mutex mu_;
  Generation cur_ ABSL_GUARDED_BY(mu_);
  Generation old_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_TEXT_STORE_HPP_
