// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/memory.hpp
// -----------------------------------------------------------------------------
//
// Not API. `TreeMemory<Symbol>`: everything the radix tree allocates, and
// its count of every byte.
//   * Nodes and claims are blocks of one slab (detail/radix/slab.hpp),
//     named by 32-bit indices.
//   * Fragments, child and tenant blocks and the tenant directory come from
//     the tree's own arena (detail/radix/arena.hpp: per-thread shards of
//     64 KB to 2 MB regions); tenant states, which threads write, from
//     whole cache lines of their own.
//   * What an optimistic reader may still be looking at (a fragment, a
//     block replaced by a larger one, an unlinked node's slot) is retired,
//     not freed: the epoch domain (detail/radix/epoch.hpp) hands it back
//     once no reader that could hold it is left. Objects never published
//     (an insert's unused allocations) and claims (which an optimistic
//     reader only prefetches) are freed at once.
//   * The tree's counters (bytes, nodes, units, claims, stamps) are striped
//     per thread (detail/striped.hpp), so that two threads inserting do not
//     write one line.
//
// Thread safety: thread-safe, like the slab, the arena and the domain.

#ifndef KVROUTE_DETAIL_RADIX_MEMORY_HPP_
#define KVROUTE_DETAIL_RADIX_MEMORY_HPP_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/arena.hpp"
#include "kvroute/detail/radix/epoch.hpp"
#include "kvroute/detail/radix/node.hpp"
#include "kvroute/detail/radix/slab.hpp"
#include "kvroute/detail/striped.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

template <class Symbol>
class TreeMemory {
 public:
  using Node = RadixNode<Symbol>;

  // The tree's counters.
  enum Count : std::size_t {
    kBytes,      // alloc()ed and line-aligned bytes (the slab counts its own)
    kNodes,      // non-root nodes
    kUnits,      // units stored in fragments
    kSymbols,    // symbols stored in fragments
    kClaims,     // (node, tenant) entries, root entries included
    kStamped,    // claims written by stamps
    kStamps,     // stamps, per thread (with recency steps)
    kFallbacks,  // descents that walked with lock coupling
    kCounts
  };

  static constexpr unsigned kNodeUnits = RadixSlab::kLarge;
  static constexpr unsigned kClaimUnits = RadixSlab::kSmall;
  static_assert(sizeof(Node) <= RadixSlab::kLargeBytes &&
                    sizeof(RadixClaim) <= RadixSlab::kSmallBytes && alignof(Node) <= 8,
                "a node is a large slab block, a claim a small one");

  explicit TreeMemory(bool huge_pages) noexcept : arena_(huge_pages) {}
  TreeMemory(const TreeMemory&) = delete;
  TreeMemory& operator=(const TreeMemory&) = delete;

  // --- slab objects ----------------------------------------------------------

  Node* node(std::uint32_t i) const noexcept { return static_cast<Node*>(pool_.at(i)); }
  RadixClaim* claim(std::uint32_t i) const noexcept {
    return static_cast<RadixClaim*>(pool_.at(i));
  }
  const RadixSlab& slab() const noexcept { return pool_; }

  // A new node; kNilIndex when out of memory.
  std::uint32_t new_node() noexcept {
    const std::uint32_t i = pool_.alloc(kNodeUnits);
    if (i != kNilIndex) new (pool_.at(i)) Node();
    return i;
  }
  // A new claim; kNilIndex when out of memory.
  std::uint32_t new_claim() noexcept {
    const std::uint32_t i = pool_.alloc(kClaimUnits);
    if (i != kNilIndex) new (pool_.at(i)) RadixClaim();
    return i;
  }
  // A new leaf and its claim, under one lock of the slab's shard (on lines
  // apart: detail/radix/slab.hpp).
  bool new_leaf(std::uint32_t& n, std::uint32_t& c) noexcept {
    if (!pool_.alloc_pair(n, c)) return false;
    new (pool_.at(n)) Node();
    new (pool_.at(c)) RadixClaim();
    return true;
  }
  // Frees a claim that was never linked (no counts to undo).
  void discard_claim(std::uint32_t c) noexcept {
    if (c != kNilIndex) pool_.release(c, kClaimUnits);
  }
  // Frees a linked claim (its node no longer names it).
  void free_claim(std::uint32_t c) noexcept {
    pool_.release(c, kClaimUnits);
    counts_.sub(kClaims, 1);
  }
  // Frees a node that was never linked (no counts to undo).
  void discard_node(std::uint32_t i) noexcept {
    if (i != kNilIndex) pool_.release(i, kNodeUnits);
  }
  // Retires an unlinked node's slot (readers may still be inside it).
  void retire_node_slot(std::uint32_t i) noexcept { domain_.retire({nullptr, i, kRetiredNode}); }

