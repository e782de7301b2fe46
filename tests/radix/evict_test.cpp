// Forgetting: incremental eviction, the budget, drop_older_than
// (feedback), merges after eviction, remove_tenant.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
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

// ---------------------------------------------------------------------------
// kvroute: eviction
// ---------------------------------------------------------------------------

TEST_CASE("radix tree: eviction is incremental: its cost follows what it evicts",
          "[radix_tree][evict]") {
  ApproxRadixTree tree;
  for (int i = 0; i < 20000; ++i) tree.insert("entry_" + std::to_string(i), t1);
  tree.insert("small one", t2);
  tree.insert("small two", t2);
  const auto nodes = tree.stats().nodes;
  CHECK(nodes > 20000);
  // Nobody over budget: nothing examined at all.
  auto r = tree.evict(1u << 30);
  CHECK(r.visited == 0);
  // t2 over by one entry: touches t2's tail only, not t1's 20000 nodes.
  r = tree.evict_tenant(t2, tree.tenant_size(t2) - 1);
  CHECK(r.claims == 1);
  CHECK(r.visited == 1);
  // t1 by one claim: exactly its least recent leaf, "entry_0"'s.
  r = tree.evict_tenant(t1, tree.tenant_size(t1) - 1);
  CHECK(r.claims == 1);
  CHECK(r.visited == 1);
  CHECK(tree.match_for_tenant("entry_0", t1).matched < 7);
  CHECK(tree.match_for_tenant("entry_1", t1).matched == 7);
  // A larger eviction visits about one tail per claim removed.
  r = tree.evict_tenant(t1, tree.tenant_size(t1) / 2);
  CHECK(r.claims > 1000);
  CHECK(r.visited == r.claims);
  require_consistent(tree);
}

TEST_CASE("radix tree: eviction stops exactly at the budget", "[radix_tree][evict]") {
  ApproxRadixTree tree;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 500; ++i)
    tree.insert("p" + std::to_string(i % 7) + random_ascii(rng, 20), t1);
  for (std::size_t budget : {5000u, 1234u, 77u, 1u}) {
    tree.evict_tenant(t1, budget);
    const std::size_t s = tree.tenant_size(t1);
    CHECK(s <= budget);
    // One more entry of at most 22 chars would have put it over: it did not
    // evict more than it had to.
    CHECK(s + 22 > budget);
    require_consistent(tree);
  }
}

TEST_CASE("radix tree: Options::tenant_budget evicts reactively on insert", "[radix_tree][evict]") {
  ApproxRadixTree tree({.tenant_budget = 200});
  std::mt19937_64 rng(9);
  for (int i = 0; i < 300; ++i) {
    tree.insert("shared system prompt " + random_ascii(rng, 30), static_cast<TenantId>(i % 3));
    for (TenantId t = 0; t < 3; ++t) REQUIRE(tree.tenant_size(t) <= 200);
  }
  // The last insert of each tenant survives whole: it was most recent.
  require_consistent(tree);
  CHECK(tree.stats().units < 3 * 200);
}

TEST_CASE("radix tree: drop_older_than removes a tenant's stale entries only",
          "[radix_tree][evict][feedback]") {
  ApproxRadixTree tree;
  tree.insert("old conversation one", t1);
  tree.insert("old conversation two", t1);
  tree.insert("old conversation two", t2);
  const MatchResult used = tree.match("old conversation two", kvroute::LowestTenantId{});
  REQUIRE(used.tenant == t1);
  REQUIRE(used.previous_recency < used.recency);
  // The server reports a miss for that request: what t1 last used at
  // used.previous_recency, and everything it used before, is gone. The
  // request itself has just refilled "old conversation two".
  auto r = tree.drop_older_than(t1, used.previous_recency + 1);
  CHECK(r.claims == 1);  // "one"
  // "old conversation " was split for "one" only: with it gone, the
  // node and its one child "two" (the same tenants) are one node again.
  CHECK(r.merges == 1);
  CHECK(tree.stats().nodes == 2);  // the root and "old conversation two"
  CHECK(tree.match_for_tenant("old conversation one", t1).matched == 17);
  CHECK(tree.match_for_tenant("old conversation two", t1).matched == 20);
  // Later a newer entry exists, and the refilled one is reported gone too.
  const std::uint64_t refilled = tree.match_for_tenant("old conversation two", t1).recency;
  tree.insert("fresh conversation", t1);
  r = tree.drop_older_than(t1, refilled + 1);
  CHECK(r.claims == 1);  // "old conversation two", one node since the merge
  CHECK(tree.match_for_tenant("old conversation one", t1).matched == 0);
  CHECK(tree.match_for_tenant("old conversation two", t1).matched == 0);
  CHECK(tree.match_for_tenant("fresh conversation", t1).matched == 18);
  // Other tenants keep theirs.
  CHECK(tree.match_for_tenant("old conversation two", t2).matched == 20);
  CHECK(tree.has_tenant(t1));
  require_consistent(tree);
  // Nothing older than the oldest: no work.
  CHECK(tree.drop_older_than(t1, 0).visited == 0);
}

