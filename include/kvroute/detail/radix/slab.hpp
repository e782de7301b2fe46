// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/slab.hpp
// -----------------------------------------------------------------------------
//
// Not API. `detail::UnitSlab<UnitBytes, SmallUnits, LargeUnits, ChunkBits>`:
// objects of two sizes, SmallUnits or LargeUnits units of UnitBytes bytes
// (by default one and two), addressed by a 32-bit unit index instead of a
// pointer. The radix tree keeps its nodes (7 units of 8 bytes) and claims
// (3 units) in one of these (detail::RadixSlab), so that
// every link between them (a child, a claim's node, its parent claim and LRU
// neighbours) takes 4 bytes instead of 8; so that small and large blocks
// lie on separate cache lines (below); and so that an insert that creates
// a leaf does not call malloc for them (glibc's arena lock on cross-thread
// frees was the tree's main cost with two threads).
//
// Layout: chunks of 2^ChunkBits units (512 by default), line-aligned,
// allocated as needed and kept until the slab is destroyed; a block never
// straddles two chunks. A fresh range hands out large blocks from its start
// upward and small blocks from its end downward, so that the two sizes meet
// on at most one cache line per range: the tree's claims are written on every
// stamp of their path, its nodes read by every descent through them, and with
// the two on one line each stamp would make the other core's next descent
// through that node reload it. What is left between the two ends when a
// large block no longer
// fits is cut into small blocks. A directory of chunk pointers doubles when
// full; old directories are kept until the slab is destroyed too, so a reader
// holding one never sees it freed (they add up to less than the current one).
// at() is two dependent loads. Objects are constructed and destroyed by the
// caller (they must be trivially destructible: chunks are freed without
// destructors).
//
// Shards: each thread allocates and releases through the shard of its
// thread_ordinal() (16 shards, as the arena's), which holds a fresh range
// (the unused middle of the chunk it took last) and a free list per size,
// all under the shard's own spin lock. Every new leaf and claim of the tree
// comes from here: with one slab-wide lock, two inserting threads took its
// line from each other on every request, and a thread that grew the slab
// (a malloc) under it stalled the other. A shard serves a request
// from its free list (newest first), else its fresh range, else a whole
// free list taken from another shard (so a block released by an evicting
// thread is reused before the slab grows), else a new chunk; only that
// last step takes the slab-wide lock, once per chunk. Memory beyond the
// live blocks: each shard's free blocks and the unused middle of its
// current chunk. With one thread the layout is exactly that of one list per
// size and one range.
//
// Thread safety: alloc and release may run concurrently from any threads.
// at(i) may run concurrently with both, for an index whose allocation
// happens-before the call (the tree publishes indices under its node
// locks, which gives that order).
//
//   detail::UnitSlab<24> slab;
//   std::uint32_t i = slab.alloc(2);       // kNilIndex when out of memory
//   Foo* f = new (slab.at(i)) Foo();       // sizeof(Foo) <= 48
//   slab.release(i, 2);

#ifndef KVROUTE_DETAIL_RADIX_SLAB_HPP_
#define KVROUTE_DETAIL_RADIX_SLAB_HPP_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/rw_lock.hpp"
#include "kvroute/detail/striped.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

// "No object": the null of an index link.
inline constexpr std::uint32_t kNilIndex = 0xFFFFFFFFu;

template <std::size_t UnitBytes, unsigned SmallUnits = 1, unsigned LargeUnits = 2,
          unsigned ChunkBits = 9>
class UnitSlab {
  static_assert(UnitBytes * SmallUnits >= sizeof(std::uint32_t) && UnitBytes % 8 == 0,
                "a free block holds the next free index; units keep 8-byte alignment");
  static_assert(SmallUnits >= 1 && LargeUnits > SmallUnits && LargeUnits < (1u << ChunkBits));

 public:
  static constexpr unsigned kSmall = SmallUnits;
  static constexpr unsigned kLarge = LargeUnits;
  // What an object of each size may take.
  static constexpr std::size_t kSmallBytes = std::size_t{SmallUnits} * UnitBytes;
  static constexpr std::size_t kLargeBytes = std::size_t{LargeUnits} * UnitBytes;
  static constexpr unsigned kChunkBits = ChunkBits;
  static constexpr std::uint32_t kChunkUnits = 1u << kChunkBits;
  // Indices from here up are never handed out (kNilIndex and other markers
  // a user of the slab may need).
  static constexpr std::uint32_t kFirstReserved = 0xFFFFFF00u;
  static constexpr std::size_t kChunkBytes = std::size_t{kChunkUnits} * UnitBytes;
  static_assert(kChunkBytes % kCacheLine == 0, "chunks are whole cache lines");

