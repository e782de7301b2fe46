#include "kvroute/feedback.hpp"

#include <catch2/catch.hpp>

TEST_CASE("feedback: a shortfall within the tolerance is rounding, beyond it an eviction",
          "[feedback]") {
  const kvroute::FeedbackTolerance tol;  // 16 tokens or 5% of the claim
  // 400 characters at 4 a token: a claim of 100 tokens; 16 tokens of slack.
  CHECK_FALSE(kvroute::claim_evicted(400, 100, 4.0, tol));
  CHECK_FALSE(kvroute::claim_evicted(400, 150, 4.0, tol));  // more than claimed
  CHECK_FALSE(kvroute::claim_evicted(400, 84, 4.0, tol));   // 16 short
  CHECK(kvroute::claim_evicted(400, 83, 4.0, tol));         // 17 short
  CHECK(kvroute::claim_evicted(400, 0, 4.0, tol));
  // A large claim: 5% of 4000 tokens is 200, more than 16.
  CHECK_FALSE(kvroute::claim_evicted(16000, 3800, 4.0, tol));
  CHECK(kvroute::claim_evicted(16000, 3799, 4.0, tol));
  // Nothing claimed, nothing to take back.
  CHECK_FALSE(kvroute::claim_evicted(0, 0, 4.0, tol));
  // Another tolerance.
  CHECK(kvroute::claim_evicted(400, 99, 4.0, {.tokens = 0, .ratio = 0}));
}

TEST_CASE("feedback: a claim converts at the request's own characters per token when known",
          "[feedback]") {
  CHECK(kvroute::claim_chars_per_token("abcdefgh", 2, 4.0) == 4.0);
  CHECK(kvroute::claim_chars_per_token("abcdefgh", 4, 4.0) == 2.0);
  CHECK(kvroute::claim_chars_per_token("日本語だ", 2, 4.0) == 2.0);   // characters, not bytes
  CHECK(kvroute::claim_chars_per_token("abcdefgh", -1, 3.0) == 3.0);  // unknown prompt
  CHECK(kvroute::claim_chars_per_token("abcdefgh", 0, 3.0) == 3.0);
  CHECK(kvroute::claim_chars_per_token("", 10, 3.0) == 3.0);  // no text
}
