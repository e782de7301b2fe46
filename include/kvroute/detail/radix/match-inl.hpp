// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/match-inl.hpp
// -----------------------------------------------------------------------------
//
// Not API; part of kvroute/radix_tree.hpp. The reads: match (longest prefix,
// a tenant chosen among the deepest node's holders, its path stamped),
// match_for_tenant and peek_for_tenant (one tenant's longest prefix, with
// and without the stamp), visit_path (every holder along a path), and the
// stamp itself.
//
// Recency is a per-tree logical clock. Every insert stamps its whole path
// for its tenant; every match stamps the chosen tenant's path from the
// deepest matched node up to the root. A path stamp keeps an ancestor
// never older than its descendants, which is what makes the per-tenant LRU
// exact and cheap (detail/radix/lru.hpp). With recency steps (recency_shift
// s > 0) a recency is a step of 2^s stamps, counted per thread: a thread's
// every 2^s-th stamp moves the tree's step on, so that a stamp writes no
// line another thread writes (a clock that every stamp advanced would move
// its line between cores on every request).

#ifndef KVROUTE_DETAIL_RADIX_MATCH_INL_HPP_
#define KVROUTE_DETAIL_RADIX_MATCH_INL_HPP_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <type_traits>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/lru.hpp"
#include "kvroute/radix_tree.hpp"  // the class this completes

KVROUTE_NAMESPACE_BEGIN

template <class Symbol>
template <class Chooser>
requires RadixChooser<Chooser> MatchResult BasicApproxRadixTree<Symbol>::match(sequence_type seq,
                                                                               Chooser&& choose)
noexcept {
  MatchResult r;
  const Symbol* text = seq.data();
  const std::size_t n = seq.size();
  const detail::EpochDomain::Section sec = mem_.enter();
  const Descent d = descend_any<false>(sec, text, n);
  Node* const x = d.node;
  r.matched = d.matched;
  r.matched_symbols = d.pos;
  r.candidates = x->ntenant;
  if (x->ntenant > 0) {
    const TenantId t = choose(candidates(*x));
    const std::uint32_t c = t == kNoTenant ? kNil : x->find_claim(t);
    if (c != kNil) {
      TenantState* ts = tenants_.find(t);
      std::lock_guard<detail::SpinMutex> g(ts->lru_mu);
      r.previous_recency = claim(c)->recency();
      r.recency = stamp_path(*ts, c);
      r.tenant = t;
    }
  }
  x->lock.unlock_shared();
  r.input = d.matched + Traits::count(text + d.pos, n - d.pos);
  return r;
}

template <class Symbol>
template <class Visit>
requires std::is_nothrow_invocable_v<Visit&, const RadixCandidates&, std::size_t> MatchResult
BasicApproxRadixTree<Symbol>::visit_path(sequence_type seq, Visit&& visit)
noexcept {
  MatchResult r;
  const Symbol* text = seq.data();
  const std::size_t n = seq.size();
  root_.lock.lock_shared();
  Node* x = &root_;
  std::size_t pos = 0;
  std::size_t matched = 0;
  visit(candidates(*x), std::size_t{0});
  while (pos < n) {
    const std::uint32_t ci = x->find_child(Traits::key(text + pos, n - pos));
    if (ci == kNil) break;
    Node* c = node(ci);
    c->lock.lock_shared();
    x->lock.unlock_shared();
    x = c;
    const std::size_t k = common_units(*x, text + pos, n - pos);
    const bool whole = k == x->len;
    matched += whole ? x->count : Traits::count(text + pos, k);
    pos += k;
    visit(candidates(*x), matched);
    if (!whole) break;
  }
  r.candidates = x->ntenant;
  x->lock.unlock_shared();
  r.matched = matched;
  r.matched_symbols = pos;
  r.input = matched + Traits::count(text + pos, n - pos);
  return r;
}

// match_for_tenant / peek_for_tenant: descends only along nodes `tenant`
// holds; with Stamp, stamps its path to where the descent stopped.
template <class Symbol>
template <bool Stamp>
TenantMatch BasicApproxRadixTree<Symbol>::tenant_descent(sequence_type seq,
                                                         TenantId tenant) noexcept {
  TenantMatch r;
  const Symbol* text = seq.data();
  const std::size_t n = seq.size();
  TenantState* ts = tenants_.find(tenant);
  root_.lock.lock_shared();
  std::uint32_t xc = ts == nullptr ? kNil : root_.find_claim(tenant);
  Descent d{&root_, nullptr, kRoot, 0, 0, 0};
  if (xc != kNil) {
    d = descend<false>(text, n, [&](const Node& c) noexcept {
      const std::uint32_t cc = c.find_claim(tenant);
      if (cc == kNil) return false;
      xc = cc;
      return true;
    });
    r.found = true;
    if constexpr (Stamp) {
      std::lock_guard<detail::SpinMutex> g(ts->lru_mu);
      r.previous_recency = claim(xc)->recency();
      r.recency = stamp_path(*ts, xc);
    } else {
      r.previous_recency = r.recency = claim(xc)->recency();
    }
  }
  d.node->lock.unlock_shared();
  r.matched = d.matched;
  r.matched_symbols = d.pos;
  r.input = d.matched + Traits::count(text + d.pos, n - d.pos);
  return r;
}

// The recency of a new stamp. Requires the stamped tenant's lru_mu, like
// the stamp: what one tenant's stamps read is then ordered by that lock, so
// its list stays sorted by recency.
template <class Symbol>
std::uint64_t BasicApproxRadixTree<Symbol>::next_recency() noexcept {
  if (recency_shift_ == 0) return clock_.fetch_add(1, std::memory_order_relaxed) + 1;
  const std::size_t mine = mem_.add_to_stripe(Memory::kStamps, 1);
  if ((mine & ((std::size_t{1} << recency_shift_) - 1)) == 0) {
    return clock_.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  return clock_.load(std::memory_order_relaxed);
}

// Stamps claim `ci` and its ancestors (LruList::stamp) with a new recency,
// which it returns. Requires ts.lru_mu and ci's node locked.
template <class Symbol>
std::uint64_t BasicApproxRadixTree<Symbol>::stamp_path(TenantState& ts, std::uint32_t ci) noexcept {
  const std::uint64_t e = next_recency();
  mem_.add(Memory::kStamped, lru(ts).stamp(ci, e, recency_shift_ != 0));
  return e;
}

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_MATCH_INL_HPP_
