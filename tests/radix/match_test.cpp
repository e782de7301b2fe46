// Matches: the tenant-choice rule, unsampled recency, visit_path,
// match_and_insert (the router's step in one descent) and peek_for_tenant.
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
// kvroute: the tenant-choice rule
// ---------------------------------------------------------------------------

TEST_CASE("radix tree: the default rule picks the most recent user of the deepest node",
          "[radix_tree][choice]") {
  ApproxRadixTree tree;
  tree.insert("system prompt: be nice. user: hi", t1);
  tree.insert("system prompt: be nice. user: hello", t2);
  tree.insert("system prompt: be nice. user: hey", t3);
  // "system prompt: be nice. user: h" is held by all three; t3 used it last.
  CHECK(tree.match("system prompt: be nice. user: h").tenant == t3);
  // A match by t1's own suffix stamps t1 on the whole path...
  CHECK(tree.match("system prompt: be nice. user: hi").tenant == t1);
  // ...so t1 is now the most recent user of the shared part.
  CHECK(tree.match("system prompt: be nice. user: h").tenant == t1);
  // And an insert stamps its whole path too.
  tree.insert("system prompt: be nice. user: hello again", t2);
  CHECK(tree.match("system prompt: be nice. user: h").tenant == t2);
}

TEST_CASE("radix tree: a chooser sees every candidate and can choose by load",
          "[radix_tree][choice]") {
  ApproxRadixTree tree;
  for (TenantId t : {t1, t2, t3}) tree.insert("shared prefix", t);
  tree.insert("shared prefix and more", t4);
  const std::map<TenantId, int> load = {{t1, 7}, {t2, 2}, {t3, 9}, {t4, 5}};
  std::vector<kvroute::RadixCandidate> seen;
  auto least_loaded = [&](const kvroute::RadixCandidates& c) noexcept {
    TenantId best = kNoTenant;
    for (kvroute::RadixCandidate x : c) {
      seen.push_back(x);
      if (best == kNoTenant || load.at(x.tenant) < load.at(best)) best = x.tenant;
    }
    return best;
  };
  const MatchResult m = tree.match("shared prefix", least_loaded);
  CHECK(m.tenant == t2);
  REQUIRE(seen.size() == 4);
  CHECK(seen[0].tenant == t1);
  CHECK(seen[1].tenant == t2);
  CHECK(seen[2].tenant == t3);
  CHECK(seen[3].tenant == t4);
  // Candidates carry the recency of their last use of this node.
  CHECK(seen[3].recency > seen[2].recency);
  CHECK(seen[2].recency > seen[1].recency);
  CHECK(m.previous_recency == seen[1].recency);
  // The chosen tenant, and only it, was stamped.
  const MatchResult again = tree.match("shared prefix");
  CHECK(again.tenant == t2);
  CHECK(again.previous_recency == m.recency);
}

TEST_CASE("radix tree: a declining chooser leaves the tree untouched", "[radix_tree][choice]") {
  ApproxRadixTree tree;
  tree.insert("abc", t1);
  tree.insert("abd", t2);
  const auto clock = tree.now();
  const MatchResult m =
      tree.match("abc", [](const kvroute::RadixCandidates&) noexcept { return kNoTenant; });
  CHECK_FALSE(m.has_tenant());
  CHECK(m.matched == 3);
  CHECK(m.candidates == 1);
  CHECK(tree.now() == clock);
  // A chooser naming a non-candidate also chooses nothing.
  const MatchResult n =
      tree.match("abc", [](const kvroute::RadixCandidates&) noexcept { return t2; });
  CHECK_FALSE(n.has_tenant());
  CHECK(tree.now() == clock);
}

// ---------------------------------------------------------------------------
// kvroute: recency
// ---------------------------------------------------------------------------

TEST_CASE("radix tree: every match refreshes recency (no 1-in-8 sampling)",
          "[radix_tree][recency]") {
  ApproxRadixTree tree;
  tree.insert("aaaa", t1);
  tree.insert("bbbb", t1);
  std::uint64_t last = tree.match("aaaa").recency;
  for (int i = 0; i < 32; ++i) {
    const MatchResult m = tree.match("aaaa");
    CHECK(m.previous_recency == last);
    CHECK(m.recency > last);
    last = m.recency;
  }
  // Alternate which entry was used last; eviction always keeps that one.
  for (int i = 0; i < 16; ++i) {
    ApproxRadixTree t;
    t.insert("aaaa", t1);
    t.insert("bbbb", t1);
    const char* keep = (i % 2 == 0) ? "aaaa" : "bbbb";
    const char* lose = (i % 2 == 0) ? "bbbb" : "aaaa";
    for (int k = 0; k < i; ++k) t.match(lose);  // any number of earlier matches
    t.match(keep);
    t.evict(4);
    CHECK(t.match_for_tenant(keep, t1).matched == 4);
    CHECK(t.match_for_tenant(lose, t1).matched == 0);
  }
}

