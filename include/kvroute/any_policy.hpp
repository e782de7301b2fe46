// -----------------------------------------------------------------------------
// File: kvroute/any_policy.hpp
// -----------------------------------------------------------------------------
//
// `AnyPolicy`, a policy chosen at runtime, and `make_policy`, which builds one
// from a `PolicyConfig` (policy_config.hpp) - typically parsed from the
// gateway's flags. AnyPolicy models the Policy concept itself, so
// `Router<AnyPolicy>` and `select_worker(any, ...)` work as with a concrete
// policy; the cost is one virtual call per selection.
//
// Thread safety: as thread-safe as the policy it holds (every shipped policy
// is thread-safe). Moving an AnyPolicy is not safe while other threads use it.
//
// Example:
//
//   absl::StatusOr<kvroute::PolicyConfig> cfg = kvroute::parse_policy_flags(argc, argv);
//   if (!cfg.ok()) return fail(cfg.status());           // names the bad flag
//   absl::StatusOr<kvroute::AnyPolicy> policy = kvroute::make_policy(*cfg);
//   if (!policy.ok()) return fail(policy.status());
//   kvroute::Router<kvroute::AnyPolicy> router(*std::move(policy));
//   // policy->name() == "round_robin" for --policy round_robin

#ifndef KVROUTE_ANY_POLICY_HPP_
#define KVROUTE_ANY_POLICY_HPP_

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kvroute/clock.hpp"
#include "kvroute/config.hpp"
#include "kvroute/decision.hpp"
#include "kvroute/detail/ascii.hpp"
#include "kvroute/policies/bucket.hpp"
#include "kvroute/policies/cache_aware.hpp"
#include "kvroute/policies/consistent_hashing.hpp"
#include "kvroute/policies/least_prefill.hpp"
#include "kvroute/policies/manual.hpp"
#include "kvroute/policies/power_of_two.hpp"
#include "kvroute/policies/prefix_hash.hpp"
#include "kvroute/policies/random.hpp"
#include "kvroute/policies/round_robin.hpp"
#include "kvroute/policy.hpp"
#include "kvroute/policy_config.hpp"
#include "kvroute/sync/change.hpp"
#include "kvroute/sync/snapshot.hpp"

KVROUTE_NAMESPACE_BEGIN

class AnyPolicy {
 public:
  // Constructs a `P` in place from `args`.
  template <Policy P, class... Args>
  static AnyPolicy make(Args&&... args) {
    AnyPolicy a;
    a.impl_ = std::make_unique<Model<P>>(std::forward<Args>(args)...);
    return a;
  }

  AnyPolicy(AnyPolicy&&) noexcept = default;
  AnyPolicy& operator=(AnyPolicy&&) noexcept = default;

  std::string_view name() const noexcept { return impl_->name(); }
  Decision choose(const RequestView& r, const ClusterView& c) noexcept {
    return impl_->choose(r, c);
  }
  void on_worker_added(const Worker& w) { impl_->on_worker_added(w); }
  void on_worker_removed(WorkerId id) { impl_->on_worker_removed(id); }
  void on_workers_changed(const WorkerSnapshot& s) { impl_->on_workers_changed(s); }
  void maintain() { impl_->maintain(); }

  // The tree-based policies' feedback (CacheAware::report_cached,
  // LeastPrefill::report_cached: the server found `cached_tokens` of the
  // prompt cached); nothing for the others. Never throws.
  EvictResult report_cached(const RequestView& request, const Decision& decision,
                            std::uint64_t cached_tokens, std::int64_t prompt_tokens = -1,
                            LoadGuard* guard = nullptr) noexcept {
    return impl_->report_cached(request, decision, cached_tokens, prompt_tokens, guard);
  }
  // The tokens to dispatch `decision` with (DispatchInfo::tokens):
  // LeastPrefill's predicted uncached tokens; 0 (no token accounting) for
  // the others. Never throws.
  std::int64_t predicted_tokens(const RequestView& request, const Decision& decision,
                                std::int64_t prompt_tokens = -1) const noexcept {
    return impl_->predicted_tokens(request, decision, prompt_tokens);
  }

  // Replicas (sync/change.hpp), for the policies that share state
  // (CacheAware, LeastPrefill): the others emit nothing, and apply_change
  // answers kNotShared. Never throw.
  bool shares_state() const noexcept { return impl_->shares_state(); }
  void set_state_sink(sync::StateSink* sink) noexcept { impl_->set_state_sink(sink); }
  sync::Applied apply_change(const sync::Change& change, const WorkerSnapshot& snapshot) noexcept {
    return impl_->apply_change(change, snapshot);
  }
  void note_sent(std::span<const sync::Change> changes) noexcept { impl_->note_sent(changes); }