// Spec section 9, "no re-merging of nodes after removal": fixed. A split
// whose reason is evicted (the branch, or the text that ended there) is
// undone, so chains of single-child nodes do not accumulate.
TEST_CASE("radix tree: evicting a branch merges its parent with the one child left",
          "[radix_tree][evict][merge]") {
  ApproxRadixTree tree;
  // Branches longer than the 8 bytes a node holds itself, so that each
  // fragment has a buffer of its own.
  tree.insert("hello there, old friend", t1);
  tree.insert("hello world, old friend", t1);  // "hello " -> {"there, ...", "world, ..."}
  REQUIRE(tree.stats().nodes == 4);
  const std::size_t bytes_split = tree.stats().bytes;
  // t1's least recent leaf is "there, old friend": evicting 17 characters
  // removes it, and "hello " is left with "world, old friend" alone, held by
  // the same tenant.
  const kvroute::EvictResult r = tree.evict_tenant(t1, 23);
  CHECK(r.claims == 1);
  CHECK(r.units == 17);
  CHECK(r.merges == 1);
  CHECK(tree.stats().nodes == 2);  // the root and "hello world, old friend"
  CHECK(tree.stats().bytes < bytes_split);
  const auto d = tree.debug_node("hello world, old friend");
  REQUIRE(d.has_value());
  CHECK(d->fragment == "hello world, old friend");
  CHECK(d->units == 23);
  CHECK(tree.tenant_size(t1) == 23);
  const MatchResult m = tree.match("hello world, old friend");
  CHECK(m.tenant == t1);
  CHECK(m.matched == 23);
  CHECK(tree.match("hello there, old friend").matched == 6);
  require_consistent(tree);
}

// A use that ended at a node is more recent than the older text below it:
// merging the two would evict them as one. Found by the differential fuzzer
// (tests/fuzz/corpus/radix_tree/evict_keeps_most_recent_insert*).
TEST_CASE("radix tree: an eviction keeps the most recent insert when it fits the budget",
          "[radix_tree][evict][merge]") {
  for (const unsigned shift : {0u, 1u, 6u}) {
    CAPTURE(shift);
    ApproxRadixTree tree(ApproxRadixTree::Options{.recency_shift = shift});
    tree.insert("ab", t1);
    tree.insert("a00000", t1);  // "a" -> {"b", "00000"}
    tree.insert("a", t1);       // ends at "a": the most recent use
    REQUIRE(tree.tenant_size(t1) == 7);
    const kvroute::EvictResult r = tree.evict_tenant(t1, 4);
    CHECK(r.merges == 0);  // "a" and "00000" were not used together last
    CHECK(r.units == 6);   // "b", then "00000"
    CHECK(tree.tenant_size(t1) == 1);
    CHECK(tree.match_for_tenant("a", t1).matched == 1);
    require_consistent(tree);
  }
}

TEST_CASE("radix tree: a node used last on the way into its only child merges after an eviction",
          "[radix_tree][evict][merge]") {
  ApproxRadixTree tree;
  tree.insert("ab", t1);
  tree.insert("a", t1);       // ends at "a"
  tree.insert("a00000", t1);  // then a use through "a" into "00000": the last use of "a"
  const kvroute::EvictResult r = tree.evict_tenant(t1, 6);
  CHECK(r.units == 1);  // "b"
  CHECK(r.merges == 1);
  CHECK(tree.debug_node("a00000")->fragment == "a00000");
  require_consistent(tree);
}