TEST_CASE("radix tree: visit_path gives every tenant its peek_for_tenant in one walk",
          "[radix_tree][visit_path]") {
  std::mt19937_64 rng(11);
  ApproxRadixTree tree;
  std::vector<std::string> texts;
  for (int i = 0; i < 400; ++i) {
    std::string s = texts.empty() || rng() % 3 == 0 ? std::string() : texts[rng() % texts.size()];
    s.resize(rng() % (s.size() + 1));
    const std::size_t extra = 1 + rng() % 8;
    for (std::size_t k = 0; k < extra; ++k) s += static_cast<char>('a' + rng() % 3);
    if (rng() % 5 == 0) s += "\xE4\xB8\xAD";  // a three-byte character
    texts.push_back(s);
    tree.insert(s, static_cast<TenantId>(rng() % 6));
    if (i % 97 == 0) tree.evict(40);
  }
  const auto clock = tree.now();
  for (int q = 0; q < 300; ++q) {
    std::string s = texts[rng() % texts.size()];
    s.resize(rng() % (s.size() + 1));
    s += rng() % 2 == 0 ? "b" : "\xE4\xB8";  // a letter, or a cut character
    std::map<TenantId, std::pair<std::size_t, std::uint64_t>> seen;
    std::size_t last = 0;
    bool ordered = true;
    const MatchResult walk =
        tree.visit_path(s, [&](const kvroute::RadixCandidates& c, std::size_t matched) noexcept {
          ordered = ordered && matched >= last;
          last = matched;
          for (kvroute::RadixCandidate x : c) seen[x.tenant] = {matched, x.recency};
        });
    CHECK(ordered);
    const MatchResult m =
        tree.match(s, [](const kvroute::RadixCandidates&) noexcept { return kNoTenant; });
    CHECK(walk.matched == m.matched);
    CHECK(walk.input == m.input);
    CHECK(walk.matched_symbols == m.matched_symbols);
    CHECK(walk.candidates == m.candidates);
    for (TenantId t = 0; t < 7; ++t) {
      const TenantMatch p = tree.peek_for_tenant(s, t);
      const auto it = seen.find(t);
      CHECK(p.found == (it != seen.end()));
      CHECK(p.matched == (it == seen.end() ? 0 : it->second.first));
      if (it != seen.end()) CHECK(p.previous_recency == it->second.second);
    }
  }
  CHECK(tree.now() == clock);  // nothing stamped
}

// ---------------------------------------------------------------------------
// kvroute: match_and_insert, the router's step in one descent
// ---------------------------------------------------------------------------

namespace {
// Follows a good match (rate > 0.3), else `fallback`: the replay's rule.
struct FollowOr {
  TenantId fallback;
  TenantId operator()(const kvroute::RadixCandidates& c, const MatchResult& m) const noexcept {
    return !c.empty() && m.match_rate() > 0.3f ? kvroute::MostRecentlyUsed{}(c) : fallback;
  }
};
}  // namespace

TEST_CASE("radix tree: match_and_insert shows the match to the rule, then inserts",
          "[radix_tree][match_and_insert]") {
  ApproxRadixTree tree;
  // Cold: no candidates, nothing matched.
  std::size_t seen_candidates = 99;
  std::size_t seen_input = 0;
  const kvroute::MatchInsertResult cold = tree.match_and_insert(
      "hello world", [&](const kvroute::RadixCandidates& c, const MatchResult& m) noexcept {
        seen_candidates = c.size();
        seen_input = m.input;
        return t1;
      });
  CHECK(seen_candidates == 0);
  CHECK(seen_input == 11);
  CHECK(cold.inserted);
  CHECK(cold.insert.ok());
  CHECK(cold.match.tenant == t1);
  CHECK(cold.match.matched == 0);
  CHECK(cold.match.recency == cold.insert.recency);
  CHECK_FALSE(cold.held);
  CHECK(tree.tenant_size(t1) == 11);
  // Following the match: the insert continues at the deepest node.
  const kvroute::MatchInsertResult hit = tree.match_and_insert("hello world, again", FollowOr{t2});
  CHECK(hit.match.tenant == t1);
  CHECK(hit.match.matched == 11);
  CHECK(hit.match.input == 18);
  CHECK(hit.match.candidates == 1);
  CHECK(hit.held);
  CHECK(hit.match.previous_recency == cold.insert.recency);
  CHECK(hit.match.recency > hit.match.previous_recency);
  CHECK(tree.tenant_size(t1) == 18);
  // A poor match goes to the fallback, which gets the whole path.
  const kvroute::MatchInsertResult miss = tree.match_and_insert("hexagon puzzle", FollowOr{t2});
  CHECK(miss.match.tenant == t2);
  CHECK(miss.match.matched == 2);
  CHECK(miss.match.previous_recency == 0);
  CHECK_FALSE(miss.held);
  CHECK(tree.tenant_size(t2) == 14);
  CHECK(tree.check_invariants().empty());
  // A declining rule inserts nothing and stamps nothing (nor keeps the
  // buffer its descent may have filled for the new leaf, text past 8
  // bytes).
  const auto clock = tree.now();
  const auto bytes = tree.stats().bytes;
  const kvroute::MatchInsertResult none = tree.match_and_insert(
      "hello there, general",
      [](const kvroute::RadixCandidates&, const MatchResult&) noexcept { return kNoTenant; });
  CHECK_FALSE(none.inserted);
  CHECK(none.match.matched == 6);
  CHECK(tree.now() == clock);
  CHECK(tree.stats().bytes == bytes);
  // Bad tenants are reported as insert would.
  const kvroute::MatchInsertResult bad = tree.match_and_insert(
      "hello", [](const kvroute::RadixCandidates&, const MatchResult&) noexcept {
        return kvroute::kMaxTenantId + 1;
      });
  CHECK(bad.inserted);
  CHECK(bad.insert.status == kvroute::InsertStatus::kInvalidTenant);
}

