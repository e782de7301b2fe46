// The LRU order: recency along paths and in each tenant's list, stamps
// that move runs, and recency steps.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kvroute/detail/utf8.hpp"
#include "kvroute/radix_tree.hpp"
#include "radix/tree_support.hpp"

using namespace kvtest;  // NOLINT(google-build-using-namespace): the tests' own helpers

TEST_CASE("radix tree: recency is ordered along paths and in each tenant's LRU",
          "[radix_tree][recency]") {
  ApproxRadixTree tree;
  tree.insert("conversation A turn 1", t1);
  tree.insert("conversation A turn 1 turn 2", t1);
  tree.insert("conversation B turn 1", t1);
  const auto r = tree.match_for_tenant("conversation A turn 1 turn 2", t1);
  CHECK(r.found);
  CHECK(r.matched == 28);
  CHECK(r.recency > r.previous_recency);
  // check_invariants verifies: parent recency >= child recency, the LRU list
  // sorted, and every claim behind its parent's.
  require_consistent(tree);
  // The least recent leaf now is B's; evicting 1 claim takes exactly it.
  const std::size_t before = tree.tenant_size(t1);
  const auto e = tree.evict_tenant(t1, before - 1);
  CHECK(e.claims == 1);
  CHECK(tree.match_for_tenant("conversation B turn 1", t1).matched == 13);  // "conversation "
}

TEST_CASE("radix tree: a stamp whose path lies in several places of the LRU reorders it exactly",
          "[radix_tree][recency]") {
  // A stamp moves its path to the front in runs (stretches that the list
  // already holds in path order); the list must end as if each claim had
  // moved on its own: the path, ancestors first, then everything else in
  // its old order.
  ApproxRadixTree tree;
  tree.insert("Hello world, one", t1);   // stamp 1
  tree.insert("Hello world, two", t1);   // 2: "Hello world, " + "one" | "two"
  tree.insert("Hello there", t1);        // 3: "Hello " + "world, " | "there"
  tree.insert("Hello world, two!", t1);  // 4: "two" + "!"
  tree.insert("Hello there, you", t1);   // 5: "there" + ", you"
  require_consistent(tree);
  // Stamp 6: "world, ", "two" and "!" lie together, behind ", you", and
  // move to the front as one run; then "Hello " (the head before the stamp)
  // moves on its own, ahead of them.
  CHECK(tree.match_for_tenant("Hello world, two!", t1).matched == 17);
  require_consistent(tree);
  // Stamp 7: "one" (the tail) moves alone, then "Hello " and "world, " as
  // one run.
  CHECK(tree.match_for_tenant("Hello world, one", t1).matched == 16);
  require_consistent(tree);
  // Leaves from the least recent: ", you" (5), then "there" (5, a leaf once
  // ", you" is gone), "!" (6), "two" (6); "one" (7) stays. Without stamp 6
  // "!" would go first, without stamp 7 "one".
  const std::size_t all = tree.tenant_size(t1);
  REQUIRE(all == 6 + 7 + 3 + 3 + 1 + 5 + 5);
  CHECK(tree.evict_tenant(t1, all - 5).claims == 1);
  CHECK(tree.peek_for_tenant("Hello there, you", t1).matched == 11);
  CHECK(tree.peek_for_tenant("Hello world, two!", t1).matched == 17);
  CHECK(tree.evict_tenant(t1, all - 10).claims == 1);
  CHECK(tree.peek_for_tenant("Hello there, you", t1).matched == 6);
  CHECK(tree.evict_tenant(t1, all - 11).claims == 1);
  CHECK(tree.peek_for_tenant("Hello world, two!", t1).matched == 16);
  CHECK(tree.evict_tenant(t1, all - 14).claims == 1);
  CHECK(tree.peek_for_tenant("Hello world, two!", t1).matched == 13);
  CHECK(tree.peek_for_tenant("Hello world, one", t1).matched == 16);
  require_consistent(tree);
}

