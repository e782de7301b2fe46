// -----------------------------------------------------------------------------
// File: kvroute/any_policy.hpp
// -----------------------------------------------------------------------------
//
// `AnyPolicy`, a policy chosen at runtime, and `MakePolicy`, which builds one
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
//   absl::StatusOr<kvroute::PolicyConfig> cfg = kvroute::ParsePolicyFlags(argc, argv);
//   if (!cfg.ok()) return fail(cfg.status());           // names the bad flag
//   absl::StatusOr<kvroute::AnyPolicy> policy = kvroute::MakePolicy(*cfg);
//   if (!policy.ok()) return fail(policy.status());
//   kvroute::Router<kvroute::AnyPolicy> router(*std::move(policy));
//   // policy->name() == "round_robin" for --policy round_robin

#ifndef KVROUTE_ANY_POLICY_HPP_
#define KVROUTE_ANY_POLICY_HPP_

#include <memory>
#include <string_view>
#include <utility>

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
  void maintain() { impl_->maintain(); }

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
    virtual void maintain() = 0;
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
    void maintain() override { run_maintenance(policy); }
    P policy;
  };

  std::unique_ptr<Base> impl_;
};

static_assert(Policy<AnyPolicy>);

// Builds the configured policy. Returns the config's validation error.
// `clock` must outlive the policy.
inline absl::StatusOr<AnyPolicy> MakePolicy(const PolicyConfig& cfg,
                                            const Clock& clock = Clock::steady()) {
  if (absl::Status s = cfg.Validate(); !s.ok()) return s;
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
                              .max_models = cfg.max_models,
                              .clock = &clock,
                              .seed = cfg.seed});
    case PolicyKind::kLeastPrefill:
      return AnyPolicy::make<LeastPrefill>(
          LeastPrefill::Options{.chars_per_token = cfg.chars_per_token,
                                .queue_weight = cfg.queue_weight,
                                .eviction_interval = cfg.eviction_interval,
                                .max_tree_size = cfg.max_tree_size,
                                .max_models = cfg.max_models,
                                .clock = &clock,
                                .seed = cfg.seed});
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--policy: ", static_cast<int>(cfg.policy), " is not a policy"));
}

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_ANY_POLICY_HPP_
