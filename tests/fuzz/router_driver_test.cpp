// The router fuzz driver (fuzz/router_driver.hpp) on seeded pseudo-random
// inputs, every policy in turn, so that its checks run in every build, not
// only under libFuzzer; and a check that such inputs do exercise the router
// (routes, dispatches, feedback that drops claims, tree checks).
#include "fuzz/router_driver.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

TEST_CASE("router driver: every policy keeps the router's invariants on random operations") {
  std::mt19937_64 rng(20261202);
  constexpr std::size_t kPolicies = kvroute::kAllPolicyKinds.size();
  std::array<kvfuzz::RouterRunStats, kPolicies> total{};
  for (std::size_t i = 0; i < 400 * kPolicies; ++i) {
    std::vector<std::uint8_t> in(32 + rng() % 700);
    for (auto& b : in) b = static_cast<std::uint8_t>(rng());
    in[0] = static_cast<std::uint8_t>(i % kPolicies);  // the policy
    kvfuzz::RouterRunStats s;
    const std::string failure = kvfuzz::run_router(in.data(), in.size(), &s);
    if (!failure.empty()) {
      FAIL_CHECK("input " << i << ":\n" << failure);
      return;
    }
    total[i % kPolicies] += s;
  }
  for (std::size_t p = 0; p < kPolicies; ++p) {
    const kvroute::PolicyKind kind = kvroute::kAllPolicyKinds[p];
    INFO(kvroute::to_string(kind) << ": " << total[p].ops << " ops, " << total[p].routed
                                  << " routed, " << total[p].not_routed << " not, "
                                  << total[p].dispatched << " dispatched, " << total[p].dropped
                                  << " drops, " << total[p].tree_checks << " tree checks");
    CHECK(total[p].routed > 100);
    CHECK(total[p].not_routed > 10);
    CHECK(total[p].dispatched > 50);
    if (kind == kvroute::PolicyKind::kCacheAware || kind == kvroute::PolicyKind::kLeastPrefill) {
      CHECK(total[p].dropped > 0);
      CHECK(total[p].tree_checks > 100);
    }
  }
}

}  // namespace
