// -----------------------------------------------------------------------------
// File: kvroute/radix_tree.hpp
// -----------------------------------------------------------------------------
//
// `kvroute::ApproxRadixTree`: the approximate, multi-tenant radix tree that
// cache-aware routing uses to guess which inference server (tenant) already
// holds a request's prefix in its KV cache. It records what was routed where
// (insert), answers "which tenant shares the longest prefix with this
// request, and how long is it" (match), and forgets by a per-tenant budget,
// least recently used leaves first (evict). A router's whole step - match,
// choose, insert under the choice - is one descent (match_and_insert).
//
// `BasicApproxRadixTree<Symbol>` serves text and tokens alike:
// `ApproxRadixTree` (char) takes UTF-8 text and counts Unicode code points,
// as the gateway's tree counts characters (invalid UTF-8 is accepted, each
// byte that starts no well-formed sequence one character); `TokenRadixTree`
// (uint32_t, or any integral id type) takes spans of token ids.
//
// Guarantees (docs/tree-design.md has the design and the reasoning):
//   * Thread-safe, with no tree-wide lock. Matches read the nodes they pass
//     without locking them (checked by version, freed by epochs); writers
//     take per-node locks; threads serving different tenants never share an
//     LRU lock. A match never sees a torn node: its matched length is a real
//     common prefix of the text and a path that was in the tree during the
//     call, and its chosen tenant held the deepest matched node when chosen.
//   * Eviction is per tenant and exact LRU (to a recency step, with
//     Options::recency_shift), a leaf at a time, and costs what it evicts:
//     no scan of the tree. The most recent use of a tenant survives any
//     eviction to a budget it fits in. With Options::tenant_budget every
//     insert evicts its own tenant back to the budget before it returns.
//   * Sizes are exact when the tree is quiescent; stats().bytes counts
//     every byte the tree allocated. Memory is bounded by the budgets: N
//     tenants of budget B hold at most N * B units of fragments (in at most
//     four times their bytes) plus their nodes and claims.
//   * Nothing returned refers into the tree; a chooser's RadixCandidates
//     view is valid only during its call, which runs under the deepest
//     node's lock (it must be short and must not call into the tree).
//   * insert, match and the maintenance calls never throw, log or block on
//     I/O; out of memory, insert returns kOutOfMemory with the tree
//     consistent. The vector-returning queries may throw std::bad_alloc.
//   * Tenants are compact ids up to kMaxTenantId (pass a WorkerId's value);
//     each id ever inserted keeps about 150 bytes of state until the tree is
//     destroyed.
//
// Complexity (L = sequence length, d = depth of the path, T = tenants at a
// node, C = children at a node): insert and match O(L + d * (log C +
// log T)); evict O(what is removed * (T + C)); remove_tenant O(nodes the
// tenant holds * (T + C)).
//
// Example:
//
//   kvroute::ApproxRadixTree tree;
//   tree.insert("You are a helpful assistant. Hi!", /*tenant=*/0);
//   tree.insert("You are a helpful assistant. Bye", /*tenant=*/1);
//   kvroute::MatchResult m = tree.match("You are a helpful assistant. Hi there");
//   // m.tenant == 0, m.matched == 31 ("...assistant. Hi"), m.input == 37
//   tree.evict(/*budget=*/1 << 20);   // each tenant to at most 2^20 chars
//
//   // The router's step in one call: follow a good match, else tenant 2.
//   tree.match_and_insert(text, [](const kvroute::RadixCandidates& c,
//                                  const kvroute::MatchResult& m) noexcept {
//     return !c.empty() && m.match_rate() > 0.3f ? kvroute::MostRecentlyUsed{}(c)
//                                                : kvroute::TenantId{2};
//   });

#ifndef KVROUTE_RADIX_TREE_HPP_
#define KVROUTE_RADIX_TREE_HPP_

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/lru.hpp"
#include "kvroute/detail/radix/memory.hpp"
#include "kvroute/detail/radix/node.hpp"
#include "kvroute/detail/radix/symbols.hpp"
#include "kvroute/detail/radix/tenants.hpp"

KVROUTE_NAMESPACE_BEGIN