TEST_CASE("radix tree: match_and_insert leaves the tree as a declined match plus an insert",
          "[radix_tree][match_and_insert]") {
  // The same random router steps on two trees, one fused, one as two
  // calls: equal matches, sizes, stats and LRU order (what a tight
  // eviction keeps).
  std::mt19937_64 rng(7);
  std::vector<std::string> texts;
  const std::string alphabet = "abc\xC3\xA9\xE4\xB8\xAD";  // ASCII, é, 中
  ApproxRadixTree fused(ApproxRadixTree::Options{.tenant_budget = 400});
  ApproxRadixTree apart(ApproxRadixTree::Options{.tenant_budget = 400});
  for (int i = 0; i < 3000; ++i) {
    std::string s = texts.empty() || rng() % 4 == 0 ? std::string() : texts[rng() % texts.size()];
    s = s.substr(0, kvroute::detail::utf8_floor_boundary(s, rng() % (s.size() + 1)));
    const std::size_t extra = rng() % 12;
    for (std::size_t k = 0; k < extra; ++k) {
      const std::size_t at = rng() % 5;
      s += at < 3 ? alphabet.substr(at, 1) : alphabet.substr(at == 3 ? 3 : 5, at == 3 ? 2 : 3);
    }
    texts.push_back(s);
    const FollowOr rule{static_cast<TenantId>(rng() % 5)};
    const kvroute::MatchInsertResult f = fused.match_and_insert(s, rule);
    bool any = false;
    TenantId mru = kNoTenant;
    const MatchResult m = apart.match(s, [&](const kvroute::RadixCandidates& c) noexcept {
      any = true;
      mru = kvroute::MostRecentlyUsed{}(c);
      return kNoTenant;  // look only
    });
    const TenantId t = any && m.match_rate() > 0.3f ? mru : rule.fallback;
    REQUIRE(f.match.matched == m.matched);
    REQUIRE(f.match.input == m.input);
    REQUIRE(f.match.candidates == m.candidates);
    REQUIRE(f.match.tenant == t);
    REQUIRE(apart.insert(s, t).ok());
    REQUIRE(f.insert.ok());
  }
  CHECK(fused.check_invariants().empty());
  CHECK(fused.recount_sizes() == apart.recount_sizes());
  CHECK(fused.stats().nodes == apart.stats().nodes);
  CHECK(fused.stats().units == apart.stats().units);
  fused.evict(60);
  apart.evict(60);
  for (const std::string& s : texts) {
    for (TenantId t = 0; t < 5; ++t) {
      REQUIRE(fused.match_for_tenant(s, t).matched == apart.match_for_tenant(s, t).matched);
    }
  }
}

TEST_CASE("radix tree: peek_for_tenant matches like match_for_tenant and stamps nothing",
          "[radix_tree][recency]") {
  ApproxRadixTree tree;
  tree.insert("aaaa", t1);
  tree.insert("bbbb", t1);
  tree.insert("aaxx", t2);
  const auto clock = tree.now();
  const TenantMatch p = tree.peek_for_tenant("aaaaz", t1);
  CHECK(p.found);
  CHECK(p.matched == 4);
  CHECK(p.input == 5);
  CHECK(p.matched_symbols == 4);
  CHECK(p.recency == p.previous_recency);
  CHECK(tree.peek_for_tenant("aaaa", t2).matched == 2);  // only along t2's nodes
  CHECK_FALSE(tree.peek_for_tenant("aaaa", 99).found);
  CHECK(tree.now() == clock);
  // Any number of peeks at the older entry leave it the LRU victim; one
  // match_for_tenant makes it the survivor.
  for (int i = 0; i < 8; ++i) tree.peek_for_tenant("aaaa", t1);
  ApproxRadixTree copy;
  copy.insert("aaaa", t1);
  copy.insert("bbbb", t1);
  copy.match_for_tenant("aaaa", t1);
  tree.evict_tenant(t1, 4);
  copy.evict_tenant(t1, 4);
  CHECK(tree.match_for_tenant("aaaa", t1).matched == 0);
  CHECK(tree.match_for_tenant("bbbb", t1).matched == 4);
  CHECK(copy.match_for_tenant("aaaa", t1).matched == 4);
  CHECK(copy.match_for_tenant("bbbb", t1).matched == 0);
}
