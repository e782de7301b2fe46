// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/node.hpp
// -----------------------------------------------------------------------------
//
// Not API. The radix tree's two slab objects:
//   * RadixClaim: "tenant t holds this node", one per (node, tenant), linked
//     into t's LRU list (detail/radix/lru.hpp).
//   * RadixNode: a compressed-edge node: its fragment, a sorted array of
//     children keyed by the first unit of their fragment, and a sorted array
//     of (tenant id, claim). No hash map and no per-character node.
//
// Layout (64-bit): a node is 56 bytes, plus its fragment when that is
// longer than 8 bytes (up to 8 bytes are kept in the node). Its first two
// children (one for 8-byte token ids) are kept in the node itself, which
// takes a dependent cache miss (the block) off every level of a descent
// through a large tree; beyond that, one block of (key, child index)
// pairs. When more than one tenant holds a node, one block of (tenant id,
// claim index) pairs; a claim is 24 bytes. Nodes and claims live in the
// tree's slab (detail/radix/slab.hpp: 7 and 3 units of 8 bytes); the
// blocks and fragments come from the tree's memory (detail/radix/memory.hpp).
//
// Thread safety: none here; RadixNode::lock and the tree's per-tenant mutexes
// guard the fields as documented in radix_tree.hpp.

#ifndef KVROUTE_DETAIL_RADIX_NODE_HPP_
#define KVROUTE_DETAIL_RADIX_NODE_HPP_

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/rw_lock.hpp"
#include "kvroute/detail/radix/slab.hpp"
#include "kvroute/detail/radix/symbols.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

// Node and claim links are 32-bit indices into the tree's slab
// (detail/radix/slab.hpp); kNilIndex is the null link and kRootIndex names the
// root, which is a member of the tree, not a slab object.
inline constexpr std::uint32_t kRootIndex = 0xFFFFFFFEu;

// "Tenant t holds node n": one per (node, tenant). The tree keeps one LRU
// list per tenant through prev/next, ordered by recency, with a claim always
// ahead of the claims on its node's descendants; `up` is the same tenant's
// claim on the parent node (kNilIndex on the root, whose claims are not
// listed).
//
// The claim's stamp word holds its recency and one mark, `ended`: the last
// stamp that wrote this claim ended on its node (an insert or a match whose
// path stopped there) rather than going on into a child. A node whose
// claims are all unmarked, and have the recency of its only child's claims,
// was last used only on the way into that child, so the two can be merged
// without evicting a use that ended at the upper node together with the
// older text below it (the tree's merge_only_child).
//
// Guarded by the tenant's LRU mutex: node, up, prev, next and writes of
// the stamp word. It may be read without it (the tenant choice reads the
// recency).
struct RadixClaim {
  static constexpr std::uint64_t kEnded = std::uint64_t{1} << 63;

  std::uint32_t node = kNilIndex;
  std::uint32_t up = kNilIndex;
  std::uint32_t prev = kNilIndex;  // toward the most recent
  std::uint32_t next = kNilIndex;  // toward the least recent
  std::atomic<std::uint64_t> stamp_word{0};

  std::uint64_t recency() const noexcept {
    return stamp_word.load(std::memory_order_relaxed) & ~kEnded;
  }
  bool ended() const noexcept { return (stamp_word.load(std::memory_order_relaxed) & kEnded) != 0; }
  // Recencies stay below 2^63 (a stamp a nanosecond would take 292 years).
  void set_stamp(std::uint64_t recency, bool ended) noexcept {
    stamp_word.store(recency | (ended ? kEnded : 0), std::memory_order_relaxed);
  }
};

// The tree's slab: 8-byte units in chunks of 2048 (16 KB); a claim is a
// small block (3 units), a node a large one (7 units).
using RadixSlab = UnitSlab<8, 3, 7, 11>;

// A node's fragment is kept in the node itself when it fits in a pointer's
// 8 bytes (kFragInline, which depends on the length alone), else in a buffer
// of exactly its length (kFragPlain, short fragments), or it lies inside a
// longer buffer of its own with a header (kFragInBuffer, see the tree's
// alloc_frag): never shared between nodes.
inline constexpr std::uint8_t kFragInline = 0;
inline constexpr std::uint8_t kFragPlain = 1;
inline constexpr std::uint8_t kFragInBuffer = 2;

template <class Symbol>
struct RadixNode {
  using Traits = RadixSymbolTraits<Symbol>;
  using Key = typename Traits::Key;