namespace detail {
struct RadixTestAccess;  // detail/radix/test_access.hpp
}  // namespace detail

// A tenant (worker) id; WorkerId::value.
using TenantId = std::uint32_t;
// "No tenant": a cold match, or a chooser that declined.
inline constexpr TenantId kNoTenant = 0xFFFFFFFFu;
// The largest accepted tenant id.
inline constexpr TenantId kMaxTenantId = detail::kTenantIds - 1;
// A budget that never evicts.
inline constexpr std::size_t kUnlimitedBudget = std::numeric_limits<std::size_t>::max();

enum class InsertStatus : std::uint8_t {
  kOk,
  kInvalidTenant,  // tenant > kMaxTenantId
  kTooLong,        // more than 2^32 - 1 symbols
  kOutOfMemory,    // nothing or a prefix was recorded; the tree is consistent
};

struct InsertResult {
  InsertStatus status = InsertStatus::kOk;
  // The recency now held by the tenant on the sequence's last node.
  std::uint64_t recency = 0;
  bool ok() const noexcept { return status == InsertStatus::kOk; }
};

struct MatchResult {
  // The chosen tenant, or kNoTenant (nothing matched on a cold tree, or the
  // chooser declined).
  TenantId tenant = kNoTenant;
  // Units matched (code points for text) and units in the input.
  std::size_t matched = 0;
  std::size_t input = 0;
  // Symbols matched (bytes for text): text.substr(0, matched_symbols) is the
  // matched prefix.
  std::size_t matched_symbols = 0;
  // How many tenants held the deepest matched node.
  std::size_t candidates = 0;
  // The chosen tenant's recency on the deepest matched node before this match
  // stamped it, and the stamp it now holds. Name the entry by
  // `previous_recency` when feeding back "the server no longer had it"
  // (drop_older_than(tenant, previous_recency + 1)).
  std::uint64_t previous_recency = 0;
  std::uint64_t recency = 0;

  bool has_tenant() const noexcept { return tenant != kNoTenant; }
  // matched / input in float, 0 for an empty input (the gateway's rule).
  float match_rate() const noexcept {
    return input == 0 ? 0.0f : static_cast<float>(matched) / static_cast<float>(input);
  }
};

struct TenantMatch {
  bool found = false;  // the tenant is registered
  std::size_t matched = 0;
  std::size_t input = 0;
  std::size_t matched_symbols = 0;
  std::uint64_t previous_recency = 0;
  std::uint64_t recency = 0;
};

struct EvictResult {
  std::size_t claims = 0;   // (node, tenant) entries removed
  std::size_t units = 0;    // units subtracted from tenant sizes
  std::size_t nodes = 0;    // nodes unlinked
  std::size_t visited = 0;  // LRU tails examined (retries included)
  // Nodes merged into their parent: left as its only child with the same
  // tenants, they were a chain link with no reason to stay split.
  std::size_t merges = 0;

  EvictResult& operator+=(const EvictResult& o) noexcept {
    claims += o.claims;
    units += o.units;
    nodes += o.nodes;
    visited += o.visited;
    merges += o.merges;
    return *this;
  }
};

// What BasicApproxRadixTree::export_nodes did.
enum class ExportStatus : std::uint8_t {
  kDone,         // every node was visited (as the walk met them)
  kStopped,      // the visitor returned false
  kBusy,         // no epoch slot was free (too many readers at once): retry
  kOutOfMemory,  // the walk's stack could not grow
};

struct TenantSize {
  TenantId tenant = kNoTenant;
  std::size_t size = 0;
  friend bool operator==(const TenantSize&, const TenantSize&) = default;
};

