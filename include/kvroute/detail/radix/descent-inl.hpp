// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/descent-inl.hpp
// -----------------------------------------------------------------------------
//
// Not API; part of kvroute/radix_tree.hpp. The descents: how an operation
// finds the deepest node a text reaches.
//
//   * Optimistic (descend_opt): no lock on the nodes passed. Each node is
//     read once, as a snapshot (its fields copied, then checked against the
//     node lock's version, detail/radix/rw_lock.hpp); the text is compared
//     against the snapshot's fragment, and the child found in the
//     snapshot's block is checked against the version again before it is
//     followed. Everything the walk may read stays allocated while the
//     caller's epoch section is open (TreeMemory). At the end it locks the
//     node it stops at and checks that it did not change since its
//     snapshot, and that no lock's version wrapped meanwhile; then the
//     result is exactly what a locked descent would have returned at that
//     moment, and the node is still in the tree (unlinking a node holds it
//     exclusively, which moves its version on). So a match writes nothing
//     on the nodes it passes, and two threads matching through the same
//     top nodes do not contend. A walk that meets writers kOptimisticTries
//     times gives up.
//   * With lock coupling (descend): the child's lock is taken before the
//     parent's is released; shared locks only. The fallback, and the walk
//     of the operations that need no speed (match_for_tenant, visit_path).
//
// An insert's optimistic walk that knows it will change the node it stops
// in (a split, or a new child) locks that node exclusively at once and
// needs no parent: the version check under the exclusive hold says the node
// is unchanged and still linked. The new leaf's text is copied before that
// lock, so that the node is held exclusively for pointer updates only, not
// for the length of a text. (Holding the parent shared instead wrote its
// lock word on every insert, and the parents of inserts are the nodes every
// descent reads.)

#ifndef KVROUTE_DETAIL_RADIX_DESCENT_INL_HPP_
#define KVROUTE_DETAIL_RADIX_DESCENT_INL_HPP_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/fragments.hpp"
#include "kvroute/detail/radix/rw_lock.hpp"
#include "kvroute/detail/radix/symbols.hpp"
#include "kvroute/radix_tree.hpp"  // the class this completes

#if KVROUTE_TSAN
// ThreadSanitizer's runtime (dynamic annotations): the optimistic descent's
// reads are validated by a version, not ordered by a lock.
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#endif

KVROUTE_NAMESPACE_BEGIN

template <class Symbol>
struct BasicApproxRadixTree<Symbol>::Descent {
  Node* node = nullptr;         // the deepest matched node, still locked (see excl)
  Node* parent = nullptr;       // its parent locked shared, or null (see the descents)
  std::uint32_t index = kRoot;  // node's index (kRoot for the root)
  std::size_t pos = 0;          // symbols matched
  std::size_t matched = 0;      // units matched
  std::size_t start = 0;        // symbols before node's fragment
  bool excl = false;            // node locked exclusively (else shared)
  // With excl, from descend_opt: text[pos, n) already in a buffer for the
  // new leaf (null when it fits in a node, or memory was short). Whoever
  // consumes the descent passes it on to insert_from or frees it
  // (unlock_descent does).
  Symbol* leaf = nullptr;
  std::size_t leaf_len = 0;
};

// Where an optimistic walk stopped: node x, read at version vx.
template <class Symbol>
struct BasicApproxRadixTree<Symbol>::OptWalk {
  Node* x = nullptr;
  std::uint32_t vx = 0;
  std::uint32_t xi = kRoot;
  std::size_t pos = 0;
  std::size_t matched = 0;
  std::size_t start = 0;
  bool changes_x = false;  // an insert would split x or add a child to it
};

namespace detail {
// ThreadSanitizer is told to ignore the optimistic reads (they are checked
// by the version, not ordered by a lock); every other access of the
// descent is checked as usual.
struct OptimisticReads {
#if KVROUTE_TSAN
  bool on = true;
  OptimisticReads() noexcept { AnnotateIgnoreReadsBegin(__FILE__, __LINE__); }
  void end() noexcept {
    if (on) AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    on = false;
  }
  ~OptimisticReads() { end(); }
#else
  void end() noexcept {}
#endif
};
}  // namespace detail