  static constexpr std::size_t kShards = 16;

  UnitSlab() noexcept = default;
  UnitSlab(const UnitSlab&) = delete;
  UnitSlab& operator=(const UnitSlab&) = delete;
  ~UnitSlab() {
    Dir* d = dir_.load(std::memory_order_relaxed);
    if (d != nullptr) {
      for (std::uint32_t c = 0; c < chunks_; ++c) std::free(d->chunk[c]);
    }
    while (d != nullptr) {
      Dir* older = d->older;
      std::free(d);
      d = older;
    }
  }

  // The first unit of the block at index i (allocated, not yet released).
  void* at(std::uint32_t i) const noexcept {
    const Dir* d = dir_.load(std::memory_order_acquire);
    return d->chunk[i >> kChunkBits] + std::size_t{i & (kChunkUnits - 1)} * UnitBytes;
  }

  // A block of n (kSmall or kLarge) contiguous units; kNilIndex when out of
  // memory (or of indices).
  std::uint32_t alloc(unsigned n) noexcept {
    Shard& s = mine();
    std::lock_guard<SpinMutex> g(s.mu);
    return alloc_in(s, n);
  }
  // A large and a small block under one lock (a new leaf and its claim);
  // both or neither (false).
  bool alloc_pair(std::uint32_t& large, std::uint32_t& small) noexcept {
    Shard& s = mine();
    std::lock_guard<SpinMutex> g(s.mu);
    large = alloc_in(s, kLarge);
    if (large == kNilIndex) return false;
    small = alloc_in(s, kSmall);
    if (small != kNilIndex) return true;
    push_free(s, large, kLarge);
    large = kNilIndex;
    return false;
  }

  void release(std::uint32_t i, unsigned n) noexcept {
    Shard& s = mine();
    std::lock_guard<SpinMutex> g(s.mu);
    push_free(s, i, n);
  }

  // Units allocated and not released (exact when no alloc or release runs).
  std::size_t live() const noexcept {
    std::size_t sum = 0;  // a shard's count may wrap; the sum does not
    for (const Shard& s : shards_) sum += s.live.load(std::memory_order_relaxed);
    return sum;
  }
  // Bytes held: chunks and directories.
  std::size_t bytes() const noexcept { return bytes_.load(std::memory_order_relaxed); }

 private:
  struct Dir {
    Dir* older;
    std::uint32_t cap;
    char* chunk[1];  // cap entries
  };
  static std::size_t dir_bytes(std::uint32_t cap) noexcept {
    return offsetof(Dir, chunk) + std::size_t{cap} * sizeof(char*);
  }

  // One per thread group, on lines of its own. Everything is under mu
  // except where noted.
  struct alignas(kCacheLine) Shard {
    SpinMutex mu;
    // The fresh range [next, end), never used: large blocks are taken at
    // next, small ones at end.
    std::uint32_t next = 0;
    std::uint32_t end = 0;
    // Free small and large blocks, linked through their first bytes. Read
    // without mu (relaxed) by a shard looking for a list to take: only a
    // hint, checked again under mu.
    std::atomic<std::uint32_t> free[2] = {kNilIndex, kNilIndex};
    // Units this shard handed out minus those released through it.
    std::atomic<std::size_t> live{0};
  };
  Shard& mine() noexcept { return shards_[thread_ordinal() % kShards]; }

  static constexpr unsigned list_of(unsigned n) noexcept { return n == kSmall ? 0 : 1; }