  // Snapshots (sync/snapshot.hpp), for the policies that keep state
  // (CacheAware, LeastPrefill, Manual): the others have no models and
  // answer Unimplemented. Never throw.
  std::vector<std::string> models() const noexcept { return impl_->models(); }
  absl::StatusOr<std::string> save_state(std::string_view model,
                                         const WorkerSnapshot& workers) const noexcept {
    return impl_->save_state(model, workers);
  }
  absl::StatusOr<sync::RestoreResult> restore_state(std::string_view bytes,
                                                    const WorkerSnapshot& workers) noexcept {
    return impl_->restore_state(bytes, workers);
  }

  // The held policy if it is a `P`, else null (for policy-specific calls
  // such as RoundRobin::reset).
  template <class P>
  P* get() noexcept {
    auto* m = dynamic_cast<Model<P>*>(impl_.get());
    return m ? &m->policy : nullptr;
  }

 private:
  AnyPolicy() = default;

  struct Base {
    virtual ~Base() = default;
    virtual std::string_view name() const noexcept = 0;
    virtual Decision choose(const RequestView&, const ClusterView&) noexcept = 0;
    virtual void on_worker_added(const Worker&) = 0;
    virtual void on_worker_removed(WorkerId) = 0;
    virtual void on_workers_changed(const WorkerSnapshot&) = 0;
    virtual void maintain() = 0;
    virtual EvictResult report_cached(const RequestView&, const Decision&, std::uint64_t,
                                      std::int64_t, LoadGuard*) noexcept = 0;
    virtual std::int64_t predicted_tokens(const RequestView&, const Decision&,
                                          std::int64_t) const noexcept = 0;
    virtual bool shares_state() const noexcept = 0;
    virtual void set_state_sink(sync::StateSink*) noexcept = 0;
    virtual sync::Applied apply_change(const sync::Change&, const WorkerSnapshot&) noexcept = 0;
    virtual void note_sent(std::span<const sync::Change>) noexcept = 0;
    virtual std::vector<std::string> models() const noexcept = 0;
    virtual absl::StatusOr<std::string> save_state(std::string_view,
                                                   const WorkerSnapshot&) const noexcept = 0;
    virtual absl::StatusOr<sync::RestoreResult> restore_state(std::string_view,
                                                              const WorkerSnapshot&) noexcept = 0;
  };

  template <class P>
  struct Model final : Base {
    template <class... Args>
    explicit Model(Args&&... args) : policy(std::forward<Args>(args)...) {}
    std::string_view name() const noexcept override { return policy.name(); }
    Decision choose(const RequestView& r, const ClusterView& c) noexcept override {
      return policy.choose(r, c);
    }
    void on_worker_added(const Worker& w) override { notify_worker_added(policy, w); }
    void on_worker_removed(WorkerId id) override { notify_worker_removed(policy, id); }
    void on_workers_changed(const WorkerSnapshot& s) override { notify_workers_changed(policy, s); }
    void maintain() override { run_maintenance(policy); }
    EvictResult report_cached(const RequestView& r, const Decision& d, std::uint64_t cached,
                              std::int64_t prompt, LoadGuard* guard) noexcept override {
      if constexpr (requires { policy.report_cached(r, d, cached, prompt, guard); }) {
        return policy.report_cached(r, d, cached, prompt, guard);
      } else {
        return {};
      }
    }
    std::int64_t predicted_tokens(const RequestView& r, const Decision& d,
                                  std::int64_t prompt) const noexcept override {
      if constexpr (requires { policy.predicted_tokens(r, d, prompt); }) {
        return policy.predicted_tokens(r, d, prompt);
      } else {
        return 0;
      }
    }
    static constexpr bool kShares = requires(P & p, sync::StateSink* s) { p.set_state_sink(s); };
    bool shares_state() const noexcept override { return kShares; }
    void set_state_sink(sync::StateSink* sink) noexcept override {
      if constexpr (kShares) policy.set_state_sink(sink);
    }
    sync::Applied apply_change(const sync::Change& c, const WorkerSnapshot& s) noexcept override {
      if constexpr (kShares) {
        return policy.apply_change(c, s);
      } else {
        return sync::Applied::kNotShared;
      }
    }
    void note_sent(std::span<const sync::Change> changes) noexcept override {
      if constexpr (requires { policy.note_sent(changes); }) policy.note_sent(changes);
    }
    static constexpr bool kSnapshots = requires(P & p, const WorkerSnapshot& w) {
      p.restore_state(std::string_view{}, w);
    };
    std::vector<std::string> models() const noexcept override {
      if constexpr (kSnapshots) {
        try {
          return policy.models();
        } catch (...) {
        }
      }
      return {};
    }
    absl::StatusOr<std::string> save_state(std::string_view model,
                                           const WorkerSnapshot& w) const noexcept override {
      if constexpr (kSnapshots) {
        return policy.save_state(model, w);
      } else {
        return no_snapshots();
      }
    }
    absl::StatusOr<sync::RestoreResult> restore_state(std::string_view bytes,
                                                      const WorkerSnapshot& w) noexcept override {
      if constexpr (kSnapshots) {
        return policy.restore_state(bytes, w);
      } else {
        return no_snapshots();
      }
    }
    absl::Status no_snapshots() const noexcept {
      return absl::UnimplementedError(
          absl::StrCat("policy ", detail::to_absl(policy.name()), " keeps no state to snapshot"));
    }
    P policy;
  };

