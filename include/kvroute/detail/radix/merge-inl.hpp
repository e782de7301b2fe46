// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/merge-inl.hpp
// -----------------------------------------------------------------------------
//
// Not API; part of kvroute/radix_tree.hpp. Merges after an eviction: when
// evicting a branch (or a tenant) leaves a node m with one child c that has
// exactly m's tenants, the two are joined back into one node, so that
// chains of single-child nodes do not pile up behind evicted branches (the
// gateway never merges): no extra level in later descents, no node and
// claims kept for nothing.
//
// Only when every one of those tenants last used m on the way into c: a
// merged node is evicted as one, and a use that ended at m is more recent
// than c's text, which an eviction must be able to take alone (the most
// recent insert of a tenant always survives an eviction to a budget it
// fits in). A pair whose joined text would exceed kMaxMergeBytes stays
// split: the copy, made under both nodes' locks, would cost more than the
// node saves.
//
// m takes c's text (appended to its own), children and descendants, and
// keeps its own claims, which take c's recency and mark; c's claims leave
// the LRU lists and the claims below c take m's as their parent claims. The
// merge holds m and c, c's children (an insert that holds a child alone
// may be splitting it, which copies claims whose parent claims are c's),
// and, without waiting, the maintenance mutex of c's other tenants, since
// their claims on c go away here while their own maintenance may hold one
// of them as its next LRU tail. When one is busy, or memory for the joined
// text is short, nothing changes: a chain is only a cost.

#ifndef KVROUTE_DETAIL_RADIX_MERGE_INL_HPP_
#define KVROUTE_DETAIL_RADIX_MERGE_INL_HPP_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/blocks.hpp"
#include "kvroute/detail/radix/fragments.hpp"
#include "kvroute/detail/radix/lru.hpp"
#include "kvroute/radix_tree.hpp"  // the class this completes

KVROUTE_NAMESPACE_BEGIN

// Whether every tenant of m (the same as c's, in the same order) last used
// m only on the way into c: its claim on m is not marked `ended` and has
// the recency of its claim on c. Stamps that run meanwhile pass through
// both nodes (they end below c: m and c are held), so they write both
// claims alike.
template <class Symbol>
bool BasicApproxRadixTree<Symbol>::used_together(const Node& m, const Node& c) const noexcept {
  for (std::uint32_t i = 0; i < m.ntenant; ++i) {
    const Claim* mc = claim(m.claims()[i]);
    if (mc->ended() || mc->recency() != claim(c.claims()[i])->recency()) return false;
  }
  return true;
}

// Merges m's only child into m (see the top of this file). Requires m (not
// the root) locked exclusively and `held`'s maint_mu. Returns whether it
// merged.
template <class Symbol>
bool BasicApproxRadixTree<Symbol>::merge_only_child(Node& m, const TenantState& held) noexcept {
  if (m.nchild != 1) return false;
  const std::uint32_t ci = m.kids()[0];
  Node* c = node(ci);
  c->lock.lock();  // top-down, as every path locks
  const std::uint32_t nt = c->ntenant;
  const std::size_t len = std::size_t{m.len} + c->len;
  if (nt != m.ntenant || !std::equal(c->tenant_ids(), c->tenant_ids() + nt, m.tenant_ids()) ||
      len * sizeof(Symbol) > kMaxMergeBytes || !used_together(m, *c)) {
    c->lock.unlock();
    return false;
  }
  for (std::uint32_t k = 0; k < c->nchild; ++k) node(c->kids()[k])->lock.lock();
  const auto unlock_children = [&]() noexcept {
    for (std::uint32_t k = 0; k < c->nchild; ++k) node(c->kids()[k])->lock.unlock();
  };
  // The other tenants' maintenance, without waiting: the first `got`.
  const std::uint32_t* ids = c->tenant_ids();
  std::uint32_t got = 0;
  while (got < nt && (ids[got] == held.id || tenants_.find(ids[got])->maint_mu.try_lock())) ++got;
  const auto unlock_others = [&]() noexcept {
    for (std::uint32_t i = 0; i < got; ++i) {
      if (ids[i] != held.id) tenants_.find(ids[i])->maint_mu.unlock();
    }
  };
  // The joined fragment: a new buffer, or a short one built here.
  typename Node::Frag joined{nullptr};
  Symbol* f = got != nt               ? nullptr
              : Node::inline_len(len) ? joined.in
                                      : detail::Fragments<Symbol>::alloc(mem_, len);
  if (f == nullptr) {
    unlock_others();
    unlock_children();
    c->lock.unlock();
    return false;
  }
  std::memcpy(f, m.data(), m.len * sizeof(Symbol));
  std::memcpy(f + m.len, c->data(), c->len * sizeof(Symbol));
  unlink_merged_claims(m, *c);
  unlock_children();
  merge_into(m, *c, joined, f, len);
  unlock_others();  // while c's tenant array is still there (free_node retires it)
  c->lock.unlock();
  free_node(ci);
  return true;
}

// The claims' side of a merge: for each tenant, the claims below c take
// its claim on m as their parent claim, its claim on m takes the stamp word
// of its claim on c (the merged node ends where c ended), and its claim on
// c leaves its LRU list and is freed. Requires what merge_only_child holds.
template <class Symbol>
void BasicApproxRadixTree<Symbol>::unlink_merged_claims(Node& m, Node& c) noexcept {
  const std::uint32_t* ids = c.tenant_ids();
  for (std::uint32_t i = 0; i < c.ntenant; ++i) {
    TenantState* u = tenants_.find(ids[i]);
    const std::uint32_t mc = m.claims()[i];
    const std::uint32_t cc = c.claims()[i];
    {
      std::lock_guard<detail::SpinMutex> g(u->lru_mu);
      for (std::uint32_t k = 0; k < c.nchild; ++k) {
        const std::uint32_t below = node(c.kids()[k])->find_claim(ids[i]);
        if (below != kNil) claim(below)->up = mc;
      }
      claim(mc)->set_stamp(claim(cc)->recency(), claim(cc)->ended());
      lru(*u).unlink(cc);
      u->listed.fetch_sub(1, std::memory_order_relaxed);
    }
    mem_.free_claim(cc);
  }
}

// The nodes' side of a merge: m takes c's children and the joined text
// (`joined` when it fits in the node, else the buffer `buf`), and c is left
// with nothing but its slot and its tenant block for free_node to retire.
template <class Symbol>
void BasicApproxRadixTree<Symbol>::merge_into(Node& m, Node& c, typename Node::Frag joined,
                                              Symbol* buf, std::size_t len) noexcept {
  using Frags = detail::Fragments<Symbol>;
  detail::NodeBlocks<Symbol>::retire_children(mem_, m);  // it held c only
  m.children = c.children;
  m.nchild = c.nchild;
  m.child_cap_code = c.child_cap_code;
  c.children.block = nullptr;
  c.nchild = 0;
  c.child_cap_code = 0;
  Frags::retire(mem_, m);
  if (Node::inline_len(len))
    m.frag = joined;
  else
    m.frag.ptr = buf;
  m.frag_kind = Frags::kind_for(len);
  m.len = static_cast<std::uint32_t>(len);
  m.set_count(std::uint64_t{m.count} + c.count);
  // c's text now lives in m, as its children do: free_node counts out and
  // retires only what c still holds (no text, no children, no claims).
  Frags::retire(mem_, c);
  c.frag.ptr = nullptr;
  c.frag_kind = detail::kFragInline;
  c.len = 0;
  c.set_count(0);
  c.ntenant = 0;  // its claims are gone; free_node retires its block
}

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_MERGE_INL_HPP_