// Units-aligned common prefix, in symbols, of `text` and n's fragment.
template <class Symbol>
std::size_t BasicApproxRadixTree<Symbol>::common_units(const Node& n, const Symbol* text,
                                                       std::size_t rem) noexcept {
  return common_units(n.data(), n.len, text, rem);
}
template <class Symbol>
std::size_t BasicApproxRadixTree<Symbol>::common_units(const Symbol* frag, std::size_t len,
                                                       const Symbol* text,
                                                       std::size_t rem) noexcept {
  const std::size_t m = std::min<std::size_t>(rem, len);
  if (m == 0) return 0;
  const std::size_t b =
      detail::common_prefix_bytes(text, frag, m * sizeof(Symbol)) / sizeof(Symbol);
  if (b == 0) return 0;
  return Traits::boundary(text, rem, frag, len, b);
}

// The descent of match and match_and_insert: optimistic when the section
// protects, else, or after a few failed validations, with lock coupling
// from the root. Same node and counts either way. For an insert
// (ForInsert) the node is held so that the insert can go on from it
// without upgrading its lock unprotected: exclusively with no parent when
// the optimistic walk knows the insert changes it, else shared with its
// parent (lock coupling; none at the root), or shared with no parent (an
// optimistic walk that ends exactly at its end).
template <class Symbol>
template <bool ForInsert>
auto BasicApproxRadixTree<Symbol>::descend_any(const detail::EpochDomain::Section& sec,
                                               const Symbol* text, std::size_t n) noexcept
    -> Descent {
  Descent d;
  if (sec.protects() && descend_opt<ForInsert>(text, n, d, EnterAll{})) return d;
  mem_.add(Memory::kFallbacks, 1);
  root_.lock.lock_shared();
  return descend<ForInsert>(text, n, EnterAll{});
}

// The optimistic descent (see the top of this file). It goes into a child
// only if `enter` allows (called on the child's checked snapshot, which it
// must only read). The lock it ends with: shared, except for an insert
// (ForInsert) that will change the node; then exclusive, with the new
// leaf's text copied beforehand (lock_to_change). Gives up (false) after
// kOptimisticTries walks that met a writer.
template <class Symbol>
template <bool ForInsert, class Enter>
bool BasicApproxRadixTree<Symbol>::descend_opt(const Symbol* text, std::size_t n, Descent& out,
                                               Enter&& enter) noexcept {
  for (int attempt = 0; attempt < kOptimisticTries; ++attempt) {
    const std::uint64_t wraps = detail::RwLock::wraps();
    OptWalk w;
    detail::OptimisticReads ignore;  // the walk's reads race with writers by design
    const bool walked = walk_opt(text, n, w, enter);
    ignore.end();
    if (!walked) continue;
    if (before_descent_lock_ != nullptr) before_descent_lock_(before_descent_lock_arg_);
    // (A text too long to insert is inserted by no one: shared.)
    if (ForInsert && w.changes_x && n <= kMaxSequenceSymbols) {
      Symbol* leaf = nullptr;
      if (!lock_to_change(*w.x, w.vx, wraps, text, w.pos, n, leaf)) continue;
      out = {w.x,   nullptr,   w.xi,
             w.pos, w.matched, w.start,
             true,  leaf,      leaf == nullptr ? 0 : n - w.pos};
      return true;
    }
    w.x->lock.lock_shared();
    if (!w.x->lock.same_version(w.vx) || detail::RwLock::wrapped_since(wraps)) {
      w.x->lock.unlock_shared();
      continue;
    }
    out = {w.x, nullptr, w.xi, w.pos, w.matched, w.start, false};
    return true;
  }
  return false;
}

// One optimistic walk from the root, taking no lock; false when it met a
// writer (walk again).
template <class Symbol>
template <class Enter>
inline bool BasicApproxRadixTree<Symbol>::walk_opt(const Symbol* text, std::size_t n, OptWalk& w,
                                                   Enter& enter) noexcept {
  Node* x = &root_;
  std::uint32_t vx = x->lock.read_begin();
  if (!detail::RwLock::readable(vx)) return false;
  Node s;  // x's snapshot
  x->snapshot_into(s);
  if (!x->lock.validate(vx)) return false;
  w = {};
  while (w.pos < n) {
    // The snapshot is consistent, so this reads inside the (possibly
    // retired, still allocated) block; the check after it says whether
    // what it read is still x's.
    const std::uint32_t ci = s.find_child(Traits::key(text + w.pos, n - w.pos));
    if (!x->lock.validate(vx)) return false;
    if (ci == kNil) {
      w.changes_x = true;
      break;
    }
    Node* c = node(ci);
    const std::uint32_t vc = c->lock.read_begin();
    // c was x's child when vc was read only if x is still unchanged:
    // unlinking c (an eviction, a merge) holds x exclusively. Without
    // this check a walk could go on into a node just taken out of the
    // tree, whose version no longer moves.
    if (!detail::RwLock::readable(vc) || !x->lock.validate(vx)) return false;
    c->snapshot_into(s);
    if (!c->lock.validate(vc)) return false;
    // The path's claims lie apart from its nodes (detail/radix/slab.hpp):
    // start loading the first one now, since a stamp of the path walks
    // them all. The index may be stale, which a prefetch does not mind.
    if (s.ntenant > 0) prefetch_claim(s.claims()[0]);
    if (!enter(static_cast<const Node&>(s))) {
      // What enter read through the snapshot (a tenant block) was c's only
      // if c is still unchanged.
      if (!c->lock.validate(vc)) return false;
      break;
    }
    x = c;
    vx = vc;
    w.xi = ci;
    w.start = w.pos;
    const std::size_t k = common_units(s.data(), s.len, text + w.pos, n - w.pos);
    if (k == s.len) {
      w.pos += k;
      w.matched += s.count;
      continue;  // the next round validates x again after its find
    }
    w.matched += Traits::count(text + w.pos, k);
    w.pos += k;
    w.changes_x = true;
    break;
  }
  w.x = x;
  w.vx = vx;
  return true;
}