struct RadixTreeStats {
  std::size_t nodes = 0;  // including the root
  std::size_t bytes = 0;  // every byte allocated by the tree
  // What the tree holds from the system for them: bytes, plus the free
  // space of its arena's regions (block headers, rounding, freed blocks not
  // yet reused, one spare region per thread shard).
  std::size_t reserved_bytes = 0;
  std::size_t units = 0;    // units stored in fragments (distinct text)
  std::size_t symbols = 0;  // symbols stored in fragments (bytes for text)
  std::size_t claims = 0;   // (node, tenant) entries, root entries included
  std::size_t tenants = 0;  // registered tenants
  std::uint64_t clock = 0;  // the last recency handed out
  // Path stamps so far (one per insert, and per match that chose a tenant),
  // and the claims they wrote: with Options::recency_shift > 0 a stamp
  // writes only the claims of its path not yet in the current step.
  std::uint64_t stamps = 0;
  std::size_t stamped_claims = 0;
  // Units taken off tenants so far by eviction (periodic or reactive),
  // drop_older_than and remove_tenant: a monotonic count for metrics.
  std::size_t removed_units = 0;
  // Descents of match, match_and_insert and insert that walked from the
  // root with lock coupling instead of optimistically: the optimistic walk
  // met writers kOptimisticTries times in a row, the thread found no epoch
  // slot, or (insert) the tenant was not registered yet. Near zero when
  // threads do not fight over the same nodes; a contention metric.
  std::uint64_t descent_fallbacks = 0;
};

// One tenant holding the deepest matched node.
struct RadixCandidate {
  TenantId tenant = kNoTenant;
  std::uint64_t recency = 0;  // its recency on that node
};

// The tenants holding the deepest matched node, in ascending id order. A view
// valid only inside the chooser call.
class RadixCandidates {
 public:
  class iterator {
   public:
    using value_type = RadixCandidate;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const RadixCandidates* c, std::size_t i) noexcept : c_(c), i_(i) {}
    RadixCandidate operator*() const noexcept { return (*c_)[i_]; }
    iterator& operator++() noexcept {
      ++i_;
      return *this;
    }
    iterator operator++(int) noexcept {
      iterator t = *this;
      ++i_;
      return t;
    }
    friend bool operator==(const iterator& a, const iterator& b) noexcept { return a.i_ == b.i_; }

   private:
    const RadixCandidates* c_ = nullptr;
    std::size_t i_ = 0;
  };

  using ClaimPool = detail::RadixSlab;
  // Built by the tree: `n` tenant ids and their claims' indices in `pool`.
  RadixCandidates(const std::uint32_t* ids, const std::uint32_t* claims, const ClaimPool* pool,
                  std::size_t n) noexcept
      : ids_(ids), claims_(claims), pool_(pool), n_(n) {}

  std::size_t size() const noexcept { return n_; }
  bool empty() const noexcept { return n_ == 0; }
  RadixCandidate operator[](std::size_t i) const noexcept {
    return {ids_[i], static_cast<const detail::RadixClaim*>(pool_->at(claims_[i]))->recency()};
  }
  bool contains(TenantId t) const noexcept {
    const std::uint32_t* e = ids_ + n_;
    const std::uint32_t* p = std::lower_bound(ids_, e, t);
    return p != e && *p == t;
  }
  iterator begin() const noexcept { return {this, 0}; }
  iterator end() const noexcept { return {this, n_}; }

 private:
  const std::uint32_t* ids_;
  const std::uint32_t* claims_;
  const ClaimPool* pool_;
  std::size_t n_;
};

// A tenant-choice rule: called with the candidates (never empty), returns
// one of them or kNoTenant to decline. Must be noexcept.
template <class C>
concept RadixChooser = std::is_nothrow_invocable_r_v<TenantId, C&, const RadixCandidates&>;

// The default rule: the candidate that used this prefix most recently; ties
// go to the lowest id.
struct MostRecentlyUsed {
  TenantId operator()(const RadixCandidates& c) const noexcept {
    TenantId best = kNoTenant;
    std::uint64_t best_r = 0;
    for (RadixCandidate x : c) {
      if (best == kNoTenant || x.recency > best_r) {
        best = x.tenant;
        best_r = x.recency;
      }
    }
    return best;
  }
};

// The lowest id among the candidates (deterministic; for tests and
// simulations).
struct LowestTenantId {
  TenantId operator()(const RadixCandidates& c) const noexcept {
    return c.empty() ? kNoTenant : c[0].tenant;
  }
};

