#include "kvroute/fmt.hpp"

#include <catch2/catch.hpp>
#include <set>

TEST_CASE("fmt: kvroute values format readably", "[fmt]") {
  CHECK(fmt::format("{}", kvroute::WorkerId{3}) == "worker 3");
  CHECK(fmt::format("{}", kvroute::WorkerId{}) == "worker (invalid)");
  CHECK(fmt::format("{}", kvroute::Branch::kRoutingKeyHit) == "routing_key_hit");
  CHECK(fmt::format("{:>12}", kvroute::Branch::kRandom) == "      random");
  CHECK(fmt::format("{}", kvroute::NoWorker::kPolicyMiss) == "policy_miss");
  CHECK(fmt::format("{}", kvroute::PolicyKind::kCacheAware) == "cache_aware");
  kvroute::Worker w{kvroute::WorkerId{2}, "http://a:1", "", true};
  CHECK(fmt::format("{}", kvroute::Decision::pick(&w, kvroute::Branch::kCacheHit)) ==
        "worker 2 http://a:1 (cache_hit)");
  CHECK(fmt::format("{}", kvroute::Decision::none(kvroute::Branch::kNoHealthyWorkers)) ==
        "no worker (no_healthy_workers)");
  // A host policy's own branch name.
  CHECK(fmt::format("{}", kvroute::Decision::custom(&w, "least_loaded")) ==
        "worker 2 http://a:1 (least_loaded)");
  CHECK(kvroute::Decision::custom(nullptr, "drained").branch_name() == "drained");
  CHECK(kvroute::Decision::pick(&w, kvroute::Branch::kRandom).branch_name() == "random");
}

TEST_CASE("fmt: every branch has a distinct snake_case name", "[fmt]") {
  std::set<std::string_view> names;
  for (kvroute::Branch b : kvroute::kAllBranches) {
    const std::string_view n = kvroute::to_string(b);
    CHECK(n != "unknown");
    for (char c : n) CHECK(((c >= 'a' && c <= 'z') || c == '_' || (c >= '0' && c <= '9')));
    names.insert(n);
  }
  CHECK(names.size() == kvroute::kAllBranches.size());
}

TEST_CASE("fmt: kAllBranches lists the enumerators in order", "[fmt]") {
  for (std::size_t i = 0; i < kvroute::kAllBranches.size(); ++i) {
    CHECK(static_cast<std::size_t>(kvroute::kAllBranches[i]) == i);
  }
}
