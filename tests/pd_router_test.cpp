#include "kvroute/pd_router.hpp"

#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "kvroute/any_policy.hpp"
#include "kvroute/policies/bucket.hpp"
#include "kvroute/policies/cache_aware.hpp"
#include "kvroute/policies/round_robin.hpp"

TEST_CASE("pd_router: prefill affinity survives decode routing", "[pd_router]") {
  // Both legs cache_aware, as the gateway's gRPC PD mode would run them, but
  // with separate instances and trees.
  kvroute::PdRouter<kvroute::CacheAware, kvroute::CacheAware> pd;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(pd.prefill().add_worker({.url = "http://p" + std::to_string(i)}).ok());
    REQUIRE(pd.decode().add_worker({.url = "http://d" + std::to_string(i)}).ok());
  }
  const std::string chat = "You are a helpful assistant. The user asks about radix trees.";
  auto first = pd.select({.text = chat});
  REQUIRE(first);
  for (int turn = 0; turn < 10; ++turn) {
    const std::string text = chat + " Turn " + std::to_string(turn) + ".";
    auto s = pd.select({.text = text});
    REQUIRE(s);
    CHECK(s.prefill.worker().id == first.prefill.worker().id);
    CHECK(s.prefill.decision.branch == kvroute::Branch::kCacheHit);
  }
  // The prefill tree knows only prefill workers, the decode tree only decode
  // workers: neither erases the other's history.
  const auto* ptree = pd.prefill().policy().tree("");
  const auto* dtree = pd.decode().policy().tree("");
  REQUIRE(ptree != nullptr);
  REQUIRE(dtree != nullptr);
  CHECK(ptree != dtree);
  CHECK(ptree->tenant_count() >= 1);
  CHECK(ptree->tenant_size(first.prefill.worker().id.value) > 0);
}

TEST_CASE("pd_router: bucket as the prefill policy", "[pd_router]") {
  kvroute::PdRouter<kvroute::Bucket, kvroute::RoundRobin> pd;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(pd.prefill().add_worker({.url = "http://p" + std::to_string(i)}).ok());
  }
  REQUIRE(pd.decode().add_worker({.url = "http://d0"}).ok());
  REQUIRE(pd.decode().add_worker({.url = "http://d1"}).ok());
  // Fresh buckets split 0..4096 evenly: short to the first, long to the last.
  auto shorty = pd.select({.text = std::string(100, 'a')});
  auto longy = pd.select({.text = std::string(3000, 'b')});
  REQUIRE(shorty);
  REQUIRE(longy);
  CHECK(shorty.prefill.worker().url == "http://p0");
  CHECK(longy.prefill.worker().url == "http://p2");
  CHECK(shorty.decode.worker().url != longy.decode.worker().url);  // round robin
}

TEST_CASE("pd_router: a leg without workers is named", "[pd_router]") {
  kvroute::PdRouter<kvroute::RoundRobin, kvroute::RoundRobin> pd;
  auto none = pd.select({});
  CHECK_FALSE(none);
  CHECK(none.failed_leg() == "prefill");
  REQUIRE(pd.prefill().add_worker({.url = "http://p0"}).ok());
  auto half = pd.select({});
  CHECK_FALSE(half);
  CHECK(half.failed_leg() == "decode");
  CHECK(half.decode.decision.reason() == kvroute::NoWorker::kNoWorkers);
  REQUIRE(pd.decode().add_worker({.url = "http://d0"}).ok());
  CHECK(pd.select({}));
  CHECK(pd.select({}).failed_leg().empty());
}

TEST_CASE("pd_router: policies chosen at runtime, exclusions per leg", "[pd_router]") {
  kvroute::PolicyConfig p, d;
  p.policy = kvroute::PolicyKind::kCacheAware;
  d.policy = kvroute::PolicyKind::kRoundRobin;
  kvroute::PdRouter<kvroute::AnyPolicy, kvroute::AnyPolicy> pd(*kvroute::make_policy(p),
                                                               *kvroute::make_policy(d));
  auto p0 = *pd.prefill().add_worker({.url = "http://p0"});
  REQUIRE(pd.prefill().add_worker({.url = "http://p1"}).ok());
  auto d0 = *pd.decode().add_worker({.url = "http://d0"});
  REQUIRE(pd.decode().add_worker({.url = "http://d1"}).ok());
  const kvroute::WorkerId xp[] = {p0};
  const kvroute::WorkerId xd[] = {d0};
  for (int i = 0; i < 6; ++i) {
    auto s = pd.select({.text = "hello"}, xp, xd);
    REQUIRE(s);
    CHECK(s.prefill.worker().id != p0);
    CHECK(s.decode.worker().id != d0);
  }
  CHECK(pd.prefill().policy().name() == "cache_aware");
  pd.maintain();
}
