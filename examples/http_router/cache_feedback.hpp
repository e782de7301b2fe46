// -----------------------------------------------------------------------------
// File: http_router/cache_feedback.hpp
// -----------------------------------------------------------------------------
//
// Feeding a worker's cache report back into the policy: cache_aware's tree
// (report_cached drops claims the worker no longer holds), or least_prefill's
// tree and its queued-work estimate (through the request's LoadGuard). Other
// policies keep no cache state and ignore it.
//
// Thread safety: thread-safe (the policies are).

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_CACHE_FEEDBACK_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_CACHE_FEEDBACK_HPP_

#include <cstdint>
#include <string_view>

#include "http_router/worker_report.hpp"
#include "kvroute/kvroute.hpp"

namespace kvexample {

// Tokens to dispatch with: least_prefill's predicted uncached work (its
// queue estimate), 0 for the other policies.
inline std::int64_t predicted_tokens(kvroute::AnyPolicy& policy, std::string_view text,
                                     std::string_view model, const kvroute::Selection& s) {
  return policy.predicted_tokens({.text = text, .model = model}, s.decision);
}

// The policy converts the worker's tokens to its tree's characters at the
// request's own characters per token (the prompt's token count is given).
inline void feed_back(kvroute::AnyPolicy& policy, std::string_view text, std::string_view model,
                      const kvroute::Selection& s, const CacheReport& r,
                      kvroute::LoadGuard* guard) {
  if (r.prompt <= 0 || r.cached < 0 || !s) return;
  (void)policy.report_cached({.text = text, .model = model}, s.decision,
                             static_cast<std::uint64_t>(r.cached), r.prompt, guard);
}

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_CACHE_FEEDBACK_HPP_
