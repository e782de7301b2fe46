// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/lru.hpp
// -----------------------------------------------------------------------------
//
// Not API. `LruList`: one tenant's claims in least-recently-used order,
// linked through the claims themselves (RadixClaim::prev/next, by slab
// index), most recent at the head. Two rules make eviction exact and cheap:
// the list is ordered by recency, and every claim is behind the claims on
// its node's ancestors. So the tail is always a leaf for the tenant (a node
// none of whose children it holds), which eviction takes without looking
// at the tree.
//
// A stamp (a use of a path) writes the path's claims with the stamp's
// recency and moves them to the front, ancestors first. With recency steps
// (ApproxRadixTree::Options::recency_shift > 0) it stops below the first
// claim up the path that already holds the current step (the anchor): that
// claim and every claim above it are already in the list's front run, so
// the claims a tenant's requests share (a system prompt, an agent's trunk)
// are written once per step rather than by every request. The claims below
// the anchor move in runs: a run is a stretch of the path that the list
// already holds in order, each claim directly behind its parent claim, as
// a stamp of that path left it; it moves as one block, so its inner links
// are not rewritten, and a path of b runs rewrites about 4b links of other
// claims instead of about 4 a claim.
//
// Thread safety: every function requires the tenant's lru_mu. Every claim
// on a stamped chain stays allocated while the caller holds the stamped
// node: only the list's tail is ever removed.

#ifndef KVROUTE_DETAIL_RADIX_LRU_HPP_
#define KVROUTE_DETAIL_RADIX_LRU_HPP_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/node.hpp"
#include "kvroute/detail/radix/slab.hpp"
#include "kvroute/detail/radix/tenants.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

// A split's LRU step for one tenant (LruList::link_split_copy): its claim
// `old` on the split node, which moves to the lower node `lower`, and the
// upper node's fresh `copy`. old == kNilIndex: none.
struct SplitStep {
  std::uint32_t old = kNilIndex;
  std::uint32_t copy = kNilIndex;
  std::uint32_t lower = kNilIndex;
};

class LruList {
 public:
  LruList(const RadixSlab& slab, TenantState& ts) noexcept : slab_(slab), ts_(ts) {}

  // Takes the run high .. low (linked in that order, high nearest the
  // front; high == low for one claim) out of the list; its inner links and
  // its ends' outward links are left as they were.
  void cut(std::uint32_t high, std::uint32_t low) const noexcept {
    const RadixClaim* h = claim(high);
    const RadixClaim* l = claim(low);
    if (h->prev != kNilIndex)
      claim(h->prev)->next = l->next;
    else
      ts_.head = l->next;
    if (l->next != kNilIndex)
      claim(l->next)->prev = h->prev;
    else
      ts_.tail = h->prev;
  }
  void unlink(std::uint32_t ci) const noexcept {
    cut(ci, ci);
    RadixClaim* c = claim(ci);
    c->prev = c->next = kNilIndex;
  }
  // Links the run high .. low, out of the list, right behind `after`, or
  // at the front when `after` is kNilIndex.
  void link_run(std::uint32_t high, std::uint32_t low, std::uint32_t after) const noexcept {
    std::uint32_t& slot = after == kNilIndex ? ts_.head : claim(after)->next;
    claim(high)->prev = after;
    claim(low)->next = slot;
    if (slot != kNilIndex)
      claim(slot)->prev = low;
    else
      ts_.tail = low;
    slot = high;
  }
  void insert_after(std::uint32_t pos, std::uint32_t ci) const noexcept { link_run(ci, ci, pos); }
  void insert_before(std::uint32_t pos, std::uint32_t ci) const noexcept {
    link_run(ci, ci, claim(pos)->prev);
  }
  // Moves the run high .. low (as cut) right behind `after`, or to the
  // front when `after` is kNilIndex.
  void move_run(std::uint32_t high, std::uint32_t low, std::uint32_t after) const noexcept {
    if (claim(high)->prev == after) return;  // already there (the head when after is nil)
    cut(high, low);
    link_run(high, low, after);
  }

