// -----------------------------------------------------------------------------
// File: kvroute/policies/cache_aware.hpp
// -----------------------------------------------------------------------------
//
// `kvroute::CacheAware`: the cache-aware policy of sgl-model-gateway. One
// approximate radix tree per model (ApproxRadixTree over the request text,
// tenants = workers) records which worker was sent which prefix. Per request:
//
//   1. Balance test over the healthy workers' in-flight loads: the pool is
//      imbalanced when max - min > balance_abs_threshold AND
//      max > min * balance_rel_threshold (both strict, in f32 as the gateway
//      computes it). Imbalanced -> the least-loaded healthy worker
//      (`imbalanced`).
//   2. Otherwise match the text in the model's tree. With match rate
//      (matched characters / request characters, 0 for empty text) above
//      cache_threshold (strict) -> the matched worker (`cache_hit`).
//   3. Otherwise the least-loaded healthy worker (`cache_miss`).
//   Then the text is inserted under the chosen worker, in every branch, so
//   the tree follows actual placement. Steps 2 and 3 and the insert are one
//   descent (ApproxRadixTree::match_and_insert), and only the worker the
//   text is sent to gets a fresh recency: the gateway's match also refreshes
//   the matched worker when the request then goes elsewhere, which keeps
//   alive claims its server may have evicted.
//
// Least-loaded choices break ties uniformly at random (seeded). The matched
// worker is chosen among the tenants at the deepest matched node that are
// healthy members of the request's model, by Options::tenant_rule: by
// default the least loaded, then the most recently used (the gateway returns
// the node's first creator, which ignores both). A matched worker that is
// unhealthy right now is skipped for this request and keeps its history
// (the gateway deletes a worker's whole tree on one failed health check).
//
// Eviction: each worker's share of a tree is kept within max_tree_size
// characters. The tree evicts a worker's least recently used leaves as the
// insert that crosses the budget returns (reactive eviction), so a tree
// never exceeds its budget by more than the requests in flight; the sweep
// every eviction_interval (run lazily by the first selection after the
// interval, or by maintain()) re-checks every tree. Periodic-only eviction,
// the gateway's, is Options::reactive_eviction = false.
//
// Feedback: servers evict on their own, so the tree's claims go stale. When
// the host learns how many tokens of a request the server really had cached
// (SGLang reports them per request), report_cached() corrects the tree: if
// the server held less than the decision claimed (feedback.hpp: the claim in
// tokens at Options::chars_per_token, with one tolerance), it evicted the entry the
// tree last saw that worker use, and - both sides evicting least recently
// used first - every claim of that worker at least as old is stale too and
// is dropped (cost proportional to what is dropped). The two LRU orders are
// not the same order (a server sees blocks, the tree whole paths), so
// Options::feedback_slack_stamps can spare the claims only a little older
// than the missing entry.
//
// Thread safety: thread-safe. A model's tree is created when its first
// worker registers or on its first request (one short exclusive lock);
// afterwards selections take a shared lock for the map lookup only, and the
// tree's own per-node locks for the match.
//
// Example:
//
//   kvroute::Router<kvroute::CacheAware> router;   // gateway defaults
//   router.add_worker({.url = "http://10.0.0.1:30000"}).IgnoreError();
//   kvroute::Selection s = router.select({.text = chat_history});
//   // ... forward; when the response says 1200 tokens were cached:
//   router.policy().report_cached({.text = chat_history}, s.decision,
//                                 /*cached_tokens=*/1200);

#ifndef KVROUTE_POLICIES_CACHE_AWARE_HPP_
#define KVROUTE_POLICIES_CACHE_AWARE_HPP_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "kvroute/clock.hpp"
#include "kvroute/config.hpp"
#include "kvroute/decision.hpp"
#include "kvroute/detail/ascii.hpp"
#include "kvroute/detail/model_trees.hpp"
#include "kvroute/detail/pick.hpp"
#include "kvroute/detail/rng.hpp"
#include "kvroute/detail/sync/hub.hpp"
#include "kvroute/feedback.hpp"
#include "kvroute/load_tracker.hpp"
#include "kvroute/policy.hpp"
#include "kvroute/radix_tree.hpp"
#include "kvroute/request.hpp"
#include "kvroute/sync/snapshot.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN

