// -----------------------------------------------------------------------------
// File: kvroute/policies/least_prefill.hpp
// -----------------------------------------------------------------------------
//
// `kvroute::LeastPrefill`: sends each request to the healthy worker where it
// costs least, by the router's own estimate of prefill work in tokens:
//
//   cost(w) = queued(w) + uncached(w) x (1 + queued(w) / u + h x fill(w) + live(w))
//
// where queued(w) is the uncached prefill work (tokens) the router has sent
// to w and w has not finished prefilling (LoadTracker::in_flight_tokens,
// raised by the host's dispatch with DispatchInfo.tokens = the decision's
// predicted uncached tokens, lowered by LoadGuard::release_tokens() at the
// first token), and uncached(w) is the part of this request's text the
// policy's tree does not credit to w, converted to tokens with
// Options::chars_per_token. The prefill rate cancels out.
//
// The rule is derived from the server it assumes, SGLang's scheduler:
// first come first served, prefill before decode, and a prefix cache in an
// LRU pool that is full once the server has run a while.
//
//   - The request's own time to first token on w is proportional to
//     queued(w) + uncached(w).
//   - Its prefill also delays the requests that will queue behind it on w:
//     by Little's law as many as are queued there now, estimated as
//     queued(w) / u, with u the mean uncached tokens of recent placements.
//   - On a full cache its uncached tokens evict as many cached ones, which
//     later requests would have reused at the hit rate h the policy
//     observes (its claims against the prompts it routed): work they will
//     redo. fill(w) is the tree's share of w against the server's pool
//     (Options::kv_capacity_tokens, or max_tree_size), at most 1.
//   - What those evictions cost depends on w: a cache that turns over
//     faster than the traffic comes back evicts prefixes that the next
//     turns of its own sessions need. live(w), from 0 to 1, says how live
//     the prefixes at w's LRU tail are. The tree's claims for w stand for
//     w's cache: the recency at the pool's depth in w's LRU order is that
//     of w's next eviction. Its age, in the tree's stamps, is compared with
//     the ages at which this traffic reuses prefixes, which the policy
//     records at each placement (the age of the claim it reuses, weighted
//     by its length, halved every 1024 reuses; one record for all models,
//     as the running means are):
//     live(w) = (share of the reuse at that age or older) / 0.05, at most
//     1. A tail younger than the last 5% of the reuse is fully live; a tail
//     older than nearly every reuse is dead, and so is a cache that is not
//     full. Without this term a busy server with a small pool keeps taking
//     new work and evicting the sessions it holds.
//
// So the weight of queued work against this request's own work adapts per
// worker, 1 / (1 + queued(w) / u + h x fill(w) + live(w)): close to 1 on
// an idle worker with room, small behind a long queue or in a full cache
// that is reused. Decode load and KV pressure: requests in flight, decoding
// ones included, hold KV and make decode steps longer, so among equal costs
// the worker with the fewest requests in flight wins (then at random,
// seeded); a full cache weighs each uncached token more (above). A fixed
// Options::queue_weight (>= 0) replaces all of this with
// queue_weight x queued(w) + uncached(w), ties at random.
//
// One approximate radix tree per model (ApproxRadixTree over the text,
// tenants = workers), as cache_aware keeps: per request one walk down the
// text's path (visit_path) gives every healthy worker its matched length
// without stamping anyone, the worker with the least predicted work is
// chosen and the text is inserted under it, which stamps its path. Only
// placements stamp: a look at a worker is not a use of its server's cache, and
// stamping looks would keep claims alive that the server has since evicted
// and make feedback's drop_older_than (which cuts at a recency) cut claims
// the server still holds. Branches:
// `cache_hit` (the chosen worker holds the longest match), `least_prefill`
// (a worker with a shorter match won on queued work), `cache_miss` (no
// worker matched anything).
//
// The decision carries what the host must dispatch with: `predicted_tokens`
// (uncached tokens predicted on the chosen worker), plus `claimed` and
// `ticket` for feedback.
//
// Feedback: when the host learns how many tokens the server really had
// cached, report_cached() corrects both estimates: the tree (if the server
// held less than claimed, feedback.hpp, the worker's claims as old as the
// one used are dropped, as CacheAware::report_cached does) and, when given
// the request's LoadGuard, the queued work (the guard then carries the real
// uncached tokens). Once the policy receives other replicas' state
// (apply_change) as keys, feedback corrects the queued work only: the cut
// by recency stands for the server's LRU order only when the tree has seen
// every request its servers were sent, and a replica's, which learns the
// others' placements when its own requests reach them, has not, so the
// cut would also drop prefixes that other replicas keep warm on that
// server; least_prefill, which weighs every worker's claim, routes worse
// for it. With texts (sync_text_share) the tree learns each placement when
// it is made, the cut stands again, and it travels to the other replicas
// as a sync::Cut (docs/replicas.md, "Texts").
//
// Eviction: each worker's share of a tree is kept within max_tree_size
// characters by reactive eviction on insert, and a sweep every
// eviction_interval (lazily on choose, or maintain()).
//
// Thread safety: thread-safe. A model's tree is created when its first
// worker registers or on its first request, under a short exclusive lock;
// afterwards selections take a shared lock for the map lookup and the
// tree's per-node locks; the adaptive rule's running means are relaxed
// atomics (a racing update may be lost). choose() never throws, logs or
// blocks on I/O; it allocates only inside tree inserts of new text. For
// live(w) it walks up to 4096 claims of the LRU list of each worker whose
// cache is full, that lacks part of the text and whose cost without live(w)
// is not already above a worker's before it, under the list's mutex, which
// that worker's inserts wait for.
//
// Example:
//
//   kvroute::Router<kvroute::LeastPrefill> router;
//   router.add_worker({.url = "http://10.0.0.1:30000"}).IgnoreError();
//   kvroute::RequestView req{.text = chat_history};
//   kvroute::Selection s = router.select(req);
//   kvroute::LoadGuard g = router.dispatch(
//       s, {.tokens = router.policy().predicted_tokens(req, s.decision,
//                                                      prompt_tokens)});
//   // ... the server reports 1200 cached tokens:
//   router.policy().report_cached(req, s.decision, 1200, prompt_tokens, &g);
//   // ... first token arrives: g.release_tokens(); response ends: g.release().

