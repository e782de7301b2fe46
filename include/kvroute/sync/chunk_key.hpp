// -----------------------------------------------------------------------------
// File: kvroute/sync/chunk_key.hpp
// -----------------------------------------------------------------------------
//
// How a text travels between router replicas: not as text but as keys of
// its chunks. A text is cut into chunks of kChunkBytes bytes from its
// start; chunk i's key hashes its bytes together with its position i. A
// prefix of i + 1 chunks is named by chunk i's key: two texts whose chunk i
// is the same at the same position almost always share the prefix before
// it too (different prefixes that happen to end in one identical chunk at
// the same offset would be taken for one: the index built on these keys is
// a guess, like the tree, and feedback corrects it). Eight bytes stand for
// kChunkBytes of text, a sixteenth; the bytes after the last whole chunk do
// not travel.
//
// The hash is kvroute's own, fixed for every platform and release (little-
// endian reads; golden values in tests/sync/sync_test.cpp), so that
// replicas on different machines compute the same keys. It folds 64-bit
// multiplies over four independent 32-byte lanes, so that a placement's
// keys cost a fraction of its tree insert (benchmarks/sync_benchmark.cpp).
//
// Thread safety: pure functions.
//
// Example:
//
//   // The key of the prefix text[0, 256): its second chunk at position 1.
//   std::uint64_t k = kvroute::sync::chunk_key(text.substr(128, 128), 1);

#ifndef KVROUTE_SYNC_CHUNK_KEY_HPP_
#define KVROUTE_SYNC_CHUNK_KEY_HPP_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "kvroute/config.hpp"
#include "kvroute/detail/rng.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {

inline constexpr std::size_t kChunkBytes = 128;

// Whole chunks in `bytes` bytes of text.
constexpr std::size_t whole_chunks(std::size_t bytes) noexcept { return bytes / kChunkBytes; }

namespace chunk_detail {
inline constexpr std::uint64_t kK[8] = {
    0xa0761d6478bd642full, 0xe7037ed1a0b428dbull, 0x8ebc6af09c88c6e3ull, 0x589965cc75374cc3ull,
    0x1d8e4e27c47d124full, 0x9e3779b97f4a7c15ull, 0xbf58476d1ce4e5b9ull, 0x94d049bb133111ebull};
inline std::uint64_t fold(std::uint64_t a, std::uint64_t b) noexcept {
  const detail::Uint128 r = static_cast<detail::Uint128>(a) * b;
  return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
}
inline std::uint64_t read64(const char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}
}  // namespace chunk_detail

// The key of a chunk of exactly kChunkBytes bytes at chunk position `i`.
inline std::uint64_t chunk_key(std::string_view chunk, std::uint32_t i) noexcept {
  using chunk_detail::fold;
  using chunk_detail::kK;
  using chunk_detail::read64;
  const char* p = chunk.data();
  std::uint64_t lane[4];
  for (std::size_t j = 0; j < 4; ++j) {
    const char* q = p + 32 * j;
    lane[j] = fold(read64(q) ^ kK[2 * j], read64(q + 8) ^ kK[2 * j + 1]) ^
              fold(read64(q + 16) ^ kK[(2 * j + 2) & 7], read64(q + 24) ^ kK[(2 * j + 3) & 7]);
  }
  const std::uint64_t pos = detail::splitmix64(i);
  return fold(lane[0] ^ lane[2] ^ pos, lane[1] ^ kK[5]) ^ fold(lane[3] ^ kK[6], pos ^ kK[7]);
}

// The key of `text`'s chunk `i`. Requires a whole chunk there.
inline std::uint64_t chunk_key_at(std::string_view text, std::size_t i) noexcept {
  return chunk_key(text.substr(i * kChunkBytes, kChunkBytes), static_cast<std::uint32_t>(i));
}

// Appends to `*out` the keys of `text`'s whole chunks, numbered from chunk
// position `first`: a text that travels from chunk `first` of the whole
// (change.hpp). False, and `*out` unchanged, when memory runs out.
inline bool append_chunk_keys(std::string_view text, std::uint32_t first,
                              std::vector<std::uint64_t>* out) noexcept {
  const std::size_t n = whole_chunks(text.size());
  try {
    out->reserve(out->size() + n);
  } catch (...) {
    return false;
  }
  for (std::size_t j = 0; j < n; ++j) {
    out->push_back(chunk_key(text.substr(j * kChunkBytes, kChunkBytes),
                             first + static_cast<std::uint32_t>(j)));
  }
  return true;
}

// One request's chunk keys, computed on demand from the back: a selection
// that looks up what other replicas placed scans from the last chunk down,
// and then emits the keys past what its tree knew, which that scan has
// mostly computed already. compute_from computes each chunk's key at most
// once; key_at computes a single one without keeping it.
class TextChunks {
 public:
  explicit TextChunks(std::string_view text) noexcept
      : text_(text), n_(whole_chunks(text.size())), lo_(n_), base_(n_) {}
  TextChunks(const TextChunks&) = delete;
  TextChunks& operator=(const TextChunks&) = delete;

  std::string_view text() const noexcept { return text_; }
  std::size_t size() const noexcept { return n_; }  // whole chunks

  // Keys of chunks [i, size()); i <= size(). Only the chunks from the
  // lowest one asked for have room: a long text whose last few chunks
  // are asked for allocates nothing (up to 64 keys are held inline), and
  // room grows at least twofold toward the front, so a scan down the whole
  // text moves each key about once. False when memory runs out.
  bool compute_from(std::size_t i) noexcept {
    if (i >= lo_) return true;
    if (i < base_) {
      const std::size_t held = n_ - base_;
      const std::size_t room = std::min(n_, std::max(n_ - i, 2 * held));
      try {
        keys_.resize(room);
      } catch (...) {
        return false;
      }
      std::move_backward(keys_.begin(), keys_.begin() + static_cast<std::ptrdiff_t>(held),
                         keys_.end());
      base_ = n_ - room;
    }
    for (std::size_t j = lo_; j-- > i;) keys_[j - base_] = chunk_key_at(text_, j);
    lo_ = i;
    return true;
  }
  // Requires compute_from(j) for some j <= i.
  std::uint64_t key(std::size_t i) const noexcept { return keys_[i - base_]; }
  // The key of chunk i < size(), computed now if it was not (and not kept:
  // for a caller that needs one key, not the run of them after it).
  std::uint64_t key_at(std::size_t i) const noexcept {
    return i >= lo_ ? keys_[i - base_] : chunk_key_at(text_, i);
  }
  // Requires compute_from(i).
  std::span<const std::uint64_t> keys_from(std::size_t i) const noexcept {
    return {keys_.data() + (i - base_), n_ - i};
  }

 private:
  std::string_view text_;
  std::size_t n_;
  std::size_t lo_;    // chunks [lo_, n_) have their keys
  std::size_t base_;  // keys_[j - base_] is chunk j's key, for j >= base_
  absl::InlinedVector<std::uint64_t, 64> keys_;
};

}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_CHUNK_KEY_HPP_
