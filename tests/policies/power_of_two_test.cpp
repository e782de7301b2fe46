#include "kvroute/policies/power_of_two.hpp"

#include <catch2/catch.hpp>

#include "support/cluster.hpp"

using kvtest::Cluster;

TEST_CASE("power_of_two: loads 10/5/0 rank W2 > W1 > W0 over 100 picks", "[power_of_two]") {
  Cluster c(3);
  c.set_load(0, 10);
  c.set_load(1, 5);
  c.set_load(2, 0);
  kvroute::PowerOfTwo p;
  std::vector<int> counts(3);
  for (int i = 0; i < 100; ++i) ++counts[static_cast<std::size_t>(c.pick(p))];
  CHECK(counts[2] > counts[1]);
  CHECK(counts[1] > counts[0]);
  // The most loaded worker can only win as... never: it loses every pair.
  CHECK(counts[0] == 0);
}

TEST_CASE("power_of_two: reported loads {W0: 100, W1: 10} pick W1 > 35 of 50", "[power_of_two]") {
  Cluster c(2);
  c.load.report_load(c.ids[0], 100);
  c.load.report_load(c.ids[1], 10);
  kvroute::PowerOfTwo p;
  int w1 = 0;
  for (int i = 0; i < 50; ++i) w1 += c.pick(p) == 1;
  CHECK(w1 > 35);
}

TEST_CASE("power_of_two: a single worker is always chosen", "[power_of_two]") {
  Cluster c(1);
  kvroute::PowerOfTwo p;
  for (int i = 0; i < 10; ++i) {
    auto d = c.select(p);
    REQUIRE(c.index_of(d) == 0);
    CHECK(d.branch == kvroute::Branch::kSingleWorker);
  }
}

TEST_CASE("power_of_two: reported and in-flight loads are never compared", "[power_of_two]") {
  // With two workers both are always drawn, so the rule decides alone.
  kvroute::PowerOfTwo p;
  SECTION("A: 0 in flight, 50k tokens reported; B: 5 in flight, no report -> A") {
    Cluster c(2);
    c.load.report_load(c.ids[0], 50000);
    c.set_load(1, 5);
    for (int i = 0; i < 20; ++i) REQUIRE(c.pick(p) == 0);
  }
  SECTION("both reported: A 10 req / 1k tokens vs B 2 req / 100k tokens -> A") {
    Cluster c(2);
    c.set_load(0, 10);
    c.set_load(1, 2);
    c.load.report_load(c.ids[0], 1000);
    c.load.report_load(c.ids[1], 100000);
    for (int i = 0; i < 20; ++i) REQUIRE(c.pick(p) == 0);
  }
  SECTION("only A reported: request counts 10 vs 2 -> B") {
    Cluster c(2);
    c.set_load(0, 10);
    c.set_load(1, 2);
    c.load.report_load(c.ids[0], 1000);
    for (int i = 0; i < 20; ++i) REQUIRE(c.pick(p) == 1);
  }
  SECTION("only B reported: request counts 2 vs 10 -> A") {
    Cluster c(2);
    c.set_load(0, 2);
    c.set_load(1, 10);
    c.load.report_load(c.ids[1], 1000);
    for (int i = 0; i < 20; ++i) REQUIRE(c.pick(p) == 0);
  }
  SECTION("neither reported: 5 vs 3 -> the second worker") {
    Cluster c(2);
    c.set_load(0, 5);
    c.set_load(1, 3);
    for (int i = 0; i < 20; ++i) REQUIRE(c.pick(p) == 1);
  }
}

TEST_CASE("power_of_two: a failed load probe never makes a worker preferred", "[power_of_two]") {
  // The gateway stores a failed probe as -1 and so prefers the failing worker.
  Cluster c(2);
  c.load.report_load_failed(c.ids[0]);
  c.load.report_load(c.ids[1], 70000);
  kvroute::PowerOfTwo p;
  // In-flight counts are equal (0): the failed one loses the tie every time,
  // whichever of the two is drawn first.
  for (int i = 0; i < 50; ++i) REQUIRE(c.pick(p) == 1);
  // A lower in-flight count still wins on its own merits.
  c.set_load(1, 3);
  for (int i = 0; i < 20; ++i) REQUIRE(c.pick(p) == 0);
}

TEST_CASE("power_of_two: equal loads keep the first draw, so ties spread", "[power_of_two]") {
  Cluster c(4);
  kvroute::PowerOfTwo p({.seed = 5});
  std::vector<int> counts(4);
  for (int i = 0; i < 4000; ++i) ++counts[static_cast<std::size_t>(c.pick(p))];
  for (int n : counts) CHECK((n > 800 && n < 1200));
}
