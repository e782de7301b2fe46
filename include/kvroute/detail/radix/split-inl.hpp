// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/split-inl.hpp
// -----------------------------------------------------------------------------
//
// Not API; part of kvroute/radix_tree.hpp. An insert's changes to one node,
// in two phases: prepare every allocation the change needs (a split's
// lower node, fragments, blocks and claim copies; a new claim; a new leaf),
// then commit. Running out of memory therefore leaves the node untouched,
// and the insert returns kOutOfMemory with the tree consistent.
//
// A split of node x after its first k symbols: x keeps the first part,
// with a fresh claim for each of its tenants, and a new child takes the
// rest of the fragment (detail/radix/fragments.hpp), x's children and x's
// claims, so that the claims below keep pointing at the right parent
// claims. Each tenant's LRU list gets the copy right ahead of its old claim
// (LruList::link_split_copy); the inserting tenant's step is left to its
// next hold of its LRU mutex (to link the new leaf, or to stamp), made
// while it still holds x: one hold of the mutex instead of two per split.

#ifndef KVROUTE_DETAIL_RADIX_SPLIT_INL_HPP_
#define KVROUTE_DETAIL_RADIX_SPLIT_INL_HPP_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/blocks.hpp"
#include "kvroute/detail/radix/fragments.hpp"
#include "kvroute/detail/radix/lru.hpp"
#include "kvroute/radix_tree.hpp"  // the class this completes

KVROUTE_NAMESPACE_BEGIN

// Allocations an insert step needs, made before it changes anything.
// Indices are slab slots (kNil: none).
template <class Symbol>
struct BasicApproxRadixTree<Symbol>::Prep {
  std::uint32_t lower = kNil;
  detail::SplitFrag frag_mode = detail::SplitFrag::kCopyBoth;
  Symbol* lower_frag = nullptr;
  Symbol* upper_frag = nullptr;
  void* upper_children = nullptr;
  std::uint32_t upper_child_cap = 0;
  void* upper_tenants = nullptr;
  std::uint32_t upper_tenant_cap = 0;
  std::uint32_t copies = kNil;  // chained through `next`
  std::uint32_t own = kNil;
  std::uint32_t leaf = kNil;
  Symbol* leaf_frag = nullptr;
  bool leaf_filled = false;  // leaf_frag already holds the text
  std::uint32_t leaf_claim = kNil;
};

// Allocates what the change of in.x needs (a split at in.k, a claim for
// the tenant, a leaf for text[after, n)) into `p`. On false (out of
// memory) nothing is allocated any more and x is unchanged. Requires x
// held exclusively.
template <class Symbol>
bool BasicApproxRadixTree<Symbol>::prepare(Inserting& in, Prep& p, bool split, bool need_claim,
                                           bool need_leaf, std::size_t after) noexcept {
  using Frags = detail::Fragments<Symbol>;
  using Blocks = detail::NodeBlocks<Symbol>;
  Node& x = *in.x;
  const std::size_t k = in.k;
  const std::size_t leaf_len = after < in.n ? in.n - after : 0;
  bool ok = true;
  if (split) {
    p.lower = mem_.new_node();
    p.frag_mode = Frags::split_mode(x, k);
    const bool lower_buf =
        p.frag_mode != detail::SplitFrag::kLowerKeeps && !Node::inline_len(x.len - k);
    const bool upper_buf = p.frag_mode != detail::SplitFrag::kUpperKeeps && !Node::inline_len(k);
    if (lower_buf) p.lower_frag = Frags::alloc(mem_, x.len - k);
    if (upper_buf) p.upper_frag = Frags::alloc(mem_, k);
    const bool frags_ok =
        (!lower_buf || p.lower_frag != nullptr) && (!upper_buf || p.upper_frag != nullptr);
    p.upper_child_cap = need_leaf ? 2 : 1;
    const std::size_t cb = Node::child_block_bytes(p.upper_child_cap);
    if (cb > 0) p.upper_children = mem_.alloc(cb);
    p.upper_tenant_cap = std::bit_ceil(x.ntenant + (need_claim ? 1u : 0u));
    const std::size_t tb = Node::tenant_block_bytes(p.upper_tenant_cap);
    if (tb > 0) p.upper_tenants = mem_.alloc(tb);
    ok = p.lower != kNil && frags_ok && (cb == 0 || p.upper_children) &&
         (tb == 0 || p.upper_tenants);
    for (std::uint32_t i = 0; ok && i < x.ntenant; ++i) {
      const std::uint32_t c = mem_.new_claim();
      if (c == kNil) {
        ok = false;
        break;
      }
      claim(c)->next = p.copies;
      p.copies = c;
    }
  } else {
    if (need_claim) ok = Blocks::reserve_tenants(mem_, x, x.ntenant + 1);
    if (ok && need_leaf) ok = Blocks::reserve_children(mem_, x, x.nchild + 1);
  }
  if (ok && need_claim) ok = (p.own = mem_.new_claim()) != kNil;
  if (ok && need_leaf) {
    ok = mem_.new_leaf(p.leaf, p.leaf_claim);
    if (in.pre != nullptr && in.pre_at == after) {
      p.leaf_frag = in.pre;
      in.pre = nullptr;
      p.leaf_filled = true;
    } else {
      in.drop_pre(mem_);
      if (!Node::inline_len(leaf_len)) p.leaf_frag = Frags::alloc(mem_, leaf_len);
    }
    ok = ok && (Node::inline_len(leaf_len) || p.leaf_frag);
  }
  if (!ok) release_prep(p, split ? x.len - k : 0, split ? k : 0, leaf_len);
  return ok;
}

