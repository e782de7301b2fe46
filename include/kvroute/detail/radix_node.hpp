// -----------------------------------------------------------------------------
// File: kvroute/detail/radix_node.hpp
// -----------------------------------------------------------------------------
//
// Not API. The pieces of kvroute::BasicApproxRadixTree (kvroute/radix_tree.hpp)
// that do not need the tree itself:
//
//   * RadixSymbolTraits<Symbol>: what a "unit" is. For `char` a unit is one
//     Unicode code point of UTF-8 text, read as detail/utf8.hpp reads it
//     (each byte of an invalid sequence is a unit of its own); for an
//     integral token type a unit is one token.
//   * common_prefix_bytes: the byte comparison every match and insert runs.
//   * RadixClaim: "tenant t holds this node", one per (node, tenant), linked
//     into t's LRU list.
//   * RadixNode: a compressed-edge node: its fragment, a sorted array of
//     children keyed by the first unit of their fragment, and a sorted array
//     of (tenant id, claim). No hash map and no per-character node.
//
// Layout (64-bit): a node is 64 bytes plus its fragment, plus one block of
// (key, child pointer) pairs and, when more than one tenant holds it, one
// block of (tenant id, claim pointer) pairs; a claim is 48 bytes. The
// blocks and fragments are allocated by the tree, which counts every byte.
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
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kvroute/config.hpp"
#include "kvroute/detail/rw_lock.hpp"
#include "kvroute/detail/utf8.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

template <class Symbol>
struct RadixSymbolTraits;

// Text: units are code points; child keys are the first code point's bytes
// packed into 32 bits (distinct characters, and a lone invalid byte versus a
// well-formed sequence that starts with it, always get distinct keys).
template <>
struct RadixSymbolTraits<char> {
  using Sequence = std::string_view;
  using Fragment = std::string;
  using Key = std::uint32_t;

  // Requires n > 0.
  static Key key(const char* p, std::size_t n) noexcept {
    const std::size_t len = utf8_char_length(p, p + n);
    Key k = 0;
    for (std::size_t i = 0; i < len; ++i) {
      k |= static_cast<Key>(static_cast<unsigned char>(p[i])) << (8 * i);
    }
    return k;
  }

  // utf8_count, with all-ASCII runs skipped 32 bytes at a time (the common
  // case: the unmatched tail of a match and a new leaf are counted on every
  // request). Same result: both advance one character at a time from a
  // character boundary, and an ASCII byte is always one character.
  static std::size_t count(const char* p, std::size_t n) noexcept {
    std::size_t i = 0;
    std::size_t c = 0;
    while (i < n) {
      if (n - i >= 32) {
        std::uint64_t w[4];
        std::memcpy(w, p + i, 32);
        if (((w[0] | w[1] | w[2] | w[3]) & 0x8080808080808080ull) == 0) {
          i += 32;
          c += 32;
          continue;
        }
      }
      if (n - i >= 8 && utf8_ascii8(p + i)) {
        i += 8;
        c += 8;
        continue;
      }
      i += utf8_char_length(p + i, p + n);
      ++c;
    }
    return c;
  }

  // The longest prefix, in bytes, that ends on a character boundary of both
  // `a` and `b`, given that their first `common` bytes are equal. A byte
  // mismatch inside a multi-byte character counts only whole characters.
  static std::size_t boundary(const char* a, std::size_t na, const char* b, std::size_t nb,
                              std::size_t common) noexcept {
    return std::min(utf8_floor_boundary(std::string_view(a, na), common),
                    utf8_floor_boundary(std::string_view(b, nb), common));
  }
};

// Tokens: one symbol is one unit.
template <class Symbol>
requires(std::is_integral_v<Symbol> && !std::is_same_v<Symbol, char> &&
         !std::is_same_v<Symbol, bool>) struct RadixSymbolTraits<Symbol> {
  using Sequence = std::span<const Symbol>;
  using Fragment = std::vector<Symbol>;
  using Key = Symbol;

  static Key key(const Symbol* p, std::size_t) noexcept { return p[0]; }
  static std::size_t count(const Symbol*, std::size_t n) noexcept { return n; }
  static std::size_t boundary(const Symbol*, std::size_t, const Symbol*, std::size_t,
                              std::size_t common) noexcept {
    return common;
  }
};

// Returns the number of leading bytes on which `a` and `b` agree, comparing
// at most `n`. An equal run (the common case: a whole fragment matches) costs
// one memcmp; a mismatch is located 256 bytes at a time with memcmp, then one
// word at a time. Complexity: O(position of the first difference).
inline std::size_t common_prefix_bytes(const void* a, const void* b, std::size_t n) noexcept {
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  if (n == 0 || std::memcmp(pa, pb, n) == 0) return n;
  std::size_t i = 0;
  constexpr std::size_t kChunk = 256;
  while (n - i >= kChunk && std::memcmp(pa + i, pb + i, kChunk) == 0) i += kChunk;
  while (n - i >= 8) {
    std::uint64_t x;
    std::uint64_t y;
    std::memcpy(&x, pa + i, 8);
    std::memcpy(&y, pb + i, 8);
    if (x != y) {
      const std::uint64_t d = x ^ y;
      if constexpr (std::endian::native == std::endian::little) {
        return i + static_cast<std::size_t>(std::countr_zero(d) >> 3);
      } else {
        return i + static_cast<std::size_t>(std::countl_zero(d) >> 3);
      }
    }
    i += 8;
  }
  while (i < n && pa[i] == pb[i]) ++i;
  return i;
}