// match_and_insert's rule: called with the candidates (possibly empty: a
// cold tree) and the match so far (matched, input, matched_symbols and
// candidates filled in), returns the tenant to insert under - a candidate
// or any other tenant - or kNoTenant to insert nothing. Must be noexcept.
template <class D>
concept RadixDecider =
    std::is_nothrow_invocable_r_v<TenantId, D&, const RadixCandidates&, const MatchResult&>;

// export_nodes' visitor for a tree of `Symbol`: called with a node's depth,
// its fragment (std::string_view for text, std::span<const Symbol> for
// tokens) and its holders; returns false to stop. Must be noexcept.
template <class V, class Symbol>
concept RadixExportVisitor = std::is_nothrow_invocable_r_v < bool,
        V&, std::size_t, typename detail::RadixSymbolTraits<Symbol>::Sequence,
const RadixCandidates& > ;

// What match_and_insert did: `match.tenant` is the decided tenant;
// `match.previous_recency` its recency on the deepest matched node before
// the insert (0 when it did not hold that node) and `match.recency` the
// stamp the insert gave it. `inserted` is false when the rule declined (and
// `insert` is then untouched), true when the insert ran, whatever its
// `insert.status` (ok, an invalid tenant, too long, out of memory).
struct MatchInsertResult {
  MatchResult match;
  InsertResult insert;
  bool inserted = false;
  // The decided tenant held the deepest matched node: `match.matched` is
  // what the tree claims it has of the sequence.
  bool held = false;
};

template <class Symbol>
class BasicApproxRadixTree {
  using Traits = detail::RadixSymbolTraits<Symbol>;
  using Key = typename Traits::Key;
  using Node = detail::RadixNode<Symbol>;
  using Claim = detail::RadixClaim;
  using TenantState = detail::TenantState;
  using Memory = detail::TreeMemory<Symbol>;

 public:
  using symbol_type = Symbol;
  // std::string_view for text, std::span<const Symbol> for tokens.
  using sequence_type = typename Traits::Sequence;
  // std::string for text, std::vector<Symbol> for tokens.
  using fragment_type = typename Traits::Fragment;

  static constexpr std::size_t kMaxSequenceSymbols = 0xFFFFFFFFu;
  // The largest Options::recency_shift; larger values are taken as this.
  static constexpr unsigned kMaxRecencyShift = 16;

  struct Options {
    // When set, every insert evicts its own tenant down to this many units
    // before returning (reactive eviction), so no tenant exceeds it by more
    // than the inserts in flight for it. Units: code points for text.
    std::size_t tenant_budget = kUnlimitedBudget;
    // Asks for transparent huge pages (Linux, madvise) for the tree's
    // memory in 2 MB regions: fewer page faults and TLB misses for a big
    // tree. Off by default: on a VM that hands freed memory back to its
    // host, every huge page costs a fresh host allocation.
    bool huge_pages = false;
    // Recency resolution: one recency step per 2^recency_shift stamps, so
    // that a stamp need not rewrite the claims its path shares with another
    // stamp of the same step (detail/radix/lru.hpp). 0: every stamp
    // distinct, exact LRU; above 0, exact between steps and unordered
    // within one. Values above kMaxRecencyShift are taken as it.
    unsigned recency_shift = 0;
  };

  // What debug_node reports about one node.
  struct DebugNode {
    fragment_type fragment{};
    std::size_t units = 0;
    std::vector<TenantId> tenants{};       // ascending
    std::vector<TenantId> leaf_tenants{};  // tenants no child holds
    std::size_t children = 0;
  };

  // Never allocates.
  BasicApproxRadixTree() noexcept : BasicApproxRadixTree(Options{}) {}
  explicit BasicApproxRadixTree(Options o) noexcept
      : mem_(o.huge_pages),
        budget_(o.tenant_budget),
        recency_shift_(static_cast<std::uint8_t>(std::min(o.recency_shift, kMaxRecencyShift))) {}

  BasicApproxRadixTree(const BasicApproxRadixTree&) = delete;
  BasicApproxRadixTree& operator=(const BasicApproxRadixTree&) = delete;

  // Requires that no other thread uses the tree.
  ~BasicApproxRadixTree() { destroy(); }