TEST_CASE("radix tree: a pair whose joined text is over 64 KB is not merged",
          "[radix_tree][evict][merge]") {
  // Merging copies both fragments under both nodes' locks; past 64 KB the
  // node it would save is not worth that copy.
  ApproxRadixTree tree;
  const std::string head(40 << 10, 'h');
  const std::string tail(40 << 10, 't');
  tree.insert(head + "x", t1);
  tree.insert(head + tail, t1);  // head -> {"x", tail}
  const kvroute::EvictResult r = tree.evict_tenant(t1, head.size() + tail.size());
  CHECK(r.claims == 1);  // "x"
  CHECK(r.merges == 0);
  CHECK(tree.stats().nodes == 3);
  CHECK(tree.match(head + tail).matched == head.size() + tail.size());
  require_consistent(tree);
}

TEST_CASE("radix tree: a node that loses a tenant merges with a child that has the rest",
          "[radix_tree][evict][merge]") {
  ApproxRadixTree tree;
  tree.insert("abc", t1);
  tree.insert("abcdef", t2);  // "abc" {t1, t2} -> "def" {t2}
  REQUIRE(tree.stats().nodes == 3);
  const kvroute::EvictResult r = tree.evict_tenant(t1, 0);
  CHECK(r.claims == 1);
  CHECK(r.merges == 1);
  CHECK(tree.stats().nodes == 2);
  const auto d = tree.debug_node("abcdef");
  REQUIRE(d.has_value());
  CHECK(d->fragment == "abcdef");
  CHECK(d->tenants == std::vector<TenantId>{t2});
  CHECK(tree.tenant_size(t2) == 6);
  CHECK(tree.match("abcdef").tenant == t2);
  CHECK(tree.match("abcdef").matched == 6);
  require_consistent(tree);
}

TEST_CASE("radix tree: a merge keeps every tenant's claims below it linked to the merged node",
          "[radix_tree][evict][merge]") {
  // Unicode throughout, so that the joined fragment's character count is
  // checked too.
  ApproxRadixTree tree;
  tree.insert("xyz-2", t1);  // t1's least recent entry
  tree.insert("xyz-日本-a", t1);
  tree.insert("xyz-日本-b😀", t1);
  tree.insert("xyz-日本-a", t2);
  // "xyz-" {t1, t2} -> {"2" {t1}, "日本-" {t1, t2} -> {"a" {t1, t2}, "b😀" {t1}}}
  REQUIRE(tree.stats().nodes == 6);
  const std::size_t t1_size = tree.tenant_size(t1);
  const kvroute::EvictResult r = tree.evict_tenant(t1, t1_size - 1);  // "2" goes
  CHECK(r.claims == 1);
  CHECK(r.merges == 1);
  CHECK(tree.stats().nodes == 4);  // root, "xyz-日本-", "a", "b😀"
  const auto d = tree.debug_node("xyz-日本-");
  REQUIRE(d.has_value());
  CHECK(d->fragment == "xyz-日本-");
  CHECK(d->units == 7);
  CHECK(d->children == 2);
  CHECK(tree.tenant_size(t1) == t1_size - 1);
  CHECK(tree.tenant_size(t2) == 8);
  require_consistent(tree);  // every claim's parent claim is on the parent node
  CHECK(tree.match_for_tenant("xyz-日本-b😀", t1).matched == 9);
  CHECK(tree.match_for_tenant("xyz-日本-a", t2).matched == 8);
  // The rest of the LRU lists still work: empty the tree.
  tree.evict(0);
  CHECK(tree.stats().nodes == 1);
  CHECK(tree.tenant_size(t1) == 0);
  CHECK(tree.tenant_size(t2) == 0);
  require_consistent(tree);
}

TEST_CASE("radix tree: remove_tenant removes it everywhere, the root included",
          "[radix_tree][remove]") {
  ApproxRadixTree tree;
  tree.insert("", t1);
  tree.insert("abc", t1);
  tree.insert("abd", t2);
  REQUIRE(tree.remove_tenant(t1));
  CHECK_FALSE(tree.has_tenant(t1));
  CHECK(tree.tenant_size(t1) == 0);
  CHECK(tree.tenant_sizes() == sizes({{t2, 3}}));
  CHECK(tree.match("").candidates == 1);
  CHECK(tree.match("abc").tenant == t2);
  require_consistent(tree);
  // A removed tenant can come back.
  tree.insert("abc", t1);
  CHECK(tree.tenant_size(t1) == 3);
  CHECK(tree.match("abc").tenant == t1);
  require_consistent(tree);
}
