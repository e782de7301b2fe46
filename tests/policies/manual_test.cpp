#include "kvroute/policies/manual.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "kvroute/clock.hpp"
#include "kvroute/select_worker.hpp"
#include "support/alloc_counter.hpp"
#include "support/cluster.hpp"

using kvtest::allocations;
using kvtest::counting;

using kvroute::Branch;
using kvroute::Manual;
using kvroute::WorkerId;
using kvtest::Cluster;
using Mode = kvroute::Manual::AssignmentMode;
using namespace std::chrono_literals;

namespace {

// A request carrying `h` (usually a routing key header) for `model`.
kvroute::RequestView with(const kvroute::Header& h, std::string_view model = {}) {
  return {.headers = std::span<const kvroute::Header>(&h, 1), .model = model};
}

kvroute::Header key(std::string_view k) { return {"x-smg-routing-key", k}; }

// prefix + i. (Not `"k" + std::to_string(i)`: gcc 12 -O3 -Wrestrict
// false positive.)
std::string numbered(std::string_view prefix, int i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

}  // namespace

// --- Routing and fallback --------------------------------------------------

TEST_CASE("manual: one key is vacant first, then hits the same worker", "[manual]") {
  Cluster c(3);
  Manual p;
  const auto h = key("user-1");
  const auto first = c.select(p, with(h));
  REQUIRE(first);
  CHECK(first.branch == Branch::kVacant);
  for (int i = 0; i < 20; ++i) {
    const auto d = c.select(p, with(h));
    REQUIRE(d.id() == first.id());
    CHECK(d.branch == Branch::kOccupiedHit);
  }
  CHECK(p.size() == 1);
}

TEST_CASE("manual: different keys are each vacant and spread over workers", "[manual]") {
  Cluster c(3);
  Manual p;
  std::set<int> seen;
  for (int i = 0; i < 60; ++i) {
    const std::string k = numbered("key-", i);
    const auto d = c.select(p, with(key(k)));
    REQUIRE(d.branch == Branch::kVacant);
    seen.insert(c.index_of(d));
  }
  CHECK(seen == std::set<int>{0, 1, 2});
  CHECK(p.size() == 60);
}

TEST_CASE("manual: no routing key is no_routing_id, stores nothing, hits both workers",
          "[manual]") {
  Cluster c(2);
  Manual p;
  SECTION("header absent") {
    std::set<int> seen;
    for (int i = 0; i < 100; ++i) {
      const auto d = c.select(p);
      REQUIRE(d.branch == Branch::kNoRoutingId);
      seen.insert(c.index_of(d));
    }
    CHECK(seen == std::set<int>{0, 1});
  }
  SECTION("header present with an empty value") {
    const auto h = key("");
    std::set<int> seen;
    for (int i = 0; i < 100; ++i) {
      const auto d = c.select(p, with(h));
      REQUIRE(d.branch == Branch::kNoRoutingId);
      seen.insert(c.index_of(d));
    }
    CHECK(seen == std::set<int>{0, 1});
  }
  SECTION("another header is not a routing key") {
    const kvroute::Header h{"x-smg-target-worker", "0"};
    CHECK(c.select(p, with(h)).branch == Branch::kNoRoutingId);
  }
  CHECK(p.size() == 0);
}

TEST_CASE("manual: the header name matches case-insensitively", "[manual]") {
  Cluster c(3);
  Manual p;
  const kvroute::Header lower{"x-smg-routing-key", "k"};
  const kvroute::Header upper{"X-SMG-Routing-Key", "k"};
  const auto a = c.select(p, with(lower));
  const auto b = c.select(p, with(upper));
  CHECK(a.branch == Branch::kVacant);
  CHECK(b.branch == Branch::kOccupiedHit);
  CHECK(a.id() == b.id());
}

TEST_CASE("manual: with W0 unhealthy the key goes to W1, vacant then hits", "[manual]") {
  Cluster c(2);
  c.set_healthy(0, false);
  Manual p;
  const auto h = key("user-1");
  const auto first = c.select(p, with(h));
  CHECK(c.index_of(first) == 1);
  CHECK(first.branch == Branch::kVacant);
  for (int i = 0; i < 10; ++i) {
    const auto d = c.select(p, with(h));
    REQUIRE(c.index_of(d) == 1);
    CHECK(d.branch == Branch::kOccupiedHit);
  }
}

TEST_CASE("manual: no healthy workers or no workers gives none", "[manual]") {
  Manual p;
  const auto h = key("user-1");
  SECTION("all unhealthy, through select_worker and choose itself") {
    Cluster c(2);
    c.set_healthy(0, false);
    c.set_healthy(1, false);
    CHECK(c.select(p, with(h)).reason() == kvroute::NoWorker::kNoHealthyWorkers);
    auto snap = c.workers.snapshot();
    const kvroute::ClusterView view(*snap, snap->group(""), &c.load);
    const auto d = p.choose(with(h), view);
    CHECK_FALSE(d);
    CHECK(d.branch == Branch::kNoHealthyWorkers);
  }
  SECTION("empty cluster") {
    Cluster c(0);
    CHECK(c.select(p, with(h)).reason() == kvroute::NoWorker::kNoWorkers);
    const auto d = p.choose(with(h), kvroute::ClusterView{});
    CHECK_FALSE(d);
    CHECK(d.branch == Branch::kNoWorkers);
  }
  CHECK(p.size() == 0);
}

TEST_CASE("manual: a single worker is vacant, then hits", "[manual]") {
  Cluster c(1);
  Manual p;
  const auto h = key("only");
  CHECK(c.select(p, with(h)).branch == Branch::kVacant);
  for (int i = 0; i < 5; ++i) {
    const auto d = c.select(p, with(h));
    REQUIRE(c.index_of(d) == 0);
    CHECK(d.branch == Branch::kOccupiedHit);
  }
}

// --- Remapping and the candidate limit -------------------------------------

TEST_CASE("manual: remap on failure is occupied_miss, then hits the new worker", "[manual]") {
  Cluster c(3);
  Manual p;
  const auto h = key("user-1");
  const int original = c.index_of(c.select(p, with(h)));
  REQUIRE(original >= 0);
  c.set_healthy(static_cast<std::size_t>(original), false);
  const auto miss = c.select(p, with(h));
  CHECK(miss.branch == Branch::kOccupiedMiss);
  const int remapped = c.index_of(miss);
  CHECK(remapped >= 0);
  CHECK(remapped != original);
  for (int i = 0; i < 10; ++i) {
    const auto d = c.select(p, with(h));
    REQUIRE(c.index_of(d) == remapped);
    CHECK(d.branch == Branch::kOccupiedHit);
  }

  SECTION("recovery returns to the original, first in the candidate list") {
    c.set_healthy(static_cast<std::size_t>(original), true);
    for (int i = 0; i < 10; ++i) {
      const auto d = c.select(p, with(h));
      REQUIRE(c.index_of(d) == original);
      CHECK(d.branch == Branch::kOccupiedHit);
    }
    const auto e = p.entry("", "user-1");
    REQUIRE(e.has_value());
    CHECK(e->candidates == std::vector<WorkerId>{c.ids[static_cast<std::size_t>(original)],
                                                 c.ids[static_cast<std::size_t>(remapped)]});
  }
}

TEST_CASE("manual: at most two candidates, and two failovers forget the original", "[manual]") {
  Cluster c(3);
  Manual p;
  const auto h = key("user-1");
  const int first = c.index_of(c.select(p, with(h)));
  c.set_healthy(static_cast<std::size_t>(first), false);
  const auto m1 = c.select(p, with(h));
  REQUIRE(m1.branch == Branch::kOccupiedMiss);
  const int second = c.index_of(m1);
  c.set_healthy(static_cast<std::size_t>(second), false);
  const auto m2 = c.select(p, with(h));
  REQUIRE(m2.branch == Branch::kOccupiedMiss);
  const int third = c.index_of(m2);
  CHECK(std::set<int>{first, second, third} == std::set<int>{0, 1, 2});

  auto e = p.entry("", "user-1");
  REQUIRE(e.has_value());
  CHECK(e->candidates == std::vector<WorkerId>{c.ids[static_cast<std::size_t>(second)],
                                               c.ids[static_cast<std::size_t>(third)]});

  // Restore the first and the second: the second (still a candidate, and
  // now the oldest one) wins, not the forgotten first.
  c.set_healthy(static_cast<std::size_t>(first), true);
  c.set_healthy(static_cast<std::size_t>(second), true);
  for (int i = 0; i < 10; ++i) {
    const auto d = c.select(p, with(h));
    REQUIRE(c.index_of(d) == second);
    CHECK(d.branch == Branch::kOccupiedHit);
  }
}

TEST_CASE("manual: restoring the forgotten worker alone does not bring the key back", "[manual]") {
  // The spec's variant: fail the first, then the second, the third is chosen;
  // restore the first: the pick is not the first, as a hit.
  Cluster c(3);
  Manual p;
  const auto h = key("user-1");
  const int first = c.index_of(c.select(p, with(h)));
  c.set_healthy(static_cast<std::size_t>(first), false);
  const int second = c.index_of(c.select(p, with(h)));
  c.set_healthy(static_cast<std::size_t>(second), false);
  const int third = c.index_of(c.select(p, with(h)));
  c.set_healthy(static_cast<std::size_t>(first), true);
  for (int i = 0; i < 10; ++i) {
    const auto d = c.select(p, with(h));
    REQUIRE(c.index_of(d) == third);
    REQUIRE(c.index_of(d) != first);
    CHECK(d.branch == Branch::kOccupiedHit);
  }
}

// --- TTL ---------------------------------------------------------------------

TEST_CASE("manual: last access moves forward on vacant, hit and miss", "[manual][ttl]") {
  kvroute::ManualClock clock(100s);
  Cluster c(2);
  Manual p({.clock = &clock});
  const auto h = key("k");
  const int first = c.index_of(c.select(p, with(h)));
  CHECK(p.entry("", "k")->last_access == 100s);
  clock.advance(5s);
  CHECK(c.select(p, with(h)).branch == Branch::kOccupiedHit);
  CHECK(p.entry("", "k")->last_access == 105s);
  clock.advance(5s);
  c.set_healthy(static_cast<std::size_t>(first), false);
  CHECK(c.select(p, with(h)).branch == Branch::kOccupiedMiss);
  CHECK(p.entry("", "k")->last_access == 110s);
}

TEST_CASE("manual: an entry idle for max_idle is vacant again before any sweep", "[manual][ttl]") {
  kvroute::ManualClock clock;
  Cluster c(3);
  // The sweep is off, so only the exact TTL check can make it vacant.
  Manual p({.max_idle = 2s, .eviction_interval = 0s, .clock = &clock});
  const auto h = key("k");
  REQUIRE(c.select(p, with(h)).branch == Branch::kVacant);

  clock.advance(2s - 1ns);
  CHECK(c.select(p, with(h)).branch == Branch::kOccupiedHit);  // refreshed
  clock.advance(2s - 1ns);
  CHECK(c.select(p, with(h)).branch == Branch::kOccupiedHit);
  clock.advance(2s);
  CHECK(c.select(p, with(h)).branch == Branch::kVacant);
  CHECK(p.size() == 1);  // overwritten in place
  CHECK(c.select(p, with(h)).branch == Branch::kOccupiedHit);
}

TEST_CASE("manual: an expired key forgets its candidates", "[manual][ttl]") {
  kvroute::ManualClock clock;
  Cluster c(3);
  Manual p({.max_idle = 10s, .eviction_interval = 0s, .clock = &clock});
  const auto h = key("k");
  const int first = c.index_of(c.select(p, with(h)));
  c.set_healthy(static_cast<std::size_t>(first), false);
  REQUIRE(c.select(p, with(h)).branch == Branch::kOccupiedMiss);
  REQUIRE(p.entry("", "k")->candidates.size() == 2);
  clock.advance(10s);
  REQUIRE(c.select(p, with(h)).branch == Branch::kVacant);
  CHECK(p.entry("", "k")->candidates.size() == 1);
}

TEST_CASE("manual: the lazy sweep removes idle entries from the map", "[manual][ttl]") {
  kvroute::ManualClock clock;
  Cluster c(2);
  Manual p({.max_idle = 2s, .eviction_interval = 2s, .clock = &clock});
  REQUIRE(c.select(p, with(key("a"))).branch == Branch::kVacant);
  REQUIRE(c.select(p, with(key("b"))).branch == Branch::kVacant);
  CHECK(p.size() == 2);
  clock.advance(1s);
  REQUIRE(c.select(p, with(key("b"))).branch == Branch::kOccupiedHit);
  // t = 2 s: the sweep is due; "a" is 2 s idle (gone), "b" 1 s (kept).
  clock.advance(1s);
  REQUIRE(c.select(p, with(key("c"))).branch == Branch::kVacant);
  CHECK(p.size() == 2);
  CHECK_FALSE(p.entry("", "a").has_value());
  CHECK(p.entry("", "b").has_value());
  // t = 4 s (the spec's "sleep 4 s"): everything idle is swept by the next call.
  clock.advance(2s);
  CHECK(c.select(p).branch == Branch::kNoRoutingId);
  CHECK(p.size() == 0);
}

TEST_CASE("manual: the sweep does not run before its interval", "[manual][ttl]") {
  kvroute::ManualClock clock;
  Cluster c(2);
  Manual p({.max_idle = 1s, .eviction_interval = 10s, .clock = &clock});
  REQUIRE(c.select(p, with(key("a"))).branch == Branch::kVacant);
  clock.advance(5s);
  REQUIRE(c.select(p, with(key("b"))).branch == Branch::kVacant);
  CHECK(p.size() == 2);                                          // "a" is expired but not yet swept
  CHECK(c.select(p, with(key("a"))).branch == Branch::kVacant);  // yet absent
}

TEST_CASE("manual: maintain() sweeps even with the lazy sweep disabled", "[manual][ttl]") {
  kvroute::ManualClock clock;
  Cluster c(2);
  Manual p({.max_idle = 3s, .eviction_interval = 0s, .clock = &clock});
  for (int i = 0; i < 10; ++i) {
    REQUIRE(c.select(p, with(key(numbered("k", i)))).branch == Branch::kVacant);
  }
  clock.advance(2s);
  REQUIRE(c.select(p, with(key("k0"))).branch == Branch::kOccupiedHit);
  clock.advance(1s);
  for (int i = 0; i < 5; ++i) c.select(p);  // no sweep from choose
  CHECK(p.size() == 10);
  p.maintain();
  CHECK(p.size() == 1);
  CHECK(p.entry("", "k0").has_value());
}

TEST_CASE("manual: max_idle 0 disables expiry", "[manual][ttl]") {
  kvroute::ManualClock clock;
  Cluster c(2);
  Manual p({.max_idle = 0s, .eviction_interval = 1s, .clock = &clock});
  REQUIRE(c.select(p, with(key("k"))).branch == Branch::kVacant);
  clock.advance(std::chrono::hours(24 * 365));
  CHECK(c.select(p, with(key("k"))).branch == Branch::kOccupiedHit);
  p.maintain();
  CHECK(p.size() == 1);
}

TEST_CASE("manual: default options follow the gateway CLI", "[manual]") {
  const Manual::Options o;
  CHECK(o.mode == Mode::kRandom);
  CHECK(o.max_idle == 14400s);
  CHECK(o.eviction_interval == 120s);
  CHECK(o.clock == &kvroute::Clock::steady());
  CHECK(Manual().name() == "manual");
}

// --- Assignment modes --------------------------------------------------------

TEST_CASE("manual: min_group spreads 9 held keys 3/3/3 and keeps them sticky", "[manual][mode]") {
  Cluster c(3);
  Manual p({.mode = Mode::kMinGroup});
  std::vector<std::string> keys;
  for (int i = 0; i < 9; ++i) keys.push_back(numbered("session-", i));
  std::vector<kvroute::LoadGuard> guards;
  std::vector<int> owner;
  for (const std::string& k : keys) {
    const auto d = c.select(p, with(key(k)));
    REQUIRE(d.branch == Branch::kVacant);
    owner.push_back(c.index_of(d));
    guards.push_back(c.load.dispatch(d.id(), {.routing_key = k}));
  }
  for (std::size_t i = 0; i < 3; ++i) CHECK(c.load.active_keys(c.ids[i]) == 3);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto d = c.select(p, with(key(keys[i])));
    REQUIRE(c.index_of(d) == owner[i]);
    CHECK(d.branch == Branch::kOccupiedHit);
  }
}

