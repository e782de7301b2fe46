// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/insert-inl.hpp
// -----------------------------------------------------------------------------
//
// Not API; part of kvroute/radix_tree.hpp. Inserts: a tenant comes to hold
// every node on its text's path, which is created or split as needed
// (detail/radix/split-inl.hpp), and the whole path is stamped for it.
//
// An insert descends optimistically as far as its tenant already holds the
// path (every ancestor of a node a tenant holds is held too), and from there
// on with lock coupling: it compares text against a node's fragment under
// that node's lock (and its parent's, shared) alone, and takes a node
// exclusively only where it changes it (adds a child, a tenant, or splits
// it). Where it upgrades a shared hold to get there, it holds the node's
// parent shared meanwhile, so that the node stays linked while its lock is
// released; a node that another writer held meanwhile is compared again (a
// split shortens a fragment, a merge lengthens it). match_and_insert goes
// on from its own descent's node when the decided tenant holds it, so the
// text is compared once.
//
// With Options::tenant_budget, an insert evicts its own tenant back to the
// budget before it returns (finish_insert), outside every node lock and
// outside its epoch section (an open section holds back reclamation).

#ifndef KVROUTE_DETAIL_RADIX_INSERT_INL_HPP_
#define KVROUTE_DETAIL_RADIX_INSERT_INL_HPP_

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/blocks.hpp"
#include "kvroute/detail/radix/fragments.hpp"
#include "kvroute/detail/radix/lru.hpp"
#include "kvroute/radix_tree.hpp"  // the class this completes

KVROUTE_NAMESPACE_BEGIN

// What a caller already counted of the text: text[from, n) is `units`
// units. match_and_insert counts the unmatched tail for the match rate; a
// new leaf that starts there takes that count instead of counting the same
// bytes again.
template <class Symbol>
struct BasicApproxRadixTree<Symbol>::TailUnits {
  std::size_t from = static_cast<std::size_t>(-1);
  std::size_t units = 0;
};

// Where an insert stands (insert_from). Node x (index xi) is locked,
// exclusively iff excl, and so is its parent, shared (null when x is the
// root, or when the insert will not upgrade x's lock: x held exclusively
// with t's claim, or held shared with t's claim when the text ends at x's
// end or goes on into an existing child). Holding the parent is what keeps
// x linked and allocated while x's lock is upgraded (released shared,
// taken exclusively): unlinking x needs the parent exclusively. For the
// same reason t's claim on the parent, which a new claim on x hangs below,
// cannot be evicted or moved meanwhile.
template <class Symbol>
struct BasicApproxRadixTree<Symbol>::Inserting {
  const Symbol* text = nullptr;
  std::size_t n = 0;
  TenantState* ts = nullptr;
  InsertResult* r = nullptr;
  TailUnits tail{};
  Node* parent = nullptr;
  Node* x = nullptr;
  std::uint32_t xi = kRoot;
  bool excl = false;
  std::uint32_t xc = kNil;  // t's claim on x
  std::uint32_t pc = kNil;  // t's claim on the parent, when xc is kNil
  std::size_t pos = 0;      // x's fragment starts at text[pos]
  std::size_t k = 0;        // the common prefix of x's fragment and text[pos, n)
  // A new leaf's fragment, allocated and filled before the exclusive lock
  // is taken (text[pre_at, n)), so that the node is held exclusively only
  // for the pointer updates. Used if the leaf still starts there.
  Symbol* pre = nullptr;
  std::size_t pre_at = 0;
  // The split's step for t (split_node), made in the next hold of t's
  // lru_mu: the leaf's link or the stamp, with x still held. Meanwhile the
  // copy is reachable by no one (x's tenants are read under x's lock), and
  // t's old claim still says x and x's parent claim: a stamp from a claim
  // below it walks a chain without the copy, which then goes right ahead of
  // old, with old's recency, so the list stays ordered; an eviction that
  // picked old (or a claim below it) waits for x and then finds old moved.
  detail::SplitStep own_step{};

