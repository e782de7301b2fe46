// Memory bound under adversarial traffic: unique random prompts at full rate
// against a small budget. The tree's own byte accounting (stats().bytes)
// must stay under memory_bound(budget, tenants) (memory_bound.hpp documents
// the formula) after every single request, both on a bare tree with
// reactive eviction and through Router<CacheAware>. The curve over a long
// run is printed by the kvroute_memory_curve program, not here.
#include "reliability/memory_bound.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "kvroute/policies/cache_aware.hpp"
#include "kvroute/radix_tree.hpp"
#include "kvroute/router.hpp"

namespace {

TEST_CASE("memory: a tree with a tenant budget stays under the documented bound") {
  for (kvtest::PromptShape shape : {kvtest::PromptShape::kMixed, kvtest::PromptShape::kBranchy}) {
    constexpr std::size_t kBudget = 512;
    constexpr std::size_t kTenants = 4;
    kvroute::ApproxRadixTree tree(kvroute::ApproxRadixTree::Options{.tenant_budget = kBudget});
    kvtest::AdversarialPrompts prompts(7, shape);
    std::size_t peak = 0;
    for (std::size_t i = 0; i < 20000; ++i) {
      const std::string p = prompts.next();
      REQUIRE(tree.insert(p, static_cast<kvroute::TenantId>(i % kTenants)).ok());
      const kvroute::RadixTreeStats s = tree.stats();
      peak = std::max(peak, s.bytes);
      REQUIRE(s.bytes <= kvtest::memory_bound(kBudget, kTenants));
      REQUIRE(tree.tenant_size(static_cast<kvroute::TenantId>(i % kTenants)) <= kBudget);
    }
    CHECK(tree.check_invariants() == "");
    // The run did fill the budget (otherwise the bound proves nothing).
    CHECK(peak > kBudget * kTenants);
  }
}

TEST_CASE("memory: Router of CacheAware under unique prompts stays under the bound") {
  constexpr std::size_t kBudget = 256;
  constexpr std::size_t kWorkers = 4;
  kvroute::Router<kvroute::CacheAware> router(
      kvroute::CacheAware::Options{.max_tree_size = kBudget});
  for (std::size_t i = 0; i < kWorkers; ++i) {
    REQUIRE(router.add_worker({.url = "http://w" + std::to_string(i) + ":1"}).ok());
  }
  kvtest::AdversarialPrompts prompts(3);
  std::size_t peak = 0;
  for (std::size_t i = 0; i < 10000; ++i) {
    const std::string p = prompts.next();
    kvroute::Selection s = router.select({.text = p});
    REQUIRE(s);
    const kvroute::ApproxRadixTree* tree = router.policy().tree("");
    REQUIRE(tree != nullptr);
    const std::size_t bytes = tree->stats().bytes;
    peak = std::max(peak, bytes);
    REQUIRE(bytes <= kvtest::memory_bound(kBudget, kWorkers));
  }
  CHECK(peak > kBudget);
  CHECK(router.policy().tree("")->check_invariants() == "");
}

}  // namespace