  // Guards every field below.
  RwLock lock;
  std::uint32_t len = 0;    // fragment length in symbols
  std::uint32_t count = 0;  // fragment length in units (written by set_count)
  std::uint32_t nchild = 0;
  std::uint32_t ntenant = 0;
  // Capacities, each 0 or a power of two, stored as 0 or log2 + 1.
  std::uint8_t child_cap_code = 0;
  std::uint8_t tenant_cap_code = 0;
  // Where the fragment lives: kFragInline, kFragPlain or kFragInBuffer.
  std::uint8_t frag_kind = kFragInline;
  // The fragment: a fragment of up to kInlineSymbols symbols is stored
  // here (which of the two members holds it follows from len alone, so an
  // optimistic reader's snapshot needs no other field); a longer one is
  // pointed to. Almost half the interior nodes of a branchy tree have such
  // a fragment: a descent compares them without a second, dependent load.
  // (8 bytes on 64-bit targets, which the figures in the docs assume.)
  static constexpr std::size_t kInlineSymbols = sizeof(void*) / sizeof(Symbol);
  static_assert(kInlineSymbols >= 1, "a symbol wider than a pointer");
  union Frag {
    Symbol* ptr;
    Symbol in[kInlineSymbols];
  } frag{nullptr};
  static constexpr bool inline_len(std::size_t len) noexcept { return len <= kInlineSymbols; }
  // The fragment's first symbol (len of them).
  const Symbol* data() const noexcept { return inline_len(len) ? frag.in : frag.ptr; }
  // Up to kInlineChildren children (most nodes: a fork has two) are kept
  // in the node, so that a descent finds the next node without loading a
  // block; more take a block: Key[cap_child()], then node index[cap_child()].
  static constexpr std::uint32_t kInlineChildren =
      std::bit_floor(std::min<std::size_t>(2, 16 / (sizeof(Key) + sizeof(std::uint32_t))));
  union Children {
    void* block;
    struct Inline {
      Key keys[kInlineChildren];
      std::uint32_t kids[kInlineChildren];
    } in;
  } children{nullptr};
  // Tenant capacity <= 1 (most nodes: one tenant): the one entry inline,
  // no block. Otherwise a block: tenant id[cap], then claim index[cap].
  union Tenants {
    void* block;
    struct One {
      std::uint32_t tenant;
      std::uint32_t claim;
    } one;
  } tenants{nullptr};

  static constexpr std::uint8_t cap_code(std::uint32_t cap) noexcept {
    return cap == 0 ? 0 : static_cast<std::uint8_t>(std::countr_zero(cap) + 1);
  }
  static constexpr std::uint32_t cap_of(std::uint8_t code) noexcept {
    return code == 0 ? 0 : 1u << (code - 1);
  }
  std::uint32_t cap_child() const noexcept { return cap_of(child_cap_code); }
  std::uint32_t cap_tenant() const noexcept { return cap_of(tenant_cap_code); }
  // Requires a power of two (or 0).
  void set_cap_child(std::uint32_t cap) noexcept { child_cap_code = cap_code(cap); }
  void set_cap_tenant(std::uint32_t cap) noexcept { tenant_cap_code = cap_code(cap); }

  static constexpr std::size_t align4(std::size_t n) noexcept { return (n + 3) & ~std::size_t{3}; }
  // 0 for inline children (cap <= kInlineChildren): no block.
  static constexpr std::size_t child_block_bytes(std::uint32_t cap) noexcept {
    return cap <= kInlineChildren ? 0 : align4(cap * sizeof(Key)) + cap * sizeof(std::uint32_t);
  }
  bool children_inline() const noexcept { return cap_child() <= kInlineChildren; }
  // 0 for the inline single tenant (cap <= 1): no block.
  static constexpr std::size_t tenant_block_bytes(std::uint32_t cap) noexcept {
    return cap <= 1 ? 0 : std::size_t{cap} * 2 * sizeof(std::uint32_t);
  }
  bool tenants_inline() const noexcept { return tenant_cap_code <= 1; }

  // Arrays of nchild entries (inline ones at fixed places, whatever the cap).
  Key* keys() const noexcept {
    if (children_inline()) return const_cast<Key*>(children.in.keys);
    return static_cast<Key*>(children.block);
  }
  std::uint32_t* kids() const noexcept {
    if (children_inline()) return const_cast<std::uint32_t*>(children.in.kids);
    return reinterpret_cast<std::uint32_t*>(static_cast<char*>(children.block) +
                                            align4(cap_child() * sizeof(Key)));
  }
  // Arrays of ntenant entries (the inline pair's fields for one tenant).
  std::uint32_t* tenant_ids() const noexcept {
    if (tenants_inline()) return const_cast<std::uint32_t*>(&tenants.one.tenant);
    return static_cast<std::uint32_t*>(tenants.block);
  }
  std::uint32_t* claims() const noexcept {
    if (tenants_inline()) return const_cast<std::uint32_t*>(&tenants.one.claim);
    return static_cast<std::uint32_t*>(tenants.block) + cap_tenant();
  }

