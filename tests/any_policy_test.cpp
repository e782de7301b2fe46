#include "kvroute/any_policy.hpp"

#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "kvroute/router.hpp"
#include "support/cluster.hpp"

using kvroute::AnyPolicy;
using kvroute::make_policy;
using kvroute::PolicyKind;

TEST_CASE("any_policy: every shipped policy builds from flags and routes", "[any_policy]") {
  kvroute::ManualClock clock;
  for (PolicyKind k : kvroute::kAllPolicyKinds) {
    const std::string name(kvroute::to_string(k));
    std::vector<std::string_view> args = {"--policy", name};
    auto cfg = kvroute::parse_policy_flags(args);
    REQUIRE(cfg.ok());
    auto p = make_policy(*cfg, clock);
    REQUIRE(p.ok());
    CHECK(p->name() == name);
    kvtest::Cluster c(3);
    std::set<int> seen;
    for (int i = 0; i < 60; ++i) {
      // Distinct from the first character, so cache_aware spreads them too.
      std::string text =
          std::to_string(kvroute::detail::splitmix64(static_cast<std::uint64_t>(i))) + " request";
      seen.insert(c.pick(*p, {.text = text}));
    }
    CHECK(seen.count(-1) == 0);
    CHECK(seen.size() >= 2);
  }
}

TEST_CASE("any_policy: configuration reaches the policy", "[any_policy]") {
  kvroute::PolicyConfig cfg;
  cfg.policy = PolicyKind::kPrefixHash;
  cfg.prefix_token_count = 3;
  auto p = make_policy(cfg);
  REQUIRE(p.ok());
  kvtest::Cluster c(8);
  // Only the first 3 characters count, so these all land together.
  const int first = c.pick(*p, {.text = "abcXXXX"});
  for (std::string_view t : {"abc", "abcdef", "abc 123456789"}) {
    CHECK(c.pick(*p, {.text = t}) == first);
  }
}

TEST_CASE("any_policy: cache_aware's flags reach its options", "[any_policy]") {
  std::vector<std::string_view> args = {"--policy=cache_aware",      "--max-tree-size=4096",
                                        "--eviction-interval=45",    "--cache-threshold=0.6",
                                        "--balance-rel-threshold=2", "--balance-abs-threshold=40"};
  auto cfg = kvroute::parse_policy_flags(args);
  REQUIRE(cfg.ok());
  auto p = make_policy(*cfg);
  REQUIRE(p.ok());
  const kvroute::CacheAware* ca = p->get<kvroute::CacheAware>();
  REQUIRE(ca != nullptr);
  const kvroute::CacheAware::Options& o = ca->options();
  CHECK(o.cache_threshold == 0.6);
  CHECK(o.balance_abs_threshold == 40u);
  CHECK(o.balance_rel_threshold == 2.0);
  CHECK(o.eviction_interval == std::chrono::seconds(45));
  CHECK(o.max_tree_size == 4096u);
  CHECK(o.max_models == 0u);
}

TEST_CASE("any_policy: --max-models reaches both tree-keeping policies", "[any_policy]") {
  for (std::string_view policy : {"--policy=cache_aware", "--policy=least_prefill"}) {
    std::vector<std::string_view> args = {policy, "--max-models", "3"};
    auto cfg = kvroute::parse_policy_flags(args);
    REQUIRE(cfg.ok());
    auto p = make_policy(*cfg);
    REQUIRE(p.ok());
    if (const auto* ca = p->get<kvroute::CacheAware>()) CHECK(ca->options().max_models == 3u);
    if (const auto* lp = p->get<kvroute::LeastPrefill>()) CHECK(lp->options().max_models == 3u);
    CHECK((p->get<kvroute::CacheAware>() != nullptr || p->get<kvroute::LeastPrefill>() != nullptr));
  }
}

TEST_CASE("any_policy: invalid configuration is an error", "[any_policy]") {
  kvroute::PolicyConfig cfg;
  cfg.policy = PolicyKind::kRoundRobin;
  cfg.balance_rel_threshold = 0.2;
  auto bad = make_policy(cfg);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("balance_rel_threshold"));
  cfg = kvroute::PolicyConfig{};
  cfg.policy = PolicyKind::kLeastPrefill;
  cfg.queue_weight = -1;
  auto negative = make_policy(cfg);
  REQUIRE_FALSE(negative.ok());
  CHECK_THAT(std::string(negative.status().message()), Catch::Contains("queue_weight"));
}