TEST_CASE("radix tree: with recency_shift a step of 2^shift stamps shares one recency",
          "[radix_tree][recency]") {
  ApproxRadixTree tree({.recency_shift = 2});  // stamps 1-3: step 0, 4-7: 1, 8-11: 2
  // Each insert is one stamp.
  tree.insert("trunk/a", t1);
  tree.insert("trunk/b", t1);
  tree.insert("trunk/c", t1);
  CHECK(tree.now() == 0);
  CHECK(tree.insert("trunk/d", t1).recency == 1);
  CHECK(tree.insert("trunk/e", t1).recency == 1);
  CHECK(tree.now() == 1);
  CHECK(tree.stats().clock == 1);
  // The trunk holds the newest step, a leaf the step of its last use.
  CHECK(tree.peek_for_tenant("trunk/", t1).recency == 1);
  CHECK(tree.peek_for_tenant("trunk/a", t1).recency == 0);
  CHECK(tree.peek_for_tenant("trunk/e", t1).recency == 1);
  require_consistent(tree);

  // Between steps the LRU is exact: the three leaves of step 0 go first.
  CHECK(tree.tenant_size(t1) == 6 + 5);
  CHECK(tree.evict_tenant(t1, 6 + 2).claims == 3);
  for (const char* gone : {"trunk/a", "trunk/b", "trunk/c"}) {
    CHECK(tree.peek_for_tenant(gone, t1).matched == 6);
  }
  CHECK(tree.peek_for_tenant("trunk/d", t1).matched == 7);
  CHECK(tree.peek_for_tenant("trunk/e", t1).matched == 7);
  require_consistent(tree);

  // drop_older_than cuts at a step: f and g join d and e in step 1, h
  // starts step 2 (and stamps the trunk with it); everything of step 1 goes.
  tree.insert("trunk/f", t1);
  tree.insert("trunk/g", t1);
  CHECK(tree.insert("trunk/h", t1).recency == 2);
  CHECK(tree.drop_older_than(t1, 2).claims == 4);
  CHECK(tree.peek_for_tenant("trunk/g", t1).matched == 6);
  CHECK(tree.peek_for_tenant("trunk/h", t1).matched == 7);
  require_consistent(tree);

  // Within a step the most-recent rule sees a tie and takes the lowest id,
  // though t2 was sent "shared" after t1 (an exact clock would pick t2).
  tree.insert("shared", t1);                   // stamp 9
  tree.insert("shared", t2);                   // stamp 10
  const MatchResult m = tree.match("shared");  // stamp 11
  CHECK(m.previous_recency == 2);
  CHECK(m.tenant == t1);
  ApproxRadixTree exact;
  exact.insert("shared", t1);
  exact.insert("shared", t2);
  CHECK(exact.match("shared").tenant == t2);
}

TEST_CASE("radix tree: with recency_shift a thread's every 2^shift-th stamp moves the step",
          "[radix_tree][recency][concurrency]") {
  // Steps are counted per thread, so that a stamp writes no line that other
  // threads write: stamps 1-3 of a thread leave the step where it is, its
  // 4th moves it on, whatever other threads stamped before.
  ApproxRadixTree tree({.recency_shift = 2});
  const auto stamps_on_a_new_thread = [&](int n, const std::string& prefix) {
    std::thread([&] {
      for (int i = 0; i < n; ++i) tree.insert(prefix + std::to_string(i), t1);
    }).join();
  };
  stamps_on_a_new_thread(3, "a");
  CHECK(tree.now() == 0);
  stamps_on_a_new_thread(3, "b");  // 6 stamps in all, none a thread's 4th
  CHECK(tree.now() == 0);
  stamps_on_a_new_thread(4, "c");
  CHECK(tree.now() == 1);
  stamps_on_a_new_thread(8, "d");
  CHECK(tree.now() == 3);
  CHECK(tree.stats().stamps == 18);
  // The stamps of d's last step hold the newest recency.
  CHECK(tree.peek_for_tenant("d7", t1).recency == 3);
  CHECK(tree.peek_for_tenant("a0", t1).recency == 0);
  require_consistent(tree);
}

TEST_CASE("radix tree: with recency_shift a stamp writes only the claims not yet in the step",
          "[radix_tree][recency][stats]") {
  ApproxRadixTree exact;
  ApproxRadixTree stepped({.recency_shift = 2});
  for (const char* leaf : {"a", "b", "c", "d", "e", "f", "g", "h"}) {
    exact.insert(std::string("trunk/") + leaf, t1);
    stepped.insert(std::string("trunk/") + leaf, t1);
  }
  CHECK(exact.stats().stamps == 8);
  CHECK(stepped.stats().stamps == 8);
  // Exact: every stamp writes its whole path, the tenant's root claim
  // included: 2 for the first insert (before "trunk/" was split out), 3 after.
  CHECK(exact.stats().stamped_claims == 2 + 7 * 3);
  // Stepped: stamps 1-3 find step 0 everywhere; d (stamp 4) and h (stamp 8)
  // open steps 1 and 2 and write leaf, trunk and root claim; e, f and g
  // find the trunk in step 1 already and their new leaf takes it from there.
  CHECK(stepped.stats().stamped_claims == 3 + 3);
  require_consistent(exact);
  require_consistent(stepped);
}

