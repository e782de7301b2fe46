// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/check-inl.hpp
// -----------------------------------------------------------------------------
//
// Not API; part of kvroute/radix_tree.hpp. What the tree says about itself:
// the size and stats queries, the debug functions (recount_sizes,
// check_invariants, debug_node: every structural invariant, the maintained
// sizes, the LRU lists and the byte accounting, recomputed from the nodes),
// and teardown.
//
// Thread safety: the queries are thread-safe; the debug functions and
// destroy() require that no other thread uses the tree.

#ifndef KVROUTE_DETAIL_RADIX_CHECK_INL_HPP_
#define KVROUTE_DETAIL_RADIX_CHECK_INL_HPP_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/blocks.hpp"
#include "kvroute/detail/radix/fragments.hpp"
#include "kvroute/radix_tree.hpp"  // the class this completes

KVROUTE_NAMESPACE_BEGIN

template <class Symbol>
std::vector<TenantSize> BasicApproxRadixTree<Symbol>::tenant_sizes() const {
  std::vector<TenantSize> out;
  for (const TenantState* ts = tenants_.first(); ts != nullptr; ts = ts->next_state) {
    if (ts->registered.load(std::memory_order_relaxed)) {
      out.push_back({ts->id, ts->size.load(std::memory_order_relaxed)});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const TenantSize& a, const TenantSize& b) { return a.tenant < b.tenant; });
  return out;
}

template <class Symbol>
std::optional<std::uint64_t> BasicApproxRadixTree<Symbol>::tenant_recency_at(
    TenantId tenant, std::size_t units, std::size_t max_claims) const noexcept {
  TenantState* ts = tenants_.find(tenant);
  if (ts == nullptr || max_claims == 0) return std::nullopt;
  // A tenant that holds fewer units answers without the lock its stamps take.
  if (ts->size.load(std::memory_order_relaxed) < units) return std::nullopt;
  std::lock_guard<detail::SpinMutex> g(ts->lru_mu);
  if (ts->head == kNil) return std::nullopt;
  std::uint32_t ci = ts->head;
  std::size_t seen = node(claim(ci)->node)->count_unlocked();
  for (std::size_t walked = 1; seen < units && walked < max_claims; ++walked) {
    const std::uint32_t next = claim(ci)->next;
    if (next == kNil) break;
    ci = next;
    seen += node(claim(ci)->node)->count_unlocked();
  }
  return claim(ci)->recency();
}

template <class Symbol>
RadixTreeStats BasicApproxRadixTree<Symbol>::stats() const noexcept {
  mem_.collect();
  RadixTreeStats s;
  s.nodes = mem_.count(Memory::kNodes) + 1;
  s.bytes = mem_.bytes();
  s.reserved_bytes = mem_.reserved_bytes();
  s.units = mem_.count(Memory::kUnits);
  s.symbols = mem_.count(Memory::kSymbols);
  s.claims = mem_.count(Memory::kClaims);
  s.tenants = registered_.load(std::memory_order_relaxed);
  s.clock = now();
  s.stamps =
      recency_shift_ == 0 ? clock_.load(std::memory_order_relaxed) : mem_.count(Memory::kStamps);
  s.stamped_claims = mem_.count(Memory::kStamped);
  s.removed_units = removed_units_.load(std::memory_order_relaxed);
  s.descent_fallbacks = mem_.count(Memory::kFallbacks);
  return s;
}

template <class Symbol>
std::vector<TenantSize> BasicApproxRadixTree<Symbol>::recount_sizes() const {
  std::vector<TenantSize> out;
  for (std::uint32_t i = 0; i < root_.ntenant; ++i) out.push_back({root_.tenant_ids()[i], 0});
  std::vector<Node*> stack;
  push_children(root_, stack);
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (std::uint32_t i = 0; i < n->ntenant; ++i) {
      const TenantId t = n->tenant_ids()[i];
      auto it = std::lower_bound(out.begin(), out.end(), t,
                                 [](const TenantSize& a, TenantId v) { return a.tenant < v; });
      if (it == out.end() || it->tenant != t) it = out.insert(it, {t, 0});
      it->size += n->count;
    }
    push_children(*n, stack);
  }
  return out;
}

template <class Symbol>
auto BasicApproxRadixTree<Symbol>::debug_node(sequence_type seq) const -> std::optional<DebugNode> {
  const Symbol* text = seq.data();
  const std::size_t n = seq.size();
  const Node* x = &root_;
  std::size_t pos = 0;
  while (pos < n) {
    const std::uint32_t ci = x->find_child(Traits::key(text + pos, n - pos));
    if (ci == kNil) return std::nullopt;
    const Node* c = node(ci);
    const std::size_t k = common_units(*c, text + pos, n - pos);
    x = c;
    pos += k;
    if (k < c->len) {
      if (pos < n) return std::nullopt;
      break;
    }
  }
  DebugNode d;
  d.fragment = fragment_type(x->data(), x->data() + x->len);
  d.units = x->count;
  d.children = x->nchild;
  for (std::uint32_t i = 0; i < x->ntenant; ++i) {
    const TenantId t = x->tenant_ids()[i];
    d.tenants.push_back(t);
    bool in_child = false;
    for (std::uint32_t j = 0; j < x->nchild && !in_child; ++j) {
      in_child = node(x->kids()[j])->find_claim(t) != kNil;
    }
    if (!in_child) d.leaf_tenants.push_back(t);
  }
  return d;
}

