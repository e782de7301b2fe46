// -----------------------------------------------------------------------------
// File: kvroute/policies/least_prefill.hpp
// -----------------------------------------------------------------------------
//
// `kvroute::LeastPrefill`: sends each request to the healthy worker where it
// would see its first token soonest, by the router's own estimate. With
// equal servers, time to first token on worker w is proportional to
//
//   queue_weight x queued(w) + uncached(w)
//
// where queued(w) is the uncached prefill work (tokens) the router has sent
// to w and w has not finished prefilling (LoadTracker::in_flight_tokens,
// raised by the host's dispatch with DispatchInfo.tokens = the decision's
// predicted uncached tokens, lowered by LoadGuard::release_tokens() when
// prefill ends), and uncached(w) is the part of this request's text the
// policy's tree does not credit to w, converted to tokens with
// Options::chars_per_token. The prefill rate cancels out, so the policy
// needs no server model. Ties break uniformly at random (seeded).
//
// One approximate radix tree per model (ApproxRadixTree over the text,
// tenants = workers), as cache_aware keeps: per request one walk down the
// text's path (visit_path) gives every healthy worker its matched length
// without stamping anyone, the worker with the least predicted work is
// chosen and the text is inserted under it, which stamps its path. Only
// placements stamp: a look at a worker is not a use of its server's cache, and
// stamping looks would keep claims alive that the server has since evicted
// and make feedback's drop_older_than (which cuts at a recency) cut claims
// the server still holds. (In kvroute_sim on the Claude Code sessions this
// is worth +0.036 hit rate and -0.25 s mean TTFT.) Branches:
// `cache_hit` (the chosen worker holds the longest match), `least_prefill`
// (a worker with a shorter match won on queued work), `cache_miss` (no
// worker matched anything).
//
// The decision carries what the host must dispatch with: `predicted_tokens`
// (uncached tokens predicted on the chosen worker), plus `claimed` and
// `ticket` for feedback.
//
// Feedback: when the host learns how many characters the server really had
// cached, report_cached() corrects both estimates: the tree (if the server
// held less than claimed, the worker's claims as old as the one used are
// dropped, as CacheAware::report_cached does) and, when given the request's
// LoadGuard, the queued work (the guard then carries the real uncached
// tokens).
//
// Eviction: each worker's share of a tree is kept within max_tree_size
// characters by reactive eviction on insert, and a sweep every
// eviction_interval (lazily on choose, or maintain()).
//
// Thread safety: thread-safe. Trees are created on a model's first request
// under a short exclusive lock; afterwards selections take a shared lock for
// the map lookup and the tree's per-node locks. choose() never throws, logs
// or blocks on I/O; it allocates only inside tree inserts of new text.
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
//   router.policy().report_cached(req, s.decision, 1200 * 4, prompt_tokens, &g);
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
#include "kvroute/detail/utf8.hpp"
#include "kvroute/load_tracker.hpp"
#include "kvroute/policy.hpp"
#include "kvroute/radix_tree.hpp"
#include "kvroute/request.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN

class LeastPrefill {
 public:
  struct Options {
    // Characters of text per token, to turn unmatched text into tokens
    // comparable with LoadTracker::in_flight_tokens. Must be > 0.
    double chars_per_token = 4.0;
    // Weight of the queued work against this request's uncached work. The
    // queued count holds a running prefill in full until it ends, while on
    // average about half of it is done, and a request moved off the worker
    // that holds its prefix also costs its session's later turns; weights
    // below 1 correct for both. 0.4 did best in kvroute_sim on the Mooncake
    // conversation and Claude Code traces (examples/sim/README.md); 1 is the
    // plain "least predicted TTFT" rule. Negative values mean 1.
    double queue_weight = 0.4;
    // <= 0: no periodic sweep (maintain() still sweeps).
    std::chrono::nanoseconds eviction_interval = std::chrono::seconds(120);
    // Characters per worker per tree. Ideally about the servers' cache size
    // in characters (tokens x chars_per_token); feedback corrects the rest.
    std::uint64_t max_tree_size = std::uint64_t{1} << 26;
    // Most model trees kept at once; creating one more drops the least
    // recently used model's tree (that model starts afresh). 0: no limit.
    std::uint64_t max_models = 0;
    // Must outlive the policy.
    const Clock* clock = &Clock::steady();
    std::uint64_t seed = detail::kDefaultSeed;
  };

  LeastPrefill() noexcept : LeastPrefill(Options{}) {}
  explicit LeastPrefill(Options o) noexcept
      : opt_(o),
        cpt_(o.chars_per_token > 0 ? o.chars_per_token : 4.0),
        qw_(o.queue_weight >= 0 ? o.queue_weight : 1.0),
        rng_(o.seed),
        trees_({.max_tree_size = o.max_tree_size,
                .reactive_eviction = true,
                .eviction_interval = o.eviction_interval,
                .clock = o.clock,
                .max_models = o.max_models}) {}

  LeastPrefill(const LeastPrefill&) = delete;
  LeastPrefill& operator=(const LeastPrefill&) = delete;

  std::string_view name() const noexcept { return "least_prefill"; }

