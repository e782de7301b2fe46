// -----------------------------------------------------------------------------
// File: http_router/cache_feedback.hpp
// -----------------------------------------------------------------------------
//
// Feeding a worker's cache report back into the policy: cache_aware's tree
// (report_cached drops claims the worker no longer holds), or least_prefill's
// tree and its queued-work estimate (through the request's LoadGuard). The
// worker counts tokens and the tree characters, so the report is converted
// at the request's own characters per token. Other policies keep no cache
// state and ignore it.
//
// Thread safety: thread-safe (the policies are).

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_CACHE_FEEDBACK_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_CACHE_FEEDBACK_HPP_

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "http_router/worker_report.hpp"
#include "kvroute/kvroute.hpp"

namespace kvexample {

// Tokens to dispatch with: least_prefill's predicted uncached work (its
// queue estimate), 0 for the other policies.
inline std::int64_t predicted_tokens(kvroute::AnyPolicy& policy, std::string_view text,
                                     std::string_view model, const kvroute::Selection& s) {
  auto* lp = policy.get<kvroute::LeastPrefill>();
  if (lp == nullptr) return 0;
  return lp->predicted_tokens({.text = text, .model = model}, s.decision);
}

inline void feed_back(kvroute::AnyPolicy& policy, std::string_view text, std::string_view model,
                      const kvroute::Selection& s, const CacheReport& r,
                      kvroute::LoadGuard* guard) {
  if (r.prompt <= 0 || !s) return;
  const double chars_per_token =
      static_cast<double>(kvroute::detail::utf8_count(text)) / static_cast<double>(r.prompt);
  auto cached_chars = static_cast<std::uint64_t>(static_cast<double>(r.cached) * chars_per_token);
  const kvroute::RequestView view{.text = text, .model = model};
  if (auto* ca = policy.get<kvroute::CacheAware>()) {
    ca->report_cached(view, s.decision, cached_chars);  // applies its own slack
  } else if (auto* lp = policy.get<kvroute::LeastPrefill>()) {
    // Token rounding is not an eviction: within 64 characters or 5% of the
    // claim, take the claim as confirmed.
    const std::uint64_t claimed = s.decision.claimed;
    const std::uint64_t slack = std::max<std::uint64_t>(64, claimed / 20);
    if (cached_chars < claimed && claimed - cached_chars <= slack) cached_chars = claimed;
    lp->report_cached(view, s.decision, cached_chars, r.prompt, guard);
  }
}

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_CACHE_FEEDBACK_HPP_