#ifndef KVROUTE_POLICIES_LEAST_PREFILL_HPP_
#define KVROUTE_POLICIES_LEAST_PREFILL_HPP_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
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
#include "kvroute/detail/age_histogram.hpp"
#include "kvroute/detail/ascii.hpp"
#include "kvroute/detail/model_trees.hpp"
#include "kvroute/detail/pick.hpp"
#include "kvroute/detail/rng.hpp"
#include "kvroute/detail/sync/hub.hpp"
#include "kvroute/detail/utf8.hpp"
#include "kvroute/feedback.hpp"
#include "kvroute/load_tracker.hpp"
#include "kvroute/policy.hpp"
#include "kvroute/radix_tree.hpp"
#include "kvroute/request.hpp"
#include "kvroute/sync/snapshot.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN

class LeastPrefill {
 public:
  struct Options {
    // Characters of text per token, to turn unmatched text into tokens
    // comparable with LoadTracker::in_flight_tokens. Must be > 0.
    double chars_per_token = 4.0;
    // Weight of the queued work against this request's uncached work.
    // Negative (the default): adaptive, per worker, as the header derives.
    // >= 0: fixed (1 is the plain "least predicted TTFT" rule; 0.4 was the
    // fixed default before the adaptive rule).
    double queue_weight = -1;
    // <= 0: no periodic sweep (maintain() still sweeps).
    std::chrono::nanoseconds eviction_interval = std::chrono::seconds(120);
    // Characters per worker per tree. Ideally about the servers' cache size
    // in characters (tokens x chars_per_token); feedback corrects the rest.
    std::uint64_t max_tree_size = std::uint64_t{1} << 26;
    // When report_cached takes a report as "the server had less than
    // claimed" (feedback.hpp).
    FeedbackTolerance feedback_tolerance{};
    // The servers' KV pool in tokens (SGLang's max_total_num_tokens, which
    // /get_server_info reports): the adaptive rule's fill(w) is the tree's
    // share of w against it. 0: unknown, max_tree_size stands for it.
    std::int64_t kv_capacity_tokens = 0;
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

