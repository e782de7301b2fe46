// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/evict-inl.hpp
// -----------------------------------------------------------------------------
//
// Not API; part of kvroute/radix_tree.hpp. Forgetting: eviction to a budget,
// drop_older_than (feedback: what a server no longer holds) and
// remove_tenant all remove a tenant's claims from the tail of its LRU list,
// which is always a leaf for the tenant, one claim at a time: no traversal
// of the tree and no heap over its leaves, so a tenant within budget costs
// O(1) and an eviction costs what it removes. A node that no tenant holds
// any more is unlinked and freed (retired: readers may still be inside it);
// a node left with one child may be merged with it (merge-inl.hpp).
//
// These operations serialise per tenant on its maintenance mutex, which
// match never takes (an insert takes it only for its own reactive
// eviction). A node is unlinked only while its parent's and its own locks
// are held exclusively, so no reader is inside it, none can reach it again,
// no insert is upgrading its lock (that insert would hold the parent), and
// an insert whose optimistic descent stopped in it finds its version moved
// on when it locks it, and walks again.

#ifndef KVROUTE_DETAIL_RADIX_EVICT_INL_HPP_
#define KVROUTE_DETAIL_RADIX_EVICT_INL_HPP_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/blocks.hpp"
#include "kvroute/detail/radix/fragments.hpp"
#include "kvroute/detail/radix/lru.hpp"
#include "kvroute/radix_tree.hpp"  // the class this completes

KVROUTE_NAMESPACE_BEGIN

template <class Symbol>
EvictResult BasicApproxRadixTree<Symbol>::evict(std::size_t budget) noexcept {
  EvictResult total;
  for (TenantState* ts = tenants_.first(); ts != nullptr; ts = ts->next_state) {
    if (ts->size.load(std::memory_order_relaxed) <= budget) continue;
    std::lock_guard<std::mutex> m(ts->maint_mu);
    total += evict_loop(*ts, [budget](const TenantState& st, const Claim&) {
      return st.size.load(std::memory_order_relaxed) > budget;
    });
  }
  mem_.collect();
  return total;
}

template <class Symbol>
EvictResult BasicApproxRadixTree<Symbol>::evict_tenant(TenantId tenant,
                                                       std::size_t budget) noexcept {
  TenantState* ts = tenants_.find(tenant);
  if (ts == nullptr) return {};
  std::lock_guard<std::mutex> m(ts->maint_mu);
  const EvictResult r = evict_loop(*ts, [budget](const TenantState& st, const Claim&) {
    return st.size.load(std::memory_order_relaxed) > budget;
  });
  mem_.collect();
  return r;
}

template <class Symbol>
EvictResult BasicApproxRadixTree<Symbol>::drop_older_than(TenantId tenant,
                                                          std::uint64_t recency) noexcept {
  TenantState* ts = tenants_.find(tenant);
  if (ts == nullptr) return {};
  std::lock_guard<std::mutex> m(ts->maint_mu);
  // No collect() here (feedback may come with every request): what this
  // retires is freed by the domain's own batches and by maintenance.
  return evict_loop(
      *ts, [recency](const TenantState&, const Claim& c) { return c.recency() < recency; });
}

template <class Symbol>
bool BasicApproxRadixTree<Symbol>::remove_tenant(TenantId tenant) noexcept {
  TenantState* ts = tenants_.find(tenant);
  if (ts == nullptr) return false;
  std::lock_guard<std::mutex> m(ts->maint_mu);
  for (;;) {
    evict_loop(*ts, [](const TenantState&, const Claim&) { return true; });
    root_.lock.lock();
    std::unique_lock<detail::SpinMutex> g(ts->lru_mu);
    if (ts->head != kNil) {  // an insert in flight added more
      g.unlock();
      root_.lock.unlock();
      std::this_thread::yield();
      continue;
    }
    // No insert of the tenant is in flight below the root: an insert holds
    // the root's lock, or (from an optimistic descent) a node on which the
    // tenant's claim is listed, which the check above would see and which
    // no eviction can take while that node is locked; and it keeps one or
    // the other until its claims below are linked.
    const std::uint32_t rc = root_.find_claim(tenant);
    if (rc == kNil) {
      g.unlock();
      root_.lock.unlock();
      return false;
    }
    root_.remove_tenant_entry(tenant);
    ts->registered.store(false, std::memory_order_relaxed);
    ts->size.store(0, std::memory_order_relaxed);
    registered_.fetch_sub(1, std::memory_order_relaxed);
    g.unlock();
    root_.lock.unlock();
    mem_.free_claim(rc);
    mem_.collect();
    return true;
  }
}

