#include "kvroute/tie_break.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <vector>

#include "support/cluster.hpp"

TEST_CASE("tie_break: the least key wins, ties spread over every tied worker", "[tie_break]") {
  kvtest::Cluster c(4);
  auto snap = c.workers.snapshot();
  const auto all = snap->group("").available();
  kvroute::TieBreaker ties(7);
  // A unique least key always wins.
  for (int i = 0; i < 50; ++i) {
    const kvroute::Worker* w =
        ties.least(all, [](const kvroute::Worker& x) { return x.id.value == 2 ? 0 : 1; });
    REQUIRE(w != nullptr);
    CHECK(w->id.value == 2);
  }
  // All tied: every worker is chosen, none far more than its share (the
  // rule a policy must keep: never towards the first worker).
  std::map<std::uint32_t, int> seen;
  for (int i = 0; i < 4000; ++i) {
    ++seen[ties.least(all, [](const kvroute::Worker&) { return 0; })->id.value];
  }
  REQUIRE(seen.size() == 4);
  for (const auto& [id, n] : seen) CHECK((n > 800 && n < 1200));
  // Ties among the accepted workers only.
  for (int i = 0; i < 100; ++i) {
    const kvroute::Worker* w = ties.least(
        all, [](const kvroute::Worker&) { return 0; },
        [](const kvroute::Worker& x) { return x.id.value >= 2; });
    CHECK(w->id.value >= 2);
  }
  CHECK(ties.least({}, [](const kvroute::Worker&) { return 0; }) == nullptr);
  CHECK(ties.least(
            all, [](const kvroute::Worker&) { return 0; },
            [](const kvroute::Worker&) { return false; }) == nullptr);
}

TEST_CASE("tie_break: equal seeds give equal choices", "[tie_break]") {
  kvtest::Cluster c(5);
  auto snap = c.workers.snapshot();
  const auto all = snap->group("").available();
  kvroute::TieBreaker a(42), b(42), other(43);
  std::vector<std::uint32_t> xa, xb, xo;
  for (int i = 0; i < 64; ++i) {
    auto zero = [](const kvroute::Worker&) { return 0; };
    xa.push_back(a.least(all, zero)->id.value);
    xb.push_back(b.least(all, zero)->id.value);
    xo.push_back(other.least(all, zero)->id.value);
  }
  CHECK(xa == xb);
  CHECK(xa != xo);
}