TEST_CASE("manual: min_group sends a new key to the worker with fewest active keys",
          "[manual][mode]") {
  Cluster c(3);
  std::vector<kvroute::LoadGuard> guards;
  guards.push_back(c.load.dispatch(c.ids[0], {.routing_key = "a"}));
  guards.push_back(c.load.dispatch(c.ids[0], {.routing_key = "b"}));
  guards.push_back(c.load.dispatch(c.ids[1], {.routing_key = "c"}));
  // Many requests of one key are one group: W1 gets 5 more requests of "c"
  // and still has 1 active key, fewer than W0.
  for (int i = 0; i < 5; ++i) {
    guards.push_back(c.load.dispatch(c.ids[1], {.routing_key = "c"}));
  }
  Manual p({.mode = Mode::kMinGroup});
  for (int i = 0; i < 20; ++i) {
    const auto d = c.select(p, with(key(numbered("new-", i))));
    REQUIRE(c.index_of(d) == 2);
    CHECK(d.branch == Branch::kVacant);
  }
  // Without a key the mode applies too.
  CHECK(c.pick(p) == 2);
}

TEST_CASE("manual: min_group counts distinct keys, not requests", "[manual][mode]") {
  Cluster c(3);
  std::vector<kvroute::LoadGuard> guards;
  // W0: 4 requests of one key; W1 and W2: 2 requests with 2 keys each.
  for (int i = 0; i < 4; ++i) {
    guards.push_back(c.load.dispatch(c.ids[0], {.routing_key = "a"}));
  }
  guards.push_back(c.load.dispatch(c.ids[1], {.routing_key = "b"}));
  guards.push_back(c.load.dispatch(c.ids[1], {.routing_key = "c"}));
  guards.push_back(c.load.dispatch(c.ids[2], {.routing_key = "d"}));
  guards.push_back(c.load.dispatch(c.ids[2], {.routing_key = "e"}));
  Manual group({.mode = Mode::kMinGroup});
  Manual load({.mode = Mode::kMinLoad});
  for (int i = 0; i < 10; ++i) {
    const std::string k = numbered("new-", i);
    REQUIRE(c.pick(group, with(key(k))) == 0);
    REQUIRE(c.pick(load, with(key(k))) != 0);
  }
}

