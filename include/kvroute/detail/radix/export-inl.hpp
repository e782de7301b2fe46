// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/export-inl.hpp
// -----------------------------------------------------------------------------
//
// Not API; part of kvroute/radix_tree.hpp. The read-only export of the tree
// (export_nodes), for snapshots: every node in pre-order with its fragment
// and the tenants holding it, while matches, inserts and evictions go on.
//
// How it stays correct alongside writers:
//   * The walk holds one epoch section from start to end, so every node it
//     has reached stays allocated (what writers unlink meanwhile is retired,
//     not reused) and a node pointer kept on its stack never dangles.
//   * A node is read under its own lock held shared; a child is locked
//     before its parent is released (lock coupling, top-down like every
//     descent), so the child is linked under that parent when it is read.
//     At most two node locks are held at once, each for the few fields read.
//   * Children are resumed by key: after visiting a child the walk comes
//     back to the parent, locks it again and takes the first child whose key
//     is above the last one visited. Children added meanwhile are seen when
//     their key comes later; nothing is visited twice.
//   * A node's path (the text from the root to the end of its fragment)
//     changes only when its fragment does: a split keeps the first part in
//     the node (shorter), a merge gives it a new, longer fragment (in a new
//     buffer, or in the node when short), and a merged-away node is left
//     with none. The walk keeps the fragment it visited a node with (its
//     length, and its text or its address); on coming back to a node whose
//     fragment changed, it skips the node's remaining children, whose text
//     would no longer extend the path it reported. Comparing lengths alone
//     would not do: a split and a merge can give back the same length with
//     other text. So every visited node's path is a path that was in the
//     tree; what changed under the walk may be missed.

#ifndef KVROUTE_DETAIL_RADIX_EXPORT_INL_HPP_
#define KVROUTE_DETAIL_RADIX_EXPORT_INL_HPP_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "kvroute/config.hpp"
#include "kvroute/radix_tree.hpp"  // the class this completes

KVROUTE_NAMESPACE_BEGIN

template <class Symbol>
template <class Visit>
requires RadixExportVisitor<Visit, Symbol> ExportStatus
BasicApproxRadixTree<Symbol>::export_nodes(Visit&& visit)
const noexcept {
  // Entering a section changes only the epoch domain's own synchronised
  // state, as match does on a tree it does not otherwise change.
  const detail::EpochDomain::Section sec = const_cast<Memory&>(mem_).enter();
  if (!sec.protects()) return ExportStatus::kBusy;
  // The fragment a node was visited with: its length, and its text when
  // kept in the node, else where it lies (a buffer the walk's section keeps
  // from reuse, so a new fragment cannot take its address).
  struct Seen {
    std::uint32_t len;
    typename Node::Frag frag;
    bool same(const Node& n) const noexcept {
      if (n.len != len) return false;
      return Node::inline_len(len) ? std::memcmp(n.frag.in, frag.in, sizeof(frag.in)) == 0
                                   : n.frag.ptr == frag.ptr;
    }
  };
  struct Frame {
    Node* node;
    Seen seen;
    bool resumed;  // `last` is set: a child was visited
    Key last;
  };
  std::vector<Frame> stack;
  Node* root = const_cast<Node*>(&root_);
  root->lock.lock_shared();
  const bool go_on = visit(std::size_t{0}, sequence_type(), candidates(*root));
  root->lock.unlock_shared();
  if (!go_on) return ExportStatus::kStopped;
  try {
    stack.push_back({root, {0, root->frag}, false, Key{}});
    while (!stack.empty()) {
      Frame& f = stack.back();
      Node* x = f.node;
      x->lock.lock_shared();
      const Key* keys = x->keys();
      const std::uint32_t slot =
          f.resumed
              ? static_cast<std::uint32_t>(std::upper_bound(keys, keys + x->nchild, f.last) - keys)
              : 0;
      if (!f.seen.same(*x) || slot >= x->nchild) {
        x->lock.unlock_shared();
        stack.pop_back();
        continue;
      }
      f.last = keys[slot];
      f.resumed = true;
      Node* c = node(x->kids()[slot]);
      c->lock.lock_shared();
      x->lock.unlock_shared();
      const Seen seen{c->len, c->frag};
      const bool more = visit(stack.size(), sequence_type(c->data(), c->len), candidates(*c));
      c->lock.unlock_shared();
      if (!more) return ExportStatus::kStopped;
      stack.push_back({c, seen, false, Key{}});
    }
  } catch (const std::bad_alloc&) {
    return ExportStatus::kOutOfMemory;
  }
  return ExportStatus::kDone;
}

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_EXPORT_INL_HPP_
