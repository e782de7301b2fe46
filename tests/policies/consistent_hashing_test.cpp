#include "kvroute/policies/consistent_hashing.hpp"

#include <catch2/catch.hpp>
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kvroute/select_worker.hpp"
#include "support/cluster.hpp"

using kvroute::Branch;
using kvroute::ConsistentHashing;
using kvroute::Decision;
using kvroute::Header;
using kvtest::Cluster;

namespace {

Decision by_key(Cluster& c, ConsistentHashing& p, std::string_view key) {
  const Header h[] = {{"x-smg-routing-key", key}};
  return c.select(p, {.headers = h});
}
Decision by_target(Cluster& c, ConsistentHashing& p, std::string_view target) {
  const Header h[] = {{"x-smg-target-worker", target}};
  return c.select(p, {.headers = h});
}
Decision by_header(Cluster& c, ConsistentHashing& p, std::string_view name,
                   std::string_view value) {
  const Header h[] = {{name, value}};
  return c.select(p, {.headers = h});
}

std::vector<std::string> keys(std::size_t n, const std::string& prefix = "user-") {
  std::vector<std::string> ks;
  for (std::size_t i = 0; i < n; ++i) ks.push_back(prefix + std::to_string(i));
  return ks;
}

// Finds two values whose ring owners differ (under routing-key lookup).
std::pair<std::string, std::string> two_keys_on_different_workers(Cluster& c,
                                                                  ConsistentHashing& p) {
  const int first = c.index_of(by_key(c, p, "k-0"));
  for (int i = 1; i < 100; ++i) {
    std::string k = "k-" + std::to_string(i);
    if (c.index_of(by_key(c, p, k)) != first) return {"k-0", k};
  }
  FAIL("no two keys on different workers");
  return {};
}

}  // namespace

TEST_CASE("consistent_hashing: name", "[consistent_hashing]") {
  CHECK(ConsistentHashing().name() == "consistent_hashing");
}

TEST_CASE("consistent_hashing: the same routing key gives the same worker 10 times",
          "[consistent_hashing]") {
  Cluster c(4);
  ConsistentHashing p;
  const Decision first = by_key(c, p, "session-17");
  REQUIRE(first);
  CHECK(first.branch == Branch::kRoutingKeyHit);
  for (int i = 0; i < 10; ++i) {
    const Decision d = by_key(c, p, "session-17");
    REQUIRE(d.id() == first.id());
    CHECK(d.branch == Branch::kRoutingKeyHit);
  }
  // The header name is case-insensitive.
  CHECK(by_header(c, p, "X-SMG-Routing-Key", "session-17").id() == first.id());
  // A second policy instance (another router replica) agrees.
  ConsistentHashing other({.seed = 99});
  CHECK(by_key(c, other, "session-17").id() == first.id());
}

TEST_CASE("consistent_hashing: 1000 keys spread over all 4 workers", "[consistent_hashing]") {
  Cluster c(4);
  ConsistentHashing p;
  std::vector<int> counts(4);
  for (const std::string& k : keys(1000)) {
    const int i = c.index_of(by_key(c, p, k));
    REQUIRE(i >= 0);
    ++counts[static_cast<std::size_t>(i)];
  }
  // 150 virtual nodes per worker keep every share near 250.
  for (int n : counts) CHECK((n > 150 && n < 350));
}

TEST_CASE("consistent_hashing: target worker by id", "[consistent_hashing]") {
  Cluster c(2);
  ConsistentHashing p;
  SECTION("\"1\" names worker id 1") {
    const Decision d = by_target(c, p, "1");
    CHECK(c.index_of(d) == 1);
    CHECK(d.branch == Branch::kTargetWorkerHit);
    CHECK(c.index_of(by_target(c, p, "0")) == 0);
    CHECK(c.index_of(by_target(c, p, "001")) == 1);
  }
  SECTION("\"5\" with two workers is a strict miss") {
    const Decision d = by_target(c, p, "5");
    CHECK(!d);
    CHECK(d.branch == Branch::kTargetWorkerMiss);
    CHECK(d.reason() == kvroute::NoWorker::kPolicyMiss);
  }
  SECTION("an unhealthy target is a strict miss, not a fallback") {
    c.set_healthy(1, false);
    const Decision d = by_target(c, p, "1");
    CHECK(!d);
    CHECK(d.branch == Branch::kTargetWorkerMiss);
  }
  SECTION("unparsable values miss") {
    for (std::string_view v : {"", "abc", "1x", "-1", "+1", " 1", "1 ", "0x1", "1.0", "4294967296",
                               "99999999999999999999"}) {
      INFO("value '" << v << "'");
      const Decision d = by_target(c, p, v);
      CHECK(!d);
      CHECK(d.branch == Branch::kTargetWorkerMiss);
    }
  }
}