TEST_CASE("manual: min_load sends a new key to the least loaded worker", "[manual][mode]") {
  Cluster c(3);
  c.set_load(0, 2);
  c.set_load(1, 1);
  c.set_load(2, 0);
  Manual p({.mode = Mode::kMinLoad});
  for (int i = 0; i < 20; ++i) {
    REQUIRE(c.pick(p, with(key(numbered("k", i)))) == 2);
  }
  CHECK(c.pick(p) == 2);
}

TEST_CASE("manual: min-mode ties are broken at random, not toward W0", "[manual][mode]") {
  Cluster c(3);
  c.set_load(0, 1);  // W1 and W2 tie at 0
  Manual p({.mode = Mode::kMinLoad});
  std::vector<int> counts(3);
  for (int i = 0; i < 400; ++i) {
    ++counts[static_cast<std::size_t>(c.pick(p, with(key(numbered("k", i)))))];
  }
  CHECK(counts[0] == 0);
  CHECK(counts[1] > 150);
  CHECK(counts[2] > 150);
}

TEST_CASE("manual: random mode ignores load", "[manual][mode]") {
  Cluster c(2);
  c.set_load(0, 100);
  Manual p;
  int loaded = 0;
  for (int i = 0; i < 100; ++i) {
    loaded += c.pick(p, with(key(numbered("k", i)))) == 0;
  }
  CHECK(loaded > 20);
  CHECK(loaded < 80);
}