class CacheAware {
 public:
  // How the matched worker is chosen among the tenants of the deepest
  // matched node. Every tenant there holds the matched prefix, so the rule
  // decides only where the request queues: kLeastLoaded, the default, puts
  // it behind the least work (the gateway takes the node's first creator,
  // which may be overloaded or long evicted).
  enum class TenantRule : std::uint8_t {
    kLeastLoaded,  // least in flight, then most recent, then lowest id
    kMostRecent,   // most recently used, then lowest id
  };

  struct Options {
    double cache_threshold = 0.3;
    std::uint64_t balance_abs_threshold = 64;
    double balance_rel_threshold = 1.5;
    // <= 0: no periodic sweep (maintain() still sweeps).
    std::chrono::nanoseconds eviction_interval = std::chrono::seconds(120);
    // Characters per worker per tree.
    std::uint64_t max_tree_size = std::uint64_t{1} << 26;
    bool reactive_eviction = true;
    TenantRule tenant_rule = TenantRule::kLeastLoaded;
    // Characters of text per token, to compare the tree's claims with the
    // cached tokens servers report (report_cached). Must be > 0.
    double chars_per_token = 4.0;
    // When report_cached takes a report as "the server had less than
    // claimed" (feedback.hpp).
    FeedbackTolerance feedback_tolerance{};
    // report_cached drops the worker's claims as old as the missing entry,
    // or older, except those fewer than this many stamps (routed requests
    // of the model) older than it. 0: the exact cut (to a recency step:
    // see recency_shift). A server's LRU and the tree's are not the same
    // order (a server sees blocks, the tree whole paths), so claims only a
    // little older than the missing entry may still be cached.
    std::uint64_t feedback_slack_stamps = 0;
    // The trees' recency resolution, 2^recency_shift stamps a step
    // (ApproxRadixTree::Options::recency_shift; 0 is exact recency). At the
    // default 6 a request writes only the claims on its path that are not
    // yet in the current step, so the claims many requests share (a system
    // prompt, an agent's trunk) are written once per 64 requests instead of
    // by every request, and two threads serving one tenant do not take
    // those claims' lines from each other (docs/benchmarks.md has the
    // figures). The price is ties within a step for the most-recent
    // tie-break, and eviction that is exact LRU only between steps.
    // report_cached keeps the missing entry's whole step (it holds claims
    // newer than the entry), a slack of up to one step.
    unsigned recency_shift = 6;
    // Most model trees kept at once; creating one more drops the least
    // recently used model's tree (that model starts afresh). 0: no limit.
    std::uint64_t max_models = 0;
    // Chunk keys held, per model, of what other replicas placed and no
    // request here has reached yet (sync/remote_index.hpp).
    std::size_t max_remote_keys = std::size_t{1} << 20;
    // Among replicas: placements carry their new text to the other
    // replicas while the requests that extend known text add at most this
    // share of their bytes as new text (running sums, detail/sync/hub.hpp),
    // and the keys of its chunks otherwise (0: keys only; 1: text always;
    // values outside [0, 1] are taken as the nearest end). A placement
    // whose text travels is in the other replicas' trees as soon as it is
    // applied, instead of when a request there reaches it, and then
    // feedback cuts travel too (detail/sync/hub.hpp, docs/replicas.md).
    // The default sends texts for agentic sessions, which add a few
    // percent a turn, and keys for chat traffic that adds more than it
    // repeats.
    double sync_text_share = 0.25;
    // Most bytes of recent text kept per model, where a placement with text
    // finds the prefix it extends (sync/text_store.hpp): the text of the
    // sessions live at once. Held only while texts travel.
    std::size_t max_remote_text_bytes = std::size_t{1} << 29;
    // Must outlive the policy.
    const Clock* clock = &Clock::steady();
    std::uint64_t seed = detail::kDefaultSeed;
  };