// Removes t's least recent claims while `more(ts, tail)` holds. Requires
// ts.maint_mu. Each step locks the tail claim's parent node and node
// exclusively (in that order), re-checks under the LRU mutex that nothing
// moved, removes the claim, and unlinks and frees the node if no tenant
// holds it. No insert is inside the node or upgrading its lock then: an
// insert in a node holds it (shared or exclusively), and upgrades only
// while it holds the parent shared.
template <class Symbol>
template <class More>
EvictResult BasicApproxRadixTree<Symbol>::evict_loop(TenantState& ts, More more) noexcept {
  EvictResult r;
  int failures = 0;
  while (failures < kMaxEvictFailures) {
    std::uint32_t ci, up, ndi, pi;
    {
      std::lock_guard<detail::SpinMutex> g(ts.lru_mu);
      ci = ts.tail;
      if (ci == kNil || !more(ts, *claim(ci))) break;
      const Claim* c = claim(ci);
      up = c->up;
      ndi = c->node;
      pi = claim(up)->node;
    }
    ++r.visited;
    // Both nodes stay allocated: each holds a claim of t, and only this
    // thread (holding maint_mu) removes t's claims.
    Node* parent = node_or_root(pi);
    Node* nd = node(ndi);
    parent->lock.lock();
    nd->lock.lock();
    std::size_t units = 0;
    bool moved, stop;
    {
      std::lock_guard<detail::SpinMutex> g(ts.lru_mu);
      const Claim* c = claim(ci);
      moved = ts.tail != ci || c->node != ndi || c->up != up || claim(up)->node != pi;
      stop = !moved && !more(ts, *c);
      if (!moved && !stop) {
        lru(ts).unlink(ci);
        units = nd->count;
        ts.size.fetch_sub(units, std::memory_order_relaxed);
        ts.listed.fetch_sub(1, std::memory_order_relaxed);
      }
    }
    if (moved || stop) {
      nd->lock.unlock();
      parent->lock.unlock();
      if (stop) break;
      ++failures;
      continue;
    }
    nd->remove_tenant_entry(ts.id);
    mem_.free_claim(ci);
    const bool unlink = nd->ntenant == 0 && nd->nchild == 0;
    if (unlink) {
      parent->remove_child(*nd, ndi);
      ++r.nodes;
    }
    // The node that lost a child or a tenant may now be a link of a chain
    // (one child, the same tenants): merge the two back into one node.
    Node* kept = unlink ? (pi == kRoot ? nullptr : parent) : nd;
    if (kept != nullptr && merge_only_child(*kept, ts)) ++r.merges;
    nd->lock.unlock();
    parent->lock.unlock();
    if (unlink) free_node(ndi);
    ++r.claims;
    r.units += units;
    failures = 0;  // the cap is on retries in a row, not over a long eviction
  }
  removed_units_.fetch_add(r.units, std::memory_order_relaxed);
  return r;
}

// Frees an unlinked node and its storage (its claims must be gone): what
// readers may still hold is retired.
template <class Symbol>
void BasicApproxRadixTree<Symbol>::free_node(std::uint32_t i) noexcept {
  Node* n = node(i);
  KVROUTE_ASSERT(n->ntenant == 0, "radix tree: freeing a node with tenants");
  mem_.sub(Memory::kNodes, 1);
  mem_.sub(Memory::kUnits, n->count);
  mem_.sub(Memory::kSymbols, n->len);
  detail::Fragments<Symbol>::retire(mem_, *n);
  detail::NodeBlocks<Symbol>::retire_children(mem_, *n);
  detail::NodeBlocks<Symbol>::retire_tenants(mem_, *n);
  mem_.retire_node_slot(i);
}

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_EVICT_INL_HPP_