TEST_CASE("consistent_hashing: target worker by URL", "[consistent_hashing]") {
  Cluster c(3);
  ConsistentHashing p;
  const Decision d = by_target(c, p, c.url(2));
  CHECK(c.index_of(d) == 2);
  CHECK(d.branch == Branch::kTargetWorkerHit);
  // Exact match only.
  CHECK(!by_target(c, p, "http://W2:8000"));
  CHECK(!by_target(c, p, c.url(2) + "/"));
  CHECK(!by_target(c, p, "http://w7:8000"));
  c.set_healthy(2, false);
  CHECK(by_target(c, p, c.url(2)).branch == Branch::kTargetWorkerMiss);
}

TEST_CASE("consistent_hashing: target ids are stable across removals", "[consistent_hashing]") {
  // The gateway indexes the filtered slice: after removing worker 0, "1"
  // would name the worker that used to be at position 2.
  Cluster c(3);
  ConsistentHashing p;
  c.remove(0);
  CHECK(c.index_of(by_target(c, p, "1")) == 1);
  CHECK(c.index_of(by_target(c, p, "2")) == 2);
  CHECK(by_target(c, p, "0").branch == Branch::kTargetWorkerMiss);
  CHECK(by_target(c, p, c.url(0)).branch == Branch::kTargetWorkerMiss);
}

TEST_CASE("consistent_hashing: a target outside the request's model misses",
          "[consistent_hashing]") {
  Cluster c(0);
  c.add("llama");  // id 0
  c.add("qwen");   // id 1
  c.add("");       // id 2, serves any model
  ConsistentHashing p;
  const auto target = [&](std::string_view v) {
    const Header h[] = {{"x-smg-target-worker", v}};
    return c.select(p, {.headers = h, .model = "llama"});
  };
  CHECK(c.index_of(target("0")) == 0);
  CHECK(c.index_of(target("2")) == 2);
  CHECK(target("1").branch == Branch::kTargetWorkerMiss);
  CHECK(target(c.url(1)).branch == Branch::kTargetWorkerMiss);
  CHECK(c.index_of(target(c.url(2))) == 2);
}

TEST_CASE("consistent_hashing: the target worker beats the routing key", "[consistent_hashing]") {
  Cluster c(3);
  ConsistentHashing p;
  for (const std::string& k : keys(20)) {
    const Header h[] = {{"x-smg-routing-key", k}, {"x-smg-target-worker", "1"}};
    const Decision d = c.select(p, {.headers = h});
    REQUIRE(c.index_of(d) == 1);
    CHECK(d.branch == Branch::kTargetWorkerHit);
  }
  // ... and a missed target does not fall back to the key either.
  const Header h[] = {{"x-smg-routing-key", "user-1"}, {"x-smg-target-worker", "9"}};
  CHECK(c.select(p, {.headers = h}).branch == Branch::kTargetWorkerMiss);
}

TEST_CASE("consistent_hashing: no key headers give a random fallback that spreads",
          "[consistent_hashing]") {
  Cluster c(4);
  ConsistentHashing p;
  std::set<int> seen;
  const Header unrelated[] = {{"content-type", "application/json"}};
  for (int i = 0; i < 100; ++i) {
    const Decision d =
        c.select(p, i % 2 ? kvroute::RequestView{.headers = unrelated} : kvroute::RequestView{});
    REQUIRE(d);
    CHECK(d.branch == Branch::kRandomFallback);
    seen.insert(c.index_of(d));
  }
  CHECK(seen == std::set<int>{0, 1, 2, 3});
}

