#include "kvroute/policies/prefix_hash.hpp"

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kvroute/detail/stable_hash.hpp"
#include "kvroute/select_worker.hpp"
#include "support/cluster.hpp"

using kvroute::Branch;
using kvroute::Decision;
using kvroute::PrefixHash;
using kvtest::Cluster;
using Tokens = std::vector<std::uint32_t>;

namespace {

Decision by_tokens(Cluster& c, PrefixHash& p, const Tokens& t) {
  return c.select(p, {.tokens = t});
}
Decision by_text(Cluster& c, PrefixHash& p, std::string_view text) {
  return c.select(p, {.text = text});
}

// A deterministic token sequence of `n` ids for `seed`.
Tokens sequence(std::uint32_t seed, std::size_t n) {
  Tokens t;
  std::uint64_t x = seed;
  for (std::size_t i = 0; i < n; ++i) {
    x = kvroute::detail::splitmix64(x);
    t.push_back(static_cast<std::uint32_t>(x % 50000));
  }
  return t;
}

Tokens concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::size_t at(int i) { return static_cast<std::size_t>(i); }

}  // namespace

TEST_CASE("prefix_hash: name and defaults", "[prefix_hash]") {
  CHECK(PrefixHash().name() == "prefix_hash");
  const PrefixHash::Options o;
  CHECK(o.prefix_token_count == 256);
  CHECK(o.load_factor == 1.25);
}

TEST_CASE("prefix_hash: the same tokens give the same worker", "[prefix_hash]") {
  Cluster c(4);
  PrefixHash p;
  const Tokens t = sequence(1, 300);
  const Decision first = by_tokens(c, p, t);
  REQUIRE(first);
  CHECK(first.branch == Branch::kRingHit);
  for (int i = 0; i < 10; ++i) {
    const Decision d = by_tokens(c, p, t);
    REQUIRE(d.id() == first.id());
    CHECK(d.branch == Branch::kRingHit);
  }
  PrefixHash replica({.seed = 42});
  CHECK(by_tokens(c, replica, t).id() == first.id());
}

TEST_CASE("prefix_hash: different sequences spread over all workers", "[prefix_hash]") {
  Cluster c(4);
  PrefixHash p;
  std::vector<int> counts(4);
  for (std::uint32_t s = 0; s < 400; ++s) {
    const int i = c.index_of(by_tokens(c, p, sequence(s, 64)));
    REQUIRE(i >= 0);
    ++counts[at(i)];
  }
  for (int n : counts) CHECK((n > 50 && n < 150));
}

TEST_CASE("prefix_hash: only the first prefix_token_count tokens count", "[prefix_hash]") {
  Cluster c(4);
  const Tokens head = {101, 102, 103, 104, 105};
  PrefixHash p5({.prefix_token_count = 5});
  PrefixHash p_all;
  const int home = c.index_of(by_tokens(c, p5, head));
  std::set<int> with_default;
  for (std::uint32_t s = 0; s < 50; ++s) {
    const Tokens t = concat(head, sequence(s, 1 + s % 20));
    CHECK(c.index_of(by_tokens(c, p5, t)) == home);
    CHECK(p5.position({.tokens = t}) == p5.position({.tokens = head}));
    with_default.insert(c.index_of(by_tokens(c, p_all, t)));
  }
  // With 256 the tails matter, so the same sequences do spread.
  CHECK(with_default.size() > 1);
  // A difference inside the prefix changes the position.
  const Tokens other = {101, 102, 103, 104, 106};
  CHECK(p5.position({.tokens = other}) != p5.position({.tokens = head}));
  // A shorter sequence hashes all of itself, not a padded prefix.
  const Tokens shorter = {101, 102, 103, 104};
  CHECK(p5.position({.tokens = shorter}) != p5.position({.tokens = head}));
}

TEST_CASE("prefix_hash: tokens win over text", "[prefix_hash]") {
  PrefixHash p;
  const Tokens t = sequence(7, 10);
  CHECK(p.position({.text = "one text", .tokens = t}) ==
        p.position({.text = "a different text", .tokens = t}));
  CHECK(p.position({.text = "one text", .tokens = t}) != p.position({.text = "one text"}));
}