  LeastPrefill() noexcept : LeastPrefill(Options{}) {}
  explicit LeastPrefill(Options o) noexcept
      : opt_(o),
        cpt_(o.chars_per_token > 0 ? o.chars_per_token : 4.0),
        qw_(o.queue_weight),
        pool_chars_(o.kv_capacity_tokens > 0 ? static_cast<double>(o.kv_capacity_tokens) * cpt_
                                             : static_cast<double>(o.max_tree_size)),
        pool_units_(pool_chars_ >= 0x1p63 ? std::size_t{1} << 63
                                          : static_cast<std::size_t>(pool_chars_)),
        rng_(o.seed),
        trees_({.max_tree_size = o.max_tree_size,
                .reactive_eviction = true,
                .eviction_interval = o.eviction_interval,
                .clock = o.clock,
                .max_models = o.max_models}),
        hub_(o.max_remote_keys, o.sync_text_share, o.max_remote_text_bytes) {}

  LeastPrefill(const LeastPrefill&) = delete;
  LeastPrefill& operator=(const LeastPrefill&) = delete;

  std::string_view name() const noexcept { return "least_prefill"; }

  Decision choose(const RequestView& r, const ClusterView& c) noexcept {
    const auto healthy = c.eligible();
    if (healthy.empty()) return c.no_worker();
    trees_.sweep_if_due();
    const detail::TreeRef ref = trees_.get_or_create(r.model);
    ApproxRadixTree* tree = ref.get();
    sync::TextChunks chunks(r.text);  // computes nothing until asked
    const bool syncing = tree != nullptr && hub_.active();
    if (syncing) hub_.fold_remote(r.model, chunks, *tree);
    if (tree == nullptr) {  // out of memory: least queued work, no affinity
      return Decision::pick(detail::pick_min(
                                healthy, [&c](const Worker& w) { return queued(c, w); }, rng_),
                            Branch::kCacheMiss);
    }
    // Pools beyond kStackWorkers peek one by one (score, below).
    const std::size_t n = healthy.size();
    std::size_t lens[kStackWorkers];
    std::uint64_t tickets[kStackWorkers];
    // The text's length in units, as the tree counts.
    const std::size_t input =
        n > kStackWorkers ? text_units(r.text) : walk(*tree, r.text, healthy, lens, tickets);
    auto score = [&](std::size_t i, std::size_t& len, std::uint64_t& ticket) noexcept {
      if (n <= kStackWorkers) {
        len = lens[i];
        ticket = tickets[i];
        return;
      }
      const TenantMatch m = tree->peek_for_tenant(r.text, healthy[i]->id.value);
      len = m.found ? m.matched : 0;
      ticket = m.previous_recency;
    };
    // The least cost wins (fewest requests in flight among equal costs,
    // then at random). score() is an array read after the walk above (pools
    // beyond kStackWorkers peek the winner once more).
    // Each key is compared with the least before it (key(), below).
    const Adaptive a = adaptive();
    std::size_t best_match = 0;
    bool seen = false;
    Key least{};
    const std::size_t win = detail::pick_min_index(
        n,
        [&](std::size_t i) noexcept {
          std::size_t len = 0;
          std::uint64_t ticket = 0;
          score(i, len, ticket);
          best_match = std::max(best_match, len);
          const double uncached = static_cast<double>(input - std::min(len, input)) / cpt_;
          const Key k = key(c, *healthy[i], *tree, a, uncached, seen ? &least : nullptr);
          if (!seen || k < least) least = k;
          seen = true;
          return k;
        },
        [](std::size_t) noexcept { return true; }, rng_);
    const Worker* chosen = healthy[win];
    std::size_t chosen_match = 0;
    std::uint64_t chosen_ticket = 0;
    score(win, chosen_match, chosen_ticket);
    const Branch b = best_match == 0              ? Branch::kCacheMiss
                     : chosen_match == best_match ? Branch::kCacheHit
                                                  : Branch::kLeastPrefill;
    // The age of the prefix this placement reuses, for live() (before the
    // insert below stamps it).
    if (chosen_match > 0 && qw_ < 0) {
      const std::uint64_t now = tree->now();
      reuse_ages_.add(now - std::min(now, chosen_ticket), static_cast<double>(chosen_match));
    }
    Decision d = Decision::pick(chosen, b);
    d.claimed = chosen_match;
    d.ticket = chosen_ticket;
    tree->insert(r.text, chosen->id.value);
    // best_match counts code points, at most the bytes they span: the
    // chunks emitted start at or before the first one the tree lacked.
    if (syncing) hub_.emit_placed(r.model, chosen->url, chunks, best_match, chosen_match >= input);
    observe(static_cast<double>(input) / cpt_,
            static_cast<double>(input - std::min(chosen_match, input)) / cpt_);
    return d;
  }