TEST_CASE("consistent_hashing: an empty routing key is no key", "[consistent_hashing]") {
  Cluster c(4);
  ConsistentHashing p;
  std::set<int> seen;
  for (int i = 0; i < 100; ++i) {
    const Decision d = by_key(c, p, "");
    REQUIRE(d);
    CHECK(d.branch == Branch::kRandomFallback);
    seen.insert(c.index_of(d));
  }
  CHECK(seen.size() > 1);
  // An implicit key still applies after it.
  const Header h[] = {{"x-smg-routing-key", ""}, {"authorization", "Bearer t"}};
  CHECK(c.select(p, {.headers = h}).branch == Branch::kImplicitKeyHit);
}

TEST_CASE("consistent_hashing: no healthy workers", "[consistent_hashing]") {
  ConsistentHashing p;
  SECTION("the only worker unhealthy") {
    Cluster c(1);
    c.set_healthy(0, false);
    CHECK(by_key(c, p, "k").branch == Branch::kNoHealthyWorkers);
    CHECK(by_target(c, p, "0").branch == Branch::kNoHealthyWorkers);
    // The policy itself checks, without select_worker's pre-check.
    auto snap = c.workers.snapshot();
    const kvroute::ClusterView view(*snap, snap->group(""), &c.load);
    const Header h[] = {{"x-smg-routing-key", "k"}};
    CHECK(p.choose({.headers = h}, view).branch == Branch::kNoHealthyWorkers);
  }
  SECTION("no workers at all") {
    Cluster c(0);
    CHECK(by_key(c, p, "k").branch == Branch::kNoWorkers);
    const Header h[] = {{"x-smg-routing-key", "k"}};
    CHECK(p.choose({.headers = h}, kvroute::ClusterView{}).branch == Branch::kNoWorkers);
  }
}

TEST_CASE("consistent_hashing: implicit keys in priority order", "[consistent_hashing]") {
  Cluster c(4);
  ConsistentHashing p;
  const auto [a, b] = two_keys_on_different_workers(c, p);
  const int wa = c.index_of(by_key(c, p, a));
  const int wb = c.index_of(by_key(c, p, b));
  REQUIRE(wa != wb);

  SECTION("each implicit header alone is a stable key; the raw value is the key") {
    for (std::string_view name : {"authorization", "x-forwarded-for", "cookie", "Cookie"}) {
      INFO(name);
      for (int i = 0; i < 5; ++i) {
        const Decision d = by_header(c, p, name, a);
        CHECK(c.index_of(d) == wa);
        CHECK(d.branch == Branch::kImplicitKeyHit);
      }
      CHECK(c.index_of(by_header(c, p, name, b)) == wb);
    }
  }
  SECTION("authorization beats x-forwarded-for beats cookie") {
    const Header h1[] = {{"cookie", b}, {"x-forwarded-for", b}, {"authorization", a}};
    CHECK(c.index_of(c.select(p, {.headers = h1})) == wa);
    const Header h2[] = {{"cookie", b}, {"x-forwarded-for", a}};
    CHECK(c.index_of(c.select(p, {.headers = h2})) == wa);
    const Header h3[] = {{"cookie", a}, {"x-forwarded-for", b}};
    CHECK(c.index_of(c.select(p, {.headers = h3})) == wb);
  }
  SECTION("the routing key beats implicit keys") {
    const Header h[] = {{"authorization", b}, {"x-smg-routing-key", a}};
    const Decision d = c.select(p, {.headers = h});
    CHECK(c.index_of(d) == wa);
    CHECK(d.branch == Branch::kRoutingKeyHit);
  }
  SECTION("an empty first present implicit header stops the search") {
    const Header h1[] = {{"authorization", ""}, {"x-forwarded-for", a}, {"cookie", a}};
    const Header h2[] = {{"x-forwarded-for", ""}, {"cookie", a}};
    std::set<int> seen;
    for (int i = 0; i < 60; ++i) {
      const Decision d1 = c.select(p, {.headers = h1});
      const Decision d2 = c.select(p, {.headers = h2});
      CHECK(d1.branch == Branch::kRandomFallback);
      CHECK(d2.branch == Branch::kRandomFallback);
      seen.insert(c.index_of(d1));
      seen.insert(c.index_of(d2));
    }
    CHECK(seen.size() > 1);  // really random, not the key's worker
  }
  SECTION("header values are opaque bytes") {
    const std::string_view bad("\xff\xfe\x00x", 4);
    const Decision d = by_header(c, p, "cookie", bad);
    CHECK(d.branch == Branch::kImplicitKeyHit);
    for (int i = 0; i < 5; ++i) CHECK(by_header(c, p, "cookie", bad).id() == d.id());
  }
}

