#include "kvroute/policies/random.hpp"

#include <catch2/catch.hpp>
#include <set>

#include "support/cluster.hpp"

using kvtest::Cluster;

TEST_CASE("random: 100 picks over 3 workers hit every worker", "[random]") {
  Cluster c(3);
  kvroute::Random r;
  std::set<int> seen;
  for (int i = 0; i < 100; ++i) seen.insert(c.pick(r));
  CHECK(seen == std::set<int>{0, 1, 2});
  CHECK(c.select(r).branch == kvroute::Branch::kRandom);
}

TEST_CASE("random: with worker 0 unhealthy of two, always worker 1", "[random]") {
  Cluster c(2);
  c.set_healthy(0, false);
  kvroute::Random r;
  for (int i = 0; i < 50; ++i) REQUIRE(c.pick(r) == 1);
}

TEST_CASE("random: all unhealthy gives no worker", "[random]") {
  Cluster c(3);
  for (int i = 0; i < 3; ++i) c.set_healthy(static_cast<std::size_t>(i), false);
  kvroute::Random r;
  CHECK(c.select(r).reason() == kvroute::NoWorker::kNoHealthyWorkers);
}

TEST_CASE("random: equal seeds give equal sequences, different seeds differ", "[random]") {
  Cluster c(8);
  kvroute::Random a({.seed = 11}), b({.seed = 11}), other({.seed = 12});
  std::vector<int> sa, sb, so;
  for (int i = 0; i < 64; ++i) {
    sa.push_back(c.pick(a));
    sb.push_back(c.pick(b));
    so.push_back(c.pick(other));
  }
  CHECK(sa == sb);
  CHECK(sa != so);
}

TEST_CASE("random: picks are close to uniform", "[random]") {
  Cluster c(4);
  kvroute::Random r({.seed = 3});
  std::vector<int> counts(4);
  for (int i = 0; i < 8000; ++i) ++counts[static_cast<std::size_t>(c.pick(r))];
  for (int n : counts) CHECK((n > 1800 && n < 2200));
}