  // The uncached tokens `d` predicts on its worker, for DispatchInfo.tokens:
  // `prompt_tokens` minus the claimed characters in tokens, at least 0 and
  // at most INT64_MAX (a tiny chars_per_token makes any text a vast number
  // of tokens). `prompt_tokens` < 0 means "estimate from the text": the
  // characters the claim leaves / chars_per_token.
  std::int64_t predicted_tokens(const RequestView& r, const Decision& d,
                                std::int64_t prompt_tokens = -1) const noexcept {
    if (prompt_tokens >= 0) {
      return whole_tokens(static_cast<double>(prompt_tokens) -
                          static_cast<double>(d.claimed) / cpt_);
    }
    // The difference first: both quotients can overflow to infinity.
    const std::uint64_t units = text_units(r.text);
    return whole_tokens(static_cast<double>(units - std::min<std::uint64_t>(units, d.claimed)) /
                        cpt_);
  }

  // Feedback for a request this policy routed: the server had
  // `cached_tokens` tokens of its prompt cached. Corrects the tree (when it
  // claimed more than that, feedback.hpp, the worker's claims as old as the
  // one used or older are dropped; never once other replicas' state
  // arrives, as the header says) and, with `guard`, the queued work: the
  // guard then carries the real uncached tokens (`prompt_tokens` as in
  // predicted_tokens). Returns what was dropped from the tree. Never throws;
  // a decision from another policy is ignored.
  EvictResult report_cached(const RequestView& request, const Decision& decision,
                            std::uint64_t cached_tokens, std::int64_t prompt_tokens = -1,
                            LoadGuard* guard = nullptr) noexcept {
    if (!decision) return {};
    if (guard != nullptr && guard->active()) {
      guard->set_tokens(
          whole_tokens(prompt_total(request, prompt_tokens) - static_cast<double>(cached_tokens)));
    }
    // A replica among others cuts only an eager tree: the header says why.
    if (hub_.receiving() && !hub_.eager()) return {};
    const double cpt = claim_chars_per_token(request.text, prompt_tokens, cpt_);
    if (decision.claimed == 0 ||
        !claim_evicted(decision.claimed, cached_tokens, cpt, opt_.feedback_tolerance)) {
      return {};
    }
    const detail::TreeRef tree = trees_.find(request.model);
    if (!tree) return {};
    EvictResult e = tree->drop_older_than(decision.worker->id.value, decision.ticket + 1);
    // The others cut alike when their trees take texts (the Cut covers what
    // a Forget would say there); else they forget the request's chunks.
    const std::uint64_t now = tree->now();
    if (e.claims > 0 && !hub_.emit_cut(request.model, decision.worker->url,
                                       now - std::min(now, decision.ticket + 1))) {
      hub_.emit_forgot(request.model, decision.worker->url, request.text,
                       static_cast<std::size_t>(static_cast<double>(cached_tokens) * cpt));
    }
    return e;
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

  // Replicas, as CacheAware: emits placements, feedback corrections and
  // worker removals to `sink`; applies changes from other replicas.
  void set_state_sink(sync::StateSink* sink) noexcept { hub_.set_sink(sink); }
  sync::Applied apply_change(const sync::Change& change, const WorkerSnapshot& snapshot) noexcept {
    return hub_.apply(change, snapshot, trees_);
  }
  void note_sent(std::span<const sync::Change> changes) noexcept { hub_.note_sent(changes); }
  void fold_remote(const RequestView& request) noexcept {
    const detail::TreeRef tree = trees_.get_or_create(request.model);
    sync::TextChunks chunks(request.text);
    if (tree) hub_.fold_remote(request.model, chunks, *tree.get());
  }
  std::size_t remote_keys() const noexcept { return hub_.remote_keys(); }
  // Placements with text applied whole, and those applied as keys because
  // the prefix they extend was not kept here.
  std::uint64_t texts_applied() const noexcept { return hub_.texts_applied(); }
  std::uint64_t texts_unanchored() const noexcept { return hub_.texts_unanchored(); }

  // Snapshots (sync/snapshot.hpp): one model's tree, workers named by URL
  // through `workers`; restore merges a snapshot into the model's tree.
  absl::StatusOr<std::string> save_state(std::string_view model,
                                         const WorkerSnapshot& workers) const noexcept {
    return detail::save_model_tree(sync::SnapshotKind::kLeastPrefill, trees_, model, workers);
  }
  absl::StatusOr<sync::RestoreResult> restore_state(std::string_view bytes,
                                                    const WorkerSnapshot& workers) noexcept {
    return detail::restore_model_tree(sync::SnapshotKind::kLeastPrefill, trees_, bytes, workers);
  }

  // Sweeps now: every tree to max_tree_size, and removed workers again.
  void maintain() noexcept { trees_.maintain(); }

  // The model's tree, or null before a worker of the model registers (or
  // its first request). With max_models the
  // tree may be dropped while the pointer is held; a host that reads trees
  // concurrently with routing uses shared_tree().
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
  // Each healthy worker's matched length and the recency of its deepest
  // matched claim (the feedback ticket) into lens and tickets (healthy's
  // size, at most kStackWorkers), from one walk down the text's path that
  // stamps nobody (visit_path: a worker's match ends at the deepest path
  // node it holds), so the tree's recency keeps following real placements.
  // Returns the text's length in units.
  template <class Healthy>
  static std::size_t walk(ApproxRadixTree& tree, std::string_view text, const Healthy& healthy,
                          std::size_t* lens, std::uint64_t* tickets) noexcept {
    const std::size_t n = healthy.size();
    std::fill(lens, lens + n, std::size_t{0});
    std::fill(tickets, tickets + n, std::uint64_t{0});
    return tree
        .visit_path(text,
                    [&](const RadixCandidates& holders, std::size_t matched) noexcept {
                      for (RadixCandidate x : holders) {
                        const std::size_t i = index_of(healthy, x.tenant);
                        if (i < n) {
                          lens[i] = matched;
                          tickets[i] = x.recency;
                        }
                      }
                    })
        .input;
  }
  static constexpr std::size_t kStackWorkers = 256;

  // The index of tenant `t` in `healthy` (ascending ids), or healthy.size().
  static std::size_t index_of(std::span<const Worker* const> healthy, TenantId t) noexcept {
    auto it = std::lower_bound(healthy.begin(), healthy.end(), t,
                               [](const Worker* w, TenantId v) { return w->id.value < v; });
    return (it != healthy.end() && (*it)->id.value == t)
               ? static_cast<std::size_t>(it - healthy.begin())
               : healthy.size();
  }

  // Tokens left to prefill, rounded up: 0 for none (or NaN), saturated at
  // INT64_MAX (a tiny chars_per_token can make a huge estimate).
  static std::int64_t whole_tokens(double left) noexcept {
    if (!(left > 0)) return 0;
    // 2^63 is exact as a double; every double below it converts.
    if (left >= 0x1p63) return std::numeric_limits<std::int64_t>::max();
    return static_cast<std::int64_t>(std::ceil(left));
  }

  // The prompt's tokens: `prompt_tokens`, or (< 0) its text's characters
  // at chars_per_token (may be infinite).
  double prompt_total(const RequestView& r, std::int64_t prompt_tokens) const noexcept {
    return prompt_tokens >= 0 ? static_cast<double>(prompt_tokens)
                              : static_cast<double>(text_units(r.text)) / cpt_;
  }

  static std::int64_t queued(const ClusterView& c, const Worker& w) noexcept {
    return c.load() ? std::max<std::int64_t>(c.load()->in_flight_tokens(w.id), 0) : 0;
  }

  // What the adaptive rule reads once per selection.
  struct Adaptive {
    double mean_uncached = 1;  // u, at least one token
    double hit = 0;            // h
  };
  Adaptive adaptive() const noexcept {
    const double prompt = prompt_.load(std::memory_order_relaxed);
    return {std::max(1.0, uncached_.load(std::memory_order_relaxed)),
            prompt > 0 ? claimed_.load(std::memory_order_relaxed) / prompt : 0.0};
  }

  // Worker w's selection key, its cost, then its requests in flight
  // (adaptive rule only; a fixed weight ties at random), or a lower bound
  // of it that is above `*least` (the least key before w, as
  // pick_min_index compares them; null for the first). live(w) walks w's
  // LRU list and can only raise w's cost: a worker whose cost without it
  // is already above the least neither wins nor ties with or without the
  // walk, so the pick, its ties and its draws are those of every key
  // computed in full. live() multiplies uncached tokens: a worker that
  // holds the whole text needs no walk.
  using Key = std::pair<double, std::int64_t>;
  Key key(const ClusterView& c, const Worker& w, const ApproxRadixTree& tree, const Adaptive& a,
          double uncached, const Key* least) const noexcept {
    const auto q = static_cast<double>(queued(c, w));
    if (qw_ >= 0) return {qw_ * q + uncached, 0};
    const double fill =
        std::min(1.0, static_cast<double>(tree.tenant_size(w.id.value)) / pool_chars_);
    const std::int64_t in_flight = c.load() ? c.load()->in_flight(w.id) : 0;
    const double weight = 1 + q / a.mean_uncached + a.hit * fill;
    const Key bound{q + uncached * weight, in_flight};
    if (uncached <= 0 || (least != nullptr && *least < bound)) return bound;
    return {q + uncached * (weight + live(tree, w)), in_flight};
  }

  // How live w's LRU tail is, in [0, 1]: 0 while w's claims fit its
  // server's pool (nothing is evicted yet) or the pool's oldest claims are
  // older than nearly every reuse; 1 once at least kLiveShare of the reuse
  // weight happens at their age or older.
  double live(const ApproxRadixTree& tree, const Worker& w) const noexcept {
    const std::optional<std::uint64_t> at =
        tree.tenant_recency_at(w.id.value, pool_units_, kLiveWalk);
    if (!at) return 0;
    const std::uint64_t now = tree.now();
    return std::min(1.0, reuse_ages_.share_from(now - std::min(now, *at)) / kLiveShare);
  }
  static constexpr double kLiveShare = 0.05;
  // Claims walked at most per worker and selection (tree.tenant_recency_at).
  static constexpr std::size_t kLiveWalk = 4096;

  // Running means of the chosen placements, for the adaptive rule: the
  // uncached tokens over the last ~64, the claimed share of the prompts over
  // the last ~256. Racing selections may lose an update; means do not mind.
  void observe(double prompt, double uncached) noexcept {
    auto ewma = [](std::atomic<double>& m, double x, double k) noexcept {
      const double old = m.load(std::memory_order_relaxed);
      m.store(old + (x - old) / k, std::memory_order_relaxed);
    };
    if (uncached_.load(std::memory_order_relaxed) == 0) {
      uncached_.store(uncached, std::memory_order_relaxed);
    } else {
      ewma(uncached_, uncached, 64);
    }
    ewma(claimed_, prompt - uncached, 256);
    ewma(prompt_, prompt, 256);
  }

  // Code points, the tree's unit for text (invalid UTF-8 read as the tree
  // reads it).
  static std::size_t text_units(std::string_view s) noexcept { return detail::utf8_count(s); }

  const Options opt_;
  const double cpt_;
  const double qw_;               // < 0: adaptive
  const double pool_chars_;       // a server's pool, characters
  const std::size_t pool_units_;  // the same, as the tree counts (saturated)
  detail::SharedRng rng_;
  detail::ModelTrees trees_;
  detail::SyncHub hub_;
  detail::AgeHistogram reuse_ages_;
  std::atomic<double> uncached_{0};
  std::atomic<double> claimed_{0};
  std::atomic<double> prompt_{0};
};

static_assert(Policy<LeastPrefill>);

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_POLICIES_LEAST_PREFILL_HPP_