// "Tenant t holds node n": one per (node, tenant). The tree keeps one LRU
// list per tenant through prev/next, ordered by recency, with a claim always
// ahead of the claims on its node's descendants; `up` is the same tenant's
// claim on the parent node (null on the root, whose claims are not listed).
//
// Guarded by the tenant's LRU mutex: node, up, prev, next, pins and writes of
// recency. recency may be read without it (the tenant choice reads it).
struct RadixClaim {
  void* node = nullptr;
  RadixClaim* up = nullptr;
  RadixClaim* prev = nullptr;  // toward the most recent
  RadixClaim* next = nullptr;  // toward the least recent
  std::atomic<std::uint64_t> recency{0};
  // Inserts in flight that are about to hang a child claim below this one;
  // eviction leaves a pinned claim alone.
  std::uint32_t pins = 0;
  // The tenant holding the node; set before the claim is linked, then
  // fixed. A node's only claim is kept without a tenant block, and this is
  // then its tenant id entry (RadixNode::tenant_ids).
  std::uint32_t tenant = 0;
};

template <class Symbol>
struct RadixNode {
  using Traits = RadixSymbolTraits<Symbol>;
  using Key = typename Traits::Key;

  // Guards every field below except `pins`.
  RwLock lock;
  // Threads between releasing a shared hold and taking the exclusive one;
  // a node unlinked meanwhile is freed by the last of them.
  std::atomic<std::uint32_t> pins{0};
  std::uint32_t len = 0;      // fragment length in symbols
  std::uint32_t count = 0;    // fragment length in units
  std::uint32_t version = 0;  // bumped when the fragment is split
  std::uint32_t nchild = 0;
  std::uint32_t cap_child = 0;
  std::uint32_t ntenant = 0;
  std::uint32_t cap_tenant = 0;
  bool dead = false;  // unlinked; see `pins`
  Symbol* frag = nullptr;
  void* child_block = nullptr;  // Key[cap_child], then RadixNode*[cap_child]
  // cap_tenant <= 1 (most nodes: one tenant): the one claim itself, or
  // null, with no block; its id is the claim's `tenant`. Otherwise a block:
  // uint32_t[cap_tenant], then RadixClaim*[cap_tenant].
  RadixClaim* tenant_block = nullptr;

  static constexpr std::size_t align8(std::size_t n) noexcept { return (n + 7) & ~std::size_t{7}; }
  static constexpr std::size_t child_block_bytes(std::uint32_t cap) noexcept {
    // Arrays of pointers, sized as such.
    return align8(cap * sizeof(Key)) +
           cap * sizeof(RadixNode*);  // NOLINT(bugprone-sizeof-expression)
  }
  // 0 for the inline single tenant (cap <= 1): no block.
  static constexpr std::size_t tenant_block_bytes(std::uint32_t cap) noexcept {
    return cap <= 1 ? 0
                    : align8(cap * sizeof(std::uint32_t)) +
                          cap * sizeof(RadixClaim*);  // NOLINT(bugprone-sizeof-expression)
  }
  bool tenants_inline() const noexcept { return cap_tenant <= 1; }

  Key* keys() const noexcept { return static_cast<Key*>(child_block); }
  RadixNode** kids() const noexcept {
    return reinterpret_cast<RadixNode**>(static_cast<char*>(child_block) +
                                         align8(cap_child * sizeof(Key)));
  }
  // Arrays of ntenant entries (null when there are none and no block).
  std::uint32_t* tenant_ids() const noexcept {
    if (tenants_inline()) return tenant_block == nullptr ? nullptr : &tenant_block->tenant;
    return reinterpret_cast<std::uint32_t*>(tenant_block);
  }
  RadixClaim** claims() const noexcept {
    if (tenants_inline()) return const_cast<RadixClaim**>(&tenant_block);
    return reinterpret_cast<RadixClaim**>(reinterpret_cast<char*>(tenant_block) +
                                          align8(cap_tenant * sizeof(std::uint32_t)));
  }

  // Index of the first key >= k.
  std::uint32_t child_slot(Key k) const noexcept {
    const Key* b = keys();
    return static_cast<std::uint32_t>(std::lower_bound(b, b + nchild, k) - b);
  }
  RadixNode* find_child(Key k) const noexcept {
    const std::uint32_t i = child_slot(k);
    return (i < nchild && keys()[i] == k) ? kids()[i] : nullptr;
  }

  std::uint32_t tenant_slot(std::uint32_t t) const noexcept {
    const std::uint32_t* b = tenant_ids();
    return static_cast<std::uint32_t>(std::lower_bound(b, b + ntenant, t) - b);
  }
  RadixClaim* find_claim(std::uint32_t t) const noexcept {
    const std::uint32_t i = tenant_slot(t);
    return (i < ntenant && tenant_ids()[i] == t) ? claims()[i] : nullptr;
  }
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_NODE_HPP_