  // --- routing (detail/radix/insert-inl.hpp, match-inl.hpp) -------------------

  // Records that `tenant` was sent `seq`: the tenant holds every node on its
  // path, which is created or split as needed, and the whole path gets a
  // fresh recency for it. An empty `seq` registers the tenant at the root.
  // Never throws.
  InsertResult insert(sequence_type seq, TenantId tenant) noexcept;

  // Finds the longest prefix of `seq` in the tree and chooses a tenant among
  // those holding the deepest matched node with `choose` (see RadixChooser),
  // then stamps the chosen tenant's path with a fresh recency. The match
  // stops in the child it matched partially, else at the last node it
  // matched fully, else at the root; a cold tree names no tenant. Never
  // throws.
  template <class Chooser>
  requires RadixChooser<Chooser> MatchResult match(sequence_type seq, Chooser&& choose)
  noexcept;
  // match with the default rule, MostRecentlyUsed.
  MatchResult match(sequence_type seq) noexcept { return match(seq, MostRecentlyUsed{}); }

  // A router's whole step in one descent: match `seq`, let `decide` pick
  // the tenant from the candidates at the deepest matched node and the
  // match (see RadixDecider), then insert `seq` under it. The result, the
  // tree and every tenant's LRU order are those of a match whose chooser
  // declines followed by insert(seq, tenant). When the tenant holds the
  // deepest matched node - a router following its match - the insert
  // continues from that node instead of descending and comparing the text
  // again. `decide` runs with the deepest node locked (shared, or
  // exclusively when the descent already holds it for the insert): it must
  // be short and must not call into the tree. Never throws.
  template <class Decide>
  requires RadixDecider<Decide> MatchInsertResult match_and_insert(sequence_type seq,
                                                                   Decide&& decide)
  noexcept;

  // The longest prefix of `seq` along nodes `tenant` holds (the gateway's
  // prefix_match_tenant); stamps the tenant's path to where it stopped.
  // Returns found = false, matched = 0 for an unregistered tenant.
  TenantMatch match_for_tenant(sequence_type seq, TenantId tenant) noexcept {
    return tenant_descent<true>(seq, tenant);
  }

  // match_for_tenant without the stamp: recency, and so the LRU order that
  // eviction and drop_older_than follow, is left as it was (recency ==
  // previous_recency == the entry's current recency). For policies that
  // look at tenants they may not choose: a look is not a use, and stamping
  // it would make the tree keep what the tenant's server has since evicted.
  TenantMatch peek_for_tenant(sequence_type seq, TenantId tenant) noexcept {
    return tenant_descent<false>(seq, tenant);
  }

  // Every tenant's peek_for_tenant in one descent: walks the path `seq`
  // takes through the tree, as match does, and calls
  // visit(holders, matched) for each node on it, root first, where
  // `holders` are the tenants holding that node (ascending id, each with
  // its recency there) and `matched` counts the units of `seq` matched
  // through that node. Since a tenant holds a prefix of the path, its
  // peek_for_tenant(seq, t).matched is the `matched` of the last node whose
  // holders include t (0 for an unregistered tenant), and that node's
  // recency is its previous_recency. Returns what a match whose chooser
  // declines returns. Stamps nothing. `visit` runs with the node locked
  // shared: it must not call into the tree. Never throws.
  template <class Visit>
  requires std::is_nothrow_invocable_v<Visit&, const RadixCandidates&, std::size_t> MatchResult
  visit_path(sequence_type seq, Visit&& visit)
  noexcept;

  // --- forgetting (detail/radix/evict-inl.hpp) -----------------------------------

  // Evicts every tenant down to `budget` units, least recently used leaves
  // first. When an eviction leaves a node with one child that holds exactly
  // its tenants, and each of them last used the node on the way into that
  // child, the two are merged back into one node (EvictResult::merges; a
  // pair over 64 KB of text stays split). Complexity: O(what is evicted);
  // O(1) per tenant within budget.
  EvictResult evict(std::size_t budget) noexcept;

  // Evicts one tenant down to `budget` units.
  EvictResult evict_tenant(TenantId tenant, std::size_t budget) noexcept;