// descend_opt's ending for an insert that will change x: the new leaf's
// text, text[pos, n), copied into a buffer (`leaf`; null when it fits in a
// node or memory is short), then x locked exclusively if its version is
// still vx and no version wrapped since `wraps`. On false x is not held and
// the buffer is freed. Out of line, so that the walk's loop stays as small
// as a match's.
template <class Symbol>
bool BasicApproxRadixTree<Symbol>::lock_to_change(Node& x, std::uint32_t vx, std::uint64_t wraps,
                                                  const Symbol* text, std::size_t pos,
                                                  std::size_t n, Symbol*& leaf) noexcept {
  using Frags = detail::Fragments<Symbol>;
  const std::size_t len = n - pos;
  if (len > 0 && !Node::inline_len(len)) leaf = Frags::alloc_copy(mem_, text + pos, len);
  // A node that has already changed is walked again without taking it: an
  // exclusive hold moves the version on even when it changes nothing,
  // which would send every other walk through the node back too.
  if (x.lock.validate(vx)) {
    x.lock.lock();
    if (x.lock.same_version(vx) && !detail::RwLock::wrapped_since(wraps)) return true;
    x.lock.unlock();
  }
  Frags::free(mem_, leaf, len);
  leaf = nullptr;
  return false;
}

template <class Symbol>
void BasicApproxRadixTree<Symbol>::unlock_descent(const Descent& d) noexcept {
  if (d.excl)
    d.node->lock.unlock();
  else
    d.node->lock.unlock_shared();
  if (d.parent != nullptr) d.parent->lock.unlock_shared();
  detail::Fragments<Symbol>::free(mem_, d.leaf, d.leaf_len);  // after: not under the hold
}

// Walks from the root, which the caller has locked shared, with lock
// coupling, as far as the text agrees with the tree and `enter(child)`
// (called with the child locked shared) allows. Stops inside a child
// matched partially, else at the last node matched fully. Returns with the
// deepest node locked shared and, with KeepParent (for an insert that goes
// on from there), its parent too; no other.
template <class Symbol>
template <bool KeepParent, class Enter>
auto BasicApproxRadixTree<Symbol>::descend(const Symbol* text, std::size_t n,
                                           Enter&& enter) noexcept -> Descent {
  Node* x = &root_;
  Node* parent = nullptr;
  std::uint32_t xi = kRoot;
  std::size_t pos = 0;
  std::size_t matched = 0;
  std::size_t start = 0;
  while (pos < n) {
    const std::uint32_t ci = x->find_child(Traits::key(text + pos, n - pos));
    if (ci == kNil) break;
    Node* c = node(ci);
    c->lock.lock_shared();
    if (c->ntenant > 0) prefetch_claim(c->claims()[0]);  // as in walk_opt
    if (!enter(static_cast<const Node&>(*c))) {
      c->lock.unlock_shared();
      break;
    }
    if constexpr (KeepParent) {
      if (parent != nullptr) parent->lock.unlock_shared();
      parent = x;
    } else {
      x->lock.unlock_shared();
    }
    x = c;
    xi = ci;
    start = pos;
    const std::size_t k = common_units(*x, text + pos, n - pos);
    if (k == x->len) {
      pos += k;
      matched += x->count;
      continue;
    }
    matched += Traits::count(text + pos, k);
    pos += k;
    break;
  }
  return {x, parent, xi, pos, matched, start};
}

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_DESCENT_INL_HPP_