  // Requires s.mu. Puts block i on s's list of its size.
  void link_free(Shard& s, std::uint32_t i, unsigned n) noexcept {
    std::atomic<std::uint32_t>& head = s.free[list_of(n)];
    const std::uint32_t h = head.load(std::memory_order_relaxed);
    std::memcpy(at(i), &h, sizeof h);
    head.store(i, std::memory_order_relaxed);
  }
  // Requires s.mu. A block handed out goes back.
  void push_free(Shard& s, std::uint32_t i, unsigned n) noexcept {
    link_free(s, i, n);
    s.live.store(s.live.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
  }

  // Requires s.mu.
  std::uint32_t alloc_in(Shard& s, unsigned n) noexcept {
    std::atomic<std::uint32_t>& head = s.free[list_of(n)];
    std::uint32_t i = head.load(std::memory_order_relaxed);
    if (i == kNilIndex && s.next + n > s.end) {
      // The range is too short. What is left of it goes to the small list,
      // small block by small block (less than a small block stays unused),
      // and the request falls to another shard's free list or a new chunk.
      // (Only a large request can leave a small block or more behind.)
      while (n == kLarge && s.next + kSmall <= s.end) {
        link_free(s, s.next, kSmall);
        s.next += kSmall;
      }
      if (take_list(s, list_of(n))) {
        i = head.load(std::memory_order_relaxed);
      } else if (!new_range(s)) {
        return kNilIndex;
      }
    }
    if (i != kNilIndex) {
      std::uint32_t after;
      std::memcpy(&after, at(i), sizeof after);
      head.store(after, std::memory_order_relaxed);
    } else if (n == kLarge) {
      i = s.next;
      s.next += n;
    } else {
      s.end -= n;
      i = s.end;
    }
    s.live.store(s.live.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    return i;
  }

  // Requires s.mu, and s's list `list` empty. Takes another shard's whole
  // list of that size (try_lock only: two shards taking from each other
  // must not wait for each other). False when none was found.
  bool take_list(Shard& s, unsigned list) noexcept {
    for (Shard& o : shards_) {
      if (&o == &s || o.free[list].load(std::memory_order_relaxed) == kNilIndex) continue;
      if (!o.mu.try_lock()) continue;
      const std::uint32_t h = o.free[list].load(std::memory_order_relaxed);
      o.free[list].store(kNilIndex, std::memory_order_relaxed);
      o.mu.unlock();
      if (h != kNilIndex) {
        s.free[list].store(h, std::memory_order_relaxed);
        return true;
      }
    }
    return false;
  }

  // Requires s.mu. Gives s a whole new chunk as its fresh range. The chunk
  // is allocated before the slab-wide lock is taken, which only installs it.
  bool new_range(Shard& s) noexcept {
    // Line-aligned, so that the chunk's first node and last claim share no
    // line with what lies around it.
    void* c = std::aligned_alloc(kCacheLine, kChunkBytes);
    if (c == nullptr) return false;
    std::uint32_t first;
    {
      std::lock_guard<SpinMutex> g(grow_mu_);
      if (!add_chunk(static_cast<char*>(c))) {
        std::free(c);
        return false;
      }
      first = (chunks_ - 1) * kChunkUnits;
    }
    s.next = first;
    s.end = first + kChunkUnits;
    return true;
  }

  // Requires grow_mu_.
  bool add_chunk(char* c) noexcept {
    if (std::size_t{chunks_ + 1} * kChunkUnits > kFirstReserved) return false;
    Dir* d = dir_.load(std::memory_order_relaxed);
    if (d == nullptr || chunks_ == d->cap) {
      const std::uint32_t cap = d == nullptr ? 4 : d->cap * 2;
      auto* nd = static_cast<Dir*>(std::malloc(dir_bytes(cap)));
      if (nd == nullptr) return false;
      nd->older = d;
      nd->cap = cap;
      for (std::uint32_t k = 0; k < chunks_; ++k) nd->chunk[k] = d->chunk[k];
      bytes_.fetch_add(dir_bytes(cap), std::memory_order_relaxed);
      d = nd;
    }
    d->chunk[chunks_] = c;
    ++chunks_;
    bytes_.fetch_add(kChunkBytes, std::memory_order_relaxed);
    // After the entry: a thread that sees the new directory sees the chunk.
    dir_.store(d, std::memory_order_release);
    return true;
  }

  // Read on every at() (every node and claim the tree touches), so on a
  // line of its own.
  alignas(kCacheLine) std::atomic<Dir*> dir_{nullptr};
  Shard shards_[kShards];
  // Taken once per chunk.
  alignas(kCacheLine) SpinMutex grow_mu_;
  std::uint32_t chunks_ = 0;  // under grow_mu_
  std::atomic<std::size_t> bytes_{0};
  // Nor does the written state share a line with what follows the slab.
  char pad_[kCacheLine] = {};
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_SLAB_HPP_