TEST_CASE("consistent_hashing: removing a worker moves only its own keys", "[consistent_hashing]") {
  Cluster c(5);
  ConsistentHashing p;
  const auto ks = keys(1000);
  std::vector<int> before;
  for (const std::string& k : ks) before.push_back(c.index_of(by_key(c, p, k)));

  const int gone = 2;
  SECTION("removed") { c.remove(gone); }
  SECTION("marked unhealthy") { c.set_healthy(gone, false); }

  std::map<int, int> moved_to;
  int owned_by_gone = 0;
  for (std::size_t i = 0; i < ks.size(); ++i) {
    const int now = c.index_of(by_key(c, p, ks[i]));
    REQUIRE(now >= 0);
    REQUIRE(now != gone);
    if (before[i] == gone) {
      ++owned_by_gone;
      ++moved_to[now];
    } else {
      INFO(ks[i]);
      REQUIRE(now == before[i]);  // no key moves between survivors
    }
  }
  CHECK(owned_by_gone > 100);
  // The orphaned keys spread over the survivors instead of piling onto one.
  CHECK(moved_to.size() == 4);
  for (const auto& [w, n] : moved_to) CHECK(n < owned_by_gone / 2);
}

TEST_CASE("consistent_hashing: minimal redistribution, gateway variant (4 workers, W1 down)",
          "[consistent_hashing]") {
  Cluster c(4);
  ConsistentHashing p;
  const auto ks = keys(100);
  std::vector<int> before;
  for (const std::string& k : ks) before.push_back(c.index_of(by_key(c, p, k)));
  c.set_healthy(1, false);
  int moved = 0, on_w1 = 0;
  for (std::size_t i = 0; i < ks.size(); ++i) {
    on_w1 += before[i] == 1;
    moved += c.index_of(by_key(c, p, ks[i])) != before[i];
  }
  CHECK(on_w1 > 0);
  CHECK(moved == on_w1);  // the gateway test allows on_w1 + 5
  CHECK(moved < 50);
}

TEST_CASE("consistent_hashing: failover and recovery", "[consistent_hashing]") {
  Cluster c(4);
  ConsistentHashing p;
  for (const std::string& k : keys(10, "tenant-")) {
    INFO(k);
    const int home = c.index_of(by_key(c, p, k));
    REQUIRE(home >= 0);
    c.set_healthy(static_cast<std::size_t>(home), false);
    const int away = c.index_of(by_key(c, p, k));
    CHECK(away >= 0);
    CHECK(away != home);
    for (int i = 0; i < 5; ++i) CHECK(c.index_of(by_key(c, p, k)) == away);
    c.set_healthy(static_cast<std::size_t>(home), true);
    CHECK(c.index_of(by_key(c, p, k)) == home);
  }
}

TEST_CASE("consistent_hashing: a key stays within its model's workers", "[consistent_hashing]") {
  Cluster c(0);
  for (int i = 0; i < 3; ++i) c.add("llama");  // 0..2
  for (int i = 0; i < 3; ++i) c.add("qwen");   // 3..5
  ConsistentHashing p;
  std::set<int> seen;
  for (const std::string& k : keys(200)) {
    const Header h[] = {{"x-smg-routing-key", k}};
    const int i = c.pick(p, {.headers = h, .model = "qwen"});
    REQUIRE(i >= 3);
    REQUIRE(i <= 5);
    seen.insert(i);
  }
  CHECK(seen.size() == 3);
}

