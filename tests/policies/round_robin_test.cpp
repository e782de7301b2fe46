#include "kvroute/policies/round_robin.hpp"

#include <catch2/catch.hpp>

#include "support/cluster.hpp"

using kvtest::Cluster;

TEST_CASE("round_robin: three healthy workers go 0, 1, 2, 0, 1", "[round_robin]") {
  Cluster c(3);
  kvroute::RoundRobin rr;
  std::vector<int> got;
  for (int i = 0; i < 5; ++i) got.push_back(c.pick(rr));
  CHECK(got == std::vector<int>{0, 1, 2, 0, 1});
  CHECK(c.select(rr).branch == kvroute::Branch::kRoundRobin);
}

TEST_CASE("round_robin: an unhealthy worker is skipped: 0, 2, 0, 2", "[round_robin]") {
  Cluster c(3);
  c.set_healthy(1, false);
  kvroute::RoundRobin rr;
  std::vector<int> got;
  for (int i = 0; i < 4; ++i) got.push_back(c.pick(rr));
  CHECK(got == std::vector<int>{0, 2, 0, 2});
}

TEST_CASE("round_robin: reset starts again from the first worker", "[round_robin]") {
  Cluster c(3);
  kvroute::RoundRobin rr;
  CHECK(c.pick(rr) == 0);
  CHECK(c.pick(rr) == 1);
  rr.reset();
  CHECK(c.pick(rr) == 0);
}

TEST_CASE("round_robin: no healthy worker is a value", "[round_robin]") {
  Cluster c(2);
  kvroute::RoundRobin rr;
  c.set_healthy(0, false);
  c.set_healthy(1, false);
  auto d = c.select(rr);
  CHECK_FALSE(d);
  CHECK(d.reason() == kvroute::NoWorker::kNoHealthyWorkers);
  Cluster empty(0);
  CHECK(empty.select(rr).reason() == kvroute::NoWorker::kNoWorkers);
}
