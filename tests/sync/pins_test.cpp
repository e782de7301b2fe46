// manual's sticky table shared between replicas: pins merge into the same
// candidate list in any order (detail/pin_list.hpp), and replicas of the
// manual policy route a key alike once they have exchanged their pins.
#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kvroute/detail/pin_list.hpp"
#include "kvroute/kvroute.hpp"
#include "kvroute/sync/outbox.hpp"

namespace {

struct PinArgs {
  std::uint32_t worker;
  std::int64_t stamp;
  bool reset;
};

std::vector<std::pair<std::uint32_t, std::int64_t>> contents(const kvroute::detail::PinList& l) {
  std::vector<std::pair<std::uint32_t, std::int64_t>> out;
  for (std::uint8_t i = 0; i < l.count; ++i) out.emplace_back(l.at[i].id.value, l.at[i].stamp);
  return out;
}

kvroute::Header key_header(const std::string& key) { return {kvroute::kRoutingKeyHeader, key}; }

struct ManualReplica {
  explicit ManualReplica(std::vector<std::string> urls) {
    for (const auto& u : urls) REQUIRE(router.add_worker({.url = u}).ok());
    router.policy().set_state_sink(&out);
  }
  std::string route(const std::string& key) {
    const kvroute::Header h[] = {key_header(key)};
    auto s = router.select({.headers = h});
    REQUIRE(s);
    return s.worker().url;
  }
  void deliver_to(ManualReplica& other) {
    std::vector<kvroute::sync::Change> changes;
    out.drain(changes);
    const auto snap = other.router.workers().snapshot();
    for (const auto& c : changes) {
      CHECK(other.router.policy().apply_change(c, *snap) == kvroute::sync::Applied::kApplied);
    }
  }
  kvroute::Router<kvroute::Manual> router;
  kvroute::sync::Outbox out;
};

}  // namespace

TEST_CASE("pins: any order of the same pins gives the same list", "[sync]") {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<PinArgs> pins;
    const int n = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < n; ++i) {
      pins.push_back({static_cast<std::uint32_t>(rng() % 4), static_cast<std::int64_t>(rng() % 10),
                      rng() % 4 == 0});
    }
    std::vector<std::pair<std::uint32_t, std::int64_t>> first;
    for (int order = 0; order < 20; ++order) {
      std::vector<PinArgs> shuffled = pins;
      std::shuffle(shuffled.begin(), shuffled.end(), rng);
      if (rng() % 2) shuffled.push_back(shuffled[rng() % shuffled.size()]);  // a duplicate
      kvroute::detail::PinList l;
      for (const PinArgs& p : shuffled) {
        l.merge(kvroute::WorkerId{p.worker}, p.stamp, p.worker * 0x9E3779B97F4A7C15ull, p.reset);
      }
      if (order == 0) {
        first = contents(l);
      } else {
        INFO("trial " << trial << ", order " << order);
        CHECK(contents(l) == first);
      }
    }
  }
}

TEST_CASE("pins: a list keeps the two newest, oldest first, after the last reset", "[sync]") {
  kvroute::detail::PinList l;
  CHECK(l.merge(kvroute::WorkerId{1}, 10, 1, true));
  CHECK(l.merge(kvroute::WorkerId{2}, 20, 2, false));
  CHECK(l.merge(kvroute::WorkerId{3}, 30, 3, false));  // 1 goes
  CHECK(contents(l) == std::vector<std::pair<std::uint32_t, std::int64_t>>{{2, 20}, {3, 30}});
  CHECK(l.merge(kvroute::WorkerId{4}, 25, 4, true));  // a reset: 2 goes
  CHECK(contents(l) == std::vector<std::pair<std::uint32_t, std::int64_t>>{{4, 25}, {3, 30}});
  CHECK_FALSE(l.merge(kvroute::WorkerId{5}, 24, 5, false));  // older than the reset
  CHECK(l.next_stamp(0) == 31);
  l.remove(kvroute::WorkerId{4});
  CHECK(contents(l) == std::vector<std::pair<std::uint32_t, std::int64_t>>{{3, 30}});
}

TEST_CASE("pins: manual replicas route a key alike once they exchanged pins", "[sync]") {
  const std::vector<std::string> urls = {"http://a", "http://b", "http://c", "http://d"};
  ManualReplica one(urls);
  ManualReplica two({urls.rbegin(), urls.rend()});  // other ids for the same URLs

  // A key pinned on one replica is an occupied hit on the other.
  const std::string at = one.route("alice");
  one.deliver_to(two);
  CHECK(two.route("alice") == at);

  // Both replicas see a new key at once and pin it each their own way; after
  // the exchange they agree, whichever pin came first to either.
  for (int i = 0; i < 20; ++i) {
    const std::string key = "bob-" + std::to_string(i);
    one.route(key);
    two.route(key);
  }
  one.deliver_to(two);
  two.deliver_to(one);
  for (int i = 0; i < 20; ++i) {
    const std::string key = "bob-" + std::to_string(i);
    CHECK(one.route(key) == two.route(key));
  }

  // A failover on one replica: its new candidate reaches the other, and the
  // original worker wins again on both when it returns.
  const auto id = one.router.workers().snapshot()->find_url(at)->id;
  REQUIRE(one.router.set_healthy(id, false).ok());
  const std::string standby = one.route("alice");
  CHECK(standby != at);
  one.deliver_to(two);
  const auto id2 = two.router.workers().snapshot()->find_url(at)->id;
  REQUIRE(two.router.set_healthy(id2, false).ok());
  CHECK(two.route("alice") == standby);
  REQUIRE(one.router.set_healthy(id, true).ok());
  REQUIRE(two.router.set_healthy(id2, true).ok());
  CHECK(one.route("alice") == at);
  CHECK(two.route("alice") == at);
}

TEST_CASE("pins: a clock at the end of int64 time still pins the chosen worker", "[sync]") {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  kvroute::detail::PinList l;
  l.merge(kvroute::WorkerId{1}, kMax, 5, /*reset=*/true);
  l.merge(kvroute::WorkerId{2}, kMax, 9, /*reset=*/false);
  const std::int64_t stamp = l.next_stamp(kMax);
  CHECK(stamp == kMax);  // saturated, not wrapped
  l.pin_newest(kvroute::WorkerId{3}, stamp, 1, /*reset=*/false);
  CHECK(l.holds(kvroute::WorkerId{3}));
}