  // Links a new claim directly behind its parent claim `up` (at the front
  // when the parent is the root's) with the parent's recency. The list stays
  // sorted by recency and every claim stays behind its ancestors.
  void link_below(std::uint32_t ci) const noexcept {
    const std::uint32_t up = claim(ci)->up;
    const RadixClaim* u = claim(up);
    if (u->up == kNilIndex)
      link_run(ci, ci, kNilIndex);
    else
      insert_after(up, ci);
    claim(ci)->set_stamp(u->recency(), false);
  }

  // A split's step (SplitStep): the old claim moves to the lower node, and
  // the upper node's copy takes its place in the path (old's parent claim)
  // and in the list (right ahead of old, with old's recency; the path goes
  // on into old's node, so the copy is not `ended`).
  void link_split_copy(const SplitStep& step) const noexcept {
    RadixClaim* oc = claim(step.old);
    RadixClaim* mc = claim(step.copy);
    oc->node = step.lower;
    mc->up = oc->up;
    oc->up = step.copy;
    insert_before(step.old, step.copy);
    mc->set_stamp(oc->recency(), false);
    ts_.listed.fetch_add(1, std::memory_order_relaxed);
  }

  // Stamps claim `ci` and every ancestor claim with recency `e` and moves
  // them to the front, ancestors first; with `steps` (recency in steps), it
  // stops below the first claim that already holds e, placing the stamped
  // claims right behind that one. The stamp ends at ci (RadixClaim:
  // `ended`). Returns the number of claims written.
  std::size_t stamp(std::uint32_t ci, std::uint64_t e, bool steps) const noexcept {
    const std::uint32_t anchor = steps ? find_anchor(ci, e) : kNilIndex;
    // The claims below the anchor go right behind it, ancestors first (to
    // the front when the anchor is the root's claim or there is none), a
    // run at a time from the bottom up, which leaves the list as moving
    // them one at a time would.
    const std::uint32_t dest =
        anchor == kNilIndex || claim(anchor)->up == kNilIndex ? kNilIndex : anchor;
    std::size_t written = 0;
    // Above the anchor a mark left by an earlier stamp stays: it only
    // keeps a merge from happening.
    if (anchor == ci && !claim(ci)->ended()) claim(ci)->set_stamp(e, true);
    for (std::uint32_t p = ci; p != anchor;) {
      RadixClaim* c = claim(p);
      c->set_stamp(e, p == ci);
      ++written;
      std::uint32_t up = c->up;
      if (up == kNilIndex) break;  // the root's claim, which is not listed
      const std::uint32_t low = p;
      std::uint32_t high = p;
      // (A root claim is not listed, so it is never a claim's prev.)
      while (up != anchor && c->prev == up) {
        high = up;
        c = claim(up);
        c->set_stamp(e, false);
        ++written;
        up = c->up;
      }
      move_run(high, low, dest);
      p = up;
    }
    return written;
  }

 private:
  RadixClaim* claim(std::uint32_t i) const noexcept {
    return static_cast<RadixClaim*>(slab_.at(i));
  }

  // The first claim up the path from ci that already holds e (kNilIndex:
  // none). It and every claim above it are in the list's front run
  // (nothing is newer than e). The walk also starts loading the list
  // neighbours of the claims below it, which the moves may unlink: they
  // lie anywhere in the slab, and the moves would otherwise wait for each
  // in turn.
  std::uint32_t find_anchor(std::uint32_t ci, std::uint64_t e) const noexcept {
    for (std::uint32_t p = ci; p != kNilIndex;) {
      const RadixClaim* c = claim(p);
      if (c->recency() >= e) return p;
      if (c->prev != kNilIndex) prefetch_for_write(claim(c->prev));
      if (c->next != kNilIndex) prefetch_for_write(claim(c->next));
      p = c->up;
    }
    return kNilIndex;
  }

  static void prefetch_for_write([[maybe_unused]] const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 1);
#endif
  }

  const RadixSlab& slab_;
  TenantState& ts_;
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_LRU_HPP_
