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
// choose, insert under the choice - is one descent with match_and_insert.
//
// `BasicApproxRadixTree<Symbol>` is one implementation for text and tokens:
//   * `ApproxRadixTree` = `BasicApproxRadixTree<char>` takes UTF-8 text and
//     counts Unicode code points: match lengths, sizes and budgets are in
//     characters, as the gateway's tree counts them. A byte mismatch inside a
//     multi-byte character counts only the whole characters before it.
//     Invalid UTF-8 is accepted; each byte that does not start a well-formed
//     sequence is one character (detail/utf8.hpp). NUL is an ordinary byte.
//   * `TokenRadixTree` = `BasicApproxRadixTree<std::uint32_t>` (or any other
//     integral token type, e.g. int32_t) takes spans of token ids; a unit is
//     one token.
//
// Semantics (gateway spec section 3, with the flaws of section 9 fixed):
//   * A compressed tree: each node holds a fragment; children are keyed by
//     their fragment's first unit. When an eviction, drop_older_than or
//     remove_tenant leaves a node with one child that has exactly its
//     tenants (the branch or the tenant that split them is gone), the two
//     are merged back into one node (EvictResult::merges), so chains of
//     single-child nodes do not pile up behind evicted branches (the
//     gateway never merges). Only when every one of those tenants last
//     used the upper node on the way into the lower one (no insert or
//     match of theirs has ended at the upper node since): the merged node
//     is evicted as one, and a use that ended at the upper node is more
//     recent than the text below it, which an eviction must be able to
//     take alone. A pair whose joined text would exceed 64 KB stays split
//     (the copy, made under both nodes' locks, would cost more than the
//     node saves).
//   * A tenant's size is the sum of the fragment lengths of every node it
//     holds; the root's fragment is empty, so a tenant present only at the
//     root has size 0. insert("") registers the tenant at the root and
//     touches nothing else.
//   * match walks as far as the text agrees with the tree. It stops at the
//     child it matched partially (that child's tenants are the candidates),
//     else at the last node matched fully, else at the root. The matched
//     count includes a partial overlap inside the last child.
//   * Tenant choice is a documented, pluggable rule over the candidates at
//     that deepest node: by default the most recently used one (ties: lowest
//     id). A chooser callback sees every candidate with its recency, so a
//     policy can pick by load and a simulator can compare rules. A cold tree
//     matches nothing and names no tenant (no phantom "empty" tenant).
//   * Recency: a per-tree logical clock. Every insert stamps its whole path
//     for its tenant; every match stamps the chosen tenant's path from the
//     deepest matched node up to the root. No sampling. (The gateway stamps
//     only the last node, and matches 1 time in 8; a path stamp keeps an
//     ancestor never older than its descendants, which is what makes the
//     per-tenant LRU exact and cheap.) peek_for_tenant, and a match whose
//     chooser declines, stamp nothing.
//   * Recency resolution (Options::recency_shift = s, default 0): at s > 0
//     a recency is a step of 2^s stamps, which share it. Steps are counted
//     per thread: a thread's every 2^s-th stamp moves the tree's step on
//     (with one thread, exactly the stamp count divided by 2^s; with T
//     threads stamping alike, still a step per 2^s stamps in all), so that a
//     stamp writes no line another thread writes: a clock that every stamp
//     advanced took its line from the other core on every request of a
//     two-thread replay. At s = 0 every stamp is distinct (a tree-wide
//     counter) and the LRU is exact. At s > 0 it is
//     exact between steps and unordered within one (the most-recent rule
//     sees ties there and takes the lowest id, and drop_older_than cuts at
//     a step), and a stamp stops at the first claim up its path that
//     already holds the current step: the claims a tenant's requests share
//     (a system prompt, an agent's trunk) are written once per step rather
//     than by every request. That is most of a stamp's writes (on the
//     branchy agent workload 33 claims per stamp at s = 0, 13 at s = 6), and
//     the lines two threads serving one tenant would otherwise take from
//     each other. Unlike the gateway's 1-in-8 sampling no use is lost: a
//     step only rounds when it happened.
//   * Eviction is per tenant, LRU, one node at a time, always a leaf for
//     that tenant (a node none of whose children it holds). The root is never
//     evicted. A node that no tenant holds any more is unlinked and freed.
//
// Thread safety: thread-safe. insert, match, match_and_insert,
// match_for_tenant, peek_for_tenant, visit_path, evict, evict_tenant,
// drop_older_than, remove_tenant and the size and stats queries may all run
// concurrently from any threads. The debug functions (recount_sizes,
// check_invariants, debug_node) require that no other thread modifies the
// tree while they run.
//
// How (so the guarantees below can be checked):
//   * There is no tree-wide lock. Each node has a reader-writer lock that is
//     also a version counter (every exclusive hold moves it on). match and
//     match_and_insert descend optimistically: they take no lock on the
//     nodes they pass, read each as a snapshot checked against its version,
//     and lock only where they stop (the deepest node: shared, or for
//     match_and_insert exclusively when the insert will change it), checking
//     that it did not change; a check that fails a few times over falls back
//     to the locked descent
//     (RadixTreeStats::descent_fallbacks counts those). insert descends the
//     same way as far as its tenant already holds the path (every ancestor
//     of a node a tenant holds is held by it too), and from there on as
//     below.
//     So a match writes nothing on the nodes it passes, and two threads
//     matching through the same top nodes do not contend. Everything such a
//     reader may be looking at (a fragment, a child or tenant block, an
//     unlinked node's slot) is retired, not freed, and freed once no reader
//     that could hold it is left (epoch-based reclamation,
//     detail/epoch.hpp). The other operations, and an insert below the
//     deepest node its tenant held, descend with lock coupling
//     (the child's lock is taken before the parent's is released), so they
//     hold at most two node locks (three, for an instant, in an insert), and
//     compare text against a node's fragment under that node's lock (and, in
//     an insert, its parent's shared lock) alone. A locked match would take
//     shared locks only; insert takes a node's lock exclusively only where
//     it changes that node (adds a child, a tenant, or splits it). Where it
//     upgrades a shared hold to get there, it holds the node's parent shared
//     meanwhile, so that the node stays linked while its lock is released;
//     where its optimistic descent already knows that it will change the
//     node it stops in, it locks that node exclusively at once and needs no
//     parent (the version check under the exclusive hold says the node is
//     unchanged and still linked). match_and_insert descends as match does,
//     with that exclusive ending, and, when the chosen tenant holds the
//     deepest matched node, goes on as insert from that node (whose lock it
//     still holds), so the text is compared once.
//   * Each tenant has a mutex for its LRU list and size. It is taken for
//     O(depth) link updates, never across a text comparison, and only by
//     operations on that tenant, so threads serving different tenants never
//     meet on it: once per match (to stamp the chosen tenant's path), once
//     per insert (to stamp its path at the end) plus once per node the insert
//     adds the tenant to.
//   * evict/drop_older_than/remove_tenant serialise per tenant on a second
//     mutex that match never takes (insert takes it only for its own
//     reactive eviction, see Options::tenant_budget).
//   * A node is unlinked only while its parent's and its own locks are held
//     exclusively, so no reader is inside it, none can reach it again, no
//     insert is upgrading its lock (that insert would hold the parent), and
//     an insert whose optimistic descent stopped in it finds its version
//     moved on when it locks it, and walks again; it is retired right
//     then. A merge also holds the merged child's children
//     exclusively, and an insert that upgrades a node's lock compares its
//     text again if another writer held the node meanwhile (a split
//     shortens a fragment, a merge lengthens it).
//   * Claims (tenant t holds node n) are removed from the tail of t's LRU
//     list, which is always a leaf for t, or by a merge, which holds the
//     nodes involved, the maintenance mutex of every tenant whose claims it
//     removes (taken without waiting: the merge is skipped when one is
//     busy) and their LRU mutexes while it relinks the claims below. So a
//     walk up a path's claims under the tenant's LRU mutex (a stamp) meets
//     live claims only, without holding their nodes.
//
// Guarantees under concurrency:
//   * A match never uses a torn node: a snapshot is used only once its
//     version check passed, and the node it stops at is read under its lock.
//     An insert publishes top-down, so a concurrent match sees it on a prefix
//     of its path (possibly none of it). The matched count is always the length
//     of a real common prefix of the text and a path that was in the tree
//     during the call. The chosen tenant held the deepest matched node when
//     it was chosen; it may be being evicted or removed at that moment.
//   * Counts are exact when the tree is quiescent (tenant_size() equals
//     recount_sizes()). During concurrent inserts a tenant's size includes
//     the nodes its in-flight inserts have claimed so far.
//   * Within one tenant the LRU list is always ordered by recency, and a
//     node's recency is >= that of its descendants; eviction order is exact
//     LRU (to one recency step, with Options::recency_shift) even under
//     concurrency.
//   * After evict(b) returns, every tenant is within b unless inserts that
//     ran concurrently added to it. With Options::tenant_budget set, every
//     insert evicts its own tenant back to the budget before it returns, so a
//     tenant exceeds its budget only by the inserts in flight for it.
//   * How long a lock is held shared grows with a fragment's length: an
//     insert compares the fragments below the deepest node its tenant
//     already held (the nodes it is adding the tenant to) while holding
//     each node and its parent shared; the nodes it already held it
//     compares in its optimistic descent, without locks (and
//     match_and_insert, going on from its own descent, compares the
//     deepest node's fragment once). So a tenant's first insert through a
//     first-level node with a fragment of megabytes holds the root shared
//     for the length of that compare (as does any insert when the
//     optimistic walk falls back); a writer at the root (a new first
//     character, a new tenant, unlinking a first-level node) waits for it,
//     and, since the lock lets a waiting writer go first, so does any
//     reader that needs the root's lock meanwhile. Optimistic descents take
//     the root's lock only when they stop at the root.
//   * remove_tenant(t) running alongside insert(..., t) ends with t either
//     present (the insert came last) or absent; it waits for the in-flight
//     inserts of t it meets, so a never-ending stream of them delays it.
//   * However long an optimistic descent is descheduled, it never takes a
//     stale snapshot for current: a node's version word repeats after 2^19
//     exclusive holds, and a descent that saw any version wrap while it
//     walked walks again (detail/rw_lock.hpp, RwLock::wrapped_since).
//
// Complexity (L = sequence length, d = depth of the path, T = tenants at a
// node, C = children at a node; all small in practice):
//   * insert: O(L + d * (log C + log T)), plus O(T) per split and O(d) to
//     stamp the path.
//   * match, match_for_tenant, peek_for_tenant: O(L + d * log C), plus the
//     chooser over the deepest node's candidates and O(d) to stamp the
//     chosen tenant's path. visit_path: O(L + d * log C) plus the visitor
//     over each node's tenants.
//   * match_and_insert: match's cost, then insert's from the deepest
//     matched node when the chosen tenant holds it (else a whole insert).
//   * evict, evict_tenant, drop_older_than: O(what is removed * (T + C)); no
//     traversal of the tree and no heap over its leaves. A tenant already
//     within budget costs O(1).
//   * remove_tenant: O(nodes the tenant holds * (T + C)).
//
// Memory: a node is 56 bytes + its fragment (1 byte per ASCII character,
// up to 4 per code point; 4 per uint32 token; nothing for a fragment of up
// to 8 bytes, which the node keeps itself) + 8 bytes per child and per
// tenant entry, in blocks of their own (but up to two children live in the
// node, and a node's only tenant too: the common cases); each (node,
// tenant) pair also costs a 24-byte claim. Nodes and claims link to each other by
// 32-bit indices into one slab (detail/slab.hpp), which grows by 16 KB
// chunks and keeps them, reusing freed slots, until the tree is
// destroyed. A fragment of 256 bytes or more has a 16-byte header, and
// after a split it may sit in a larger buffer, at most four times its size
// (the other part of the split was copied out). Long fragments (chat
// prompts) therefore cost little more than their text. stats().bytes counts
// every byte the tree has allocated (requested sizes and whole slab chunks);
// stats().reserved_bytes adds the free space of the tree's own allocator
// (detail/arena.hpp: fragments and blocks come from per-thread shards of
// 64 KB to 2 MB regions, a region given back when its last block is freed,
// one spare kept per shard; Options::huge_pages asks for transparent huge
// pages for the 2 MB ones). Memory is bounded by the
// budgets: with a per-tenant budget B and N tenants a tree holds at most
// N * B units of fragments (in at most four times their bytes), and its
// slab at most the nodes and claims of the largest tree it has been. A tree
// holds at most about 2^32 / 10 nodes, 400 million (a node and one claim
// take 10 of the slab's 2^32 units; insert then reports kOutOfMemory).
// What an operation unlinks while other threads may be reading it (a
// split's old fragment, a grown block's old copy, an evicted node) stays
// allocated, and counted in stats().bytes, until no such reader is left:
// evict(), evict_tenant(), remove_tenant() and stats() free what has become
// free, and each list of retired objects is reclaimed every 64 it receives.
// With no concurrent readers, stats() therefore sees nothing of it.
//
// Invalidation: nothing returned refers into the tree. The RadixCandidates
// view passed to a chooser (or a match_and_insert rule) is valid only during
// that call, and the chooser runs under the deepest node's lock (shared;
// for match_and_insert possibly exclusive, held for the insert): it must be
// short, must not throw and must not call back into the tree.
//
// Errors: insert, match and the maintenance calls never throw, never log and
// never block on I/O; an allocation failure makes insert return
// kOutOfMemory with the tree consistent (a prefix of the sequence may have
// been recorded). The vector-returning queries and the debug functions may
// throw std::bad_alloc.
//
// Tenants are compact ids: pass a WorkerId's `value` (kvroute/worker_set.hpp).
// Ids up to kMaxTenantId (2^24 - 1, kMaxWorkerIds - 1) are accepted. Each id
// ever inserted keeps about 150 bytes of state until the tree is destroyed
// (so that no operation can hold a dangling pointer to it), and the id table
// costs 2 KB per 256 consecutive ids plus 2 KB per 65536.
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
//
//   // Choose by load instead of recency:
//   m = tree.match(text, [&](const kvroute::RadixCandidates& c) noexcept {
//     kvroute::TenantId best = kvroute::kNoTenant;
//     for (kvroute::RadixCandidate x : c)
//       if (best == kvroute::kNoTenant || load(x.tenant) < load(best)) best = x.tenant;
//     return best;
//   });