TEST_CASE("radix tree: with recency_shift concurrent stamps, evictions and drops stay consistent",
          "[radix_tree][recency][concurrency]") {
  // One stamp in two starts a step, so stamps meet the step's claims all the
  // time; agents fork shared trunks, so their paths overlap.
  ApproxRadixTree tree({.recency_shift = 1});
  std::atomic<bool> stop{false};
  std::thread maintainer([&] {
    std::mt19937_64 rng(7);
    while (!stop.load()) {
      const auto t = static_cast<TenantId>(rng() % 4);
      if (rng() % 2 == 0) {
        tree.evict(400);
      } else {
        tree.drop_older_than(t, tree.now() - std::min<std::uint64_t>(tree.now(), 20));
      }
      std::this_thread::yield();
    }
  });
  run_threads(4, [&](int i) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(300 + i));
    for (int k = 0; k < 500; ++k) {
      std::string s = "agent" + std::to_string(rng() % 4) + " trunk ";
      for (int level = 0, depth = static_cast<int>(rng() % 6); level < depth; ++level) {
        s += std::to_string(rng() % 3) + "/";
      }
      s += random_ascii(rng, rng() % 6);
      const auto own = static_cast<TenantId>(rng() % 4);
      switch (rng() % 4) {
        case 0:
          tree.match(s);
          break;
        case 1:
          tree.insert(s, own);
          break;
        default:
          tree.match_and_insert(
              s, [own](const kvroute::RadixCandidates& c, const MatchResult& m) noexcept {
                return !c.empty() && m.match_rate() > 0.3f ? kvroute::MostRecentlyUsed{}(c) : own;
              });
          break;
      }
    }
  });
  stop = true;
  maintainer.join();
  require_consistent(tree);
  tree.evict(100);
  for (const auto& s : tree.tenant_sizes()) CHECK(s.size <= 100);
  require_consistent(tree);
}

TEST_CASE("radix tree: tenant_recency_at finds the recency a given depth into a tenant's LRU",
          "[radix_tree][recency]") {
  // Three texts with nothing in common: three claims of 4 units each, the
  // most recent first in t1's LRU order.
  ApproxRadixTree tree;
  const std::uint64_t a = tree.insert("aaaa", t1).recency;
  const std::uint64_t b = tree.insert("bbbb", t1).recency;
  const std::uint64_t c = tree.insert("cccc", t1).recency;
  REQUIRE(a < b);
  REQUIRE(b < c);
  CHECK(tree.tenant_recency_at(t1, 1, 100) == c);
  CHECK(tree.tenant_recency_at(t1, 4, 100) == c);
  CHECK(tree.tenant_recency_at(t1, 5, 100) == b);
  CHECK(tree.tenant_recency_at(t1, 12, 100) == a);
  CHECK_FALSE(tree.tenant_recency_at(t1, 13, 100));  // t1 holds fewer units
  CHECK(tree.tenant_recency_at(t1, 12, 2) == b);     // the walk stops after two claims
  CHECK_FALSE(tree.tenant_recency_at(t1, 12, 0));
  CHECK_FALSE(tree.tenant_recency_at(t2, 1, 100));  // unknown tenant
  // A use moves "aaaa" to the front: "bbbb" is now the deepest.
  const std::uint64_t a2 = tree.match_for_tenant("aaaa", t1).recency;
  CHECK(tree.tenant_recency_at(t1, 4, 100) == a2);
  CHECK(tree.tenant_recency_at(t1, 12, 100) == b);
  // A split leaves the units where they were: "cccc" becomes "cc" + "cc"
  // and "ccdd" adds a claim of 2 units in front.
  tree.insert("ccdd", t1);
  require_consistent(tree);
  CHECK(tree.tenant_recency_at(t1, 14, 100) == b);
  CHECK_FALSE(tree.tenant_recency_at(t1, 15, 100));
}

TEST_CASE("radix tree: tenant_recency_at runs beside inserts that split nodes",
          "[radix_tree][recency][concurrency]") {
  // Under TSan: the walk reads node lengths that splits and merges write
  // under the nodes' locks, which the walk does not take.
  ApproxRadixTree tree;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> answers{0};
  std::atomic<std::uint64_t> future{0};  // answers past the clock (Catch2 asserts on one thread)
  std::thread reader([&] {
    do {  // at least once, however late this thread starts
      const std::optional<std::uint64_t> r = tree.tenant_recency_at(t1, 64, 1000);
      if (r && *r > tree.now()) future.fetch_add(1);
      answers.fetch_add(1);
    } while (!stop.load());
  });
  run_threads(3, [&](int i) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(900 + i));
    for (int k = 0; k < 400; ++k) {
      std::string s = "session" + std::to_string(rng() % 5) + " ";
      s += random_ascii(rng, 1 + rng() % 40);
      tree.insert(s, k % 3 == 0 ? t2 : t1);
      if (k % 50 == 0) tree.evict(300);
    }
  });
  stop = true;
  reader.join();
  CHECK(answers.load() > 0);
  CHECK(future.load() == 0);
  require_consistent(tree);
}