  CacheAware() noexcept : CacheAware(Options{}) {}
  explicit CacheAware(Options o) noexcept
      : opt_(o),
        cpt_(o.chars_per_token > 0 ? o.chars_per_token : 4.0),
        rng_(o.seed),
        trees_({.max_tree_size = o.max_tree_size,
                .reactive_eviction = o.reactive_eviction,
                .eviction_interval = o.eviction_interval,
                .clock = o.clock,
                .recency_shift = o.recency_shift,
                .max_models = o.max_models}),
        hub_(o.max_remote_keys, o.sync_text_share, o.max_remote_text_bytes) {}

  CacheAware(const CacheAware&) = delete;
  CacheAware& operator=(const CacheAware&) = delete;

  std::string_view name() const noexcept { return "cache_aware"; }

  Decision choose(const RequestView& r, const ClusterView& c) noexcept {
    const auto healthy = c.eligible();
    if (healthy.empty()) return c.no_worker();
    trees_.sweep_if_due();
    const detail::TreeRef ref = trees_.get_or_create(r.model);
    ApproxRadixTree* tree = ref.get();
    sync::TextChunks chunks(r.text);  // computes nothing until asked
    const bool syncing = tree != nullptr && hub_.active();
    if (syncing) hub_.fold_remote(r.model, chunks, *tree);

    if (imbalanced(healthy, c)) {
      const Worker* w = least_loaded(healthy, c);
      Decision d = place(tree, r, w, Branch::kImbalanced);
      if (syncing) hub_.emit_placed(r.model, w->url, chunks, 0);  // no match was made
      return d;
    }
    if (tree == nullptr) {  // out of memory: route without affinity
      return Decision::pick(least_loaded(healthy, c), Branch::kCacheMiss);
    }
    // Steps 2 and 3 and the insert in one descent: the rule sees the
    // deepest matched node's candidates and the match, and names the worker
    // the text is inserted under.
    const Worker* chosen = nullptr;
    Branch branch = Branch::kCacheMiss;
    const MatchInsertResult mi = tree->match_and_insert(
        r.text, [&](const RadixCandidates& cands, const MatchResult& m) noexcept {
          const TenantId t = cands.empty() ? kNoTenant : Chooser{this, healthy, &c}(cands);
          if (t != kNoTenant && m.match_rate() > static_cast<float>(opt_.cache_threshold)) {
            chosen = find(healthy, t);
            branch = Branch::kCacheHit;
          } else {
            chosen = least_loaded(healthy, c);
          }
          return chosen->id.value;
        });
    Decision d = Decision::pick(chosen, branch);
    if (mi.held) {  // the chosen worker holds the matched prefix
      d.claimed = mi.match.matched;
      d.ticket = mi.match.previous_recency;
    }
    if (syncing) {
      const bool held_all =
          mi.held && mi.match.matched_symbols >= chunks.size() * sync::kChunkBytes;
      hub_.emit_placed(r.model, chosen->url, chunks, mi.match.matched_symbols, held_all);
    }
    return d;
  }

  // Corrects the tree with what the server reported for a request this
  // policy routed: `cached_tokens` tokens of its prompt, of `prompt_tokens`
  // (-1: unknown), were in its cache. When that is less than the decision
  // claimed (feedback.hpp: claim_evicted, with feedback_tolerance, at the
  // request's characters per token, or Options::chars_per_token), drops the
  // chosen worker's claims as old as the one the decision named, or older.
  // Returns what was dropped. `guard` is LeastPrefill's (its queued-work
  // correction); here it changes nothing, so that a host reports to either
  // policy alike. Never throws; a decision from another policy is ignored.
  EvictResult report_cached(const RequestView& request, const Decision& decision,
                            std::uint64_t cached_tokens, std::int64_t prompt_tokens = -1,
                            LoadGuard* /*guard*/ = nullptr) noexcept {
    if (!decision || decision.claimed == 0) return {};
    const double cpt = claim_chars_per_token(request.text, prompt_tokens, cpt_);
    EvictResult e = report_cached(request.model, decision.worker->id, decision.claimed,
                                  decision.ticket, cached_tokens, cpt);
    if (e.claims > 0) {
      hub_.emit_forgot(request.model, decision.worker->url, request.text,
                       static_cast<std::size_t>(static_cast<double>(cached_tokens) * cpt));
    }
    return e;
  }
  // The same, for a host that kept only the decision's fields; the claim is
  // converted at `chars_per_token` (> 0; <= 0: Options::chars_per_token).
  EvictResult report_cached(std::string_view model, WorkerId worker, std::uint64_t claimed,
                            std::uint64_t ticket, std::uint64_t cached_tokens,
                            double chars_per_token = 0) noexcept {
    const double cpt = chars_per_token > 0 ? chars_per_token : cpt_;
    if (!claim_evicted(claimed, cached_tokens, cpt, opt_.feedback_tolerance)) return {};
    const detail::TreeRef tree = trees_.find(model);
    if (!tree) return {};
    return tree->drop_older_than(worker.value, feedback_cut(ticket, tree->recency_shift()));
  }

