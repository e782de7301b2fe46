// The descents: an insert's optimistic walk along the nodes its tenant
// holds, and a match's optimistic walk against the locked one.
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

static_assert(kvroute::RadixChooser<kvroute::MostRecentlyUsed>);
static_assert(kvroute::RadixChooser<kvroute::LowestTenantId>);
static_assert(!kvroute::RadixChooser<int (*)(const kvroute::RadixCandidates&)>);  // not noexcept

TEST_CASE("radix tree: insert descends optimistically along the nodes its tenant holds",
          "[radix_tree][consistency]") {
  // An insert walks without locks as far as its tenant already holds the
  // path (every ancestor of a held node is held), then goes on from there
  // as before; only a tenant new to the tree takes the locked walk from
  // the root. Observable as RadixTreeStats::descent_fallbacks, which a
  // single thread never causes otherwise.
  ApproxRadixTree tree;
  tree.insert("system prompt, then question one", t1);  // t1 new: the locked walk
  CHECK(tree.stats().descent_fallbacks == 1);
  tree.insert("system prompt, then question two", t1);  // held down to the fork
  tree.insert("system prompt, then question one, then more", t1);
  tree.insert("", t2);  // t2 new
  CHECK(tree.stats().descent_fallbacks == 2);
  // t2 holds only the root: the walk stops there, not in t1's nodes.
  tree.insert("system prompt, then question three", t2);
  tree.insert("system prompt, then question three, again", t2);
  CHECK(tree.match("system prompt, then question one", kvroute::LowestTenantId{}).tenant == t1);
  const MatchResult m = tree.match("system prompt, then question three, again");
  CHECK(m.tenant == t2);
  CHECK(m.matched == m.input);
  CHECK(tree.match_for_tenant("system prompt, then question two", t2).matched == 30);
  CHECK(tree.stats().descent_fallbacks == 2);
  require_consistent(tree);
}

TEST_CASE("radix tree: match's optimistic descent finds what the locked walk finds",
          "[radix_tree][consistency]") {
  // match() descends without locks (versioned snapshots); visit_path walks
  // with lock coupling. On a quiescent tree they must agree on every query:
  // stored texts, their prefixes, forks and strangers, short and long.
  ApproxRadixTree tree;
  std::mt19937_64 rng(11);
  std::vector<std::string> texts = {std::string(300, 'a'), "system: be brief. user: hi"};
  for (int i = 0; i < 400; ++i) {
    const std::string& from = texts[rng() % texts.size()];
    std::string t = from.substr(0, rng() % (from.size() + 1)) + random_ascii(rng, rng() % 80);
    tree.insert(t, static_cast<TenantId>(rng() % 5));
    texts.push_back(std::move(t));
  }
  const auto decline = [](const kvroute::RadixCandidates&) noexcept { return kNoTenant; };
  for (int q = 0; q < 2000; ++q) {
    const std::string& from = texts[rng() % texts.size()];
    std::string query = from.substr(0, rng() % (from.size() + 1));
    if (rng() % 2 == 0) query += random_ascii(rng, rng() % 40);
    const MatchResult opt = tree.match(query, decline);
    const MatchResult locked =
        tree.visit_path(query, [](const kvroute::RadixCandidates&, std::size_t) noexcept {});
    INFO("query " << q << ": " << query);
    REQUIRE(opt.matched == locked.matched);
    REQUIRE(opt.matched_symbols == locked.matched_symbols);
    REQUIRE(opt.candidates == locked.candidates);
    REQUIRE(opt.input == locked.input);
  }
  require_consistent(tree);
}
