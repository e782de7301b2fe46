// -----------------------------------------------------------------------------
// File: kvroute/detail/slab.hpp
// -----------------------------------------------------------------------------
//
// Not API. `detail::UnitSlab<UnitBytes, SmallUnits, LargeUnits, ChunkBits>`:
// objects of two sizes, SmallUnits or LargeUnits units of UnitBytes bytes
// (by default one and two), addressed by a 32-bit unit index instead of a
// pointer. The radix tree keeps its nodes (7 units of 8 bytes) and claims
// (3 units) in one of these (detail::RadixSlab), so that
// every link between them (a child, a claim's node, its parent claim and LRU
// neighbours) takes 4 bytes instead of 8; so that a new leaf and its claim,
// allocated together, sit next to each other in memory (a stamp of a path
// walks the claims right after the descent has loaded the nodes); and so
// that an insert that creates a leaf does not call malloc for them (glibc's
// arena lock on cross-thread frees was the tree's main cost with two
// threads).
//
// Layout: chunks of 2^ChunkBits units (512 by default), allocated as
// needed and kept until the slab is destroyed; a block never straddles two
// chunks (the end of a chunk too short for a large block is cut into small
// ones). Freed small and large blocks go on two free lists and are reused,
// newest first. A directory of chunk pointers doubles when full; old
// directories are kept until the slab is destroyed too, so a reader holding
// one never sees it freed (they add up to less than the current one). at()
// is two dependent loads. Objects are constructed and destroyed by the
// caller (they must be trivially destructible: chunks are freed without
// destructors).
//
// Thread safety: alloc and release may run concurrently from any threads
// (a spin mutex). at(i) may run concurrently with both, for an index whose
// allocation happens-before the call (the tree publishes indices under its
// node locks, which gives that order).
//
//   detail::UnitSlab<24> slab;
//   std::uint32_t i = slab.alloc(2);       // kNilIndex when out of memory
//   Foo* f = new (slab.at(i)) Foo();       // sizeof(Foo) <= 48
//   slab.release(i, 2);

#ifndef KVROUTE_DETAIL_SLAB_HPP_
#define KVROUTE_DETAIL_SLAB_HPP_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kvroute/config.hpp"
#include "kvroute/detail/rw_lock.hpp"
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
    std::lock_guard<SpinMutex> g(mu_);
    return alloc_locked(n);
  }
  // A large and a small block under one lock, adjacent when fresh; both or
  // neither (false).
  bool alloc_pair(std::uint32_t& large, std::uint32_t& small) noexcept {
    std::lock_guard<SpinMutex> g(mu_);
    large = alloc_locked(kLarge);
    if (large == kNilIndex) return false;
    small = alloc_locked(kSmall);
    if (small != kNilIndex) return true;
    release_locked(large, kLarge);
    large = kNilIndex;
    return false;
  }

  void release(std::uint32_t i, unsigned n) noexcept {
    std::lock_guard<SpinMutex> g(mu_);
    release_locked(i, n);
  }

  // Units allocated and not released.
  std::size_t live() const noexcept { return live_.load(std::memory_order_relaxed); }
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

  // Requires mu_.
  static constexpr unsigned list_of(unsigned n) noexcept { return n == kSmall ? 0 : 1; }

  std::uint32_t alloc_locked(unsigned n) noexcept {
    std::uint32_t& head = free_[list_of(n)];
    std::uint32_t i;
    if (head != kNilIndex) {
      i = head;
      std::memcpy(&head, at(i), sizeof head);
    } else {
      // A block never straddles chunks: what is left of a chunk too small
      // for the block goes to the small list, small block by small block
      // (less than a small block is left unused).
      const std::uint32_t end = std::uint32_t{chunks_} * kChunkUnits;
      if (next_ < end && (next_ & (kChunkUnits - 1)) + n > kChunkUnits) {
        const std::uint32_t chunk_end = (next_ | (kChunkUnits - 1)) + 1;
        while (n == kLarge && next_ + kSmall <= chunk_end) {
          std::memcpy(at(next_), &free_[0], sizeof free_[0]);
          free_[0] = next_;
          next_ += kSmall;
        }
        next_ = chunk_end;
      }
      if (next_ + n > end && !add_chunk()) return kNilIndex;
      i = next_;
      next_ += n;
    }
    live_.store(live_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    return i;
  }

  void release_locked(std::uint32_t i, unsigned n) noexcept {
    std::uint32_t& head = free_[list_of(n)];
    std::memcpy(at(i), &head, sizeof head);
    head = i;
    live_.store(live_.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
  }

  // Requires mu_ and next_ at a chunk boundary.
  bool add_chunk() noexcept {
    if (std::size_t{chunks_ + 1} * kChunkUnits > kFirstReserved) return false;
    Dir* d = dir_.load(std::memory_order_relaxed);
    if (d == nullptr || chunks_ == d->cap) {
      const std::uint32_t cap = d == nullptr ? 4 : d->cap * 2;
      auto* nd = static_cast<Dir*>(std::malloc(dir_bytes(cap)));
      if (nd == nullptr) return false;
      nd->older = d;
      nd->cap = cap;
      for (std::uint32_t c = 0; c < chunks_; ++c) nd->chunk[c] = d->chunk[c];
      bytes_.fetch_add(dir_bytes(cap), std::memory_order_relaxed);
      dir_.store(nd, std::memory_order_release);
      d = nd;
    }
    void* c = std::malloc(kChunkBytes);
    if (c == nullptr) return false;
    d->chunk[chunks_] = static_cast<char*>(c);
    ++chunks_;
    bytes_.fetch_add(kChunkBytes, std::memory_order_relaxed);
    return true;
  }

  // Read on every at() (every node and claim the tree touches), so on a
  // line of its own: the state below it is written on every alloc and
  // release, by every inserting thread.
  alignas(kCacheLine) std::atomic<Dir*> dir_{nullptr};
  alignas(kCacheLine) SpinMutex mu_;
  std::uint32_t chunks_ = 0;  // under mu_
  std::uint32_t next_ = 0;    // first never-used unit; under mu_
  // Free small and large blocks, linked through their first bytes.
  std::uint32_t free_[2] = {kNilIndex, kNilIndex};  // under mu_
  std::atomic<std::size_t> live_{0};                // written under mu_
  std::atomic<std::size_t> bytes_{0};
  // Nor does the written state share a line with what follows the slab.
  char pad_[kCacheLine] = {};
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_SLAB_HPP_