  std::unique_ptr<Base> impl_;
};

static_assert(Policy<AnyPolicy>);

// Builds the configured policy. Returns the config's validation error.
// `clock` must outlive the policy.
inline absl::StatusOr<AnyPolicy> make_policy(const PolicyConfig& cfg,
                                             const Clock& clock = Clock::steady()) {
  if (absl::Status s = cfg.validate(); !s.ok()) return s;
  switch (cfg.policy) {
    case PolicyKind::kRoundRobin:
      return AnyPolicy::make<RoundRobin>();
    case PolicyKind::kRandom:
      return AnyPolicy::make<Random>(Random::Options{.seed = cfg.seed});
    case PolicyKind::kPowerOfTwo:
      return AnyPolicy::make<PowerOfTwo>(PowerOfTwo::Options{.seed = cfg.seed});
    case PolicyKind::kConsistentHashing:
      return AnyPolicy::make<ConsistentHashing>(ConsistentHashing::Options{
          .seed = cfg.seed, .bounded_load_factor = cfg.bounded_load_factor});
    case PolicyKind::kPrefixHash:
      return AnyPolicy::make<PrefixHash>(
          PrefixHash::Options{.prefix_token_count = cfg.prefix_token_count,
                              .load_factor = cfg.prefix_hash_load_factor,
                              .seed = cfg.seed});
    case PolicyKind::kManual:
      return AnyPolicy::make<Manual>(Manual::Options{.mode = cfg.assignment_mode,
                                                     .max_idle = cfg.max_idle,
                                                     .eviction_interval = cfg.eviction_interval,
                                                     .clock = &clock,
                                                     .seed = cfg.seed});
    case PolicyKind::kBucket:
      return AnyPolicy::make<Bucket>(
          Bucket::Options{.balance_abs_threshold = cfg.balance_abs_threshold,
                          .balance_rel_threshold = cfg.balance_rel_threshold,
                          .adjust_interval = cfg.bucket_adjust_interval,
                          .clock = &clock,
                          .seed = cfg.seed});
    case PolicyKind::kCacheAware:
      return AnyPolicy::make<CacheAware>(
          CacheAware::Options{.cache_threshold = cfg.cache_threshold,
                              .balance_abs_threshold = cfg.balance_abs_threshold,
                              .balance_rel_threshold = cfg.balance_rel_threshold,
                              .eviction_interval = cfg.eviction_interval,
                              .max_tree_size = cfg.max_tree_size,
                              .chars_per_token = cfg.chars_per_token,
                              .max_models = cfg.max_models,
                              .sync_text_share = cfg.sync_text_share,
                              .clock = &clock,
                              .seed = cfg.seed});
    case PolicyKind::kLeastPrefill:
      return AnyPolicy::make<LeastPrefill>(
          LeastPrefill::Options{.chars_per_token = cfg.chars_per_token,
                                .queue_weight = cfg.queue_weight.value_or(-1),
                                .eviction_interval = cfg.eviction_interval,
                                .max_tree_size = cfg.max_tree_size,
                                .kv_capacity_tokens = cfg.kv_capacity_tokens,
                                .max_models = cfg.max_models,
                                .sync_text_share = cfg.sync_text_share,
                                .clock = &clock,
                                .seed = cfg.seed});
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--policy: ", static_cast<int>(cfg.policy), " is not a policy"));
}

// The name before 0.2; removed in the next release.
// NOLINTNEXTLINE(readability-identifier-naming)
[[deprecated("use kvroute::make_policy")]] inline absl::StatusOr<AnyPolicy> MakePolicy(
    const PolicyConfig& cfg, const Clock& clock = Clock::steady()) {
  return make_policy(cfg, clock);
}

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_ANY_POLICY_HPP_