TEST_CASE("manual: equal seeds give equal assignments", "[manual]") {
  Cluster c(5);
  Manual a({.seed = 42});
  Manual b({.seed = 42});
  for (int i = 0; i < 50; ++i) {
    const std::string k = numbered("k", i);  // outlives the header view
    const auto h = key(k);
    REQUIRE(c.pick(a, with(h)) == c.pick(b, with(h)));
  }
}

// --- Scoping and removal -----------------------------------------------------

TEST_CASE("manual: the same key under two models has independent entries", "[manual]") {
  // Model-less workers serve both models: one pool, two key namespaces.
  Cluster c(3);
  Manual p;
  const auto h = key("shared-key");
  // Pin model-a to W0 and model-b to W1.
  c.set_healthy(1, false);
  c.set_healthy(2, false);
  REQUIRE(c.select(p, with(h, "model-a")).branch == Branch::kVacant);
  c.set_healthy(0, false);
  c.set_healthy(1, true);
  // The gateway (keys not scoped by model) would answer occupied_miss here.
  const auto b = c.select(p, with(h, "model-b"));
  CHECK(b.branch == Branch::kVacant);
  CHECK(c.index_of(b) == 1);
  c.set_healthy(0, true);
  c.set_healthy(2, true);
  CHECK(p.size() == 2);
  for (int i = 0; i < 5; ++i) {
    REQUIRE(c.pick(p, with(h, "model-a")) == 0);
    REQUIRE(c.pick(p, with(h, "model-b")) == 1);
  }
  // A failover under model-a does not touch model-b's candidates.
  c.set_healthy(0, false);
  CHECK(c.select(p, with(h, "model-a")).branch == Branch::kOccupiedMiss);
  CHECK(p.entry("model-a", "shared-key")->candidates.size() == 2);
  const auto d = c.select(p, with(h, "model-b"));
  CHECK(c.index_of(d) == 1);
  CHECK(d.branch == Branch::kOccupiedHit);
  CHECK(p.entry("model-b", "shared-key")->candidates == std::vector<WorkerId>{c.ids[1]});
  CHECK_FALSE(p.entry("", "shared-key").has_value());
}