  TenantId tenant() const noexcept { return ts->id; }
  void drop_pre(Memory& m) noexcept {
    detail::Fragments<Symbol>::free(m, pre, n - pre_at);
    pre = nullptr;
  }
  // The parent is needed only until x is held exclusively and t's claim on
  // x exists (x cannot be unlinked then, and nothing hangs below pc).
  void let_parent_go() noexcept {
    if (parent != nullptr) parent->lock.unlock_shared();
    parent = nullptr;
  }
  // Requires ts->lru_mu.
  void link_own_copy(const detail::LruList& lru) noexcept {
    if (own_step.old == kNil) return;
    lru.link_split_copy(own_step);
    own_step = {};
  }
  // Ends the insert's holds.
  void release(Memory& m) noexcept {
    KVROUTE_ASSERT(own_step.old == kNil, "radix tree: a split's LRU step left undone");
    drop_pre(m);
    if (excl)
      x->lock.unlock();
    else
      x->lock.unlock_shared();
    let_parent_go();
  }
};

template <class Symbol>
InsertResult BasicApproxRadixTree<Symbol>::insert(sequence_type seq, TenantId tenant) noexcept {
  InsertResult r;
  if (tenant > kMaxTenantId) {
    r.status = InsertStatus::kInvalidTenant;
    return r;
  }
  if (seq.size() > kMaxSequenceSymbols) {
    r.status = InsertStatus::kTooLong;
    return r;
  }
  TenantState* ts = tenants_.find_or_create(tenant, mem_);
  if (ts == nullptr) {
    r.status = InsertStatus::kOutOfMemory;
    return r;
  }
  detail::EpochDomain::Section sec = mem_.enter();  // for what a split retires
  typename Memory::Prefaults prefaults(mem_, sec);
  if (insert_descend(sec, seq.data(), seq.size(), *ts, r) == Step::kOutOfMemory) {
    r.status = InsertStatus::kOutOfMemory;
  }
  prefaults.run();
  // Not across the reactive eviction, which may wait for another eviction
  // of the tenant: an open section holds back every reclamation.
  sec.leave();
  finish_insert(*ts);
  return r;
}

template <class Symbol>
template <class Decide>
requires RadixDecider<Decide> MatchInsertResult
BasicApproxRadixTree<Symbol>::match_and_insert(sequence_type seq, Decide&& decide)
noexcept {
  MatchInsertResult out;
  MatchResult& m = out.match;
  const Symbol* text = seq.data();
  const std::size_t n = seq.size();
  detail::EpochDomain::Section sec = mem_.enter();
  typename Memory::Prefaults prefaults(mem_, sec);
  const Descent d = descend_any<true>(sec, text, n);
  Node* const x = d.node;
  m.matched = d.matched;
  m.matched_symbols = d.pos;
  m.candidates = x->ntenant;
  m.input = d.matched + Traits::count(text + d.pos, n - d.pos);
  const TenantId t = decide(candidates(*x), static_cast<const MatchResult&>(m));
  m.tenant = t;
  if (t == kNoTenant) {
    unlock_descent(d);
    return out;
  }
  out.inserted = true;
  const std::uint32_t c = t <= kMaxTenantId ? x->find_claim(t) : kNil;
  out.held = c != kNil;
  if (c != kNil) m.previous_recency = claim(c)->recency();
  TenantState* ts = (c == kNil || n > kMaxSequenceSymbols) ? nullptr : tenants_.find(t);
  if (ts != nullptr) {
    // Consumes the descent's holds. The descent's compare in x
    // (d.pos - d.start symbols) holds: x has not changed since it was read.
    Inserting in{.text = text,
                 .n = n,
                 .ts = ts,
                 .r = &out.insert,
                 .tail = {d.pos, m.input - d.matched},
                 .parent = d.parent,
                 .x = x,
                 .xi = d.index,
                 .excl = d.excl,
                 .xc = c,
                 .pos = d.start,
                 .k = d.pos - d.start,
                 .pre = d.leaf,
                 .pre_at = d.pos};
    if (insert_from(in) == Step::kOutOfMemory) out.insert.status = InsertStatus::kOutOfMemory;
    prefaults.run();
    sec.leave();  // as in insert()
    finish_insert(*ts);
    m.recency = out.insert.recency;
    return out;
  }
  unlock_descent(d);
  prefaults.run();  // nothing held back yet; insert() defers its own
  sec.leave();
  out.insert = insert(seq, t);
  m.recency = out.insert.recency;
  return out;
}