TEST_CASE("any_policy: a Router over AnyPolicy forwards hooks and downcasts", "[any_policy]") {
  kvroute::PolicyConfig cfg;
  cfg.policy = PolicyKind::kRoundRobin;
  kvroute::Router<AnyPolicy> router(*make_policy(cfg));
  REQUIRE(router.add_worker({.url = "http://a"}).ok());
  REQUIRE(router.add_worker({.url = "http://b"}).ok());
  CHECK(router.select({}).worker().url == "http://a");
  CHECK(router.select({}).worker().url == "http://b");
  REQUIRE(router.policy().get<kvroute::RoundRobin>() != nullptr);
  CHECK(router.policy().get<kvroute::Random>() == nullptr);
  router.policy().get<kvroute::RoundRobin>()->reset();
  CHECK(router.select({}).worker().url == "http://a");
  router.maintain();
}

TEST_CASE("any_policy: feedback in tokens reaches the tree-based policies", "[any_policy]") {
  for (PolicyKind k : {PolicyKind::kCacheAware, PolicyKind::kLeastPrefill}) {
    INFO(kvroute::to_string(k));
    kvroute::PolicyConfig cfg;
    cfg.policy = k;
    kvroute::Router<AnyPolicy> router(*make_policy(cfg));
    const auto w = *router.add_worker({.url = "http://a"});
    const std::string old_text = "an older conversation: " + std::string(400, 'o');
    const std::string text = "this conversation: " + std::string(400, 't');
    (void)router.select({.text = old_text});
    // cache_aware's trees keep recency in steps of 64 requests, and feedback
    // spares the missing entry's step: put the old text in an older step.
    for (int i = 0; i < 70; ++i) (void)router.select({.text = "filler " + std::to_string(i)});
    (void)router.select({.text = text});
    const kvroute::RequestView req{.text = text};
    const kvroute::Selection s = router.select(req);
    REQUIRE(s.decision.claimed == kvroute::detail::utf8_count(text));
    // 419 characters in 100 tokens: all of them cached, nothing to take back.
    CHECK(router.policy().report_cached(req, s.decision, 100, 100).claims == 0);
    // None of them cached: the worker's older claims go.
    CHECK(router.policy().report_cached(req, s.decision, 0, 100).claims > 0);
    auto* ca = router.policy().get<kvroute::CacheAware>();
    auto* lp = router.policy().get<kvroute::LeastPrefill>();
    kvroute::ApproxRadixTree* tree = ca != nullptr ? ca->tree("") : lp->tree("");
    CHECK(tree->peek_for_tenant(old_text, w.value).matched < old_text.size());
  }
  // least_prefill's queue estimate comes through too; other policies have none.
  kvroute::PolicyConfig lp;
  lp.policy = PolicyKind::kLeastPrefill;
  kvroute::Router<AnyPolicy> router(*make_policy(lp));
  REQUIRE(router.add_worker({.url = "http://a"}).ok());
  const std::string text(400, 'k');
  const kvroute::Selection s = router.select({.text = text});
  CHECK(router.policy().predicted_tokens({.text = text}, s.decision) == 100);  // 400 / 4
  kvroute::LoadGuard g = router.dispatch(s, {.tokens = 100});
  router.policy().report_cached({.text = text}, s.decision, 30, 100, &g);
  CHECK(g.tokens() == 70);
  kvroute::PolicyConfig rr;
  rr.policy = PolicyKind::kRoundRobin;
  kvroute::Router<AnyPolicy> plain(*make_policy(rr));
  REQUIRE(plain.add_worker({.url = "http://a"}).ok());
  const kvroute::Selection p = plain.select({.text = text});
  CHECK(plain.policy().predicted_tokens({.text = text}, p.decision) == 0);
  CHECK(plain.policy().report_cached({.text = text}, p.decision, 0, 100).claims == 0);
}