  // --- allocation, every byte counted ----------------------------------------

  // From the arena; freed with dealloc(p, n) or retire(p, n). Null when out
  // of memory.
  void* alloc(std::size_t n) noexcept {
    void* p = arena_.allocate(n);
    if (p != nullptr) counts_.add(kBytes, n);
    return p;
  }
  void dealloc(void* p, std::size_t n) noexcept {
    if (p == nullptr) return;
    arena_.deallocate(p, n);
    counts_.sub(kBytes, n);
  }
  // Frees what alloc() gave once no reader can hold it (p may be null).
  void retire(void* p, std::size_t n) noexcept {
    if (p != nullptr) domain_.retire({p, n, kRetiredBlock});
  }
  // For an object that threads write (n a multiple of the line size): on
  // lines of its own, so that writing it does not take a neighbour's line
  // from another thread. Freed with dealloc_line_aligned.
  void* alloc_line_aligned(std::size_t n) noexcept {
    void* p = std::aligned_alloc(kCacheLine, n);
    if (p != nullptr) {
      counts_.add(kBytes, n);
      line_aligned_bytes_.fetch_add(n, std::memory_order_relaxed);
    }
    return p;
  }
  void dealloc_line_aligned(void* p, std::size_t n) noexcept {
    if (p == nullptr) return;
    std::free(p);
    counts_.sub(kBytes, n);
    line_aligned_bytes_.fetch_sub(n, std::memory_order_relaxed);
  }

  // An insert's prefaults (detail/radix/arena.hpp) wait until it has
  // released its node locks: run() before the section is left, while
  // nothing the insert has linked into the tree can be freed. Not when the
  // section does not protect (then another thread could free such a
  // block, and its region be unmapped, before run()).
  struct Prefaults : BlockArena::DeferPrefaults {
    Prefaults(TreeMemory& m, const EpochDomain::Section& sec) noexcept
        : DeferPrefaults(m.arena_, sec.protects()) {}
  };

  // --- readers and reclamation -----------------------------------------------

  // A reader's section: what is retired while it is open stays allocated.
  EpochDomain::Section enter() noexcept { return domain_.enter(); }
  // Frees what has been retired and no reader can hold any more.
  void collect() const noexcept { domain_.collect(); }

  // --- counters ----------------------------------------------------------------

  void add(Count c, std::size_t n) noexcept { counts_.add(c, n); }
  void sub(Count c, std::size_t n) noexcept { counts_.sub(c, n); }
  // add(), returning the caller's stripe after it.
  std::size_t add_to_stripe(Count c, std::size_t n) noexcept { return counts_.add_to_stripe(c, n); }
  std::size_t count(Count c) const noexcept { return counts_.load(c); }

  // Every byte allocated: what alloc() and alloc_line_aligned() gave, and
  // the slab's whole chunks.
  std::size_t bytes() const noexcept { return count(kBytes) + pool_.bytes(); }
  // What the tree holds from the system for them: bytes(), plus the free
  // space of the arena's regions.
  std::size_t reserved_bytes() const noexcept {
    return arena_.reserved_bytes() + pool_.bytes() +
           line_aligned_bytes_.load(std::memory_order_relaxed);
  }
  // Slab units in use (each node kNodeUnits, each claim kClaimUnits).
  std::size_t slab_units() const noexcept { return pool_.live(); }

 private:
  static constexpr std::uint32_t kRetiredBlock = 0;  // from alloc(): ptr, bytes
  static constexpr std::uint32_t kRetiredNode = 1;   // a node's slab block: index
  static void reclaim_retired(void* self, const Retired& r) noexcept {
    auto* m = static_cast<TreeMemory*>(self);
    if (r.kind == kRetiredBlock) {
      m->dealloc(r.ptr, static_cast<std::size_t>(r.size));
    } else {
      m->pool_.release(static_cast<std::uint32_t>(r.size), kNodeUnits);
    }
  }

  // Laid out by who writes what: the slab's directory (read on every node
  // access), the counters (per-thread stripes), the arena and the domain
  // each start a line of their own.
  alignas(kCacheLine) RadixSlab pool_;
  StripedCounters<kCounts> counts_;
  alignas(kCacheLine) BlockArena arena_;
  std::atomic<std::size_t> line_aligned_bytes_{0};
  // Last, so destroyed first: what is still retired goes back through
  // reclaim_retired while the slab, the arena and the counters still
  // exist. Mutable: stats and checks reclaim before they count.
  alignas(kCacheLine) mutable EpochDomain domain_{this, &TreeMemory::reclaim_retired};
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_MEMORY_HPP_