TEST_CASE("manual: keys of models with their own workers stay in their pool", "[manual]") {
  Cluster c(0);
  c.add("llama");
  c.add("llama");
  c.add("qwen");
  c.add("qwen");
  Manual p;
  const auto h = key("k");
  for (int i = 0; i < 10; ++i) {
    CHECK(c.pick(p, with(h, "llama")) < 2);
    CHECK(c.pick(p, with(h, "qwen")) >= 2);
  }
  CHECK(p.size() == 2);
}

TEST_CASE("manual: a removed worker is never returned and leaves the lists", "[manual]") {
  Cluster c(3);
  Manual p;
  // Pin many keys; some land on W0.
  std::vector<std::string> on_w0;
  for (int i = 0; i < 30; ++i) {
    const std::string k = numbered("k", i);
    if (c.pick(p, with(key(k))) == 0) on_w0.push_back(k);
  }
  REQUIRE_FALSE(on_w0.empty());
  const WorkerId gone = c.ids[0];

  SECTION("removed from the set only: never chosen") {
    c.remove(0);
    for (const std::string& k : on_w0) {
      const auto d = c.select(p, with(key(k)));
      REQUIRE(d);
      REQUIRE(d.id() != gone);
      CHECK(d.branch == Branch::kOccupiedMiss);
    }
  }
  SECTION("and on_worker_removed: the keys start over without W0") {
    c.remove(0);
    p.on_worker_removed(gone);
    CHECK(p.size() == 30 - on_w0.size());
    for (const std::string& k : on_w0) {
      CHECK_FALSE(p.entry("", k).has_value());
      const auto d = c.select(p, with(key(k)));
      REQUIRE(d.id() != gone);
      CHECK(d.branch == Branch::kVacant);
    }
    for (int i = 0; i < 30; ++i) {
      const auto e = p.entry("", numbered("k", i));
      REQUIRE(e.has_value());
      for (WorkerId id : e->candidates) CHECK(id != gone);
    }
  }
  SECTION("on_worker_removed frees W0's candidate slot") {
    // A key with candidates [W0, Wx]: after removal only Wx remains, so a
    // later failover of Wx keeps the new worker and Wx, not a dead slot.
    const std::string& k = on_w0.front();
    c.set_healthy(0, false);
    const int x = c.index_of(c.select(p, with(key(k))));
    REQUIRE(x > 0);
    c.remove(0);
    p.on_worker_removed(gone);
    REQUIRE(p.entry("", k)->candidates ==
            std::vector<WorkerId>{c.ids[static_cast<std::size_t>(x)]});
    c.set_healthy(static_cast<std::size_t>(x), false);
    const int y = c.index_of(c.select(p, with(key(k))));
    CHECK(y > 0);
    CHECK(y != x);
    CHECK(p.entry("", k)->candidates == std::vector<WorkerId>{c.ids[static_cast<std::size_t>(x)],
                                                              c.ids[static_cast<std::size_t>(y)]});
  }
}