  // Removes every (non-root) node entry of `tenant` whose recency is below
  // `recency`: the feedback hook for "the server no longer holds the entry
  // last used at recency r, so anything it last used earlier is gone too"
  // (call drop_older_than(t, r + 1) to drop the entry itself as well).
  // Complexity: O(what is dropped).
  EvictResult drop_older_than(TenantId tenant, std::uint64_t recency) noexcept;

  // Removes `tenant` from every node, the root included, and forgets its
  // size. Returns false when it was not registered. Running alongside
  // insert(..., tenant) it ends with the tenant present (the insert came
  // last) or absent; it waits for the in-flight inserts of the tenant it
  // meets.
  bool remove_tenant(TenantId tenant) noexcept;

  // --- queries (detail/radix/check-inl.hpp) ------------------------------------

  // Whether `tenant` is registered (present at the root).
  bool has_tenant(TenantId tenant) const noexcept {
    const TenantState* ts = tenants_.find(tenant);
    return ts != nullptr && ts->registered.load(std::memory_order_relaxed);
  }
  // The maintained size of `tenant` in units; 0 when unregistered. Exact
  // when the tree is quiescent; during concurrent inserts it includes the
  // nodes they have claimed so far.
  std::size_t tenant_size(TenantId tenant) const noexcept {
    const TenantState* ts = tenants_.find(tenant);
    return ts == nullptr ? 0 : ts->size.load(std::memory_order_relaxed);
  }
  // The number of (non-root) nodes `tenant` holds.
  std::size_t tenant_nodes(TenantId tenant) const noexcept {
    const TenantState* ts = tenants_.find(tenant);
    return ts == nullptr ? 0 : ts->listed.load(std::memory_order_relaxed);
  }
  // The recency `units` deep in `tenant`'s LRU order, counted from its most
  // recent claim; none when it holds fewer units (or max_claims is 0). For
  // a tree that mirrors a server's LRU cache of that many units, the
  // recency of the server's next eviction. The walk holds the tenant's LRU
  // mutex, which its stamps wait for, and stops after `max_claims` claims
  // with the recency there.
  std::optional<std::uint64_t> tenant_recency_at(TenantId tenant, std::size_t units,
                                                 std::size_t max_claims) const noexcept;
  // The maintained size of every registered tenant, ascending id. Allocates.
  std::vector<TenantSize> tenant_sizes() const;
  std::size_t tenant_count() const noexcept { return registered_.load(std::memory_order_relaxed); }

  // Never allocates; each field is read atomically but not all at once.
  // First frees what earlier operations unlinked and no reader can still
  // hold, so bytes settle when the tree is quiescent.
  RadixTreeStats stats() const noexcept;

  // Options::recency_shift as the tree applies it (clamped).
  unsigned recency_shift() const noexcept { return recency_shift_; }
  // The last recency handed out.
  std::uint64_t now() const noexcept { return clock_.load(std::memory_order_relaxed); }

  // --- export (detail/radix/export-inl.hpp) -----------------------------------

  // Calls visit(depth, fragment, holders) for every node in pre-order,
  // children by ascending first symbol: the root first (depth 0, empty
  // fragment), then each node with depth one more than its parent's, so a
  // node's path is the fragments of the latest visited node at each lower
  // depth, then its own. `holders` are the tenants holding the node
  // (ascending id, each with its recency there). A false from visit stops
  // the walk. `visit` runs with the node locked shared: it must be short
  // and must not call into the tree.
  //
  // Runs alongside every other operation (the file's header says how):
  // each visited node's path was a path of the tree during the call, with
  // the holders it had when visited; changes made during the walk may be
  // missed. What writers unlink during the walk stays allocated until it
  // ends. Allocates a stack of one entry per level, nothing else. Never
  // throws.
  template <class Visit>
  requires RadixExportVisitor<Visit, Symbol> ExportStatus export_nodes(Visit&& visit)
  const noexcept;