// Frees what prepare allocated (the parts not yet used).
template <class Symbol>
void BasicApproxRadixTree<Symbol>::release_prep(Prep& p, std::size_t lower_len,
                                                std::size_t upper_len,
                                                std::size_t leaf_len) noexcept {
  using Frags = detail::Fragments<Symbol>;
  mem_.discard_node(p.lower);
  Frags::free(mem_, p.lower_frag, lower_len);
  Frags::free(mem_, p.upper_frag, upper_len);
  mem_.dealloc(p.upper_children, Node::child_block_bytes(p.upper_child_cap));
  mem_.dealloc(p.upper_tenants, Node::tenant_block_bytes(p.upper_tenant_cap));
  while (p.copies != kNil) {
    const std::uint32_t c = p.copies;
    p.copies = claim(c)->next;
    mem_.discard_claim(c);
  }
  mem_.discard_claim(p.own);
  mem_.discard_node(p.leaf);
  Frags::free(mem_, p.leaf_frag, leaf_len);
  mem_.discard_claim(p.leaf_claim);
  p = Prep{};
}

// Splits x (index xi) after its first k symbols (kc units), holding x
// exclusively, with what p holds (see the top of this file). The LRU step
// of tenant `own` (the inserting one) is returned for the caller to make
// (old == kNil when `own` does not hold x).
template <class Symbol>
detail::SplitStep BasicApproxRadixTree<Symbol>::split_node(Node& x, std::uint32_t xi, std::size_t k,
                                                           std::size_t kc, Prep& p,
                                                           TenantId own) noexcept {
  const std::uint32_t loi = p.lower;
  p.lower = kNil;
  Node* lo = node(loi);
  lo->len = static_cast<std::uint32_t>(x.len - k);
  lo->set_count(x.count - kc);
  detail::Fragments<Symbol>::split(mem_, x, *lo, k, p.frag_mode, p.lower_frag, p.upper_frag);
  p.lower_frag = nullptr;
  p.upper_frag = nullptr;
  lo->children = x.children;
  lo->nchild = x.nchild;
  lo->child_cap_code = x.child_cap_code;
  lo->tenants = x.tenants;
  lo->ntenant = x.ntenant;
  lo->tenant_cap_code = x.tenant_cap_code;

  x.len = static_cast<std::uint32_t>(k);
  x.set_count(kc);
  if (p.upper_children != nullptr)
    x.children.block = p.upper_children;
  else
    x.children.in = {};  // inline children
  x.set_cap_child(p.upper_child_cap);
  x.nchild = 0;
  p.upper_children = nullptr;
  x.add_child(Traits::key(lo->data(), lo->len), loi);
  if (p.upper_tenants != nullptr)
    x.tenants.block = p.upper_tenants;
  else
    x.tenants.one = {};  // an inline tenant
  x.set_cap_tenant(p.upper_tenant_cap);
  x.ntenant = 0;
  p.upper_tenants = nullptr;
  detail::SplitStep own_step;
  for (std::uint32_t i = 0; i < lo->ntenant; ++i) {
    const TenantId u = lo->tenant_ids()[i];
    const std::uint32_t old = lo->claims()[i];
    const std::uint32_t m = p.copies;
    Claim* mc = claim(m);
    p.copies = mc->next;
    mc->next = kNil;
    mc->node = xi;
    x.add_tenant_entry(u, m);  // in id order: appends
    if (u == own) {
      own_step = {old, m, loi};
      continue;
    }
    TenantState* ts = tenants_.find(u);
    std::lock_guard<detail::SpinMutex> g(ts->lru_mu);
    lru(*ts).link_split_copy({old, m, loi});
  }
  mem_.add(Memory::kClaims, lo->ntenant);
  mem_.add(Memory::kNodes, 1);
  return own_step;
}

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_SPLIT_INL_HPP_