TEST_CASE("manual: known keys, misses and keyless requests do not allocate", "[manual]") {
  kvroute::ManualClock clock;
  Cluster c(3);
  Manual p({.mode = Mode::kMinGroup, .clock = &clock});
  std::vector<std::string> keys;
  // Longer than the small-string buffer: copying a key would allocate.
  for (int i = 0; i < 100; ++i) keys.push_back(numbered("conversation-with-a-long-id-", i));
  std::vector<kvroute::Header> headers;
  for (const std::string& k : keys) headers.push_back(key(k));
  auto snap = c.workers.snapshot();
  for (const auto& h : headers) {
    REQUIRE(kvroute::select_worker(p, with(h), *snap, c.load).branch == Branch::kVacant);
  }
  c.set_healthy(0, false);  // some keys now miss
  auto degraded = c.workers.snapshot();
  std::size_t hits = 0;
  std::size_t misses = 0;
  counting = true;
  for (int round = 0; round < 10; ++round) {
    clock.advance(1s);
    for (const auto& h : headers) {
      const auto d = kvroute::select_worker(p, with(h), *(round % 2 ? snap : degraded), c.load);
      hits += d.branch == Branch::kOccupiedHit;
      misses += d.branch == Branch::kOccupiedMiss;
    }
    (void)kvroute::select_worker(p, {}, *snap, c.load);
  }
  counting = false;
  CHECK(allocations == 0);
  CHECK(hits > 0);
  CHECK(misses > 0);
}