  // Index of the first key >= k.
  std::uint32_t child_slot(Key k) const noexcept {
    const Key* b = keys();
    return static_cast<std::uint32_t>(std::lower_bound(b, b + nchild, k) - b);
  }
  // The child's node index, or kNilIndex.
  std::uint32_t find_child(Key k) const noexcept {
    const std::uint32_t i = child_slot(k);
    return (i < nchild && keys()[i] == k) ? kids()[i] : kNilIndex;
  }

  std::uint32_t tenant_slot(std::uint32_t t) const noexcept {
    const std::uint32_t* b = tenant_ids();
    return static_cast<std::uint32_t>(std::lower_bound(b, b + ntenant, t) - b);
  }
  // t's claim index, or kNilIndex.
  std::uint32_t find_claim(std::uint32_t t) const noexcept {
    const std::uint32_t i = tenant_slot(t);
    return (i < ntenant && tenant_ids()[i] == t) ? claims()[i] : kNilIndex;
  }

  // --- entries (the caller holds the node exclusively, with capacity) --------

  // Adds child `c` under key `k`. Requires capacity.
  void add_child(Key k, std::uint32_t c) noexcept {
    const std::uint32_t i = child_slot(k);
    Key* ks = keys();
    std::uint32_t* cs = kids();
    std::memmove(ks + i + 1, ks + i, (nchild - i) * sizeof(Key));
    std::memmove(cs + i + 1, cs + i, (nchild - i) * sizeof(std::uint32_t));
    ks[i] = k;
    cs[i] = c;
    ++nchild;
  }

  // Removes child `c`, whose node is `cn`.
  void remove_child(const RadixNode& cn, [[maybe_unused]] std::uint32_t c) noexcept {
    const std::uint32_t i = child_slot(Traits::key(cn.data(), cn.len));
    KVROUTE_ASSERT(i < nchild && kids()[i] == c, "radix tree: child not found");
    Key* ks = keys();
    std::uint32_t* cs = kids();
    std::memmove(ks + i, ks + i + 1, (nchild - i - 1) * sizeof(Key));
    std::memmove(cs + i, cs + i + 1, (nchild - i - 1) * sizeof(std::uint32_t));
    --nchild;
  }

  // Adds tenant `t` with claim `c`. Requires capacity and t absent.
  void add_tenant_entry(std::uint32_t t, std::uint32_t c) noexcept {
    if (tenants_inline()) {
      KVROUTE_ASSERT(ntenant == 0 && cap_tenant() == 1, "radix tree: no room for a tenant");
      tenants.one.tenant = t;
      tenants.one.claim = c;
      ntenant = 1;
      return;
    }
    const std::uint32_t i = tenant_slot(t);
    std::uint32_t* ids = tenant_ids();
    std::uint32_t* cl = claims();
    std::memmove(ids + i + 1, ids + i, (ntenant - i) * sizeof(std::uint32_t));
    std::memmove(cl + i + 1, cl + i, (ntenant - i) * sizeof(std::uint32_t));
    ids[i] = t;
    cl[i] = c;
    ++ntenant;
  }

  void remove_tenant_entry(std::uint32_t t) noexcept {
    const std::uint32_t i = tenant_slot(t);
    KVROUTE_ASSERT(i < ntenant && tenant_ids()[i] == t, "radix tree: tenant not found");
    if (tenants_inline()) {
      tenants.one = {};
      ntenant = 0;
      return;
    }
    std::uint32_t* ids = tenant_ids();
    std::uint32_t* cl = claims();
    std::memmove(ids + i, ids + i + 1, (ntenant - i - 1) * sizeof(std::uint32_t));
    std::memmove(cl + i, cl + i + 1, (ntenant - i - 1) * sizeof(std::uint32_t));
    --ntenant;
  }

  // `count` is also read by the LRU walk (the tree's tenant_recency_at),
  // which holds a tenant's LRU mutex and not this node's lock, so that read
  // and every write of `count` are atomic.
  void set_count(std::uint64_t units) noexcept {
    std::atomic_ref<std::uint32_t>(count).store(static_cast<std::uint32_t>(units),
                                                std::memory_order_relaxed);
  }
  std::uint32_t count_unlocked() const noexcept {
    return std::atomic_ref<std::uint32_t>(const_cast<std::uint32_t&>(count))
        .load(std::memory_order_relaxed);
  }

  // Copies the fields an optimistic read uses into `to` (not the lock):
  // nothing is derived from them, not even a pointer, before the copy is
  // known to be consistent; after that the node's own accessors work on
  // the copy.
  void snapshot_into(RadixNode& to) const noexcept {
    to.len = len;
    to.count = count;
    to.nchild = nchild;
    to.ntenant = ntenant;
    to.child_cap_code = child_cap_code;
    to.tenant_cap_code = tenant_cap_code;
    to.frag = frag;
    to.children = children;
    to.tenants = tenants;
  }
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_NODE_HPP_