  // A worker left: forget it in every tree (and again on every sweep: a
  // selection still running on an older snapshot may insert for it).
  void on_worker_removed(WorkerId id) noexcept {
    trees_.on_worker_removed(id);
    hub_.emit_worker_gone(id);
  }

  // Workers joined or left: every model they serve gets its tree now.
  void on_workers_changed(const WorkerSnapshot& snapshot) noexcept {
    trees_.create_for(snapshot);
    hub_.workers_changed(snapshot);
  }

  // Replicas (sync/change.hpp). Emits this policy's placements, feedback
  // corrections and worker removals to `sink` (null: stop); the sink must
  // outlive the policy or be unset first.
  void set_state_sink(sync::StateSink* sink) noexcept { hub_.set_sink(sink); }
  // Applies a change from another replica, naming workers by their URL in
  // `snapshot` (the current one). Idempotent and order-free; never emits.
  sync::Applied apply_change(const sync::Change& change, const WorkerSnapshot& snapshot) noexcept {
    return hub_.apply(change, snapshot, trees_);
  }
  // The changes the host drained from the sink (after each drain, on its
  // transport's thread): keeps the texts that travelled, which a selection
  // otherwise keeps itself (detail/sync/hub.hpp). Optional; never emits.
  void note_sent(std::span<const sync::Change> changes) noexcept { hub_.note_sent(changes); }
  // Folds into the model's tree what other replicas placed that `request`'s
  // text reaches, without routing it (a selection does this first): for
  // tools and tests that read the tree.
  void fold_remote(const RequestView& request) noexcept {
    const detail::TreeRef tree = trees_.get_or_create(request.model);
    sync::TextChunks chunks(request.text);
    if (tree) hub_.fold_remote(request.model, chunks, *tree.get());
  }
  // Chunk keys from other replicas not yet folded into a tree.
  std::size_t remote_keys() const noexcept { return hub_.remote_keys(); }
  // Placements with text applied whole, and those applied as keys because
  // the prefix they extend was not kept here.
  std::uint64_t texts_applied() const noexcept { return hub_.texts_applied(); }
  std::uint64_t texts_unanchored() const noexcept { return hub_.texts_unanchored(); }

  // Snapshots (sync/snapshot.hpp): one model's tree, workers named by URL
  // through `workers`; restore merges a snapshot into the model's tree.
  absl::StatusOr<std::string> save_state(std::string_view model,
                                         const WorkerSnapshot& workers) const noexcept {
    return detail::save_model_tree(sync::SnapshotKind::kCacheAware, trees_, model, workers);
  }
  absl::StatusOr<sync::RestoreResult> restore_state(std::string_view bytes,
                                                    const WorkerSnapshot& workers) noexcept {
    return detail::restore_model_tree(sync::SnapshotKind::kCacheAware, trees_, bytes, workers);
  }

  // Sweeps now: every tree to max_tree_size, and removed workers again.
  void maintain() noexcept { trees_.maintain(); }

