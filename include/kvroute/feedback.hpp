// -----------------------------------------------------------------------------
// File: kvroute/feedback.hpp
// -----------------------------------------------------------------------------
//
// What a server's cached-token count says about a tree's guess. The
// tree-based policies (CacheAware, LeastPrefill) record where text was sent
// and credit a worker with what it was sent before (`Decision::claimed`,
// in the tree's unit: characters of text); servers evict on their own and
// report, per request, how many prompt tokens they found cached (SGLang's
// `meta_info.cached_tokens`, OpenAI's
// `usage.prompt_tokens_details.cached_tokens`). Both policies take that
// report the same way, in tokens: `report_cached(request, decision,
// cached_tokens, prompt_tokens, ...)`. The claim is converted to tokens at
// the request's own characters per token when the host passes the prompt's
// token count (servers report it beside the cached count) and the request's
// text, else at the policy's `chars_per_token`.
//
// One tolerance decides whether the server "had less than claimed": it did
// when claimed - cached exceeds max(tolerance.tokens, tolerance.ratio x
// claimed), all in tokens. Servers cache in pages and count tokens, the
// tree counts characters, and characters per token varies from text to
// text, so an exact comparison would call rounding an eviction; a real
// eviction of an earlier turn is far larger than the tolerance.
//
// Thread safety: values and pure functions.
//
// Example:
//
//   kvroute::FeedbackTolerance tol;                  // 16 tokens or 5%
//   bool stale = kvroute::claim_evicted(/*claimed_chars=*/4000,
//                                       /*cached_tokens=*/200, 4.0, tol);
//   // stale == true: 1000 tokens claimed, 200 found

#ifndef KVROUTE_FEEDBACK_HPP_
#define KVROUTE_FEEDBACK_HPP_

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "kvroute/config.hpp"
#include "kvroute/detail/utf8.hpp"

KVROUTE_NAMESPACE_BEGIN

struct FeedbackTolerance {
  // A shortfall of up to this many tokens is rounding, not an eviction.
  std::uint64_t tokens = 16;
  // ... nor is one of up to this fraction of the claim.
  double ratio = 0.05;
};

// Characters per token for converting a claim on `text`: the request's own
// (its characters over `prompt_tokens`) when both are known, else
// `fallback`. Requires fallback > 0.
inline double claim_chars_per_token(std::string_view text, std::int64_t prompt_tokens,
                                    double fallback) noexcept {
  if (prompt_tokens <= 0 || text.empty()) return fallback;
  return static_cast<double>(detail::utf8_count(text)) / static_cast<double>(prompt_tokens);
}

// Whether a server that found `cached_tokens` of a request cached no longer
// holds what the tree claimed for it (`claimed_chars` characters, at
// `chars_per_token`, which must be > 0). Never throws.
inline bool claim_evicted(std::uint64_t claimed_chars, std::uint64_t cached_tokens,
                          double chars_per_token, const FeedbackTolerance& tol) noexcept {
  const double claimed = static_cast<double>(claimed_chars) / chars_per_token;
  const double slack = std::max(static_cast<double>(tol.tokens), tol.ratio * claimed);
  return claimed - static_cast<double>(cached_tokens) > slack;
}

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_FEEDBACK_HPP_