// After an insert of ts's tenant: the reactive eviction to
// Options::tenant_budget.
template <class Symbol>
void BasicApproxRadixTree<Symbol>::finish_insert(TenantState& ts) noexcept {
  if (budget_ == kUnlimitedBudget || ts.size.load(std::memory_order_relaxed) <= budget_) return;
  std::lock_guard<std::mutex> m(ts.maint_mu);
  const std::size_t b = budget_;
  evict_loop(ts, [b](const TenantState& st, const Claim&) {
    return st.size.load(std::memory_order_relaxed) > b;
  });
}

// insert's descent: optimistic, as match's, along the nodes the tenant
// already holds, then on from the deepest of them as insert_from does,
// without comparing its fragment again. With lock coupling from the root
// (insert_once) when the section does not protect, the walk keeps meeting
// writers, or the tenant is not at the root yet.
template <class Symbol>
auto BasicApproxRadixTree<Symbol>::insert_descend(const detail::EpochDomain::Section& sec,
                                                  const Symbol* text, std::size_t n,
                                                  TenantState& ts, InsertResult& r) noexcept
    -> Step {
  const TenantId t = ts.id;
  Descent d;
  if (sec.protects() && descend_opt<true>(text, n, d, [t](const Node& c) noexcept {
        return c.find_claim(t) != kNil;
      })) {
    const std::uint32_t xc = d.node->find_claim(t);
    if (xc != kNil) {
      Inserting in{.text = text,
                   .n = n,
                   .ts = &ts,
                   .r = &r,
                   .parent = d.parent,
                   .x = d.node,
                   .xi = d.index,
                   .excl = d.excl,
                   .xc = xc,
                   .pos = d.start,
                   .k = d.pos - d.start,
                   .pre = d.leaf,
                   .pre_at = d.pos};
      return insert_from(in);
    }
    unlock_descent(d);  // stopped at the root, which t does not hold
  }
  mem_.add(Memory::kFallbacks, 1);
  return insert_once(text, n, ts, r);
}

template <class Symbol>
auto BasicApproxRadixTree<Symbol>::insert_once(const Symbol* text, std::size_t n, TenantState& ts,
                                               InsertResult& r) noexcept -> Step {
  Node* x = &root_;
  bool excl = false;
  x->lock.lock_shared();
  std::uint32_t xc = x->find_claim(ts.id);
  if (xc == kNil) {
    x->lock.unlock_shared();
    x->lock.lock();
    excl = true;
    xc = x->find_claim(ts.id);
    if (xc == kNil) xc = register_at_root(ts);
    if (xc == kNil) {
      x->lock.unlock();
      return Step::kOutOfMemory;
    }
  }
  Inserting in{.text = text, .n = n, .ts = &ts, .r = &r, .x = x, .excl = excl, .xc = xc};
  in.k = common_units(*x, text, n);  // 0: the root's fragment is empty
  return insert_from(in);
}

// Adds ts's tenant at the root; its claim, or kNil when out of memory.
// Requires the root exclusively locked and the tenant absent there.
template <class Symbol>
std::uint32_t BasicApproxRadixTree<Symbol>::register_at_root(TenantState& ts) noexcept {
  const std::uint32_t c = mem_.new_claim();
  if (c == kNil || !detail::NodeBlocks<Symbol>::reserve_tenants(mem_, root_, root_.ntenant + 1)) {
    mem_.discard_claim(c);
    return kNil;
  }
  claim(c)->node = kRoot;
  root_.add_tenant_entry(ts.id, c);
  mem_.add(Memory::kClaims, 1);
  ts.registered.store(true, std::memory_order_relaxed);
  registered_.fetch_add(1, std::memory_order_relaxed);
  return c;
}

