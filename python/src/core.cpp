// The Python Router's C++ side; see core.hpp.
#include "core.hpp"

#include <chrono>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kvroute_py {

std::vector<ConfigField> config_fields(const kvroute::PolicyConfig& c) {
  using U = std::uint64_t;
  return {
      {"policy", std::string(kvroute::to_string(c.policy))},
      {"cache_threshold", c.cache_threshold},
      {"balance_abs_threshold", U{c.balance_abs_threshold}},
      {"balance_rel_threshold", c.balance_rel_threshold},
      {"eviction_interval", static_cast<U>(c.eviction_interval.count())},
      {"max_tree_size", U{c.max_tree_size}},
      {"max_models", U{c.max_models}},
      {"max_idle_secs", static_cast<U>(c.max_idle.count())},
      {"assignment_mode", std::string(kvroute::to_string(c.assignment_mode))},
      {"prefix_token_count", U{c.prefix_token_count}},
      {"prefix_hash_load_factor", c.prefix_hash_load_factor},
      {"bucket_adjust_interval_secs", static_cast<U>(c.bucket_adjust_interval.count())},
      {"bounded_load_factor", c.bounded_load_factor},
      {"queue_weight", c.queue_weight ? ConfigField::Value(*c.queue_weight)
                                      : ConfigField::Value(std::string("adaptive"))},
      {"kv_capacity_tokens", static_cast<U>(c.kv_capacity_tokens)},
      {"chars_per_token", c.chars_per_token},
      {"seed", U{c.seed}},
  };
}

absl::StatusOr<std::shared_ptr<RouterCore>> RouterCore::make(
    std::span<const std::string_view> flags, std::vector<std::string>* unparsed) {
  absl::StatusOr<kvroute::PolicyConfig> cfg = kvroute::parse_policy_flags(flags, unparsed);
  if (!cfg.ok()) return cfg.status();
  absl::StatusOr<kvroute::AnyPolicy> policy = kvroute::make_policy(*cfg);
  if (!policy.ok()) return policy.status();
  return std::make_shared<RouterCore>(*cfg, *std::move(policy));
}

RouterCore::RouterCore(kvroute::PolicyConfig cfg, kvroute::AnyPolicy policy)
    : config_(cfg), router_(std::move(policy)), metrics_(registry_, router_.policy().name()) {}

absl::Status RouterCore::add_workers(std::span<const kvroute::WorkerSpec> specs) {
  return router_.add_workers(specs).status();
}

absl::StatusOr<kvroute::WorkerId> RouterCore::find(std::string_view url) const {
  const auto snap = snapshot();
  if (const kvroute::Worker* w = snap->find_url(url)) return w->id;
  return absl::NotFoundError(
      absl::StrCat("worker url: '", kvroute::detail::to_absl(url), "' is not registered"));
}

absl::Status RouterCore::remove_worker(std::string_view url) {
  absl::StatusOr<kvroute::WorkerId> id = find(url);
  if (!id.ok()) return id.status();
  return router_.remove_worker(*id);
}

absl::Status RouterCore::set_healthy(std::string_view url, bool healthy) {
  absl::StatusOr<kvroute::WorkerId> id = find(url);
  if (!id.ok()) return id.status();
  return router_.set_healthy(*id, healthy);
}

kvroute::Selection RouterCore::select(const kvroute::RequestView& request,
                                      std::span<const std::string> exclude) noexcept {
  std::vector<kvroute::WorkerId> avoid;
  if (!exclude.empty()) {
    const auto snap = snapshot();
    try {
      for (const std::string& url : exclude) {
        if (const kvroute::Worker* w = snap->find_url(url)) avoid.push_back(w->id);
      }
    } catch (const std::bad_alloc&) {
      avoid.clear();
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  kvroute::Selection s = router_.select(request, avoid);
  metrics_.record(s.decision, std::chrono::steady_clock::now() - t0);
  return s;
}

std::int64_t RouterCore::predicted_tokens(const kvroute::RequestView& request,
                                          const kvroute::Selection& s,
                                          std::int64_t prompt_tokens) const noexcept {
  if (!s) return 0;
  return router_.policy().predicted_tokens(request, s.decision, prompt_tokens);
}

kvroute::LoadGuard RouterCore::dispatch(const kvroute::RequestView& request,
                                        const kvroute::Selection& s,
                                        std::int64_t prompt_tokens) noexcept {
  const kvroute::DispatchInfo info{
      .tokens = predicted_tokens(request, s, prompt_tokens),
      .routing_key = request.header(kvroute::kRoutingKeyHeader).value_or(std::string_view{})};
  return router_.dispatch(s, info);
}

std::uint64_t RouterCore::report_cached(const kvroute::RequestView& request,
                                        const kvroute::Selection& s, std::uint64_t cached_tokens,
                                        std::int64_t prompt_tokens,
                                        kvroute::LoadGuard* guard) noexcept {
  if (!s) return 0;
  return router_.policy()
      .report_cached(request, s.decision, cached_tokens, prompt_tokens, guard)
      .units;
}

std::string RouterCore::metrics() {
  const auto snap = snapshot();
  metrics_.observe_workers(*snap, router_.load());
  kvroute::AnyPolicy& p = router_.policy();
  auto* cache_aware = p.get<kvroute::CacheAware>();
  auto* least_prefill = p.get<kvroute::LeastPrefill>();
  if (cache_aware != nullptr || least_prefill != nullptr) {
    snap->for_each_group([&](const kvroute::ModelGroup& g) {
      const kvroute::ApproxRadixTree* t =
          cache_aware != nullptr ? cache_aware->tree(g.model()) : least_prefill->tree(g.model());
      if (t != nullptr) metrics_.observe_tree(g.model(), *t);
    });
  }
  return registry_.render();
}

}  // namespace kvroute_py