  Decision choose(const RequestView& r, const ClusterView& c) noexcept {
    const auto healthy = c.healthy();
    if (healthy.empty()) return c.no_worker();
    trees_.sweep_if_due();
    const detail::TreeRef ref = trees_.get_or_create(r.model);
    ApproxRadixTree* tree = ref.get();
    if (tree == nullptr) {  // out of memory: least queued work, no affinity
      return Decision::pick(detail::pick_min(
                                healthy, [&c](const Worker& w) { return queued(c, w); }, rng_),
                            Branch::kCacheMiss);
    }
    // Each healthy worker's matched length and the recency of its deepest
    // matched claim (the feedback ticket), from one walk down the text's
    // path that stamps nobody (visit_path: a worker's match ends at the
    // deepest path node it holds), so the tree's recency keeps following
    // real placements. Pools beyond kStackWorkers peek one by one.
    const std::size_t n = healthy.size();
    std::size_t lens[kStackWorkers];
    std::uint64_t tickets[kStackWorkers];
    std::size_t input = 0;  // the text's length in units, as the tree counts
    if (n > kStackWorkers) {
      input = text_units(r.text);
    } else {
      std::fill(lens, lens + n, std::size_t{0});
      std::fill(tickets, tickets + n, std::uint64_t{0});
      input = tree->visit_path(r.text,
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
    // The least predicted work wins, ties at random. score() is an array
    // read after the walk above (pools beyond kStackWorkers peek the winner
    // once more).
    std::size_t best_match = 0;
    const std::size_t win = detail::pick_min_index(
        n,
        [&](std::size_t i) noexcept {
          std::size_t len = 0;
          std::uint64_t ticket = 0;
          score(i, len, ticket);
          best_match = std::max(best_match, len);
          return qw_ * static_cast<double>(queued(c, *healthy[i])) +
                 static_cast<double>(input - std::min(len, input)) / cpt_;
        },
        [](std::size_t) noexcept { return true; }, rng_);
    const Worker* chosen = healthy[win];
    std::size_t chosen_match = 0;
    std::uint64_t chosen_ticket = 0;
    score(win, chosen_match, chosen_ticket);
    const Branch b = best_match == 0              ? Branch::kCacheMiss
                     : chosen_match == best_match ? Branch::kCacheHit
                                                  : Branch::kLeastPrefill;
    Decision d = Decision::pick(chosen, b);
    d.claimed = chosen_match;
    d.ticket = chosen_ticket;
    tree->insert(r.text, chosen->id.value);
    return d;
  }

  // The uncached tokens `d` predicts on its worker, for DispatchInfo.tokens:
  // `prompt_tokens` minus the claimed characters in tokens, at least 0.
  // `prompt_tokens` < 0 means "estimate from the text" (characters /
  // chars_per_token).
  std::int64_t predicted_tokens(const RequestView& r, const Decision& d,
                                std::int64_t prompt_tokens = -1) const noexcept {
    const double total = prompt_tokens >= 0 ? static_cast<double>(prompt_tokens)
                                            : static_cast<double>(text_units(r.text)) / cpt_;
    const double left = total - static_cast<double>(d.claimed) / cpt_;
    return left <= 0 ? 0 : static_cast<std::int64_t>(std::ceil(left));
  }

  // Feedback for a request this policy routed: the server had `cached`
  // characters of `request.text` cached. Corrects the tree (when it claimed
  // more than that, the worker's claims as old as the one used or older are
  // dropped) and, with `guard`, the queued work: the guard then carries the
  // real uncached tokens (`prompt_tokens` as in predicted_tokens). Returns
  // what was dropped from the tree. Never throws; a decision from another
  // policy is ignored.
  EvictResult report_cached(const RequestView& request, const Decision& decision,
                            std::uint64_t cached, std::int64_t prompt_tokens = -1,
                            LoadGuard* guard = nullptr) noexcept {
    if (!decision) return {};
    if (guard != nullptr && guard->active()) {
      Decision real = decision;
      real.claimed = cached;
      guard->set_tokens(predicted_tokens(request, real, prompt_tokens));
    }
    if (decision.claimed == 0 || cached >= decision.claimed) return {};
    const detail::TreeRef tree = trees_.find(request.model);
    if (!tree) return {};
    return tree->drop_older_than(decision.worker->id.value, decision.ticket + 1);
  }

  // A worker left: forget it in every tree (and again on every sweep: a
  // selection still running on an older snapshot may insert for it).
  void on_worker_removed(WorkerId id) noexcept { trees_.on_worker_removed(id); }

  // Sweeps now: every tree to max_tree_size, and removed workers again.
  void maintain() noexcept { trees_.maintain(); }

  // The model's tree, or null before its first request. With max_models the
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
  static constexpr std::size_t kStackWorkers = 256;

  // The index of tenant `t` in `healthy` (ascending ids), or healthy.size().
  static std::size_t index_of(std::span<const Worker* const> healthy, TenantId t) noexcept {
    auto it = std::lower_bound(healthy.begin(), healthy.end(), t,
                               [](const Worker* w, TenantId v) { return w->id.value < v; });
    return (it != healthy.end() && (*it)->id.value == t)
               ? static_cast<std::size_t>(it - healthy.begin())
               : healthy.size();
  }

  static std::int64_t queued(const ClusterView& c, const Worker& w) noexcept {
    return c.load ? std::max<std::int64_t>(c.load->in_flight_tokens(w.id), 0) : 0;
  }

  // Code points, the tree's unit for text (invalid UTF-8 read as the tree
  // reads it).
  static std::size_t text_units(std::string_view s) noexcept { return detail::utf8_count(s); }

  const Options opt_;
  const double cpt_;
  const double qw_;
  detail::SharedRng rng_;
  detail::ModelTrees trees_;
};

static_assert(Policy<LeastPrefill>);

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_POLICIES_LEAST_PREFILL_HPP_