#ifndef KVROUTE_RADIX_TREE_HPP_
#define KVROUTE_RADIX_TREE_HPP_

#include <atomic>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "kvroute/config.hpp"
#include "kvroute/detail/arena.hpp"
#include "kvroute/detail/epoch.hpp"
#include "kvroute/detail/radix_node.hpp"
#include "kvroute/detail/striped.hpp"

#if KVROUTE_TSAN
// ThreadSanitizer's runtime (dynamic annotations): the optimistic descent's
// reads are validated by a version, not ordered by a lock.
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#endif

KVROUTE_NAMESPACE_BEGIN

// A tenant (worker) id; WorkerId::value.
using TenantId = std::uint32_t;
// "No tenant": a cold match, or a chooser that declined.
inline constexpr TenantId kNoTenant = 0xFFFFFFFFu;
// The largest accepted tenant id.
inline constexpr TenantId kMaxTenantId = (1u << 24) - 1;
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
    // host, every huge page costs a fresh host allocation (measured in
    // benchmarks/README.md).
    bool huge_pages = false;
    // Recency resolution: one recency step per 2^recency_shift stamps, so
    // that a stamp need not rewrite the claims its path shares with another
    // stamp of the same step ("Recency resolution" above). 0: every stamp
    // distinct, exact LRU. Values above kMaxRecencyShift are taken as it.
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
      : budget_(o.tenant_budget),
        recency_shift_(static_cast<std::uint8_t>(std::min(o.recency_shift, kMaxRecencyShift))),
        arena_(o.huge_pages) {}

  BasicApproxRadixTree(const BasicApproxRadixTree&) = delete;
  BasicApproxRadixTree& operator=(const BasicApproxRadixTree&) = delete;

  // Requires that no other thread uses the tree.
  ~BasicApproxRadixTree() { destroy(); }

  // Records that `tenant` was sent `seq`: the tenant holds every node on its
  // path, which is created or split as needed, and the whole path gets a
  // fresh recency for it. An empty `seq` registers the tenant at the root.
  // Never throws.
  InsertResult insert(sequence_type seq, TenantId tenant) noexcept {
    InsertResult r;
    if (tenant > kMaxTenantId) {
      r.status = InsertStatus::kInvalidTenant;
      return r;
    }
    if (seq.size() > kMaxSequenceSymbols) {
      r.status = InsertStatus::kTooLong;
      return r;
    }
    TenantState* ts = state_or_create(tenant);
    if (ts == nullptr) {
      r.status = InsertStatus::kOutOfMemory;
      return r;
    }
    detail::EpochDomain::Section sec = domain_.enter();  // for what a split retires
    Prefaults prefaults(arena_, sec);
    if (insert_descend(sec, seq.data(), seq.size(), *ts, r) == Step::kOutOfMemory) {
      r.status = InsertStatus::kOutOfMemory;
    }
    prefaults.run();
    // Not across the reactive eviction, which may wait for another
    // eviction of the tenant: an open section holds back every reclamation.
    sec.leave();
    finish_insert(*ts);
    return r;
  }

  // Finds the longest prefix of `seq` in the tree and chooses a tenant among
  // those holding the deepest matched node with `choose` (see RadixChooser),
  // then stamps the chosen tenant's path with a fresh recency. Never throws.
  template <class Chooser>
  requires RadixChooser<Chooser> MatchResult match(sequence_type seq, Chooser&& choose)
  noexcept {
    MatchResult r;
    const Symbol* text = seq.data();
    const std::size_t n = seq.size();
    const detail::EpochDomain::Section sec = domain_.enter();
    const Descent d = descend_any<false>(sec, text, n);
    Node* const x = d.node;
    const std::size_t pos = d.pos;
    const std::size_t matched = d.matched;
    r.matched = matched;
    r.matched_symbols = pos;
    r.candidates = x->ntenant;
    if (x->ntenant > 0) {
      const TenantId t = choose(candidates(*x));
      const std::uint32_t c = t == kNoTenant ? kNil : x->find_claim(t);
      if (c != kNil) {
        TenantState* ts = find_state(t);
        std::lock_guard<detail::SpinMutex> g(ts->lru_mu);
        r.previous_recency = claim(c)->recency();
        r.recency = stamp_path(*ts, c);
        r.tenant = t;
      }
    }
    x->lock.unlock_shared();
    r.input = matched + Traits::count(text + pos, n - pos);
    return r;
  }

  // match with the default rule, MostRecentlyUsed.
  MatchResult match(sequence_type seq) noexcept { return match(seq, MostRecentlyUsed{}); }

  // A router's whole step in one descent: match `seq`, let `decide` pick
  // the tenant from the candidates at the deepest matched node and the
  // match (see RadixDecider), then insert `seq` under it. The result, the
  // tree and every tenant's LRU order are those of a match whose chooser
  // declines followed by insert(seq, tenant) (the match stamps nothing; the
  // insert stamps the whole path). When the tenant holds the deepest
  // matched node - a router following its match - the insert continues
  // from that node instead of descending and comparing the text again;
  // otherwise (another tenant, or a concurrent eviction in between) it runs
  // as a separate insert. `decide` runs with the deepest node locked
  // (shared, or exclusively when the descent already holds it for an insert
  // that splits it or adds a child to it): it must be short and must not
  // call into the tree. (When it declines, or picks a tenant that does not
  // hold that node - a router's miss - that exclusive hold and the copy of
  // the new text made for it served nothing: the separate insert makes its
  // own.) Never throws.
  template <class Decide>
  requires RadixDecider<Decide> MatchInsertResult match_and_insert(sequence_type seq,
                                                                   Decide&& decide)
  noexcept {
    MatchInsertResult out;
    MatchResult& m = out.match;
    const Symbol* text = seq.data();
    const std::size_t n = seq.size();
    detail::EpochDomain::Section sec = domain_.enter();
    Prefaults prefaults(arena_, sec);
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
    TenantState* ts = (c == kNil || n > kMaxSequenceSymbols) ? nullptr : find_state(t);
    if (ts != nullptr) {
      // Consumes the descent's holds. The descent's compare in x
      // (d.pos - d.start symbols) holds: x has not changed since it was read.
      if (insert_from(d.parent, x, d.index, d.excl, c, d.start, text, n, *ts, out.insert,
                      {d.pos, m.input - d.matched}, d.pos - d.start,
                      d.leaf) == Step::kOutOfMemory) {
        out.insert.status = InsertStatus::kOutOfMemory;
      }
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

  // Evicts every tenant down to `budget` units, least recently used leaves
  // first. Complexity: O(what is evicted); O(1) per tenant within budget.
  EvictResult evict(std::size_t budget) noexcept {
    EvictResult total;
    for (TenantState* ts = registry_.load(std::memory_order_acquire); ts != nullptr;
         ts = ts->next_state) {
      if (ts->size.load(std::memory_order_relaxed) <= budget) continue;
      std::lock_guard<std::mutex> m(ts->maint_mu);
      total += evict_loop(*ts, [budget](const TenantState& st, const Claim&) {
        return st.size.load(std::memory_order_relaxed) > budget;
      });
    }
    domain_.collect();
    return total;
  }

  // Evicts one tenant down to `budget` units.
  EvictResult evict_tenant(TenantId tenant, std::size_t budget) noexcept {
    TenantState* ts = find_state(tenant);
    if (ts == nullptr) return {};
    std::lock_guard<std::mutex> m(ts->maint_mu);
    const EvictResult r = evict_loop(*ts, [budget](const TenantState& st, const Claim&) {
      return st.size.load(std::memory_order_relaxed) > budget;
    });
    domain_.collect();
    return r;
  }

  // Removes every (non-root) node entry of `tenant` whose recency is below
  // `recency`: the feedback hook for "the server no longer holds the entry
  // last used at recency r, so anything it last used earlier is gone too"
  // (call drop_older_than(t, r + 1) to drop the entry itself as well).
  // Complexity: O(what is dropped).
  EvictResult drop_older_than(TenantId tenant, std::uint64_t recency) noexcept {
    TenantState* ts = find_state(tenant);
    if (ts == nullptr) return {};
    std::lock_guard<std::mutex> m(ts->maint_mu);
    // No collect() here (feedback may come with every request): what this
    // retires is freed by the domain's own batches and by maintenance.
    return evict_loop(
        *ts, [recency](const TenantState&, const Claim& c) { return c.recency() < recency; });
  }

  // Removes `tenant` from every node, the root included, and forgets its
  // size. Returns false when it was not registered.
  bool remove_tenant(TenantId tenant) noexcept {
    TenantState* ts = find_state(tenant);
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
      // No insert of the tenant is in flight below the root: an insert
      // holds the root's lock, or (from an optimistic descent) a node on
      // which the tenant's claim is listed, which the check above would
      // see and which no eviction can take while that node is locked; and
      // it keeps one or the other until its claims below are linked.
      const std::uint32_t rc = root_.find_claim(tenant);
      if (rc == kNil) {
        g.unlock();
        root_.lock.unlock();
        return false;
      }
      remove_tenant_entry(root_, tenant);
      ts->registered.store(false, std::memory_order_relaxed);
      ts->size.store(0, std::memory_order_relaxed);
      registered_.fetch_sub(1, std::memory_order_relaxed);
      g.unlock();
      root_.lock.unlock();
      free_claim(rc);
      domain_.collect();
      return true;
    }
  }

  // Whether `tenant` is registered (present at the root).
  bool has_tenant(TenantId tenant) const noexcept {
    const TenantState* ts = find_state(tenant);
    return ts != nullptr && ts->registered.load(std::memory_order_relaxed);
  }

  // The maintained size of `tenant` in units; 0 when unregistered.
  std::size_t tenant_size(TenantId tenant) const noexcept {
    const TenantState* ts = find_state(tenant);
    return ts == nullptr ? 0 : ts->size.load(std::memory_order_relaxed);
  }

  // The number of (non-root) nodes `tenant` holds.
  std::size_t tenant_nodes(TenantId tenant) const noexcept {
    const TenantState* ts = find_state(tenant);
    return ts == nullptr ? 0 : ts->listed.load(std::memory_order_relaxed);
  }

  // The maintained size of every registered tenant, ascending id. Allocates.
  std::vector<TenantSize> tenant_sizes() const {
    std::vector<TenantSize> out;
    for (const TenantState* ts = registry_.load(std::memory_order_acquire); ts != nullptr;
         ts = ts->next_state) {
      if (ts->registered.load(std::memory_order_relaxed)) {
        out.push_back({ts->id, ts->size.load(std::memory_order_relaxed)});
      }
    }
    std::sort(out.begin(), out.end(),
              [](const TenantSize& a, const TenantSize& b) { return a.tenant < b.tenant; });
    return out;
  }

  std::size_t tenant_count() const noexcept { return registered_.load(std::memory_order_relaxed); }

  // Never allocates; each field is read atomically but not all at once.
  // First frees what earlier operations unlinked and no reader can still
  // hold (see "Memory"), so bytes settle when the tree is quiescent.
  RadixTreeStats stats() const noexcept {
    domain_.collect();
    RadixTreeStats s;
    s.nodes = counts(kNodes) + 1;
    s.bytes = counts(kBytes) + pool_.bytes();
    s.reserved_bytes = arena_.reserved_bytes() + pool_.bytes() +
                       line_aligned_bytes_.load(std::memory_order_relaxed);
    s.units = counts(kUnits);
    s.symbols = counts(kSymbols);
    s.claims = counts(kClaims);
    s.tenants = registered_.load(std::memory_order_relaxed);
    s.clock = now();
    s.stamps = recency_shift_ == 0 ? clock_.load(std::memory_order_relaxed) : counts(kStamps);
    s.stamped_claims = counts(kStamped);
    s.removed_units = removed_units_.load(std::memory_order_relaxed);
    s.descent_fallbacks = counts(kFallbacks);
    return s;
  }

  // Options::recency_shift as the tree applies it (clamped).
  unsigned recency_shift() const noexcept { return recency_shift_; }

  // The last recency handed out.
  std::uint64_t now() const noexcept { return clock_.load(std::memory_order_relaxed); }

  // Debug: every registered tenant's size recomputed from the nodes
  // (tenants at the root only count 0), ascending id. Requires quiescence.
  std::vector<TenantSize> recount_sizes() const {
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

  // Debug: checks every structural invariant, the maintained sizes, the LRU
  // lists and the byte accounting; returns "" or a description of the first
  // violation. Requires quiescence.
  std::string check_invariants() const { return check(); }

  // Debug: the node where `seq` ends (the last node its walk from the root
  // enters, following `seq` exactly; the root for an empty `seq`), or
  // nullopt when `seq` leaves the tree. Requires quiescence.
  std::optional<DebugNode> debug_node(sequence_type seq) const {
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

#if defined(KVROUTE_RADIX_TREE_TEST_HOOKS)
  // Tests only, with KVROUTE_RADIX_TREE_TEST_HOOKS defined before this
  // header is included (in a test program of its own: the macro changes the
  // class). Called by every optimistic descent between its walk and the
  // lock it ends with, on the descending thread, which holds no node lock
  // then: a test changes the tree in that window from another thread.
  void (*before_descent_lock)(void* arg) = nullptr;
  void* before_descent_lock_arg = nullptr;
#endif

 private:
  static constexpr int kMaxEvictFailures = 4096;
  static constexpr std::uint32_t kNil = detail::kNilIndex;
  static constexpr std::uint32_t kRoot = detail::kRootIndex;

  // Per-tenant state; allocated on the tenant's first insert and kept (and
  // reused) until the tree is destroyed, so a pointer to it never dangles.
  // Every insert for the tenant writes it, so it takes whole lines
  // (alloc_line_aligned): inserts for two tenants do not share one.
  struct alignas(detail::kCacheLine) TenantState {
    explicit TenantState(TenantId i) noexcept : id(i) {}
    const TenantId id;
    detail::SpinMutex lru_mu;             // guards head, tail and every claim's links
    std::mutex maint_mu;                  // serialises evict/drop/remove for this tenant
    std::uint32_t head = kNil;            // most recent claim
    std::uint32_t tail = kNil;            // least recent: always a leaf for this tenant
    std::atomic<std::size_t> size{0};     // written under lru_mu
    std::atomic<std::size_t> listed{0};   // claims in the list; under lru_mu
    std::atomic<bool> registered{false};  // written under the root's lock
    TenantState* next_state = nullptr;    // registry list; immutable once published
  };

  struct TenantLeaf {
    std::atomic<TenantState*> slot[256];
  };
  struct TenantMid {
    std::atomic<TenantLeaf*> slot[256];
  };

  enum class Step { kDone, kOutOfMemory };
  // How a split treats a fragment (see split_frag).
  enum class SplitFrag { kCopyBoth, kUpperKeeps, kLowerKeeps };

  // A split's LRU step for one tenant (link_split_copy): its claim `old` on
  // the split node, which moves to the lower node `lower`, and the upper
  // node's fresh `copy`. old == kNil: none.
  struct SplitStep {
    std::uint32_t old = kNil;
    std::uint32_t copy = kNil;
    std::uint32_t lower = kNil;
  };

  // Allocations an insert step needs, made before it changes anything so
  // that running out of memory leaves the node untouched. Indices are slab
  // slots (kNil: none).
  struct Prep {
    std::uint32_t lower = kNil;
    SplitFrag frag_mode = SplitFrag::kCopyBoth;
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

  // --- slab objects ----------------------------------------------------------

  static constexpr unsigned kNodeUnits = detail::RadixSlab::kLarge;
  static constexpr unsigned kClaimUnits = detail::RadixSlab::kSmall;
  static_assert(sizeof(Node) <= detail::RadixSlab::kLargeBytes &&
                    sizeof(Claim) <= detail::RadixSlab::kSmallBytes && alignof(Node) <= 8,
                "a node is a large slab block, a claim a small one");
  Node* node(std::uint32_t i) const noexcept { return static_cast<Node*>(pool_.at(i)); }
  // Also the root, for a claim's `node`.
  Node* node_or_root(std::uint32_t i) const noexcept {
    return i == kRoot ? const_cast<Node*>(&root_) : node(i);
  }
  Claim* claim(std::uint32_t i) const noexcept { return static_cast<Claim*>(pool_.at(i)); }
  void prefetch_claim(std::uint32_t i) const noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(claim(i), 1);
#else
    (void)i;
#endif
  }
  RadixCandidates candidates(const Node& x) const noexcept {
    return RadixCandidates(x.tenant_ids(), x.claims(), &pool_, x.ntenant);
  }

  // --- counters ----------------------------------------------------------------

  enum Count : std::size_t {
    kBytes,
    kNodes,
    kUnits,
    kSymbols,
    kClaims,
    kStamped,
    kStamps,
    kFallbacks,
    kCounts
  };
  std::size_t counts(Count c) const noexcept { return counts_.load(c); }

  // --- allocation, every byte counted -------------------------------------

  // From the tree's own arena (detail/arena.hpp: one shard per thread,
  // regions of 64 KB to 2 MB), freed with dealloc(p, n).
  void* alloc(std::size_t n) noexcept {
    void* p = arena_.allocate(n);
    if (p != nullptr) counts_.add(kBytes, n);
    return p;
  }
  // For an object that threads write (n a multiple of the line size): on
  // lines of its own, so that writing it does not take a neighbour's line
  // from another thread. Freed with dealloc_line_aligned.
  void* alloc_line_aligned(std::size_t n) noexcept {
    void* p = std::aligned_alloc(detail::kCacheLine, n);
    if (p != nullptr) {
      counts_.add(kBytes, n);
      line_aligned_bytes_.fetch_add(n, std::memory_order_relaxed);
    }
    return p;
  }
  void dealloc(void* p, std::size_t n) noexcept {
    if (p == nullptr) return;
    arena_.deallocate(p, n);
    counts_.sub(kBytes, n);
  }
  void dealloc_line_aligned(void* p, std::size_t n) noexcept {
    if (p == nullptr) return;
    std::free(p);
    counts_.sub(kBytes, n);
    line_aligned_bytes_.fetch_sub(n, std::memory_order_relaxed);
  }
  // kNil when out of memory.
  std::uint32_t new_node() noexcept {
    const std::uint32_t i = pool_.alloc(kNodeUnits);
    if (i != kNil) new (pool_.at(i)) Node();
    return i;
  }
  std::uint32_t new_claim() noexcept {
    const std::uint32_t i = pool_.alloc(kClaimUnits);
    if (i != kNil) new (pool_.at(i)) Claim();
    return i;
  }
  // A new leaf and its claim, under one lock of the slab's shard (on lines
  // apart: detail/slab.hpp).
  bool new_leaf(std::uint32_t& n, std::uint32_t& c) noexcept {
    if (!pool_.alloc_pair(n, c)) return false;
    new (pool_.at(n)) Node();
    new (pool_.at(c)) Claim();
    return true;
  }
  // Frees a claim that was never linked (no stats to undo).
  void discard_claim(std::uint32_t c) noexcept {
    if (c != kNil) pool_.release(c, kClaimUnits);
  }
  void free_claim(std::uint32_t c) noexcept {
    pool_.release(c, kClaimUnits);
    counts_.sub(kClaims, 1);
  }
  // Frees a node that was never linked (no stats to undo).
  void discard_node(std::uint32_t i) noexcept {
    if (i != kNil) pool_.release(i, kNodeUnits);
  }
  // Frees an unlinked node and its storage (its claims must be gone).
  void free_node(std::uint32_t i) noexcept {
    Node* n = node(i);
    KVROUTE_ASSERT(n->ntenant == 0, "radix tree: freeing a node with tenants");
    counts_.sub(kNodes, 1);
    counts_.sub(kUnits, n->count);
    counts_.sub(kSymbols, n->len);
    retire_frag(*n);
    retire_child_block(*n);
    retire_tenant_block(*n);
    domain_.retire({nullptr, i, kRetiredNode});
  }

  // Fragments. One of up to 8 bytes is kept in the node (RadixNode::frag).
  // A short one (under kLongBytes) is a buffer of exactly its length; a
  // split copies both parts into new buffers (or nodes) and frees the old
  // one. A long one lies in a buffer of its own, after a 16-byte header
  // written just before the fragment: its distance from the buffer's start,
  // and the buffer's size. A split leaves the buffer to one part and copies
  // the other (one allocation, no free: a free of another thread's block is
  // what made glibc's malloc the bottleneck with two threads on chat) as
  // long as the part that keeps it still uses at least a quarter of it
  // (kDeadPerLive); the upper part keeps it in place, the lower part keeps
  // it with a new header written over the bytes just before it, which the
  // upper part no longer uses. Otherwise both parts are copied and the
  // buffer is freed. So a buffer never holds more than kDeadPerLive dead
  // bytes per live one (plus its header), and it goes with its one node.
  // (With half instead of a quarter, two threads on chat ran at 0.88x one
  // thread instead of 1.15-1.36x: most splits then copied both parts and
  // freed the other thread's buffer.)
  static constexpr std::size_t kLongBytes = 256;
  static constexpr std::size_t kFragHeader = 16;
  static constexpr std::size_t kDeadPerLive = 3;
  struct FragHeader {
    std::size_t offset;  // from the buffer's start to the fragment
    std::size_t total;   // the buffer's size
  };
  static std::uint8_t frag_kind_for(std::size_t len) noexcept {
    if (Node::inline_len(len)) return detail::kFragInline;
    return len * sizeof(Symbol) < kLongBytes ? detail::kFragPlain : detail::kFragInBuffer;
  }
  static FragHeader frag_header(const Symbol* f) noexcept {
    FragHeader h;
    std::memcpy(&h, reinterpret_cast<const char*>(f) - kFragHeader, sizeof h);
    return h;
  }
  static void set_frag_header(Symbol* f, FragHeader h) noexcept {
    std::memcpy(reinterpret_cast<char*>(f) - kFragHeader, &h, sizeof h);
  }
  // A buffer for len symbols, of kind frag_kind_for(len); null when out of
  // memory. Requires a length that does not fit in the node.
  Symbol* alloc_frag(std::size_t len) noexcept {
    KVROUTE_ASSERT(!Node::inline_len(len), "radix tree: a buffer for an inline fragment");
    const std::size_t b = len * sizeof(Symbol);
    if (frag_kind_for(len) == detail::kFragPlain) return static_cast<Symbol*>(alloc(b));
    const FragHeader h{kFragHeader, b + kFragHeader};
    auto* p = static_cast<char*>(alloc(h.total));
    if (p == nullptr) return nullptr;
    auto* f = reinterpret_cast<Symbol*>(p + kFragHeader);
    set_frag_header(f, h);
    return f;
  }
  // An insert's prefaults (detail/arena.hpp) wait until it has released its
  // node locks: run() before the section is left, while nothing the insert
  // has linked into the tree can be freed. Not when the section does not
  // protect (then another thread could free such a block, and its region
  // be unmapped, before run()).
  struct Prefaults : detail::BlockArena::DeferPrefaults {
    Prefaults(detail::BlockArena& arena, const detail::EpochDomain::Section& sec) noexcept
        : DeferPrefaults(arena, sec.protects()) {}
  };

  // --- deferred frees --------------------------------------------------------
  //
  // What an optimistic descent may be reading (see descend_opt) is retired
  // instead of freed: a fragment, a child or tenant block replaced by a
  // larger one, an unlinked node's slab slot. The epoch domain hands it
  // back to reclaim_retired once no section that could hold it is open.
  // Objects never published (an insert's unused allocations) and claims
  // (which an optimistic reader only prefetches) are freed at once.
  static constexpr std::uint32_t kRetiredBlock = 0;  // from alloc(): ptr, bytes
  static constexpr std::uint32_t kRetiredNode = 1;   // a node's slab block: index
  static void reclaim_retired(void* self, const detail::Retired& r) noexcept {
    auto* t = static_cast<BasicApproxRadixTree*>(self);
    if (r.kind == kRetiredBlock) {
      t->dealloc(r.ptr, static_cast<std::size_t>(r.size));
    } else {
      t->pool_.release(static_cast<std::uint32_t>(r.size), kNodeUnits);
    }
  }
  void retire_block(void* p, std::size_t n) noexcept {
    if (p != nullptr) domain_.retire({p, n, kRetiredBlock});
  }
  // n's fragment buffer, if it has one.
  void retire_frag(const Node& n) noexcept {
    if (n.frag_kind != detail::kFragInline) retire_frag(n.frag.ptr, n.len, n.frag_kind);
  }
  void retire_frag(Symbol* f, std::size_t len, std::uint8_t kind) noexcept {
    if (f == nullptr) return;
    const FragBuffer b = frag_buffer(f, len, kind);
    retire_block(b.base, b.bytes);
  }
  void retire_tenant_block(Node& n) noexcept {
    if (!n.tenants_inline())
      retire_block(n.tenants.block, Node::tenant_block_bytes(n.cap_tenant()));
  }

  // The allocation behind a fragment: the fragment itself, or its buffer.
  struct FragBuffer {
    void* base;
    std::size_t bytes;
  };
  static FragBuffer frag_buffer(Symbol* f, std::size_t len, std::uint8_t kind) noexcept {
    if (kind == detail::kFragPlain) return {f, len * sizeof(Symbol)};
    const FragHeader h = frag_header(f);
    return {reinterpret_cast<char*>(f) - h.offset, h.total};
  }
  // A buffer from alloc_frag (f may be null).
  void free_frag(Symbol* f, std::size_t len, std::uint8_t kind) noexcept {
    if (f == nullptr || kind == detail::kFragInline) return;
    const FragBuffer b = frag_buffer(f, len, kind);
    dealloc(b.base, b.bytes);
  }
  // A buffer as alloc_frag(len) returned it (f may be null): not one a
  // split has since cut, whose kind the node keeps.
  void free_frag(Symbol* f, std::size_t len) noexcept { free_frag(f, len, frag_kind_for(len)); }
  // A buffer from alloc_frag(len) holding src[0, len); null when out of
  // memory.
  Symbol* alloc_frag_copy(const Symbol* src, std::size_t len) noexcept {
    Symbol* f = alloc_frag(len);
    if (f != nullptr) std::memcpy(f, src, len * sizeof(Symbol));
    return f;
  }

  // Gives n the fragment src[0, len) (n.len is not read: the caller sets
  // it): in the node when it fits there, else in buf (from
  // alloc_frag(len)), copied there unless `filled`. src may be n's own
  // inline fragment.
  static void set_frag(Node& n, Symbol* buf, const Symbol* src, std::size_t len,
                       bool filled = false) noexcept {
    n.frag_kind = frag_kind_for(len);
    if (n.frag_kind == detail::kFragInline) {
      typename Node::Frag f{nullptr};
      std::memcpy(f.in, src, len * sizeof(Symbol));
      n.frag = f;
      return;
    }
    n.frag.ptr = buf;
    if (!filled) std::memcpy(buf, src, len * sizeof(Symbol));
  }

  static SplitFrag split_frag(const Node& x, std::size_t k) noexcept {
    if (x.frag_kind != detail::kFragInBuffer) return SplitFrag::kCopyBoth;
    const std::size_t total = frag_header(x.frag.ptr).total;
    const std::size_t up = k * sizeof(Symbol);
    const std::size_t low = (x.len - k) * sizeof(Symbol);
    // A part may keep the buffer while the rest of it (its dead bytes,
    // header included) is at most kDeadPerLive times what it uses, plus
    // the header.
    const bool upper_ok = total - up <= kDeadPerLive * up + kFragHeader;
    // The lower part's header goes over the upper part's last bytes.
    const bool lower_ok = up >= kFragHeader && total - low <= kDeadPerLive * low + kFragHeader;
    if (upper_ok && (!lower_ok || low <= up)) return SplitFrag::kUpperKeeps;  // copy the lower
    if (lower_ok) return SplitFrag::kLowerKeeps;                              // copy the upper
    return SplitFrag::kCopyBoth;
  }

  static std::uint32_t grown(std::uint32_t cap, std::uint32_t need) noexcept {
    std::uint32_t c = cap == 0 ? 1 : cap;
    while (c < need) c *= 2;
    return c;
  }

  // Makes room for `need` children: in the node up to
  // Node::kInlineChildren, then in a block. Requires n exclusively locked.
  bool reserve_children(Node& n, std::uint32_t need) noexcept {
    if (n.cap_child() >= need) return true;
    const std::uint32_t cap = grown(n.cap_child(), need);
    if (cap <= Node::kInlineChildren) {  // the inline arrays stay where they are
      n.set_cap_child(cap);
      return true;
    }
    void* b = alloc(Node::child_block_bytes(cap));
    if (b == nullptr) return false;
    Node tmp;  // only to compute the new block's layout
    tmp.children.block = b;
    tmp.set_cap_child(cap);
    if (n.nchild > 0) {
      std::memcpy(tmp.keys(), n.keys(), n.nchild * sizeof(Key));
      std::memcpy(tmp.kids(), n.kids(), n.nchild * sizeof(std::uint32_t));
    }
    retire_child_block(n);
    n.children.block = b;
    n.set_cap_child(cap);
    return true;
  }

  // n's child block, if it has one (not inline children): retired (readers
  // may hold it) or freed.
  void retire_child_block(Node& n) noexcept {
    if (!n.children_inline())
      retire_block(n.children.block, Node::child_block_bytes(n.cap_child()));
  }
  void free_child_block(Node& n) noexcept {
    if (!n.children_inline()) dealloc(n.children.block, Node::child_block_bytes(n.cap_child()));
  }

  // A node's only tenant needs no block (cap 1, kept inline); from the
  // second on, a block of grown capacity.
  bool reserve_tenants(Node& n, std::uint32_t need) noexcept {
    if (n.cap_tenant() >= need) return true;
    if (need <= 1) {
      n.set_cap_tenant(1);
      return true;
    }
    const std::uint32_t cap = grown(std::max<std::uint32_t>(n.cap_tenant(), 2), need);
    void* b = alloc(Node::tenant_block_bytes(cap));
    if (b == nullptr) return false;
    auto* ids = static_cast<std::uint32_t*>(b);
    if (n.ntenant > 0) {
      std::memcpy(ids, n.tenant_ids(), n.ntenant * sizeof(std::uint32_t));
      std::memcpy(ids + cap, n.claims(), n.ntenant * sizeof(std::uint32_t));
    }
    retire_tenant_block(n);
    n.tenants.block = b;
    n.set_cap_tenant(cap);
    return true;
  }

  // Frees n's tenant block, if it has one (not the inline single entry).
  void free_tenant_block(Node& n) noexcept {
    if (!n.tenants_inline()) dealloc(n.tenants.block, Node::tenant_block_bytes(n.cap_tenant()));
  }

  // Requires capacity.
  static void add_child(Node& n, Key k, std::uint32_t c) noexcept {
    const std::uint32_t i = n.child_slot(k);
    Key* keys = n.keys();
    std::uint32_t* kids = n.kids();
    std::memmove(keys + i + 1, keys + i, (n.nchild - i) * sizeof(Key));
    std::memmove(kids + i + 1, kids + i, (n.nchild - i) * sizeof(std::uint32_t));
    keys[i] = k;
    kids[i] = c;
    ++n.nchild;
  }

  // c is the index of child node `cn`.
  static void remove_child(Node& n, const Node& cn, [[maybe_unused]] std::uint32_t c) noexcept {
    const std::uint32_t i = n.child_slot(Traits::key(cn.data(), cn.len));
    KVROUTE_ASSERT(i < n.nchild && n.kids()[i] == c, "radix tree: child not found");
    Key* keys = n.keys();
    std::uint32_t* kids = n.kids();
    std::memmove(keys + i, keys + i + 1, (n.nchild - i - 1) * sizeof(Key));
    std::memmove(kids + i, kids + i + 1, (n.nchild - i - 1) * sizeof(std::uint32_t));
    --n.nchild;
  }

  // Requires capacity and t absent.
  static void add_tenant_entry(Node& n, TenantId t, std::uint32_t c) noexcept {
    if (n.tenants_inline()) {
      KVROUTE_ASSERT(n.ntenant == 0 && n.cap_tenant() == 1, "radix tree: no room for a tenant");
      n.tenants.one.tenant = t;
      n.tenants.one.claim = c;
      n.ntenant = 1;
      return;
    }
    const std::uint32_t i = n.tenant_slot(t);
    std::uint32_t* ids = n.tenant_ids();
    std::uint32_t* cl = n.claims();
    std::memmove(ids + i + 1, ids + i, (n.ntenant - i) * sizeof(std::uint32_t));
    std::memmove(cl + i + 1, cl + i, (n.ntenant - i) * sizeof(std::uint32_t));
    ids[i] = t;
    cl[i] = c;
    ++n.ntenant;
  }

  static void remove_tenant_entry(Node& n, TenantId t) noexcept {
    const std::uint32_t i = n.tenant_slot(t);
    KVROUTE_ASSERT(i < n.ntenant && n.tenant_ids()[i] == t, "radix tree: tenant not found");
    if (n.tenants_inline()) {
      n.tenants.one = {};
      n.ntenant = 0;
      return;
    }
    std::uint32_t* ids = n.tenant_ids();
    std::uint32_t* cl = n.claims();
    std::memmove(ids + i, ids + i + 1, (n.ntenant - i - 1) * sizeof(std::uint32_t));
    std::memmove(cl + i, cl + i + 1, (n.ntenant - i - 1) * sizeof(std::uint32_t));
    --n.ntenant;
  }

  // --- tenants -------------------------------------------------------------

  TenantState* find_state(TenantId t) const noexcept {
    if (t > kMaxTenantId) return nullptr;
    TenantMid* mid = top_[t >> 16].load(std::memory_order_acquire);
    if (mid == nullptr) return nullptr;
    TenantLeaf* leaf = mid->slot[(t >> 8) & 0xFFu].load(std::memory_order_acquire);
    if (leaf == nullptr) return nullptr;
    return leaf->slot[t & 0xFFu].load(std::memory_order_acquire);
  }

  template <class T>
  T* install(std::atomic<T*>& slot) noexcept {
    T* cur = slot.load(std::memory_order_acquire);
    if (cur != nullptr) return cur;
    void* p = alloc(sizeof(T));
    if (p == nullptr) return nullptr;
    T* fresh = new (p) T{};
    if (slot.compare_exchange_strong(cur, fresh, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      return fresh;
    }
    fresh->~T();
    dealloc(p, sizeof(T));
    return cur;
  }

  TenantState* state_or_create(TenantId t) noexcept {
    if (TenantState* s = find_state(t)) return s;
    TenantMid* mid = install(top_[t >> 16]);
    if (mid == nullptr) return nullptr;
    TenantLeaf* leaf = install(mid->slot[(t >> 8) & 0xFFu]);
    if (leaf == nullptr) return nullptr;
    std::atomic<TenantState*>& slot = leaf->slot[t & 0xFFu];
    TenantState* cur = slot.load(std::memory_order_acquire);
    if (cur != nullptr) return cur;
    static_assert(sizeof(TenantState) % detail::kCacheLine == 0);
    void* p = alloc_line_aligned(sizeof(TenantState));
    if (p == nullptr) return nullptr;
    auto* fresh = new (p) TenantState(t);
    if (!slot.compare_exchange_strong(cur, fresh, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      fresh->~TenantState();
      dealloc_line_aligned(p, sizeof(TenantState));
      return cur;
    }
    TenantState* head = registry_.load(std::memory_order_relaxed);
    do {
      fresh->next_state = head;
    } while (!registry_.compare_exchange_weak(head, fresh, std::memory_order_release,
                                              std::memory_order_relaxed));
    return fresh;
  }

  // --- the LRU list (under the tenant's lru_mu; claims by index) -------------

  // Takes the run high .. low (linked in that order, high nearest the
  // front; high == low for one claim) out of the list; its inner links and
  // its ends' outward links are left as they were.
  void list_cut(TenantState& ts, std::uint32_t high, std::uint32_t low) const noexcept {
    const Claim* h = claim(high);
    const Claim* l = claim(low);
    if (h->prev != kNil)
      claim(h->prev)->next = l->next;
    else
      ts.head = l->next;
    if (l->next != kNil)
      claim(l->next)->prev = h->prev;
    else
      ts.tail = h->prev;
  }
  void list_unlink(TenantState& ts, std::uint32_t ci) const noexcept {
    list_cut(ts, ci, ci);
    Claim* c = claim(ci);
    c->prev = c->next = kNil;
  }
  // Links the run high .. low, out of the list, right behind `after`, or
  // at the front when `after` is kNil.
  void list_link_run(TenantState& ts, std::uint32_t high, std::uint32_t low,
                     std::uint32_t after) const noexcept {
    std::uint32_t& slot = after == kNil ? ts.head : claim(after)->next;
    claim(high)->prev = after;
    claim(low)->next = slot;
    if (slot != kNil)
      claim(slot)->prev = low;
    else
      ts.tail = low;
    slot = high;
  }
  void list_push_front(TenantState& ts, std::uint32_t ci) const noexcept {
    list_link_run(ts, ci, ci, kNil);
  }
  void list_insert_after(TenantState& ts, std::uint32_t pos, std::uint32_t ci) const noexcept {
    list_link_run(ts, ci, ci, pos);
  }
  void list_insert_before(TenantState& ts, std::uint32_t pos, std::uint32_t ci) const noexcept {
    list_link_run(ts, ci, ci, claim(pos)->prev);
  }

  // Moves the run high .. low (as list_cut) right behind `after`, or to the
  // front when `after` is kNil.
  void list_move_run(TenantState& ts, std::uint32_t high, std::uint32_t low,
                     std::uint32_t after) const noexcept {
    if (claim(high)->prev == after) return;  // already there (the head when after is kNil)
    list_cut(ts, high, low);
    list_link_run(ts, high, low, after);
  }

  // Links a new claim directly behind its parent claim `up` (at the front
  // when the parent is the root's) with the parent's recency. The list stays
  // sorted by recency and every claim stays behind its ancestors.
  void link_below(TenantState& ts, std::uint32_t ci) const noexcept {
    const std::uint32_t up = claim(ci)->up;
    const Claim* u = claim(up);
    if (u->up == kNil)
      list_push_front(ts, ci);
    else
      list_insert_after(ts, up, ci);
    claim(ci)->set_stamp(u->recency(), false);
  }

  // The recency of a new stamp. Requires the stamped tenant's lru_mu, like
  // the stamp: what one tenant's stamps read is then ordered by that lock,
  // so its list stays sorted by recency.
  std::uint64_t next_recency() noexcept {
    if (recency_shift_ == 0) return clock_.fetch_add(1, std::memory_order_relaxed) + 1;
    const std::size_t mine = counts_.add_to_stripe(kStamps, 1);
    if ((mine & ((std::size_t{1} << recency_shift_) - 1)) == 0) {
      return clock_.fetch_add(1, std::memory_order_relaxed) + 1;
    }
    return clock_.load(std::memory_order_relaxed);
  }

  // Stamps claim `ci` and every ancestor claim with the current recency and
  // moves them to the front, ancestors first; stops below the first claim
  // that already holds it (with recency_shift_ > 0), placing the stamped
  // claims right behind that one. Returns the stamp. Every claim
  // on the chain stays allocated while `ci` does: only the list's tail (a
  // leaf for the tenant) is ever removed, and the caller holds ci's node
  // locked.
  std::uint64_t stamp_path(TenantState& ts, std::uint32_t ci) noexcept {
    const std::uint64_t e = next_recency();
    // The first claim up the path that already holds e: it and every claim
    // above it are in the list's front run (nothing is newer than e), so
    // only the claims below it are stamped, and they go right behind it.
    // (At shift 0 every stamp is new: no claim holds e, and there is no
    // walk.) The walk also starts loading the list neighbours of the claims
    // below the anchor, which the moves below may unlink: they lie anywhere
    // in the slab, and the moves would otherwise wait for each in turn
    // (benchmarks/README.md, "A stamp's list neighbours loaded ahead"; at
    // shift 0 a walk for the prefetches alone measured no faster).
    std::uint32_t anchor = kNil;
    for (std::uint32_t p = recency_shift_ == 0 ? kNil : ci; p != kNil;) {
      const Claim* c = claim(p);
      if (c->recency() >= e) {
        anchor = p;
        break;
      }
      if (c->prev != kNil) prefetch_claim(c->prev);
      if (c->next != kNil) prefetch_claim(c->next);
      p = c->up;
    }
    // The claims below the anchor go right behind it, ancestors first (to
    // the front when the anchor is the root's claim or there is none). They
    // are moved in runs: a run is a stretch of the path that the list
    // already holds in order, each claim directly behind its parent claim,
    // as a stamp of that path left it; a run moves as one block, so its
    // inner links are not rewritten. Moving the runs from the bottom up, each
    // right behind the anchor, leaves the list as moving the claims one at a
    // time would. A path of b runs rewrites about 4b links of other claims
    // instead of about 4 a claim (branchy: 12.8 claims a stamp in 2.8 runs;
    // two threads on branchy 20k about 6% faster, benchmarks/README.md, "A
    // stamp moves runs").
    const std::uint32_t dest = anchor == kNil || claim(anchor)->up == kNil ? kNil : anchor;
    std::size_t written = 0;
    // The stamp ends at ci (RadixClaim: `ended`); the claims above it were
    // passed on the way. Above the anchor a mark left by an earlier stamp
    // stays: it only keeps a merge from happening.
    if (anchor == ci && !claim(ci)->ended()) claim(ci)->set_stamp(e, true);
    for (std::uint32_t p = ci; p != anchor;) {
      Claim* c = claim(p);
      c->set_stamp(e, p == ci);
      ++written;
      std::uint32_t up = c->up;
      if (up == kNil) break;  // the root's claim, which is not listed
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
      list_move_run(ts, high, low, dest);
      p = up;
    }
    counts_.add(kStamped, written);
    return e;
  }

  // --- comparison ----------------------------------------------------------

  // Units-aligned common prefix, in symbols, of `text` and n's fragment.
  static std::size_t common_units(const Node& n, const Symbol* text, std::size_t rem) noexcept {
    return common_units(n.data(), n.len, text, rem);
  }
  static std::size_t common_units(const Symbol* frag, std::size_t len, const Symbol* text,
                                  std::size_t rem) noexcept {
    const std::size_t m = std::min<std::size_t>(rem, len);
    if (m == 0) return 0;
    const std::size_t b =
        detail::common_prefix_bytes(text, frag, m * sizeof(Symbol)) / sizeof(Symbol);
    if (b == 0) return 0;
    return Traits::boundary(text, rem, frag, len, b);
  }

  // match_for_tenant / peek_for_tenant: descends only along nodes `tenant`
  // holds; with Stamp, stamps its path to where the descent stopped.
  template <bool Stamp>
  TenantMatch tenant_descent(sequence_type seq, TenantId tenant) noexcept {
    TenantMatch r;
    const Symbol* text = seq.data();
    const std::size_t n = seq.size();
    TenantState* ts = find_state(tenant);
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

  // --- the descent -----------------------------------------------------------

  struct Descent {
    Node* node;           // the deepest matched node, still locked (see excl)
    Node* parent;         // its parent locked shared, or null (see the descents)
    std::uint32_t index;  // node's index (kRoot for the root)
    std::size_t pos;      // symbols matched
    std::size_t matched;  // units matched
    std::size_t start;    // symbols before node's fragment
    bool excl = false;    // node locked exclusively (else shared)
    // With excl, from descend_opt: text[pos, n) already in a buffer for
    // the new leaf (null when it fits in a node, or memory was short).
    // Whoever consumes the descent passes it on to insert_from or frees it
    // (unlock_descent does).
    Symbol* leaf = nullptr;
    std::size_t leaf_len = 0;
  };

  // The descent of match and match_and_insert: optimistic when the section
  // protects (nothing written on the nodes passed), else, or after a few
  // failed validations, with lock coupling from the root. Same node and
  // counts either way. For an insert (ForInsert) the node is held so that
  // the insert can go on from it without upgrading its lock unprotected:
  // exclusively with no parent when the optimistic walk knows the insert
  // changes it, else shared with its parent (lock coupling; none at the
  // root), or shared with no parent (an optimistic walk that ends exactly at
  // its end).
  template <bool ForInsert>
  Descent descend_any(const detail::EpochDomain::Section& sec, const Symbol* text,
                      std::size_t n) noexcept {
    Descent d;
    if (sec.protects() && descend_opt<ForInsert>(text, n, d, EnterAll{})) return d;
    counts_.add(kFallbacks, 1);
    root_.lock.lock_shared();
    return descend<ForInsert>(text, n, EnterAll{});
  }
  struct EnterAll {
    bool operator()(const Node&) const noexcept { return true; }
  };

  // Walks from the root without taking any lock: each node is read once, as
  // a snapshot (its fields copied into a local Node, then checked against
  // the node lock's version, detail/rw_lock.hpp), the text is compared
  // against the snapshot's fragment, and the child found in the snapshot's
  // block is checked against the version again before it is followed.
  // Everything the walk may read stays allocated while the caller's section
  // is open (retire_*). At the end it locks the node and checks that it did
  // not change since its snapshot; then the result is exactly what a locked
  // descent would have returned at that moment, and the node is still in
  // the tree (unlinking a node holds it exclusively, which moves its
  // version on). Like descend, it goes into a child only if `enter` allows
  // (called on the child's checked snapshot, which it must only read).
  // Gives up (false) after kOptimisticTries walks that met a writer.
  //
  // The lock it ends with: shared, except for an insert (ForInsert) that
  // will change the node: a split (the text leaves its fragment) or a new
  // child (no child goes on with the text). Then it takes the node
  // exclusively at once, and no parent: with the version checked under the
  // exclusive hold, nothing can have unlinked the node, and the insert
  // needs no upgrade (an upgrade releases the node, which is what a held
  // parent protects). The new leaf's text is allocated and copied before
  // that lock (out.leaf), as insert_from does before an upgrade, so that
  // the node is held exclusively for the pointer updates, not for the
  // length of a text. Holding a parent shared wrote its lock word on every
  // insert, and the parents of inserts are the nodes every descent reads
  // (two threads on branchy 20k about 4% faster without: benchmarks/README.md,
  // "Inserts without the parent's lock").
  template <bool ForInsert, class Enter>
  bool descend_opt(const Symbol* text, std::size_t n, Descent& out, Enter&& enter) noexcept {
    for (int attempt = 0; attempt < kOptimisticTries; ++attempt) {
      OptimisticReads ignore;  // the reads race with writers by design
      const std::uint64_t wraps = detail::RwLock::wraps();
      Node* x = &root_;
      std::uint32_t vx = x->lock.read_begin();
      if (!detail::RwLock::readable(vx)) continue;
      Node s;  // x's snapshot
      snapshot(*x, s);
      if (!x->lock.validate(vx)) continue;
      std::uint32_t xi = kRoot;
      std::size_t pos = 0;
      std::size_t matched = 0;
      std::size_t start = 0;
      bool retry = false;
      bool changes_x = false;  // a split of x or a new child of x follows
      while (pos < n) {
        // The snapshot is consistent, so this reads inside the (possibly
        // retired, still allocated) block; the check after it says whether
        // what it read is still x's.
        const std::uint32_t ci = s.find_child(Traits::key(text + pos, n - pos));
        if (!x->lock.validate(vx)) {
          retry = true;
          break;
        }
        if (ci == kNil) {
          changes_x = true;
          break;
        }
        Node* c = node(ci);
        const std::uint32_t vc = c->lock.read_begin();
        // c was x's child when vc was read only if x is still unchanged:
        // unlinking c (an eviction, a merge) holds x exclusively. Without
        // this check a descent could go on into a node just taken out of
        // the tree, whose version no longer moves.
        if (!detail::RwLock::readable(vc) || !x->lock.validate(vx)) {
          retry = true;
          break;
        }
        snapshot(*c, s);
        if (!c->lock.validate(vc)) {
          retry = true;
          break;
        }
        // The index may be stale, which a prefetch does not mind.
        if (s.ntenant > 0) prefetch_claim(s.claims()[0]);
        if (!enter(static_cast<const Node&>(s))) {
          // What enter read through the snapshot (a tenant block) was c's
          // only if c is still unchanged.
          retry = !c->lock.validate(vc);
          break;
        }
        x = c;
        vx = vc;
        xi = ci;
        start = pos;
        const std::size_t k = common_units(s.data(), s.len, text + pos, n - pos);
        if (k == s.len) {
          pos += k;
          matched += s.count;
          continue;  // the next round validates x again after its find
        }
        matched += Traits::count(text + pos, k);
        pos += k;
        changes_x = true;
        break;
      }
      ignore.end();
      if (retry) continue;
#if defined(KVROUTE_RADIX_TREE_TEST_HOOKS)
      if (before_descent_lock != nullptr) before_descent_lock(before_descent_lock_arg);
#endif
      // (A text too long to insert is inserted by no one: shared.)
      if (ForInsert && changes_x && n <= kMaxSequenceSymbols) {
        Symbol* leaf = nullptr;
        if (!lock_to_change(*x, vx, wraps, text, pos, n, leaf)) continue;
        out = {x, nullptr, xi, pos, matched, start, true, leaf, leaf == nullptr ? 0 : n - pos};
        return true;
      }
      x->lock.lock_shared();
      if (!x->lock.same_version(vx) || detail::RwLock::wrapped_since(wraps)) {
        x->lock.unlock_shared();
        continue;
      }
      out = {x, nullptr, xi, pos, matched, start, false};
      return true;
    }
    return false;
  }

  // descend_opt's ending for an insert that will change x: the new leaf's
  // text, text[pos, n), copied into a buffer (`leaf`; null when it fits in
  // a node or memory is short), then x locked exclusively if its version
  // is still vx. On false x is not held and the buffer is freed. Out of
  // line, so that the walk's loop stays as small as a match's.
  KVROUTE_NOINLINE bool lock_to_change(Node& x, std::uint32_t vx, std::uint64_t wraps,
                                       const Symbol* text, std::size_t pos, std::size_t n,
                                       Symbol*& leaf) noexcept {
    const std::size_t len = n - pos;
    if (len > 0 && !Node::inline_len(len)) leaf = alloc_frag_copy(text + pos, len);
    // A node that has already changed is walked again without taking it:
    // an exclusive hold moves the version on even when it changes nothing,
    // which would send every other walk through the node back too.
    if (x.lock.validate(vx)) {
      x.lock.lock();
      if (x.lock.same_version(vx) && !detail::RwLock::wrapped_since(wraps)) return true;
      x.lock.unlock();
    }
    free_frag(leaf, len);
    leaf = nullptr;
    return false;
  }

  static constexpr int kOptimisticTries = 4;

  // The fields an optimistic read uses, copied (not the lock): nothing is
  // derived from them, not even a pointer, before the copy is known to be
  // consistent; after that the node's own accessors work on the copy.
  static void snapshot(const Node& from, Node& to) noexcept {
    to.len = from.len;
    to.count = from.count;
    to.nchild = from.nchild;
    to.ntenant = from.ntenant;
    to.child_cap_code = from.child_cap_code;
    to.tenant_cap_code = from.tenant_cap_code;
    to.frag = from.frag;
    to.children = from.children;
    to.tenants = from.tenants;
  }

  // ThreadSanitizer is told to ignore the optimistic reads (they are
  // checked by the version, not ordered by a lock); every other access of
  // the descent is checked as usual.
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

  void unlock_descent(const Descent& d) noexcept {
    if (d.excl)
      d.node->lock.unlock();
    else
      d.node->lock.unlock_shared();
    if (d.parent != nullptr) d.parent->lock.unlock_shared();
    free_frag(d.leaf, d.leaf_len);  // after: not under the hold
  }

  // Walks from the root, which the caller has locked shared, with lock
  // coupling, as far as the text agrees with the tree and `enter(child)`
  // (called with the child locked shared) allows. Stops inside a child
  // matched partially, else at the last node matched fully. Returns with the
  // deepest node locked shared and, with KeepParent (for an insert that
  // goes on from there), its parent too; no other.
  template <bool KeepParent, class Enter>
  Descent descend(const Symbol* text, std::size_t n, Enter&& enter) noexcept {
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
      // The path's claims lie apart from its nodes (detail/slab.hpp):
      // start loading the first one now, since a stamp of the path (match's
      // chosen tenant, or match_and_insert's insert) walks them all.
      if (c->ntenant > 0) prefetch_claim(c->claims()[0]);
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

  // --- insert ---------------------------------------------------------------

  // A split's LRU step for one tenant (under its lru_mu): its old claim
  // moves to the lower node, and the upper node's copy takes its place in
  // the path (old's parent claim) and in the list (right ahead of old, with
  // old's recency).
  void link_split_copy(TenantState& ts, const SplitStep& step) const noexcept {
    Claim* oc = claim(step.old);
    Claim* mc = claim(step.copy);
    oc->node = step.lower;
    mc->up = oc->up;
    oc->up = step.copy;
    list_insert_before(ts, step.old, step.copy);
    mc->set_stamp(oc->recency(), false);  // the path goes on into old's node
    ts.listed.fetch_add(1, std::memory_order_relaxed);
  }

  void release_prep(Prep& p, std::size_t lower_len, std::size_t upper_len,
                    std::size_t leaf_len) noexcept {
    discard_node(p.lower);
    free_frag(p.lower_frag, lower_len);
    free_frag(p.upper_frag, upper_len);
    dealloc(p.upper_children, Node::child_block_bytes(p.upper_child_cap));
    dealloc(p.upper_tenants, Node::tenant_block_bytes(p.upper_tenant_cap));
    while (p.copies != kNil) {
      const std::uint32_t c = p.copies;
      p.copies = claim(c)->next;
      discard_claim(c);
    }
    discard_claim(p.own);
    discard_node(p.leaf);
    free_frag(p.leaf_frag, leaf_len);
    discard_claim(p.leaf_claim);
    p = Prep{};
  }

  // Splits x (index xi) after its first k symbols (kc units), holding x
  // exclusively: x keeps the first part, with a fresh claim for each of its
  // tenants, and a new child `lower` takes the rest of the fragment (as
  // p.frag_mode says: see split_frag), x's children and x's claims (so the
  // claims below keep pointing at the right parent claims). The LRU step
  // of tenant `own` (the inserting one) is returned for the caller to make
  // (link_split_copy; old == kNil when `own` does not hold x), which takes
  // that tenant's LRU mutex next anyway (to link the new leaf's claim, or
  // to stamp), still holding x: one hold of the mutex instead of two per
  // split (benchmarks/README.md, "One LRU hold a split").
  [[nodiscard]] SplitStep split_node(Node& x, std::uint32_t xi, std::size_t k, std::size_t kc,
                                     Prep& p, TenantId own) noexcept {
    const std::uint32_t loi = p.lower;
    p.lower = kNil;
    Node* lo = node(loi);
    lo->len = static_cast<std::uint32_t>(x.len - k);
    lo->count = static_cast<std::uint32_t>(x.count - kc);
    const Symbol* src = x.data();
    switch (p.frag_mode) {
      case SplitFrag::kCopyBoth: {  // x's old buffer (if any) retired once both are copied
        Symbol* old = x.frag_kind == detail::kFragInline ? nullptr : x.frag.ptr;
        const std::uint8_t old_kind = x.frag_kind;
        set_frag(*lo, p.lower_frag, src + k, lo->len);
        set_frag(x, p.upper_frag, src, k);
        retire_frag(old, x.len, old_kind);  // x.len is still the old length
        break;
      }
      case SplitFrag::kUpperKeeps:  // x keeps the buffer, shortened
        set_frag(*lo, p.lower_frag, src + k, lo->len);
        break;
      case SplitFrag::kLowerKeeps: {  // lo takes the buffer from src + k on
        const FragHeader h = frag_header(x.frag.ptr);
        Symbol* buf = x.frag.ptr;
        set_frag(x, p.upper_frag, src, k);  // before lo's header covers its last bytes
        lo->frag.ptr = buf + k;
        lo->frag_kind = detail::kFragInBuffer;
        set_frag_header(lo->frag.ptr, {h.offset + k * sizeof(Symbol), h.total});
        break;
      }
    }
    p.lower_frag = nullptr;
    p.upper_frag = nullptr;
    lo->children = x.children;
    lo->nchild = x.nchild;
    lo->child_cap_code = x.child_cap_code;
    lo->tenants = x.tenants;
    lo->ntenant = x.ntenant;
    lo->tenant_cap_code = x.tenant_cap_code;

    x.len = static_cast<std::uint32_t>(k);
    x.count = static_cast<std::uint32_t>(kc);
    if (p.upper_children != nullptr)
      x.children.block = p.upper_children;
    else
      x.children.in = {};  // inline children
    x.set_cap_child(p.upper_child_cap);
    x.nchild = 0;
    p.upper_children = nullptr;
    add_child(x, Traits::key(lo->data(), lo->len), loi);
    if (p.upper_tenants != nullptr)
      x.tenants.block = p.upper_tenants;
    else
      x.tenants.one = {};  // an inline tenant
    x.set_cap_tenant(p.upper_tenant_cap);
    x.ntenant = 0;
    p.upper_tenants = nullptr;
    SplitStep own_step;
    for (std::uint32_t i = 0; i < lo->ntenant; ++i) {
      const TenantId u = lo->tenant_ids()[i];
      const std::uint32_t old = lo->claims()[i];
      const std::uint32_t m = p.copies;
      Claim* mc = claim(m);
      p.copies = mc->next;
      mc->next = kNil;
      mc->node = xi;
      add_tenant_entry(x, u, m);  // in id order: appends
      if (u == own) {
        own_step = {old, m, loi};
        continue;
      }
      TenantState* ts = find_state(u);
      std::lock_guard<detail::SpinMutex> g(ts->lru_mu);
      link_split_copy(*ts, {old, m, loi});
    }
    counts_.add(kClaims, lo->ntenant);
    counts_.add(kNodes, 1);
    return own_step;
  }

  // After an insert of ts's tenant: the reactive eviction to
  // Options::tenant_budget.
  void finish_insert(TenantState& ts) noexcept {
    if (budget_ == kUnlimitedBudget || ts.size.load(std::memory_order_relaxed) <= budget_) return;
    std::lock_guard<std::mutex> m(ts.maint_mu);
    const std::size_t b = budget_;
    evict_loop(ts, [b](const TenantState& st, const Claim&) {
      return st.size.load(std::memory_order_relaxed) > b;
    });
  }

  // insert's descent: optimistic, as match's, along the nodes the tenant
  // already holds (every ancestor of such a node is held too), then on from
  // the deepest of them as insert_from does, without comparing its fragment
  // again. With lock coupling from the root (insert_once) when the section
  // does not protect, the walk keeps meeting writers, or the tenant is not
  // at the root yet.
  Step insert_descend(const detail::EpochDomain::Section& sec, const Symbol* text, std::size_t n,
                      TenantState& ts, InsertResult& r) noexcept {
    const TenantId t = ts.id;
    Descent d;
    if (sec.protects() && descend_opt<true>(text, n, d, [t](const Node& c) noexcept {
          return c.find_claim(t) != kNil;
        })) {
      const std::uint32_t xc = d.node->find_claim(t);
      if (xc != kNil) {
        return insert_from(d.parent, d.node, d.index, d.excl, xc, d.start, text, n, ts, r, {},
                           d.pos - d.start, d.leaf);
      }
      unlock_descent(d);  // stopped at the root, which t does not hold
    }
    counts_.add(kFallbacks, 1);
    return insert_once(text, n, ts, r);
  }

  Step insert_once(const Symbol* text, std::size_t n, TenantState& ts, InsertResult& r) noexcept {
    const TenantId t = ts.id;
    Node* x = &root_;
    bool excl = false;
    x->lock.lock_shared();
    std::uint32_t xc = x->find_claim(t);
    if (xc == kNil) {
      x->lock.unlock_shared();
      x->lock.lock();
      excl = true;
      xc = x->find_claim(t);
      if (xc == kNil) xc = register_at_root(ts);
      if (xc == kNil) {
        x->lock.unlock();
        return Step::kOutOfMemory;
      }
    }
    return insert_from(nullptr, x, kRoot, excl, xc, 0, text, n, ts, r);
  }

  // Adds ts's tenant at the root; its claim, or kNil when out of memory.
  // Requires the root exclusively locked and the tenant absent there.
  std::uint32_t register_at_root(TenantState& ts) noexcept {
    const std::uint32_t c = new_claim();
    if (c == kNil || !reserve_tenants(root_, root_.ntenant + 1)) {
      discard_claim(c);
      return kNil;
    }
    claim(c)->node = kRoot;
    add_tenant_entry(root_, ts.id, c);
    counts_.add(kClaims, 1);
    ts.registered.store(true, std::memory_order_relaxed);
    registered_.fetch_add(1, std::memory_order_relaxed);
    return c;
  }

  // What a caller already counted of the text: text[from, n) is `units`
  // units. match_and_insert counts the unmatched tail for the match rate;
  // a new leaf that starts there takes that count instead of counting the
  // same bytes again.
  struct TailUnits {
    std::size_t from = static_cast<std::size_t>(-1);
    std::size_t units = 0;
  };

  // The insert from node x (index xi) on. x is locked (exclusively iff
  // excl) and so is its parent, shared (null when x is the root); x's
  // fragment starts at text[pos], and xc is t's claim on x. Releases both.
  // The parent may also be null when the insert will not upgrade x's lock:
  // x held exclusively with xc, or x held shared with xc when the text ends
  // at x's end or goes on into an existing child (descend_opt's cases).
  //
  // Holding the parent is what keeps x linked and allocated while x's lock
  // is upgraded (released shared, taken exclusively): unlinking x needs the
  // parent exclusively. For the same reason t's claim on the parent, which a
  // new claim on x hangs below, cannot be evicted or moved meanwhile.
  //
  // `known`, when given, is the common prefix of x's fragment and
  // text[pos, n) as the caller computed it from x unchanged since (a
  // descent that stopped in x and holds it locked): not compared again.
  static constexpr std::size_t kNotCompared = static_cast<std::size_t>(-1);
  Step insert_from(Node* parent, Node* x, std::uint32_t xi, bool excl, std::uint32_t xc,
                   std::size_t pos, const Symbol* text, std::size_t n, TenantState& ts,
                   InsertResult& r, TailUnits tail = {}, std::size_t known = kNotCompared,
                   Symbol* pre_leaf = nullptr) noexcept {
    const TenantId t = ts.id;
    // Loop state: as above; when xc is kNil, pc is t's claim on the parent.
    std::uint32_t pc = kNil;
    std::size_t k = known != kNotCompared ? known : common_units(*x, text + pos, n - pos);
    // A new leaf's fragment, allocated and filled before the exclusive lock
    // is taken (text[pre_at, n)), so that the node is held exclusively only
    // for the pointer updates. Used if the leaf still starts there. The
    // caller's `pre_leaf` (descend_opt's, with x held exclusively) is one
    // for text[pos + known, n).
    KVROUTE_ASSERT(pre_leaf == nullptr || known != kNotCompared,
                   "radix tree: a leaf's buffer without the position it starts at");
    Symbol* pre = pre_leaf;
    std::size_t pre_at = pre_leaf != nullptr ? pos + known : 0;
    auto drop_pre = [&]() noexcept {
      free_frag(pre, n - pre_at);
      pre = nullptr;
    };
    // The parent is needed only until x is held exclusively and t's claim
    // on x exists (x cannot be unlinked then, and nothing hangs below pc).
    auto let_parent_go = [&]() noexcept {
      if (parent != nullptr) parent->lock.unlock_shared();
      parent = nullptr;
    };
    // The split's step for t (split_node), made in the next hold of t's
    // lru_mu: the leaf's link or the stamp, with x still held. Meanwhile
    // the copy is reachable by no one (x's tenants are read under x's lock),
    // and t's old claim still says x and x's parent claim: a stamp from a
    // claim below it walks a chain without the copy, which then goes right
    // ahead of old, with old's recency, so the list stays ordered; an
    // eviction that picked old (or a claim below it) waits for x and then
    // finds old moved.
    SplitStep own_step;
    auto link_own_copy = [&]() noexcept {
      if (own_step.old == kNil) return;
      link_split_copy(ts, own_step);
      own_step = {};
    };
    auto release = [&]() noexcept {
      KVROUTE_ASSERT(own_step.old == kNil, "radix tree: a split's LRU step left undone");
      drop_pre();
      if (excl)
        x->lock.unlock();
      else
        x->lock.unlock_shared();
      let_parent_go();
    };
    for (;;) {
      const bool split = k < x->len;
      const std::size_t after = pos + k;
      std::uint32_t child = kNil;
      if (!split && after < n) child = x->find_child(Traits::key(text + after, n - after));
      const bool need_claim = xc == kNil;
      const bool need_leaf = after < n && child == kNil;

      if (split || need_claim || need_leaf) {
        if (!excl) {
          KVROUTE_ASSERT(parent != nullptr || x == &root_,
                         "radix tree: an upgrade without the parent's hold");
          if (need_leaf && pre == nullptr && !Node::inline_len(n - after)) {
            pre = alloc_frag_copy(text + after, n - after);
            pre_at = after;
          }
          const std::uint32_t seen = x->lock.read_begin();  // no writer: we hold it
          const std::uint64_t wraps = detail::RwLock::wraps();
          x->lock.unlock_shared();
          x->lock.lock();
          excl = true;
          // Another writer may have held x meanwhile: an insert that split
          // it (x then keeps a prefix of its fragment, and fresh copies of
          // its claims) or an eviction that merged its only child into it
          // (x's fragment then goes on past where it ended): compare again.
          if (!x->lock.same_version(seen) || detail::RwLock::wrapped_since(wraps)) {
            k = common_units(*x, text + pos, n - pos);
          }
          const std::uint32_t now = x->find_claim(t);
          if (now != kNil) {
            xc = now;  // the upper copy, or another insert of t added it
          } else if (xc != kNil) {
            // Only at the root, which has no parent to hold: remove_tenant
            // took t off the tree while the lock was released. Register t
            // again (what the insert would have done had it come after).
            KVROUTE_ASSERT(x == &root_, "radix tree: a held claim was evicted");
            xc = register_at_root(ts);
            if (xc == kNil) {
              release();
              return Step::kOutOfMemory;
            }
          }
          if (xc != kNil) let_parent_go();
          continue;  // re-decide under the exclusive lock
        }

        // Prepare every allocation, then commit.
        Prep p;
        const std::size_t leaf_len = after < n ? n - after : 0;
        const std::size_t kc = split ? Traits::count(text + pos, k) : x->count;
        bool ok = true;
        if (split) {
          p.lower = new_node();
          p.frag_mode = split_frag(*x, k);
          const bool lower_buf =
              p.frag_mode != SplitFrag::kLowerKeeps && !Node::inline_len(x->len - k);
          const bool upper_buf = p.frag_mode != SplitFrag::kUpperKeeps && !Node::inline_len(k);
          if (lower_buf) p.lower_frag = alloc_frag(x->len - k);
          if (upper_buf) p.upper_frag = alloc_frag(k);
          const bool frags_ok =
              (!lower_buf || p.lower_frag != nullptr) && (!upper_buf || p.upper_frag != nullptr);
          p.upper_child_cap = need_leaf ? 2 : 1;
          const std::size_t cb = Node::child_block_bytes(p.upper_child_cap);
          if (cb > 0) p.upper_children = alloc(cb);
          p.upper_tenant_cap = std::bit_ceil(x->ntenant + (need_claim ? 1u : 0u));
          const std::size_t tb = Node::tenant_block_bytes(p.upper_tenant_cap);
          if (tb > 0) p.upper_tenants = alloc(tb);
          ok = p.lower != kNil && frags_ok && (cb == 0 || p.upper_children) &&
               (tb == 0 || p.upper_tenants);
          for (std::uint32_t i = 0; ok && i < x->ntenant; ++i) {
            const std::uint32_t c = new_claim();
            if (c == kNil) {
              ok = false;
              break;
            }
            claim(c)->next = p.copies;
            p.copies = c;
          }
        } else {
          if (need_claim) ok = reserve_tenants(*x, x->ntenant + 1);
          if (ok && need_leaf) ok = reserve_children(*x, x->nchild + 1);
        }
        if (ok && need_claim) ok = (p.own = new_claim()) != kNil;
        if (ok && need_leaf) {
          ok = new_leaf(p.leaf, p.leaf_claim);
          if (pre != nullptr && pre_at == after) {
            p.leaf_frag = pre;
            pre = nullptr;
            p.leaf_filled = true;
          } else {
            drop_pre();
            if (!Node::inline_len(leaf_len)) p.leaf_frag = alloc_frag(leaf_len);
          }
          ok = ok && (Node::inline_len(leaf_len) || p.leaf_frag);
        }
        if (!ok) {
          release_prep(p, split ? x->len - k : 0, split ? k : 0, leaf_len);
          release();
          return Step::kOutOfMemory;
        }

        if (split) {
          own_step = split_node(*x, xi, k, kc, p, t);
          if (xc != kNil) xc = x->find_claim(t);  // the upper copy
        }
        if (need_claim) {
          // t held no claim on x, so a split had no step for t to leave.
          KVROUTE_ASSERT(own_step.old == kNil, "radix tree: a split's LRU step for a new claim");
          const std::uint32_t c = p.own;
          p.own = kNil;
          Claim* cc = claim(c);
          cc->node = xi;
          cc->up = pc;
          add_tenant_entry(*x, t, c);
          counts_.add(kClaims, 1);
          std::lock_guard<detail::SpinMutex> g(ts.lru_mu);
          link_below(ts, c);  // stamped with the whole path at the end
          ts.size.fetch_add(x->count, std::memory_order_relaxed);
          ts.listed.fetch_add(1, std::memory_order_relaxed);
          xc = c;
          pc = kNil;
        }
        let_parent_go();
        if (need_leaf) {
          const std::uint32_t li = p.leaf;
          Node* leaf = node(li);
          leaf->len = static_cast<std::uint32_t>(leaf_len);
          leaf->count = static_cast<std::uint32_t>(
              after == tail.from ? tail.units : Traits::count(text + after, leaf_len));
          set_frag(*leaf, p.leaf_frag, text + after, leaf_len, p.leaf_filled);
          p.leaf_frag = nullptr;
          leaf->set_cap_tenant(1);  // its one tenant inline: no block
          const std::uint32_t lc = p.leaf_claim;
          Claim* lcc = claim(lc);
          lcc->node = li;
          lcc->up = xc;
          add_tenant_entry(*leaf, t, lc);
          add_child(*x, Traits::key(leaf->data(), leaf->len), li);
          counts_.add(kNodes, 1);
          counts_.add(kUnits, leaf->count);
          counts_.add(kSymbols, leaf->len);
          counts_.add(kClaims, 1);
          {
            std::lock_guard<detail::SpinMutex> g(ts.lru_mu);
            link_own_copy();  // before the leaf's claim: lc hangs below the copy
            link_below(ts, lc);
            ts.size.fetch_add(leaf->count, std::memory_order_relaxed);
            ts.listed.fetch_add(1, std::memory_order_relaxed);
            r.recency = stamp_path(ts, lc);
          }
          release();
          return Step::kDone;
        }
        continue;  // x now needs nothing more; descend or finish
      }

      if (after == n) {
        {
          std::lock_guard<detail::SpinMutex> g(ts.lru_mu);
          link_own_copy();  // the split at the text's end
          r.recency = stamp_path(ts, xc);
        }
        release();
        return Step::kDone;
      }

      // Descend into `child`: x becomes the parent, held shared; the old
      // parent is released once the child is locked.
      if (excl) {
        x->lock.downgrade();
        excl = false;
      }
      Node* c = node(child);
      c->lock.lock_shared();
      if (parent != nullptr) parent->lock.unlock_shared();
      const std::uint32_t cc = c->find_claim(t);
      if (cc != kNil) prefetch_claim(cc);  // stamp_path walks it at the end
      pc = cc == kNil ? xc : kNil;
      xc = cc;
      parent = x;
      x = c;
      xi = child;
      pos = after;
      k = common_units(*x, text + pos, n - pos);
    }
  }

  // --- eviction --------------------------------------------------------------

  // Removes t's least recent claims while `more(ts, tail)` holds. Requires
  // ts.maint_mu. Each step locks the tail claim's parent node and node
  // exclusively (in that order), re-checks under the LRU mutex that nothing
  // moved, removes the claim, and unlinks and frees the node if no tenant
  // holds it. No insert is inside the node or upgrading its lock then: an
  // insert in a node holds it (shared or exclusively), and upgrades only
  // while it holds the parent shared.
  template <class More>
  EvictResult evict_loop(TenantState& ts, More more) noexcept {
    EvictResult r;
    int failures = 0;
    while (failures < kMaxEvictFailures) {
      std::uint32_t ci;
      std::uint32_t up;
      std::uint32_t ndi;
      std::uint32_t pi;
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
      bool moved;
      bool stop = false;
      {
        std::lock_guard<detail::SpinMutex> g(ts.lru_mu);
        const Claim* c = claim(ci);
        moved = ts.tail != ci || c->node != ndi || c->up != up || claim(up)->node != pi;
        if (!moved && !more(ts, *c)) stop = true;
        if (!moved && !stop) {
          list_unlink(ts, ci);
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
      remove_tenant_entry(*nd, ts.id);
      free_claim(ci);
      const bool unlink = nd->ntenant == 0 && nd->nchild == 0;
      if (unlink) {
        remove_child(*parent, *nd, ndi);
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

  // Merges m's only child c into m when c has exactly m's tenants: m takes
  // c's text (appended to its own), children and descendants, and keeps its
  // own claims, which are at least as recent as c's; c's claims leave the
  // LRU lists and the claims below c take m's as their parent claims. So a
  // split whose reason has been evicted (a branch, or a text that ended
  // there) does not outlive it: no chains of single-child nodes, no extra
  // level in later descents, and no node and claims kept for nothing.
  // Requires m (not the root) locked exclusively and `held`'s maint_mu.
  // Takes c's lock (top-down, as every path does) and, without waiting,
  // the maint_mu of c's other tenants, since their claims on c go away
  // here while their own maintenance may hold one of them as its next
  // LRU tail; when one is busy, or memory for the joined text is short,
  // nothing changes and the pair stays as it is (a chain is only a cost).
  // Cost: one copy of the two fragments (at most kMaxMergeBytes: a longer
  // pair stays a chain, whose extra node is small beside its text), and a
  // look at each child of c for each tenant. Returns whether it merged.
  static constexpr std::size_t kMaxMergeBytes = std::size_t{64} << 10;
  // Whether every tenant of m (the same as c's, in the same order) last
  // used m only on the way into c: its claim on m is not marked `ended`
  // and has the recency of its claim on c. Otherwise some tenant's most
  // recent use ended at m, and the merged node, which is evicted as one,
  // would take that use away with c's older text (an eviction that
  // unmerged stops after c). Stamps that run meanwhile pass through both
  // nodes (they end below c: m and c are held), so they write both claims
  // alike.
  bool used_together(const Node& m, const Node& c) const noexcept {
    for (std::uint32_t i = 0; i < m.ntenant; ++i) {
      const Claim* mc = claim(m.claims()[i]);
      if (mc->ended() || mc->recency() != claim(c.claims()[i])->recency()) return false;
    }
    return true;
  }
  bool merge_only_child(Node& m, const TenantState& held) noexcept {
    if (m.nchild != 1) return false;
    const std::uint32_t ci = m.kids()[0];
    Node* c = node(ci);
    c->lock.lock();
    const std::uint32_t nt = c->ntenant;
    const std::size_t len = std::size_t{m.len} + c->len;
    const bool same = nt == m.ntenant &&
                      std::equal(c->tenant_ids(), c->tenant_ids() + nt, m.tenant_ids()) &&
                      len * sizeof(Symbol) <= kMaxMergeBytes && used_together(m, *c);
    if (!same) {
      c->lock.unlock();
      return false;
    }
    // c's children too: an insert that holds a child alone (its parent let
    // go once the child is held exclusively with its claim, or never held
    // when its optimistic descent took the child exclusively) may be splitting
    // it, which copies claims whose parent claims are c's.
    for (std::uint32_t k = 0; k < c->nchild; ++k) node(c->kids()[k])->lock.lock();
    const auto unlock_children = [&]() noexcept {
      for (std::uint32_t k = 0; k < c->nchild; ++k) node(c->kids()[k])->lock.unlock();
    };
    const std::uint32_t* ids = c->tenant_ids();
    const auto others = [&](std::uint32_t upto, auto&& f) {
      for (std::uint32_t i = 0; i < upto; ++i) {
        if (ids[i] != held.id && !f(*find_state(ids[i]))) return i;
      }
      return upto;
    };
    const auto unlock_others = [&](std::uint32_t upto) {
      others(upto, [](TenantState& u) {
        u.maint_mu.unlock();
        return true;
      });
    };
    const std::uint32_t got = others(nt, [](TenantState& u) { return u.maint_mu.try_lock(); });
    // The joined fragment: a new buffer, or a short one built here.
    const bool joined_inline = Node::inline_len(len);
    typename Node::Frag joined{nullptr};
    Symbol* f = got != nt ? nullptr : joined_inline ? joined.in : alloc_frag(len);
    if (f == nullptr) {
      unlock_others(got);
      unlock_children();
      c->lock.unlock();
      return false;
    }
    std::memcpy(f, m.data(), m.len * sizeof(Symbol));
    std::memcpy(f + m.len, c->data(), c->len * sizeof(Symbol));
    for (std::uint32_t i = 0; i < nt; ++i) {
      TenantState* u = find_state(ids[i]);
      const std::uint32_t mc = m.claims()[i];
      const std::uint32_t cc = c->claims()[i];
      {
        std::lock_guard<detail::SpinMutex> g(u->lru_mu);
        for (std::uint32_t k = 0; k < c->nchild; ++k) {
          const std::uint32_t below = node(c->kids()[k])->find_claim(ids[i]);
          if (below != kNil) claim(below)->up = mc;
        }
        // The merged node ends where c ended: its mark comes from c's claim.
        claim(mc)->set_stamp(claim(cc)->recency(), claim(cc)->ended());
        list_unlink(*u, cc);
        u->listed.fetch_sub(1, std::memory_order_relaxed);
      }
      free_claim(cc);
    }
    unlock_children();
    retire_child_block(m);  // it held c only
    m.children = c->children;
    m.nchild = c->nchild;
    m.child_cap_code = c->child_cap_code;
    c->children.block = nullptr;
    c->nchild = 0;
    c->child_cap_code = 0;
    retire_frag(m);
    if (joined_inline)
      m.frag = joined;
    else
      m.frag.ptr = f;
    m.frag_kind = frag_kind_for(len);
    m.len = static_cast<std::uint32_t>(len);
    m.count += c->count;
    // c's text now lives in m, as its children do: free_node counts out and
    // retires only what c still holds (no text, no children, no claims).
    retire_frag(*c);
    c->frag.ptr = nullptr;
    c->frag_kind = detail::kFragInline;
    c->len = 0;
    c->count = 0;
    c->ntenant = 0;     // its claims are gone; free_node retires its block
    unlock_others(nt);  // while c's tenant array is still there (free_node retires it)
    c->lock.unlock();
    free_node(ci);
    return true;
  }

  // --- debug ------------------------------------------------------------------

  template <class N, class V>
  void push_children(N& n, V& stack) const {
    for (std::uint32_t i = 0; i < n.nchild; ++i) stack.push_back(node(n.kids()[i]));
  }

  std::string check() const {
    domain_.collect();  // quiescent: everything retired is freed
    auto fail = [](std::string what) { return what; };
    std::size_t nodes = 0, units = 0, symbols = 0, claims = 0, bytes = 0;
    struct Item {
      const Node* node;
      const Node* parent;
      std::uint32_t index;
    };
    std::vector<Item> stack;
    stack.push_back({&root_, nullptr, kRoot});
    std::vector<TenantSize> sizes;
    while (!stack.empty()) {
      const Item it = stack.back();
      stack.pop_back();
      const Node* n = it.node;
      const Node* p = it.parent;
      // Before any data(): which member of frag it reads follows from this.
      if ((n->frag_kind == detail::kFragInline) != Node::inline_len(n->len)) {
        return fail("a fragment is in the node iff it fits there: not so");
      }
      if (n->frag_kind != detail::kFragInline && n->frag.ptr == nullptr) {
        return fail("a fragment has no buffer");
      }
      if (p != nullptr) {
        ++nodes;
        if (n->len == 0) return fail("a non-root node has an empty fragment");
        if (n->ntenant == 0) return fail("a non-root node has no tenant");
        if (n->count != Traits::count(n->data(), n->len))
          return fail("a node's unit count is stale");
        if (p->find_child(Traits::key(n->data(), n->len)) != it.index) {
          return fail("a child is not under the key of its first unit");
        }
      }
      if (n->nchild > n->cap_child()) return fail("more children than capacity");
      if (n->ntenant > n->cap_tenant()) return fail("more tenants than capacity");
      units += n->count;
      symbols += n->len;
      if (n->frag_kind != detail::kFragInline) {
        bytes += frag_buffer(n->frag.ptr, n->len, n->frag_kind).bytes;
      }
      if (n->frag_kind == detail::kFragInBuffer) {
        const FragHeader h = frag_header(n->frag.ptr);
        const std::size_t live = n->len * sizeof(Symbol);
        if (h.offset < kFragHeader || h.offset + live > h.total) {
          return fail("a fragment's header does not frame it in its buffer");
        }
        if (h.total - live > kDeadPerLive * live + kFragHeader) {
          return fail("a buffer holds too many dead bytes");
        }
      }
      bytes += Node::child_block_bytes(n->cap_child());
      bytes += Node::tenant_block_bytes(n->cap_tenant());
      for (std::uint32_t i = 1; i < n->nchild; ++i) {
        if (!(n->keys()[i - 1] < n->keys()[i])) return fail("child keys are not sorted");
      }
      for (std::uint32_t i = 0; i < n->ntenant; ++i) {
        const TenantId t = n->tenant_ids()[i];
        const Claim* c = claim(n->claims()[i]);
        ++claims;
        if (i > 0 && !(n->tenant_ids()[i - 1] < t)) return fail("tenant ids are not sorted");
        if (c->node != it.index) return fail("a claim names another node");
        if (p == nullptr) {
          if (c->up != kNil) return fail("a root claim has a parent claim");
          continue;
        }
        const std::uint32_t pc = p->find_claim(t);
        if (pc == kNil) return fail("a tenant holds a node but not its parent");
        if (c->up != pc) return fail("a claim's parent claim is not on the parent node");
        if (c->recency() > claim(pc)->recency())
          return fail("a node is more recent than its parent");
        auto s = std::lower_bound(sizes.begin(), sizes.end(), t,
                                  [](const TenantSize& a, TenantId v) { return a.tenant < v; });
        if (s == sizes.end() || s->tenant != t) s = sizes.insert(s, {t, 0});
        s->size += n->count;
      }
      for (std::uint32_t i = 0; i < n->nchild; ++i) {
        stack.push_back({node(n->kids()[i]), n, n->kids()[i]});
      }
    }
    // Tenants: registered iff at the root; sizes and lists consistent.
    std::size_t registered = 0;
    for (const TenantState* ts = registry_.load(); ts != nullptr; ts = ts->next_state) {
      bytes += sizeof(TenantState);
      const bool at_root = root_.find_claim(ts->id) != kNil;
      if (at_root != ts->registered.load()) return fail("registered flag disagrees with the root");
      if (at_root) ++registered;
      std::size_t expect = 0;
      auto s = std::lower_bound(sizes.begin(), sizes.end(), ts->id,
                                [](const TenantSize& a, TenantId v) { return a.tenant < v; });
      if (s != sizes.end() && s->tenant == ts->id) expect = s->size;
      if (!at_root && expect != 0) return fail("an unregistered tenant holds nodes");
      if (ts->size.load() != expect) {
        return fail("tenant " + std::to_string(ts->id) + ": size " +
                    std::to_string(ts->size.load()) + " but recount " + std::to_string(expect));
      }
      std::size_t listed = 0;
      std::uint32_t prev = kNil;
      for (std::uint32_t ci = ts->head; ci != kNil; prev = ci, ci = claim(ci)->next) {
        const Claim* c = claim(ci);
        ++listed;
        if (listed > claims) return fail("an LRU list has a cycle");
        if (c->prev != prev) return fail("LRU list links are broken");
        if (c->up == kNil) return fail("a root claim is listed");
        if (prev != kNil && claim(prev)->recency() < c->recency()) {
          return fail("LRU list is not ordered by recency");
        }
        if (node_or_root(c->node)->find_claim(ts->id) != ci) {
          return fail("a listed claim is not on its node");
        }
        // Ancestors are ahead: the parent claim must be found before c.
        if (claim(c->up)->up != kNil) {
          bool ahead = false;
          for (std::uint32_t q = c->prev; q != kNil && !ahead; q = claim(q)->prev) {
            ahead = q == c->up;
          }
          if (!ahead) return fail("a claim is ahead of its parent claim in the LRU list");
        }
      }
      if (prev != ts->tail) return fail("LRU tail pointer is wrong");
      if (listed != ts->listed.load()) return fail("listed count is wrong");
    }
    if (registered != registered_.load()) return fail("registered count is wrong");
    std::size_t listed_total = 0;
    for (const TenantState* ts = registry_.load(); ts != nullptr; ts = ts->next_state) {
      listed_total += ts->listed.load();
    }
    if (listed_total + root_.ntenant != claims) return fail("claims in nodes != claims listed");
    if (nodes != counts(kNodes)) return fail("node count is wrong");

    if (units != counts(kUnits)) return fail("unit count is wrong");
    if (symbols != counts(kSymbols)) return fail("symbol count is wrong");
    if (claims != counts(kClaims)) return fail("claim count is wrong");
    if (kNodeUnits * nodes + kClaimUnits * claims != pool_.live())
      return fail("units in the slab != nodes and claims");
    for (const auto& top : top_) {
      const TenantMid* mid = top.load();
      if (mid == nullptr) continue;
      bytes += sizeof(TenantMid);
      for (const auto& leaf : mid->slot) {
        if (leaf.load() != nullptr) bytes += sizeof(TenantLeaf);
      }
    }
    if (bytes != counts(kBytes)) {
      return fail("bytes: counted " + std::to_string(counts(kBytes)) + " but structure holds " +
                  std::to_string(bytes));
    }
    return {};
  }

  // The slabs free their chunks themselves (nodes and claims are trivially
  // destructible); this frees what nodes own outside them.
  void destroy() noexcept {
    std::vector<Node*> stack;
    push_children(root_, stack);
    free_child_block(root_);
    free_tenant_block(root_);
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      push_children(*n, stack);
      if (n->frag_kind != detail::kFragInline) free_frag(n->frag.ptr, n->len, n->frag_kind);
      free_child_block(*n);
      free_tenant_block(*n);
    }
    TenantState* ts = registry_.load();
    while (ts != nullptr) {
      TenantState* next = ts->next_state;
      ts->~TenantState();
      dealloc_line_aligned(ts, sizeof(TenantState));
      ts = next;
    }
    for (auto& m : top_) {
      TenantMid* mid = m.load();
      if (mid == nullptr) continue;
      for (auto& l : mid->slot) {
        TenantLeaf* leaf = l.load();
        if (leaf != nullptr) {
          leaf->~TenantLeaf();
          dealloc(leaf, sizeof(TenantLeaf));
        }
      }
      mid->~TenantMid();
      dealloc(mid, sizeof(TenantMid));
    }
  }

  // Laid out by who writes what, so that two threads routing at once do not
  // take cache lines from each other for data neither of them changed: the
  // root (read by every descent), the slab's directory (read on every node
  // access), the tenant directory, the clock (written by stamps) and
  // the counters (per-thread stripes) each start a line of their own.
  const std::size_t budget_;
  const std::uint8_t recency_shift_;
  alignas(detail::kCacheLine) Node root_;
  // Every non-root node and every claim (destroyed after destroy() has
  // freed what the nodes own outside them).
  detail::RadixSlab pool_;
  alignas(detail::kCacheLine) std::atomic<TenantMid*> top_[256] = {};
  std::atomic<TenantState*> registry_{nullptr};
  // The last recency handed out: the stamps so far (recency_shift 0), or
  // the step (recency_shift > 0, the stamps being counted in counts_).
  // Written by stamps, on a line of its own.
  alignas(detail::kCacheLine) std::atomic<std::uint64_t> clock_{0};
  // Written by every insert: one stripe per thread (detail/striped.hpp).
  // kBytes counts alloc()ed bytes (the slab counts its own); kNodes the
  // non-root nodes.
  detail::StripedCounters<kCounts> counts_;
  // Fragments, child and tenant blocks, the tenant directory (alloc());
  // destroyed after the epoch domain, which frees into it.
  alignas(detail::kCacheLine) detail::BlockArena arena_;
  std::atomic<std::size_t> line_aligned_bytes_{0};  // tenant states
  std::atomic<std::size_t> registered_{0};
  std::atomic<std::size_t> removed_units_{0};
  // Last, so destroyed first: what is still retired goes back through
  // reclaim_retired while the slab and the counters still exist. Mutable:
  // stats() and check() reclaim before they count.
  alignas(detail::kCacheLine) mutable detail::EpochDomain domain_{
      this, &BasicApproxRadixTree::reclaim_retired};
};

// Text in UTF-8, counted in code points.
using ApproxRadixTree = BasicApproxRadixTree<char>;
// Token ids.
using TokenRadixTree = BasicApproxRadixTree<std::uint32_t>;

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_RADIX_TREE_HPP_