// The insert from where `in` stands on (see Inserting): each round either
// changes x (under its exclusive lock, upgrading first), or steps down into
// the child the text goes on into, until the text ends. Releases every
// hold.
template <class Symbol>
auto BasicApproxRadixTree<Symbol>::insert_from(Inserting& in) noexcept -> Step {
  for (;;) {
    Node* const x = in.x;
    const bool split = in.k < x->len;
    const std::size_t after = in.pos + in.k;
    std::uint32_t child = kNil;
    if (!split && after < in.n) {
      child = x->find_child(Traits::key(in.text + after, in.n - after));
    }
    const bool need_claim = in.xc == kNil;
    const bool need_leaf = after < in.n && child == kNil;
    if (split || need_claim || need_leaf) {
      if (!in.excl) {
        if (!upgrade(in, need_leaf, after)) {
          in.release(mem_);
          return Step::kOutOfMemory;
        }
        continue;  // re-decide under the exclusive lock
      }
      Prep p;
      if (!prepare(in, p, split, need_claim, need_leaf, after)) {
        in.release(mem_);
        return Step::kOutOfMemory;
      }
      if (split) {
        const std::size_t kc = Traits::count(in.text + in.pos, in.k);
        in.own_step = split_node(*x, in.xi, in.k, kc, p, in.tenant());
        if (in.xc != kNil) in.xc = x->find_claim(in.tenant());  // the upper copy
      }
      if (need_claim) add_claim(in, p);
      in.let_parent_go();
      if (need_leaf) {
        add_leaf(in, p, after);
        in.release(mem_);
        return Step::kDone;
      }
      continue;  // x now needs nothing more; step down or finish
    }
    if (after == in.n) {
      {
        std::lock_guard<detail::SpinMutex> g(in.ts->lru_mu);
        in.link_own_copy(lru(*in.ts));  // the split at the text's end
        in.r->recency = stamp_path(*in.ts, in.xc);
      }
      in.release(mem_);
      return Step::kDone;
    }
    step_down(in, child, after);
  }
}

// Takes x exclusively in place of the shared hold, with the parent held
// meanwhile. Returns false when out of memory (x then held exclusively).
template <class Symbol>
bool BasicApproxRadixTree<Symbol>::upgrade(Inserting& in, bool need_leaf,
                                           std::size_t after) noexcept {
  Node* const x = in.x;
  KVROUTE_ASSERT(in.parent != nullptr || x == &root_,
                 "radix tree: an upgrade without the parent's hold");
  if (need_leaf && in.pre == nullptr && !Node::inline_len(in.n - after)) {
    in.pre = detail::Fragments<Symbol>::alloc_copy(mem_, in.text + after, in.n - after);
    in.pre_at = after;
  }
  const std::uint32_t seen = x->lock.read_begin();  // no writer: we hold it
  const std::uint64_t wraps = detail::RwLock::wraps();
  x->lock.unlock_shared();
  x->lock.lock();
  in.excl = true;
  // Another writer may have held x meanwhile: an insert that split it (x
  // then keeps a prefix of its fragment, and fresh copies of its claims)
  // or an eviction that merged its only child into it (x's fragment then
  // goes on past where it ended): compare again.
  if (!x->lock.same_version(seen) || detail::RwLock::wrapped_since(wraps)) {
    in.k = common_units(*x, in.text + in.pos, in.n - in.pos);
  }
  const std::uint32_t now = x->find_claim(in.tenant());
  if (now != kNil) {
    in.xc = now;  // the upper copy, or another insert of t added it
  } else if (in.xc != kNil) {
    // Only at the root, which has no parent to hold: remove_tenant took t
    // off the tree while the lock was released. Register t again (what the
    // insert would have done had it come after).
    KVROUTE_ASSERT(x == &root_, "radix tree: a held claim was evicted");
    in.xc = register_at_root(*in.ts);
    if (in.xc == kNil) return false;
  }
  if (in.xc != kNil) in.let_parent_go();
  return true;
}