  // The model's tree, or null before a worker of the model registers (or
  // its first request): for stats, tests,
  // and hosts that seed or inspect it (the tree is thread-safe). With
  // max_models the tree may be dropped while the pointer is held; a host
  // that reads trees concurrently with routing uses shared_tree().
  ApproxRadixTree* tree(std::string_view model) const noexcept { return trees_.find(model).get(); }
  std::shared_ptr<ApproxRadixTree> shared_tree(std::string_view model) const noexcept {
    return trees_.find_shared(model);
  }
  // The models that have a tree now (at most max_models when set).
  std::vector<std::string> models() const { return trees_.models(); }
  // Trees dropped so far to stay within max_models.
  std::uint64_t dropped_models() const noexcept { return trees_.dropped(); }
  const Options& options() const noexcept { return opt_; }

 private:
  // The recency below which report_cached drops claims, for a missing entry
  // last used at `ticket` in a tree with recency shift `s`: ticket + 1 (the
  // entry's age and older) less the slack in recency units (stamps / 2^s,
  // rounded up; at least one step when there are steps).
  std::uint64_t feedback_cut(std::uint64_t ticket, unsigned s) const noexcept {
    std::uint64_t slack = (opt_.feedback_slack_stamps >> s) +
                          ((opt_.feedback_slack_stamps & ((std::uint64_t{1} << s) - 1)) != 0);
    if (s > 0) slack = std::max<std::uint64_t>(slack, 1);
    return ticket + 1 > slack ? ticket + 1 - slack : 0;
  }

  // The deepest node's tenants, filtered to healthy members.
  struct Chooser {
    const CacheAware* self;
    std::span<const Worker* const> healthy;
    const ClusterView* cluster;
    TenantId operator()(const RadixCandidates& cands) const noexcept {
      TenantId best = kNoTenant;
      std::int64_t best_load = 0;
      std::uint64_t best_recency = 0;
      for (RadixCandidate x : cands) {
        const Worker* w = find(healthy, x.tenant);
        if (w == nullptr) continue;
        const std::int64_t load =
            self->opt_.tenant_rule == TenantRule::kLeastLoaded ? cluster->in_flight(*w) : 0;
        if (best == kNoTenant || load < best_load ||
            (load == best_load && x.recency > best_recency)) {
          best = x.tenant;
          best_load = load;
          best_recency = x.recency;
        }
      }
      return best;
    }
  };

  // The healthy member with id `t` (healthy is in ascending id order).
  static const Worker* find(std::span<const Worker* const> healthy, TenantId t) noexcept {
    auto it = std::lower_bound(healthy.begin(), healthy.end(), t,
                               [](const Worker* w, TenantId v) { return w->id.value < v; });
    return (it != healthy.end() && (*it)->id.value == t) ? *it : nullptr;
  }

  bool imbalanced(std::span<const Worker* const> healthy, const ClusterView& c) const noexcept {
    if (c.load() == nullptr) return false;
    const LoadTracker::Stats st = c.load()->stats(healthy);
    const auto spread = static_cast<std::uint64_t>(st.max - st.min);
    return spread > opt_.balance_abs_threshold &&
           static_cast<float>(st.max) >
               static_cast<float>(st.min) * static_cast<float>(opt_.balance_rel_threshold);
  }

  const Worker* least_loaded(std::span<const Worker* const> healthy,
                             const ClusterView& c) noexcept {
    return detail::pick_min(
        healthy, [&c](const Worker& w) { return c.in_flight(w); }, rng_);
  }

  // Inserts the text under `w` and builds the decision; `m` is the match
  // that named `w`, if any, for the feedback claim.
  // Inserts the text under w (no match: the imbalanced branch).
  static Decision place(ApproxRadixTree* tree, const RequestView& r, const Worker* w,
                        Branch b) noexcept {
    if (tree != nullptr) tree->insert(r.text, w->id.value);
    return Decision::pick(w, b);
  }

  const Options opt_;
  const double cpt_;
  detail::SharedRng rng_;
  detail::ModelTrees trees_;
  detail::SyncHub hub_;
};

static_assert(Policy<CacheAware>);

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_POLICIES_CACHE_AWARE_HPP_