  // Debug: every registered tenant's size recomputed from the nodes
  // (tenants at the root only count 0), ascending id. Requires quiescence.
  std::vector<TenantSize> recount_sizes() const;
  // Debug: checks every structural invariant, the maintained sizes, the LRU
  // lists and the byte accounting; returns "" or a description of the first
  // violation. Requires quiescence.
  std::string check_invariants() const;
  // Debug: the node where `seq` ends (the last node its walk from the root
  // enters, following `seq` exactly; the root for an empty `seq`), or
  // nullopt when `seq` leaves the tree. Requires quiescence.
  std::optional<DebugNode> debug_node(sequence_type seq) const;

 private:
  friend struct detail::RadixTestAccess;

  static constexpr int kMaxEvictFailures = 4096;
  static constexpr int kOptimisticTries = 4;
  static constexpr std::size_t kMaxMergeBytes = std::size_t{64} << 10;
  static constexpr std::uint32_t kNil = detail::kNilIndex;
  static constexpr std::uint32_t kRoot = detail::kRootIndex;
  enum class Step { kDone, kOutOfMemory };

  struct Descent;
  struct OptWalk;
  struct Prep;
  struct Inserting;
  struct TailUnits;
  struct EnterAll {
    bool operator()(const Node&) const noexcept { return true; }
  };

  // --- slab objects and recency (here) -----------------------------------------