// What check() adds up over the nodes, to compare with the counters.
template <class Symbol>
struct BasicApproxRadixTree<Symbol>::CheckTotals {
  std::size_t nodes = 0, units = 0, symbols = 0, claims = 0, bytes = 0;
  std::vector<TenantSize> sizes;  // per tenant, from the nodes it holds
};

template <class Symbol>
std::string BasicApproxRadixTree<Symbol>::check_invariants() const {
  mem_.collect();  // quiescent: everything retired is freed
  CheckTotals t;
  struct Item {
    const Node* node;
    const Node* parent;
    std::uint32_t index;
  };
  std::vector<Item> stack;
  stack.push_back({&root_, nullptr, kRoot});
  while (!stack.empty()) {
    const Item it = stack.back();
    stack.pop_back();
    if (std::string e = check_node(*it.node, it.parent, it.index, t); !e.empty()) return e;
    for (std::uint32_t i = 0; i < it.node->nchild; ++i) {
      stack.push_back({node(it.node->kids()[i]), it.node, it.node->kids()[i]});
    }
  }
  if (std::string e = check_tenants(t); !e.empty()) return e;
  if (t.nodes != mem_.count(Memory::kNodes)) return "node count is wrong";
  if (t.units != mem_.count(Memory::kUnits)) return "unit count is wrong";
  if (t.symbols != mem_.count(Memory::kSymbols)) return "symbol count is wrong";
  if (t.claims != mem_.count(Memory::kClaims)) return "claim count is wrong";
  if (Memory::kNodeUnits * t.nodes + Memory::kClaimUnits * t.claims != mem_.slab_units()) {
    return "units in the slab != nodes and claims";
  }
  t.bytes += tenants_.table_bytes();
  if (t.bytes != mem_.count(Memory::kBytes)) {
    return "bytes: counted " + std::to_string(mem_.count(Memory::kBytes)) +
           " but structure holds " + std::to_string(t.bytes);
  }
  return {};
}

// One node's invariants (n is the node at slab index `index`, below
// `parent`, null for the root), added to the totals.
template <class Symbol>
std::string BasicApproxRadixTree<Symbol>::check_node(const Node& n, const Node* parent,
                                                     std::uint32_t index, CheckTotals& t) const {
  using Frags = detail::Fragments<Symbol>;
  // Before any data(): which member of frag it reads follows from this.
  if ((n.frag_kind == detail::kFragInline) != Node::inline_len(n.len)) {
    return "a fragment is in the node iff it fits there: not so";
  }
  if (n.frag_kind != detail::kFragInline && n.frag.ptr == nullptr)
    return "a fragment has no buffer";
  if (parent != nullptr) {
    ++t.nodes;
    if (n.len == 0) return "a non-root node has an empty fragment";
    if (n.ntenant == 0) return "a non-root node has no tenant";
    if (n.count != Traits::count(n.data(), n.len)) return "a node's unit count is stale";
    if (parent->find_child(Traits::key(n.data(), n.len)) != index) {
      return "a child is not under the key of its first unit";
    }
  }
  if (n.nchild > n.cap_child()) return "more children than capacity";
  if (n.ntenant > n.cap_tenant()) return "more tenants than capacity";
  t.units += n.count;
  t.symbols += n.len;
  if (n.frag_kind != detail::kFragInline)
    t.bytes += Frags::buffer(n.frag.ptr, n.len, n.frag_kind).bytes;
  if (n.frag_kind == detail::kFragInBuffer) {
    const typename Frags::Header h = Frags::header(n.frag.ptr);
    const std::size_t live = n.len * sizeof(Symbol);
    if (h.offset < Frags::kHeaderBytes || h.offset + live > h.total) {
      return "a fragment's header does not frame it in its buffer";
    }
    if (h.total - live > Frags::kDeadPerLive * live + Frags::kHeaderBytes) {
      return "a buffer holds too many dead bytes";
    }
  }
  t.bytes += Node::child_block_bytes(n.cap_child()) + Node::tenant_block_bytes(n.cap_tenant());
  for (std::uint32_t i = 1; i < n.nchild; ++i) {
    if (!(n.keys()[i - 1] < n.keys()[i])) return "child keys are not sorted";
  }
  for (std::uint32_t i = 0; i < n.ntenant; ++i) {
    const TenantId tid = n.tenant_ids()[i];
    const Claim* c = claim(n.claims()[i]);
    ++t.claims;
    if (i > 0 && !(n.tenant_ids()[i - 1] < tid)) return "tenant ids are not sorted";
    if (c->node != index) return "a claim names another node";
    if (parent == nullptr) {
      if (c->up != kNil) return "a root claim has a parent claim";
      continue;
    }
    const std::uint32_t pc = parent->find_claim(tid);
    if (pc == kNil) return "a tenant holds a node but not its parent";
    if (c->up != pc) return "a claim's parent claim is not on the parent node";
    if (c->recency() > claim(pc)->recency()) return "a node is more recent than its parent";
    auto s = std::lower_bound(t.sizes.begin(), t.sizes.end(), tid,
                              [](const TenantSize& a, TenantId v) { return a.tenant < v; });
    if (s == t.sizes.end() || s->tenant != tid) s = t.sizes.insert(s, {tid, 0});
    s->size += n.count;
  }
  return {};
}