// --- Concurrency (run under TSan) -------------------------------------------

TEST_CASE("manual: concurrent choose, sweeps, removals and health flips", "[manual][concurrency]") {
  kvroute::ManualClock clock;
  Cluster c(4);
  Manual p({.mode = Mode::kMinGroup, .max_idle = 50ms, .eviction_interval = 10ms, .clock = &clock});
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3000; ++i) {
        const std::string k = numbered("k", (i * 7 + t) % 64);
        const kvroute::Header h = key(k);
        auto snap = c.workers.snapshot();
        const auto d = kvroute::select_worker(p, with(h), *snap, c.load);
        if (d) {
          if (!d.worker->healthy) ++bad;
          auto g = c.load.dispatch(d.id(), {.routing_key = k});
        }
      }
    });
  }
  threads.emplace_back([&] {
    int i = 0;
    while (!stop.load()) {
      clock.advance(1ms);
      if (++i % 50 == 0) p.maintain();
      std::this_thread::yield();
    }
  });
  threads.emplace_back([&] { kvtest::churn_membership(c, p); });
  for (std::size_t i = 0; i < 4; ++i) threads[i].join();
  stop.store(true);
  for (std::size_t i = 4; i < threads.size(); ++i) threads[i].join();
  CHECK(bad.load() == 0);
  CHECK(p.size() <= 64);
  p.on_worker_removed(c.ids[3]);
  for (int i = 0; i < 64; ++i) {
    if (auto e = p.entry("", numbered("k", i))) {
      for (WorkerId id : e->candidates) CHECK(id != c.ids[3]);
    }
  }
}