TEST_CASE("prefix_hash: without tokens the text prefix routes", "[prefix_hash]") {
  Cluster c(4);
  PrefixHash p8({.prefix_token_count = 8});
  const Decision first = by_text(c, p8, "You are a helpful assistant.");
  REQUIRE(first);
  CHECK(first.branch == Branch::kRingHit);
  std::set<int> seen;
  for (int i = 0; i < 40; ++i) {
    const std::string tail = " question " + std::to_string(i);
    // Same first 8 characters ("You are "), different tails: together.
    CHECK(by_text(c, p8, "You are " + tail).id() == first.id());
    // Different first 8 characters: spread.
    seen.insert(c.index_of(by_text(c, p8, std::to_string(i) + tail)));
  }
  CHECK(seen.size() > 1);
  // Text shorter than the prefix is hashed whole.
  CHECK(p8.position({.text = "You"}) == kvroute::detail::xxh64("You"));
}

TEST_CASE("prefix_hash: the text prefix counts characters, not bytes", "[prefix_hash]") {
  Cluster c(4);
  PrefixHash p4({.prefix_token_count = 4});
  const std::string hello_world = "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c";  // 你好世界
  // Four characters are 12 bytes here.
  CHECK(p4.position({.text = hello_world + "!!"}) == kvroute::detail::xxh64(hello_world));
  CHECK(p4.position({.text = hello_world + "\xe5\x95\x8a more"}) ==
        kvroute::detail::xxh64(hello_world));
  // "你好" + two different characters: the first 4 *bytes* agree ("你" and
  // half of "好"), the first 4 characters do not, so these spread.
  const std::string ni_hao = "\xe4\xbd\xa0\xe5\xa5\xbd";
  std::set<int> seen;
  std::set<std::uint64_t> positions;
  for (std::uint32_t cp = 0x4e00; cp < 0x4e00 + 40; ++cp) {
    std::string s = ni_hao;
    for (int k = 0; k < 2; ++k) {  // the same 3-byte character twice
      s.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
    positions.insert(*p4.position({.text = s}));
    seen.insert(c.index_of(by_text(c, p4, s)));
  }
  CHECK(positions.size() == 40);
  CHECK(seen.size() > 1);
}

TEST_CASE("prefix_hash: neither tokens nor text is a random fallback", "[prefix_hash]") {
  Cluster c(4);
  PrefixHash p;
  CHECK(!p.position({}));
  std::set<int> seen;
  for (int i = 0; i < 100; ++i) {
    const Decision d = c.select(p, {.text = "", .tokens = {}});
    REQUIRE(d);
    CHECK(d.branch == Branch::kRandomFallback);
    seen.insert(c.index_of(d));
  }
  CHECK(seen == std::set<int>{0, 1, 2, 3});
}

TEST_CASE("prefix_hash: no healthy workers", "[prefix_hash]") {
  PrefixHash p;
  const Tokens t = {1, 2, 3};
  Cluster c(2);
  c.set_healthy(0, false);
  c.set_healthy(1, false);
  CHECK(by_tokens(c, p, t).branch == Branch::kNoHealthyWorkers);
  // The policy itself checks, without select_worker's pre-check.
  auto snap = c.workers.snapshot();
  const kvroute::ClusterView view(*snap, snap->group(""), &c.load);
  CHECK(p.choose({.tokens = t}, view).branch == Branch::kNoHealthyWorkers);
  CHECK(p.choose({.tokens = t}, kvroute::ClusterView{}).branch == Branch::kNoWorkers);
}

TEST_CASE("prefix_hash: load_ok arithmetic", "[prefix_hash]") {
  // ((100 + 1) / 4) * 1.25 = 31.5625
  CHECK(PrefixHash::load_ok(30, 100, 4, 1.25));
  CHECK(PrefixHash::load_ok(31, 100, 4, 1.25));
  CHECK_FALSE(PrefixHash::load_ok(32, 100, 4, 1.25));
  CHECK_FALSE(PrefixHash::load_ok(35, 100, 4, 1.25));
  // Total 0 is always ok; so is n 0.
  CHECK(PrefixHash::load_ok(1000, 0, 4, 1.25));
  CHECK(PrefixHash::load_ok(1000, 10, 0, 1.25));
  // The +1 counts the incoming request: (3 + 1) / 4 * 1 = 1.
  CHECK(PrefixHash::load_ok(1, 3, 4, 1.0));
  CHECK_FALSE(PrefixHash::load_ok(2, 3, 4, 1.0));
}

TEST_CASE("prefix_hash: bounded load through choose()", "[prefix_hash][bounded_load]") {
  Cluster c(4);
  PrefixHash p;  // load_factor 1.25; with total 100 over 4 the bound is 31.5625
  const Tokens t = sequence(3, 40);
  const int pick = c.index_of(by_tokens(c, p, t));
  c.set_healthy(at(pick), false);
  const int next = c.index_of(by_tokens(c, p, t));  // the ring successor
  c.set_healthy(at(pick), true);
  REQUIRE(pick >= 0);
  REQUIRE(next >= 0);
  REQUIRE(pick != next);
  std::vector<std::size_t> others;
  for (std::size_t i = 0; i < 4; ++i) {
    if (i != at(pick) && i != at(next)) others.push_back(i);
  }

  SECTION("ring pick at 30 of 100 is load-ok: ring_hit") {
    c.set_load(at(pick), 30);
    c.set_load(at(next), 23);
    c.set_load(others[0], 23);
    c.set_load(others[1], 24);
    const Decision d = by_tokens(c, p, t);
    CHECK(c.index_of(d) == pick);
    CHECK(d.branch == Branch::kRingHit);
  }
  SECTION("ring pick at 31 of 100 is still load-ok") {
    c.set_load(at(pick), 31);
    c.set_load(at(next), 23);
    c.set_load(others[0], 23);
    c.set_load(others[1], 23);
    CHECK(by_tokens(c, p, t).branch == Branch::kRingHit);
  }
  SECTION("ring pick at 32 of 100 is not: load_balance_walk") {
    c.set_load(at(pick), 32);
    c.set_load(at(next), 23);
    c.set_load(others[0], 23);
    c.set_load(others[1], 22);
    const Decision d = by_tokens(c, p, t);
    CHECK(c.index_of(d) == next);
    CHECK(d.branch == Branch::kLoadBalanceWalk);
  }
  SECTION("ring pick at 35 walks to its ring successor, not the least loaded") {
    // The gateway would take the global minimum (17); the walk keeps every
    // request of this prefix on one spill worker.
    c.set_load(at(pick), 35);
    c.set_load(at(next), 30);
    c.set_load(others[0], 17);
    c.set_load(others[1], 18);
    for (int i = 0; i < 5; ++i) {
      const Decision d = by_tokens(c, p, t);
      CHECK(c.index_of(d) == next);
      CHECK(d.branch == Branch::kLoadBalanceWalk);
    }
  }
  SECTION("an over-bound successor is skipped as well") {
    c.set_load(at(pick), 35);
    c.set_load(at(next), 35);
    c.set_load(others[0], 15);
    c.set_load(others[1], 15);
    const Decision d = by_tokens(c, p, t);
    CHECK(c.index_of(d) != pick);
    CHECK(c.index_of(d) != next);
    CHECK(d.branch == Branch::kLoadBalanceWalk);
  }
  SECTION("no worker load-ok keeps the ring pick") {
    PrefixHash half({.load_factor = 0.5});
    for (std::size_t i = 0; i < 4; ++i) c.set_load(i, 10);  // bound 0.5 * 41 / 4
    const Decision d = by_tokens(c, half, t);
    CHECK(c.index_of(d) == pick);
    CHECK(d.branch == Branch::kLoadBalanceWalk);
  }
  SECTION("loads on unhealthy workers do not count") {
    // Healthy pick 20 and next 0: total 20 over 2, bound 13.125, so the pick
    // spills. Counting the two unhealthy workers' 200 would keep it.
    for (std::size_t i : others) {
      c.set_load(i, 100);
      c.set_healthy(i, false);
    }
    c.set_load(at(pick), 20);
    const Decision d = by_tokens(c, p, t);
    CHECK(c.index_of(d) == next);
    CHECK(d.branch == Branch::kLoadBalanceWalk);
  }
}

TEST_CASE("prefix_hash: an unhealthy ring pick moves to its successor and back", "[prefix_hash]") {
  Cluster c(4);
  PrefixHash p;
  for (std::uint32_t s = 0; s < 10; ++s) {
    const Tokens t = sequence(s, 32);
    const int home = c.index_of(by_tokens(c, p, t));
    c.set_healthy(at(home), false);
    const Decision away = by_tokens(c, p, t);
    CHECK(away);
    CHECK(c.index_of(away) != home);
    CHECK(away.branch == Branch::kRingHit);
    c.set_healthy(at(home), true);
    CHECK(c.index_of(by_tokens(c, p, t)) == home);
  }
}

TEST_CASE("prefix_hash: removing a worker moves only its own prefixes", "[prefix_hash]") {
  Cluster c(5);
  PrefixHash p;
  std::vector<int> before;
  for (std::uint32_t s = 0; s < 500; ++s)
    before.push_back(c.index_of(by_tokens(c, p, sequence(s, 16))));
  c.remove(3);
  int moved = 0;
  for (std::uint32_t s = 0; s < 500; ++s) {
    const int now = c.index_of(by_tokens(c, p, sequence(s, 16)));
    REQUIRE(now != 3);
    if (before[s] == 3) {
      ++moved;
    } else {
      REQUIRE(now == before[s]);
    }
  }
  CHECK(moved > 50);
}

TEST_CASE("prefix_hash: a worker removed mid-flight", "[prefix_hash]") {
  Cluster c(4);
  PrefixHash p;
  auto old_snap = c.workers.snapshot();
  std::vector<kvroute::WorkerId> before;
  for (std::uint32_t s = 0; s < 200; ++s) {
    const Tokens t = sequence(s, 24);
    before.push_back(kvroute::select_worker(p, {.tokens = t}, *old_snap, c.load).id());
  }
  const kvroute::WorkerId removed = c.ids[2];
  c.remove(2);
  auto new_snap = c.workers.snapshot();
  int was_on_removed = 0;
  for (std::uint32_t s = 0; s < 200; ++s) {
    const Tokens t = sequence(s, 24);
    const Decision now = kvroute::select_worker(p, {.tokens = t}, *new_snap, c.load);
    REQUIRE(now);
    REQUIRE(now.id() != removed);
    REQUIRE(new_snap->find(now.id()) == now.worker);
    if (before[s] == removed) ++was_on_removed;
    // The old snapshot is unchanged for a selection still holding it.
    CHECK(kvroute::select_worker(p, {.tokens = t}, *old_snap, c.load).id() == before[s]);
  }
  CHECK(was_on_removed > 0);
  for (int i = 0; i < 200; ++i) {
    REQUIRE(kvroute::select_worker(p, {}, *new_snap, c.load).id() != removed);
    REQUIRE(kvroute::select_worker(p, {.text = std::to_string(i)}, *new_snap, c.load).id() !=
            removed);
  }
}

TEST_CASE("prefix_hash: random fallback is deterministic per seed", "[prefix_hash]") {
  Cluster c(8);
  PrefixHash a({.seed = 11}), b({.seed = 11}), other({.seed = 12});
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

TEST_CASE("prefix_hash: a key stays within its model's workers", "[prefix_hash]") {
  Cluster c(0);
  for (int i = 0; i < 3; ++i) c.add("llama");  // 0..2
  for (int i = 0; i < 3; ++i) c.add("qwen");   // 3..5
  PrefixHash p;
  std::set<int> seen;
  for (std::uint32_t s = 0; s < 200; ++s) {
    const Tokens t = sequence(s, 8);
    const int i = c.pick(p, {.tokens = t, .model = "llama"});
    REQUIRE(i >= 0);
    REQUIRE(i <= 2);
    seen.insert(i);
  }
  CHECK(seen.size() == 3);
}