// Every tenant: registered iff at the root; its size and LRU list
// consistent with the nodes (t.sizes); its state's bytes added to t.
template <class Symbol>
std::string BasicApproxRadixTree<Symbol>::check_tenants(CheckTotals& t) const {
  std::size_t registered = 0;
  std::size_t listed_total = 0;
  for (const TenantState* ts = tenants_.first(); ts != nullptr; ts = ts->next_state) {
    t.bytes += sizeof(TenantState);
    const bool at_root = root_.find_claim(ts->id) != kNil;
    if (at_root != ts->registered.load()) return "registered flag disagrees with the root";
    if (at_root) ++registered;
    std::size_t expect = 0;
    auto s = std::lower_bound(t.sizes.begin(), t.sizes.end(), ts->id,
                              [](const TenantSize& a, TenantId v) { return a.tenant < v; });
    if (s != t.sizes.end() && s->tenant == ts->id) expect = s->size;
    if (!at_root && expect != 0) return "an unregistered tenant holds nodes";
    if (ts->size.load() != expect) {
      return "tenant " + std::to_string(ts->id) + ": size " + std::to_string(ts->size.load()) +
             " but recount " + std::to_string(expect);
    }
    if (std::string e = check_list(*ts, t.claims); !e.empty()) return e;
    listed_total += ts->listed.load();
  }
  if (registered != registered_.load()) return "registered count is wrong";
  if (listed_total + root_.ntenant != t.claims) return "claims in nodes != claims listed";
  return {};
}

// One tenant's LRU list: links, order by recency, every claim on its node
// and behind its parent claim, the tail pointer and the listed count.
template <class Symbol>
std::string BasicApproxRadixTree<Symbol>::check_list(const TenantState& ts,
                                                     std::size_t claims) const {
  std::size_t listed = 0;
  std::uint32_t prev = kNil;
  for (std::uint32_t ci = ts.head; ci != kNil; prev = ci, ci = claim(ci)->next) {
    const Claim* c = claim(ci);
    ++listed;
    if (listed > claims) return "an LRU list has a cycle";
    if (c->prev != prev) return "LRU list links are broken";
    if (c->up == kNil) return "a root claim is listed";
    if (prev != kNil && claim(prev)->recency() < c->recency()) {
      return "LRU list is not ordered by recency";
    }
    if (node_or_root(c->node)->find_claim(ts.id) != ci) return "a listed claim is not on its node";
    // Ancestors are ahead: the parent claim must be found before c.
    if (claim(c->up)->up != kNil) {
      bool ahead = false;
      for (std::uint32_t q = c->prev; q != kNil && !ahead; q = claim(q)->prev) ahead = q == c->up;
      if (!ahead) return "a claim is ahead of its parent claim in the LRU list";
    }
  }
  if (prev != ts.tail) return "LRU tail pointer is wrong";
  if (listed != ts.listed.load()) return "listed count is wrong";
  return {};
}

// Frees what nodes own outside the slab (nodes and claims are trivially
// destructible; the slab frees its chunks itself), and the tenant states.
template <class Symbol>
void BasicApproxRadixTree<Symbol>::destroy() noexcept {
  using Blocks = detail::NodeBlocks<Symbol>;
  std::vector<Node*> stack;
  push_children(root_, stack);
  Blocks::free_children(mem_, root_);
  Blocks::free_tenants(mem_, root_);
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    push_children(*n, stack);
    if (n->frag_kind != detail::kFragInline) {
      detail::Fragments<Symbol>::free(mem_, n->frag.ptr, n->len, n->frag_kind);
    }
    Blocks::free_children(mem_, *n);
    Blocks::free_tenants(mem_, *n);
  }
  tenants_.destroy(mem_);
}

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_CHECK_INL_HPP_