TEST_CASE("consistent_hashing: a worker removed mid-flight", "[consistent_hashing]") {
  Cluster c(4);
  ConsistentHashing p;
  const auto ks = keys(300);
  auto old_snap = c.workers.snapshot();
  std::vector<kvroute::WorkerId> before;
  for (const std::string& k : ks) {
    const Header h[] = {{"x-smg-routing-key", k}};
    before.push_back(kvroute::select_worker(p, {.headers = h}, *old_snap, c.load).id());
  }
  const kvroute::WorkerId removed = c.ids[1];
  c.remove(1);
  auto new_snap = c.workers.snapshot();
  int was_on_removed = 0;
  for (std::size_t i = 0; i < ks.size(); ++i) {
    const Header h[] = {{"x-smg-routing-key", ks[i]}};
    const Decision now = kvroute::select_worker(p, {.headers = h}, *new_snap, c.load);
    REQUIRE(now);
    REQUIRE(now.id() != removed);
    REQUIRE(new_snap->find(now.id()) == now.worker);  // points into the new snapshot
    if (before[i] == removed) {
      ++was_on_removed;
    } else {
      CHECK(now.id() == before[i]);
    }
    // The old snapshot still answers as before for a selection in flight.
    const Decision old = kvroute::select_worker(p, {.headers = h}, *old_snap, c.load);
    CHECK(old.id() == before[i]);
  }
  CHECK(was_on_removed > 0);
  // Random fallbacks and targets on the new snapshot never name it either.
  for (int i = 0; i < 200; ++i) {
    REQUIRE(kvroute::select_worker(p, {}, *new_snap, c.load).id() != removed);
  }
  const Header t[] = {{"x-smg-target-worker", "1"}};
  CHECK(kvroute::select_worker(p, {.headers = t}, *new_snap, c.load).branch ==
        Branch::kTargetWorkerMiss);
  CHECK(kvroute::select_worker(p, {.headers = t}, *old_snap, c.load).id() == removed);
}

TEST_CASE("consistent_hashing: random fallback is deterministic per seed", "[consistent_hashing]") {
  Cluster c(8);
  ConsistentHashing a({.seed = 11}), b({.seed = 11}), other({.seed = 12});
  std::vector<int> sa, sb, so;
  for (int i = 0; i < 64; ++i) {
    sa.push_back(c.pick(a));
    sb.push_back(c.pick(b));
    so.push_back(c.pick(other));
  }
  CHECK(sa == sb);
  CHECK(sa != so);
  CHECK(std::set<int>(sa.begin(), sa.end()).size() > 4);
}