  Node* node(std::uint32_t i) const noexcept { return mem_.node(i); }
  // Also the root, for a claim's `node`.
  Node* node_or_root(std::uint32_t i) const noexcept {
    return i == kRoot ? const_cast<Node*>(&root_) : node(i);
  }
  Claim* claim(std::uint32_t i) const noexcept { return mem_.claim(i); }
  void prefetch_claim(std::uint32_t i) const noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(claim(i), 1);
#else
    (void)i;
#endif
  }
  detail::LruList lru(TenantState& ts) const noexcept { return detail::LruList(mem_.slab(), ts); }
  RadixCandidates candidates(const Node& x) const noexcept {
    return RadixCandidates(x.tenant_ids(), x.claims(), &mem_.slab(), x.ntenant);
  }
  std::uint64_t next_recency() noexcept;
  std::uint64_t stamp_path(TenantState& ts, std::uint32_t ci) noexcept;

  // --- descents (detail/radix/descent-inl.hpp, match-inl.hpp) ------------------

  static std::size_t common_units(const Node& n, const Symbol* text, std::size_t rem) noexcept;
  static std::size_t common_units(const Symbol* frag, std::size_t len, const Symbol* text,
                                  std::size_t rem) noexcept;
  template <bool ForInsert>
  Descent descend_any(const detail::EpochDomain::Section& sec, const Symbol* text,
                      std::size_t n) noexcept;
  template <bool ForInsert, class Enter>
  bool descend_opt(const Symbol* text, std::size_t n, Descent& out, Enter&& enter) noexcept;
  template <class Enter>
  KVROUTE_ALWAYS_INLINE bool walk_opt(const Symbol* text, std::size_t n, OptWalk& w,
                                      Enter& enter) noexcept;
  KVROUTE_NOINLINE bool lock_to_change(Node& x, std::uint32_t vx, std::uint64_t wraps,
                                       const Symbol* text, std::size_t pos, std::size_t n,
                                       Symbol*& leaf) noexcept;
  void unlock_descent(const Descent& d) noexcept;
  template <bool KeepParent, class Enter>
  Descent descend(const Symbol* text, std::size_t n, Enter&& enter) noexcept;
  template <bool Stamp>
  TenantMatch tenant_descent(sequence_type seq, TenantId tenant) noexcept;

  // --- inserts (detail/radix/insert-inl.hpp, split-inl.hpp) --------------------

  Step insert_descend(const detail::EpochDomain::Section& sec, const Symbol* text, std::size_t n,
                      TenantState& ts, InsertResult& r) noexcept;
  Step insert_once(const Symbol* text, std::size_t n, TenantState& ts, InsertResult& r) noexcept;
  std::uint32_t register_at_root(TenantState& ts) noexcept;
  Step insert_from(Inserting& in) noexcept;
  bool upgrade(Inserting& in, bool need_leaf, std::size_t after) noexcept;
  bool prepare(Inserting& in, Prep& p, bool split, bool need_claim, bool need_leaf,
               std::size_t after) noexcept;
  void add_claim(Inserting& in, Prep& p) noexcept;
  void add_leaf(Inserting& in, Prep& p, std::size_t after) noexcept;
  void step_down(Inserting& in, std::uint32_t child, std::size_t after) noexcept;
  void release_prep(Prep& p, std::size_t lower_len, std::size_t upper_len,
                    std::size_t leaf_len) noexcept;
  [[nodiscard]] detail::SplitStep split_node(Node& x, std::uint32_t xi, std::size_t k,
                                             std::size_t kc, Prep& p, TenantId own) noexcept;
  void finish_insert(TenantState& ts) noexcept;

  // --- eviction and merges (detail/radix/evict-inl.hpp, merge-inl.hpp) ----------

  template <class More>
  EvictResult evict_loop(TenantState& ts, More more) noexcept;
  void free_node(std::uint32_t i) noexcept;
  bool used_together(const Node& m, const Node& c) const noexcept;
  bool merge_only_child(Node& m, const TenantState& held) noexcept;
  void unlink_merged_claims(Node& m, Node& c) noexcept;
  void merge_into(Node& m, Node& c, typename Node::Frag joined, Symbol* buf,
                  std::size_t len) noexcept;

  // --- debugging and teardown (detail/radix/check-inl.hpp) ---------------------

  struct CheckTotals;
  std::string check_node(const Node& n, const Node* parent, std::uint32_t index,
                         CheckTotals& t) const;
  std::string check_tenants(CheckTotals& t) const;
  std::string check_list(const TenantState& ts, std::size_t claims) const;
  template <class N, class V>
  void push_children(N& n, V& stack) const {
    for (std::uint32_t i = 0; i < n.nchild; ++i) stack.push_back(node(n.kids()[i]));
  }
  void destroy() noexcept;

  // Laid out by who writes what, so that two threads routing at once do not
  // take cache lines from each other for data neither of them changed: the
  // tree's memory (slab directory, striped counters, arena, epochs), the
  // root (read by every descent), the tenant directory and the recency
  // clock (written by stamps) each start a line of their own. Destroyed in
  // reverse: what the memory's epoch domain still holds goes back to the
  // memory last of all (destroy() has freed what nodes own).
  Memory mem_;
  const std::size_t budget_;
  const std::uint8_t recency_shift_;
  // Tests only (detail::RadixTestAccess): called by every optimistic
  // descent between its walk and the lock it ends with, on the descending
  // thread, which holds no node lock then, so that a test can change the
  // tree in that window from another thread. Always present, so that no
  // build changes the class.
  void (*before_descent_lock_)(void* arg) = nullptr;
  void* before_descent_lock_arg_ = nullptr;
  alignas(detail::kCacheLine) Node root_;
  detail::TenantDirectory tenants_;
  std::atomic<std::size_t> registered_{0};
  std::atomic<std::size_t> removed_units_{0};
  // The last recency handed out: the stamps so far (recency_shift 0), or
  // the step (recency_shift > 0, the stamps being counted in mem_).
  alignas(detail::kCacheLine) std::atomic<std::uint64_t> clock_{0};
};

// Text in UTF-8, counted in code points.
using ApproxRadixTree = BasicApproxRadixTree<char>;
// Token ids.
using TokenRadixTree = BasicApproxRadixTree<std::uint32_t>;

KVROUTE_NAMESPACE_END

// The implementation, one idea a file.
#include "kvroute/detail/radix/check-inl.hpp"
#include "kvroute/detail/radix/descent-inl.hpp"
#include "kvroute/detail/radix/evict-inl.hpp"
#include "kvroute/detail/radix/export-inl.hpp"
#include "kvroute/detail/radix/insert-inl.hpp"
#include "kvroute/detail/radix/match-inl.hpp"
#include "kvroute/detail/radix/merge-inl.hpp"
#include "kvroute/detail/radix/split-inl.hpp"
#include "kvroute/detail/radix/test_access.hpp"

#endif  // KVROUTE_RADIX_TREE_HPP_