// Gives t a claim on x (p.own), linked behind its claim on the parent;
// the path is stamped at the end.
template <class Symbol>
void BasicApproxRadixTree<Symbol>::add_claim(Inserting& in, Prep& p) noexcept {
  // t held no claim on x, so a split had no step for t to leave.
  KVROUTE_ASSERT(in.own_step.old == kNil, "radix tree: a split's LRU step for a new claim");
  const std::uint32_t c = p.own;
  p.own = kNil;
  Claim* cc = claim(c);
  cc->node = in.xi;
  cc->up = in.pc;
  in.x->add_tenant_entry(in.tenant(), c);
  mem_.add(Memory::kClaims, 1);
  std::lock_guard<detail::SpinMutex> g(in.ts->lru_mu);
  lru(*in.ts).link_below(c);
  in.ts->size.fetch_add(in.x->count, std::memory_order_relaxed);
  in.ts->listed.fetch_add(1, std::memory_order_relaxed);
  in.xc = c;
  in.pc = kNil;
}

// Hangs the new leaf (text[after, n), p.leaf with its claim) below x and
// stamps the path down to it.
template <class Symbol>
void BasicApproxRadixTree<Symbol>::add_leaf(Inserting& in, Prep& p, std::size_t after) noexcept {
  const std::size_t leaf_len = in.n - after;
  const std::uint32_t li = p.leaf;
  Node* leaf = node(li);
  leaf->len = static_cast<std::uint32_t>(leaf_len);
  leaf->set_count(after == in.tail.from ? in.tail.units : Traits::count(in.text + after, leaf_len));
  detail::Fragments<Symbol>::set(*leaf, p.leaf_frag, in.text + after, leaf_len, p.leaf_filled);
  p.leaf_frag = nullptr;
  leaf->set_cap_tenant(1);  // its one tenant inline: no block
  const std::uint32_t lc = p.leaf_claim;
  Claim* lcc = claim(lc);
  lcc->node = li;
  lcc->up = in.xc;
  leaf->add_tenant_entry(in.tenant(), lc);
  in.x->add_child(Traits::key(leaf->data(), leaf->len), li);
  mem_.add(Memory::kNodes, 1);
  mem_.add(Memory::kUnits, leaf->count);
  mem_.add(Memory::kSymbols, leaf->len);
  mem_.add(Memory::kClaims, 1);
  std::lock_guard<detail::SpinMutex> g(in.ts->lru_mu);
  const detail::LruList list = lru(*in.ts);
  in.link_own_copy(list);  // before the leaf's claim: lc hangs below the copy
  list.link_below(lc);
  in.ts->size.fetch_add(leaf->count, std::memory_order_relaxed);
  in.ts->listed.fetch_add(1, std::memory_order_relaxed);
  in.r->recency = stamp_path(*in.ts, lc);
}

// Steps into `child`: x becomes the parent, held shared; the old parent is
// released once the child is locked.
template <class Symbol>
void BasicApproxRadixTree<Symbol>::step_down(Inserting& in, std::uint32_t child,
                                             std::size_t after) noexcept {
  if (in.excl) {
    in.x->lock.downgrade();
    in.excl = false;
  }
  Node* c = node(child);
  c->lock.lock_shared();
  if (in.parent != nullptr) in.parent->lock.unlock_shared();
  const std::uint32_t cc = c->find_claim(in.tenant());
  if (cc != kNil) prefetch_claim(cc);  // stamp_path walks it at the end
  in.pc = cc == kNil ? in.xc : kNil;
  in.xc = cc;
  in.parent = in.x;
  in.x = c;
  in.xi = child;
  in.pos = after;
  in.k = common_units(*c, in.text + in.pos, in.n - in.pos);
}

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_INSERT_INL_HPP_