TEST_CASE("consistent_hashing: bounded load", "[consistent_hashing][bounded_load]") {
  Cluster c(5);
  const std::string key = "session-17";
  ConsistentHashing plain;
  // The owner and the next two healthy members along the key's ring walk,
  // found by taking earlier ones out of the healthy set.
  const int owner = c.index_of(by_key(c, plain, key));
  c.set_healthy(static_cast<std::size_t>(owner), false);
  const int second = c.index_of(by_key(c, plain, key));
  c.set_healthy(static_cast<std::size_t>(second), false);
  const int third = c.index_of(by_key(c, plain, key));
  c.set_healthy(static_cast<std::size_t>(owner), true);
  c.set_healthy(static_cast<std::size_t>(second), true);
  REQUIRE(owner != second);
  REQUIRE(third != owner);
  REQUIRE(third != second);
  const auto at = [](int i) { return static_cast<std::size_t>(i); };

  ConsistentHashing p({.bounded_load_factor = 1.25});

  SECTION("off by default: an overloaded owner keeps its keys") {
    c.set_load(at(owner), 100);
    const Decision d = by_key(c, plain, key);
    CHECK(c.index_of(d) == owner);
    CHECK(d.branch == Branch::kRoutingKeyHit);
  }
  SECTION("no load: the owner") {
    const Decision d = by_key(c, p, key);
    CHECK(c.index_of(d) == owner);
    CHECK(d.branch == Branch::kRoutingKeyHit);
  }
  SECTION("owner within bound: 2 each, bound 1.25 * 11 / 5 = 2.75") {
    for (std::size_t i = 0; i < 5; ++i) c.set_load(i, 2);
    const Decision d = by_key(c, p, key);
    CHECK(c.index_of(d) == owner);
    CHECK(d.branch == Branch::kRoutingKeyHit);
  }
  SECTION("owner over bound spills to its ring successor, always the same one") {
    c.set_load(at(owner), 10);  // total 10, bound 2.75
    for (int i = 0; i < 5; ++i) {
      const Decision d = by_key(c, p, key);
      CHECK(c.index_of(d) == second);
      CHECK(d.branch == Branch::kBoundedLoadSpill);
    }
    // Implicit keys spill the same way.
    const Decision d = by_header(c, p, "authorization", key);
    CHECK(c.index_of(d) == second);
    CHECK(d.branch == Branch::kBoundedLoadSpill);
    // Once the owner is back within its bound the key comes home: owner 3,
    // the others 2 each, total 11, bound 1.25 * 12 / 5 = 3.
    c.set_load(at(owner), 3);
    for (std::size_t i = 0; i < 5; ++i) {
      if (i != at(owner)) c.set_load(i, 2);
    }
    const Decision home = by_key(c, p, key);
    CHECK(c.index_of(home) == owner);
    CHECK(home.branch == Branch::kRoutingKeyHit);
  }
  SECTION("an over-bound successor is skipped too") {
    c.set_load(at(owner), 3);  // total 6, bound 1.25 * 7 / 5 = 1.75
    c.set_load(at(second), 3);
    const Decision d = by_key(c, p, key);
    CHECK(c.index_of(d) == third);
    CHECK(d.branch == Branch::kBoundedLoadSpill);
  }
  SECTION("the bound is strict: in_flight > factor * (total + 1) / n") {
    ConsistentHashing p1({.bounded_load_factor = 1.0});
    Cluster c4(4);
    const int o = c4.index_of(by_key(c4, p1, key));
    std::vector<std::size_t> rest;
    for (std::size_t i = 0; i < 4; ++i) {
      if (static_cast<int>(i) != o) rest.push_back(i);
    }
    // total 7, bound 8 / 4 = 2: the owner at 2 is within it.
    c4.set_load(static_cast<std::size_t>(o), 2);
    c4.set_load(rest[0], 2);
    c4.set_load(rest[1], 2);
    c4.set_load(rest[2], 1);
    CHECK(by_key(c4, p1, key).branch == Branch::kRoutingKeyHit);
    // Owner at 3, still total 7: over.
    c4.set_load(static_cast<std::size_t>(o), 3);
    c4.set_load(rest[0], 1);
    const Decision d = by_key(c4, p1, key);
    CHECK(d.branch == Branch::kBoundedLoadSpill);
    CHECK(c4.index_of(d) != o);
  }
  SECTION("load on unhealthy workers does not count") {
    // Healthy: owner 2, second 0, others out. Total 2 over 2 healthy, bound
    // 1.25 * 3 / 2 = 1.875: the owner spills. Counting the unhealthy
    // workers' 300 would raise the bound far above 2.
    for (std::size_t i = 0; i < 5; ++i) {
      if (static_cast<int>(i) == owner || static_cast<int>(i) == second) continue;
      c.set_load(i, 100);
      c.set_healthy(i, false);
    }
    c.set_load(at(owner), 2);
    const Decision d = by_key(c, p, key);
    CHECK(c.index_of(d) == second);
    CHECK(d.branch == Branch::kBoundedLoadSpill);
  }
  SECTION("nobody within bound keeps the owner") {
    ConsistentHashing half({.bounded_load_factor = 0.5});
    for (std::size_t i = 0; i < 5; ++i) c.set_load(i, 10);  // bound 0.5 * 51 / 5 = 5.1
    const Decision d = by_key(c, half, key);
    CHECK(c.index_of(d) == owner);
    CHECK(d.branch == Branch::kRoutingKeyHit);
  }
  SECTION("an explicit target ignores the bound") {
    c.set_load(at(owner), 50);
    const Decision d = by_target(c, p, std::to_string(c.ids[at(owner)].value));
    CHECK(c.index_of(d) == owner);
    CHECK(d.branch == Branch::kTargetWorkerHit);
  }
}
