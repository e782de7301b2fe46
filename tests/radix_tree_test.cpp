// Conformance tests for kvroute::ApproxRadixTree: the gateway's 40 tree tests
// (gateway spec section 6.1, numbered as there), adapted where kvroute fixes
// a flaw of section 9 (each adaptation says so), then kvroute's own
// behaviours: invalid UTF-8, NUL, empty and very long texts, token trees,
// the tenant-choice rule, unsampled recency, incremental eviction, the
// feedback hook, byte accounting and size recounts after every operation.

#include "kvroute/radix_tree.hpp"
#include "kvroute/detail/utf8.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

KVROUTE_NAMESPACE_BEGIN
inline std::ostream& operator<<(std::ostream& os, const TenantSize& s) {
  return os << "{t" << s.tenant << ": " << s.size << "}";
}
KVROUTE_NAMESPACE_END

// The layout the header documents (64-bit): 56-byte nodes (two children
// inline), 24-byte claims.
static_assert(sizeof(void*) != 8 || sizeof(kvroute::detail::RadixNode<char>) == 56);
static_assert(sizeof(void*) != 8 || sizeof(kvroute::detail::RadixNode<std::uint32_t>) == 56);
static_assert(sizeof(void*) != 8 || sizeof(kvroute::detail::RadixNode<std::int64_t>) == 56);
static_assert(kvroute::detail::RadixNode<char>::kInlineChildren == 2);
static_assert(kvroute::detail::RadixNode<std::int64_t>::kInlineChildren == 1);
static_assert(sizeof(kvroute::detail::RadixClaim) == 24);

// What the slab of nodes and claims holds once it has its first chunk.
static constexpr std::size_t kFirstSlabChunks = kvroute::detail::RadixSlab::kChunkBytes + 256;
static_assert(kvroute::RadixChooser<kvroute::MostRecentlyUsed>);
static_assert(kvroute::RadixChooser<kvroute::LowestTenantId>);
static_assert(!kvroute::RadixChooser<int (*)(const kvroute::RadixCandidates&)>);  // not noexcept

namespace {

using kvroute::ApproxRadixTree;
using kvroute::kNoTenant;
using kvroute::MatchResult;
using kvroute::TenantId;
using kvroute::TenantMatch;
using kvroute::TenantSize;

constexpr TenantId t0 = 0, t1 = 1, t2 = 2, t3 = 3, t4 = 4;

// Maintained sizes equal the recount and every internal invariant holds.
template <class Tree>
void require_consistent(const Tree& tree) {
  INFO(tree.check_invariants());
  REQUIRE(tree.check_invariants().empty());
  REQUIRE(tree.tenant_sizes() == tree.recount_sizes());
}

std::vector<TenantSize> sizes(std::initializer_list<TenantSize> s) { return s; }

// Registers `tenants` at the root (each one's state and root claim) and
// returns the tree's bytes then: the base a test measures growth from.
std::size_t register_tenants(ApproxRadixTree& tree, std::initializer_list<TenantId> tenants) {
  for (TenantId t : tenants) tree.insert("", t);
  return tree.stats().bytes;
}

std::string prefix_of(std::string_view text, const MatchResult& m) {
  return std::string(text.substr(0, m.matched_symbols));
}

std::string prefix_for(ApproxRadixTree& tree, std::string_view text, TenantId t) {
  return std::string(text.substr(0, tree.match_for_tenant(text, t).matched_symbols));
}

std::string random_ascii(std::mt19937_64& rng, std::size_t n) {
  static constexpr char kAlpha[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string s(n, ' ');
  for (char& c : s) c = kAlpha[rng() % (sizeof(kAlpha) - 1)];
  return s;
}

template <class F>
void run_threads(int n, F f) {
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) ts.emplace_back(f, i);
  for (auto& t : ts) t.join();
}

// ---------------------------------------------------------------------------
// Gateway spec 6.1: counts and sizes
// ---------------------------------------------------------------------------

TEST_CASE("radix tree 6.1.1 tenant_char_count: maintained sizes equal recounts at every phase",
          "[radix_tree][spec]") {
  ApproxRadixTree tree;
  for (const char* s : {"apple", "apricot", "banana"}) tree.insert(s, t1);
  for (const char* s : {"amplify", "application"}) tree.insert(s, t2);
  require_consistent(tree);
  tree.insert("apartment", t1);
  tree.insert("appetite", t2);
  tree.insert("ball", t1);
  tree.insert("box", t2);
  require_consistent(tree);
  for (TenantId t : {t1, t2}) {
    tree.insert("zebra", t);
    tree.insert("zero", t);
  }
  require_consistent(tree);
  const auto r = tree.evict(10);
  CHECK(r.claims > 0);
  require_consistent(tree);
  CHECK(tree.tenant_size(t1) <= 10);
  CHECK(tree.tenant_size(t2) <= 10);
}

TEST_CASE("radix tree 6.1.2 used_size_per_tenant: sizes count every char on a tenant's paths",
          "[radix_tree][spec]") {
  ApproxRadixTree tree;
  tree.insert("hello", t1);
  tree.insert("world", t1);
  CHECK(tree.tenant_size(t1) == 10);
  tree.insert("hello", t2);
  tree.insert("help", t2);
  CHECK(tree.tenant_size(t2) == 6);  // "hel" + "lo" + "p"
  CHECK(tree.tenant_size(t1) == 10);
  tree.insert("你好", t3);
  CHECK(tree.tenant_size(t3) == 2);
  CHECK(tree.recount_sizes() == sizes({{t1, 10}, {t2, 6}, {t3, 2}}));
  require_consistent(tree);
}

// ---------------------------------------------------------------------------
// Basic matching
// ---------------------------------------------------------------------------

TEST_CASE("radix tree 6.1.3 cold_start: an empty tree matches nothing and names no tenant",
          "[radix_tree][spec]") {
  // Adapted: the gateway returns the phantom tenant "empty"; kvroute returns
  // kNoTenant and stores nothing.
  ApproxRadixTree tree;
  const MatchResult m = tree.match("hello");
  CHECK(m.tenant == kNoTenant);
  CHECK_FALSE(m.has_tenant());
  CHECK(m.matched == 0);
  CHECK(m.input == 5);
  CHECK(m.candidates == 0);
  CHECK(m.match_rate() == 0.0f);
  CHECK(tree.tenant_sizes().empty());
  CHECK(tree.stats().nodes == 1);
  require_consistent(tree);
}

TEST_CASE("radix tree 6.1.4 exact_match_seq: each string matches itself and its own tenant",
          "[radix_tree][spec]") {
  ApproxRadixTree tree;
  tree.insert("hello", t1);
  tree.insert("apple", t2);
  tree.insert("banana", t3);
  for (auto [s, t] : {std::pair{"hello", t1}, {"apple", t2}, {"banana", t3}}) {
    const MatchResult m = tree.match(s);
    CHECK(prefix_of(s, m) == s);
    CHECK(m.tenant == t);
    CHECK(m.matched == m.input);
  }
}

TEST_CASE("radix tree 6.1.5 exact_match_concurrent: parallel inserts, then parallel matches",
          "[radix_tree][spec][concurrency]") {
  ApproxRadixTree tree;
  const std::vector<std::pair<std::string, TenantId>> items = {
      {"hello", t1}, {"apple", t2}, {"banana", t3}};
  run_threads(3, [&](int i) {
    tree.insert(items[static_cast<std::size_t>(i)].first,
                items[static_cast<std::size_t>(i)].second);
  });
  std::atomic<int> ok{0};
  run_threads(3, [&](int i) {
    const auto& [s, t] = items[static_cast<std::size_t>(i)];
    const MatchResult m = tree.match(s);
    if (m.matched == s.size() && m.tenant == t) ++ok;
  });
  CHECK(ok == 3);
  require_consistent(tree);
}

TEST_CASE("radix tree 6.1.6 partial_match_concurrent: one tenant's overlapping inserts",
          "[radix_tree][spec][concurrency]") {
  ApproxRadixTree tree;
  const std::vector<std::string> items = {"apple", "apabc", "acbdeds"};
  run_threads(3, [&](int i) { tree.insert(items[static_cast<std::size_t>(i)], t0); });
  for (const auto& s : items) {
    const MatchResult m = tree.match(s);
    CHECK(prefix_of(s, m) == s);
    CHECK(m.tenant == t0);
  }
  CHECK(tree.tenant_size(t0) == 14);  // "a" + "p" + "ple" + "abc" + "cbdeds"
  require_consistent(tree);
}

TEST_CASE("radix tree 6.1.7 group_prefix_insert_match: a bare prefix matches its group's tenant",
          "[radix_tree][spec][concurrency]") {
  ApproxRadixTree tree;
  const std::vector<std::string> prefixes = {"aaaaa", "bbbbb", "ccccc", "ddddd"};
  const std::vector<std::string> suffixes = {"11111", "22222"};
  run_threads(4, [&](int i) {
    for (const auto& suf : suffixes) {
      tree.insert(prefixes[static_cast<std::size_t>(i)] + suf, static_cast<TenantId>(i));
    }
  });
  for (std::size_t i = 0; i < prefixes.size(); ++i) {
    const MatchResult m = tree.match(prefixes[i]);
    CHECK(prefix_of(prefixes[i], m) == prefixes[i]);
    CHECK(m.tenant == static_cast<TenantId>(i));
  }
  require_consistent(tree);
}

TEST_CASE("radix tree 6.1.8 mixed_concurrent_insert_match: no deadlock, consistent afterwards",
          "[radix_tree][spec][concurrency]") {
  ApproxRadixTree tree;
  std::atomic<int> bad{0};  // Catch2 assertions are not thread-safe
  run_threads(4, [&](int i) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(i));
    for (int k = 0; k < 300; ++k) {
      const std::string s = "prefix_" + std::to_string(rng() % 40) + random_ascii(rng, 4);
      if (i % 2 == 0) {
        if (!tree.insert(s, static_cast<TenantId>(i)).ok()) ++bad;
      } else {
        const MatchResult m = tree.match(s);
        if (m.matched > m.input || m.input != s.size()) ++bad;
      }
    }
  });
  CHECK(bad == 0);
  require_consistent(tree);
}

TEST_CASE("radix tree 6.1.9 utf8_split_seq / utf8_split_concurrent: splits fall on char boundaries",
          "[radix_tree][spec][utf8]") {
  const std::vector<std::pair<std::string, TenantId>> items = {
      {"你好嗎", t1}, {"你好喔", t2}, {"你心情好嗎", t3}};
  auto verify = [&](ApproxRadixTree& tree) {
    for (const auto& [s, t] : items) {
      const MatchResult m = tree.match(s);
      CHECK(prefix_of(s, m) == s);
      CHECK(m.tenant == t);
      CHECK(m.matched == kvroute::detail::utf8_count(s));
    }
    // 你 is shared by all three, 好 by the first two.
    CHECK(tree.debug_node("你")->fragment == "你");
    CHECK(tree.debug_node("你好")->fragment == "好");
    CHECK(tree.tenant_size(t1) == 3);
    CHECK(tree.tenant_size(t3) == 5);
    require_consistent(tree);
  };
  SECTION("sequential") {
    ApproxRadixTree tree;
    for (const auto& [s, t] : items) tree.insert(s, t);
    verify(tree);
  }
  SECTION("concurrent") {
    ApproxRadixTree tree;
    run_threads(3, [&](int i) {
      tree.insert(items[static_cast<std::size_t>(i)].first,
                  items[static_cast<std::size_t>(i)].second);
    });
    verify(tree);
  }
}

// ---------------------------------------------------------------------------
// Eviction
// ---------------------------------------------------------------------------

TEST_CASE("radix tree 6.1.10 simple_eviction: evict(5) takes t2 off \"hello\" only",
          "[radix_tree][spec][evict]") {
  ApproxRadixTree tree;
  tree.insert("hello", t1);
  tree.insert("hello", t2);
  tree.insert("world", t2);
  CHECK(tree.tenant_size(t1) == 5);
  CHECK(tree.tenant_size(t2) == 10);
  const auto r = tree.evict(5);
  CHECK(r.claims == 1);
  CHECK(r.units == 5);
  CHECK(tree.tenant_size(t1) == 5);
  CHECK(tree.tenant_size(t2) == 5);
  CHECK(tree.match("world").tenant == t2);
  CHECK(tree.match_for_tenant("hello", t2).matched == 0);
  CHECK(tree.match("hello").tenant == t1);
  require_consistent(tree);
}

TEST_CASE("radix tree 6.1.11 advanced_eviction: 4 tenants x 100 strings, evict(100)",
          "[radix_tree][spec][evict]") {
  ApproxRadixTree tree;
  std::mt19937_64 rng(11);
  const std::vector<std::string> prefixes = {"aqwefcisdf", "iajsdfkmade", "kjnzxcvewqe",
                                             "iejksduqasd"};
  for (int i = 0; i < 100; ++i) {
    for (TenantId t = 0; t < 4; ++t) tree.insert(prefixes[t] + random_ascii(rng, 10), t);
  }
  for (TenantId t = 0; t < 4; ++t) CHECK(tree.tenant_size(t) > 100);
  tree.evict(100);
  for (TenantId t = 0; t < 4; ++t) CHECK(tree.tenant_size(t) <= 100);
  require_consistent(tree);
}

TEST_CASE("radix tree 6.1.12 concurrent_operations_with_eviction: budget holds after a final evict",
          "[radix_tree][spec][evict][concurrency]") {
  // Adapted: a bounded number of operations instead of 10 seconds.
  ApproxRadixTree tree;
  std::atomic<bool> stop{false};
  std::thread evictor([&] {
    while (!stop.load()) {
      tree.evict(100);
      std::this_thread::yield();
    }
  });
  run_threads(4, [&](int i) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(100 + i));
    for (int k = 0; k < 400; ++k) {
      const std::string s = "p" + std::to_string(rng() % 16) + "_" + random_ascii(rng, 8);
      if (rng() % 10 < 7) {
        tree.match(s);
      } else {
        tree.insert(s, static_cast<TenantId>(rng() % 4));
      }
    }
  });
  stop = true;
  evictor.join();
  require_consistent(tree);
  tree.evict(100);
  for (const auto& s : tree.tenant_sizes()) CHECK(s.size <= 100);
  require_consistent(tree);
}

// ---------------------------------------------------------------------------
// Leaf detection and prefix_match_tenant
// ---------------------------------------------------------------------------

TEST_CASE("radix tree 6.1.13 leaf_of: which tenants a node is a leaf for", "[radix_tree][spec]") {
  ApproxRadixTree tree;
  tree.insert("hello", t1);
  auto h = tree.debug_node("h");
  REQUIRE(h);
  CHECK(h->fragment == "hello");
  CHECK(h->leaf_tenants == std::vector<TenantId>{t1});
  tree.insert("hello", t2);
  CHECK(tree.debug_node("h")->leaf_tenants == std::vector<TenantId>{t1, t2});
  tree.insert("hi", t1);
  h = tree.debug_node("h");
  CHECK(h->fragment == "h");
  CHECK(h->children == 2);
  CHECK(h->leaf_tenants.empty());
  CHECK(tree.debug_node("hello")->fragment == "ello");
  CHECK(tree.debug_node("hi")->fragment == "i");
  require_consistent(tree);
}

TEST_CASE("radix tree 6.1.14 prefix_match_tenant: descends only through the tenant's nodes",
          "[radix_tree][spec]") {
  ApproxRadixTree tree;
  tree.insert("hello", t1);
  tree.insert("hello", t2);
  tree.insert("hello world", t2);
  tree.insert("help", t1);
  tree.insert("helicopter", t2);
  CHECK(prefix_for(tree, "hello", t1) == "hello");
  CHECK(prefix_for(tree, "help", t1) == "help");
  CHECK(prefix_for(tree, "hel", t1) == "hel");
  CHECK(prefix_for(tree, "hello world", t1) == "hello");
  CHECK(prefix_for(tree, "helicopter", t1) == "hel");
  CHECK(prefix_for(tree, "hello", t2) == "hello");
  CHECK(prefix_for(tree, "hello world", t2) == "hello world");
  CHECK(prefix_for(tree, "helicopter", t2) == "helicopter");
  CHECK(prefix_for(tree, "hel", t2) == "hel");
  CHECK(prefix_for(tree, "help", t2) == "hel");
  const auto unknown = tree.match_for_tenant("hello", t3);
  CHECK_FALSE(unknown.found);
  CHECK(unknown.matched == 0);
  CHECK(prefix_for(tree, "help", t3).empty());
  CHECK(tree.match_for_tenant("helicopter", t2).matched == 10);
  CHECK(tree.match_for_tenant("helicopter", t2).input == 10);
}

// ---------------------------------------------------------------------------
// remove_tenant
// ---------------------------------------------------------------------------

TEST_CASE("radix tree 6.1.15 simple_tenant_eviction: remove_tenant deletes a tenant and its size",
          "[radix_tree][spec][remove]") {
  ApproxRadixTree tree;
  tree.insert("hello", t1);
  tree.insert("world", t1);
  tree.insert("hello", t2);
  tree.insert("help", t2);
  CHECK(tree.tenant_sizes() == sizes({{t1, 10}, {t2, 6}}));
  CHECK(tree.remove_tenant(t1));
  CHECK(tree.tenant_sizes() == sizes({{t2, 6}}));
  CHECK_FALSE(tree.has_tenant(t1));
  CHECK(prefix_for(tree, "hello", t1).empty());
  CHECK(prefix_for(tree, "world", t1).empty());
  CHECK(prefix_for(tree, "hello", t2) == "hello");
  CHECK(prefix_for(tree, "help", t2) == "help");
  // "world" was t1's alone: its node is gone.
  CHECK_FALSE(tree.debug_node("world"));
  CHECK_FALSE(tree.remove_tenant(t1));
  require_consistent(tree);
}

TEST_CASE("radix tree 6.1.16 complex_tenant_eviction: removing t1 keeps t2 intact",
          "[radix_tree][spec][remove]") {
  ApproxRadixTree tree;
  tree.insert("apple", t1);
  tree.insert("application", t1);
  tree.insert("apple", t2);
  tree.insert("appetite", t2);
  tree.insert("banana", t1);
  tree.insert("banana", t2);
  tree.insert("ball", t2);
  REQUIRE(tree.remove_tenant(t1));
  for (const char* s : {"apple", "appetite", "banana", "ball"}) {
    CHECK(prefix_for(tree, s, t2) == s);
    CHECK(tree.match(s).tenant == t2);
  }
  // "app"+"le"+"etite"... : splits stay, so "apple" is 5 in pieces.
  CHECK(tree.tenant_size(t2) == 5 + 5 + 6 + 2);
  CHECK_FALSE(tree.debug_node("applic"));
  require_consistent(tree);
}

// ---------------------------------------------------------------------------
// Edge cases
// ---------------------------------------------------------------------------

TEST_CASE("radix tree 6.1.17 empty_string_input: \"\" registers at the root and matches there",
          "[radix_tree][spec]") {
  // Adapted: the gateway keeps returning t1 (its root's cached creator).
  // kvroute's default rule is most-recently-used, and t2's insert used the
  // root last; the creator-like answer is available with LowestTenantId.
  ApproxRadixTree tree;
  tree.insert("", t1);
  MatchResult m = tree.match("");
  CHECK(m.tenant == t1);
  CHECK(m.matched == 0);
  CHECK(m.input == 0);
  CHECK(m.match_rate() == 0.0f);
  CHECK(tree.stats().nodes == 1);
  CHECK(tree.tenant_sizes() == sizes({{t1, 0}}));
  tree.insert("hello", t2);
  m = tree.match("");
  CHECK(m.candidates == 2);
  CHECK(m.tenant == t2);
  // (A match stamps what it chooses, so t1 is the most recent after this.)
  CHECK(tree.match("", kvroute::LowestTenantId{}).tenant == t1);
  CHECK(tree.match("").tenant == t1);
  require_consistent(tree);
}

TEST_CASE("radix tree 6.1.18 single_character_operations", "[radix_tree][spec]") {
  ApproxRadixTree tree;
  tree.insert("a", t1);
  tree.insert("b", t2);
  tree.insert("c", t1);
  CHECK(tree.match("a").tenant == t1);
  CHECK(prefix_of("a", tree.match("a")) == "a");
  CHECK(tree.match("b").tenant == t2);
  const MatchResult m = tree.match("abc");
  CHECK(prefix_of("abc", m) == "a");
  CHECK(m.tenant == t1);
  CHECK(m.input == 3);
}

TEST_CASE("radix tree 6.1.19 prefix_is_subset_of_existing: a partial overlap counts",
          "[radix_tree][spec]") {
  ApproxRadixTree tree;
  tree.insert("application", t1);
  tree.insert("app", t2);
  MatchResult m = tree.match("app");
  CHECK(prefix_of("app", m) == "app");
  CHECK((m.tenant == t1 || m.tenant == t2));
  // Adapted (spec section 9, "the tenant choice ignores recency and load"):
  // the gateway names the node's first creator; the tree's default chooser
  // (MostRecentlyUsed) names the tenant that used the node last.
  CHECK(m.tenant == t2);  // t2 used "app" last
  CHECK(m.candidates == 2);
  CHECK(tree.match("application").tenant == t1);
  m = tree.match("apple");
  CHECK(prefix_of("apple", m) == "appl");
  CHECK(m.matched == 4);
  CHECK(m.tenant == t1);  // stops inside "lication", held by t1 alone
}

TEST_CASE("radix tree 6.1.20 existing_is_prefix_of_new", "[radix_tree][spec]") {
  ApproxRadixTree tree;
  tree.insert("app", t1);
  tree.insert("application", t2);
  MatchResult m = tree.match("app");
  CHECK((m.tenant == t1 || m.tenant == t2));
  // Adapted as in 6.1.19 (spec section 9, the tenant choice).
  CHECK(m.tenant == t2);  // t2's insert stamped "app" after t1's
  CHECK(tree.match("application").tenant == t2);
  m = tree.match("applesauce");
  CHECK(prefix_of("applesauce", m) == "appl");
  CHECK(m.tenant == t2);
}

// ---------------------------------------------------------------------------
// Counts
// ---------------------------------------------------------------------------

TEST_CASE("radix tree 6.1.21 with_counts_accuracy", "[radix_tree][spec]") {
  ApproxRadixTree tree;
  tree.insert("hello world", t1);
  MatchResult m = tree.match("hello world");
  CHECK(m.matched == 11);
  CHECK(m.input == 11);
  CHECK(m.tenant == t1);
  CHECK(m.match_rate() == 1.0f);
  m = tree.match("hello");
  CHECK(m.matched == 5);
  CHECK(m.input == 5);
  m = tree.match("hello world and more");
  CHECK(m.matched == 11);
  CHECK(m.input == 20);
  CHECK(m.match_rate() == 11.0f / 20.0f);
  m = tree.match("goodbye");
  CHECK(m.matched == 0);
  CHECK(m.input == 7);
}

TEST_CASE("radix tree 6.1.22 with_counts_utf8: counts are code points",
          "[radix_tree][spec][utf8]") {
  ApproxRadixTree tree;
  tree.insert("你好世界呀", t1);
  MatchResult m = tree.match("你好世界呀");
  CHECK(m.matched == 5);
  CHECK(m.input == 5);
  m = tree.match("你好");
  CHECK(m.matched == 2);
  CHECK(m.input == 2);
  tree.insert("hello你好", t2);
  m = tree.match("hello你好世界");
  CHECK(m.matched == 7);
  CHECK(m.input == 9);
  CHECK(m.tenant == t2);
  CHECK(tree.tenant_size(t1) == 5);
  CHECK(tree.tenant_size(t2) == 7);
}

// ---------------------------------------------------------------------------
// Splits
// ---------------------------------------------------------------------------

TEST_CASE("radix tree 6.1.23 split_at_first_character", "[radix_tree][spec]") {
  ApproxRadixTree tree;
  tree.insert("abc", t1);
  tree.insert("aXX", t2);
  CHECK(tree.match("abc").tenant == t1);
  CHECK(tree.match("aXX").tenant == t2);
  const MatchResult m = tree.match("a");
  CHECK(prefix_of("a", m) == "a");
  CHECK(m.candidates == 2);
  CHECK(tree.debug_node("a")->fragment == "a");
  require_consistent(tree);
}

TEST_CASE("radix tree 6.1.24 split_at_last_character", "[radix_tree][spec]") {
  ApproxRadixTree tree;
  tree.insert("abcd", t1);
  tree.insert("abcX", t2);
  CHECK(tree.match("abcd").tenant == t1);
  CHECK(tree.match("abcX").tenant == t2);
  CHECK(prefix_of("abcd", tree.match("abcd")) == "abcd");
  CHECK(prefix_of("abc", tree.match("abc")) == "abc");
  CHECK(tree.debug_node("abc")->fragment == "abc");
  require_consistent(tree);
}

TEST_CASE("radix tree 6.1.25 multiple_splits_same_path", "[radix_tree][spec]") {
  ApproxRadixTree tree;
  tree.insert("abcdefgh", t1);
  tree.insert("abcdef", t2);
  tree.insert("abcd", t3);
  tree.insert("ab", t4);
  for (const char* s : {"abcdefgh", "abcdef", "abcd", "ab", "a"}) {
    CHECK(prefix_of(s, tree.match(s)) == s);
  }
  CHECK(tree.match("abcdefgh").tenant == t1);
  CHECK(tree.match("ab", kvroute::LowestTenantId{}).candidates == 4);
  CHECK(tree.tenant_size(t1) == 8);
  CHECK(tree.tenant_size(t4) == 2);
  CHECK(tree.stats().nodes == 5);  // root, ab, cd, ef, gh
  require_consistent(tree);
}

// ---------------------------------------------------------------------------
// Stress
// ---------------------------------------------------------------------------

TEST_CASE("radix tree 6.1.26 high_contention_same_prefix: 16 threads x 100 inserts + matches",
          "[radix_tree][spec][concurrency]") {
  ApproxRadixTree tree;
  std::atomic<int> bad{0};
  run_threads(16, [&](int i) {
    for (int k = 0; k < 100; ++k) {
      const std::string s = "shared_prefix_" + std::to_string(i * 100 + k);
      tree.insert(s, static_cast<TenantId>(i));
      const MatchResult m = tree.match(s);
      if (m.matched_symbols < 14 || m.matched != s.size() || !m.has_tenant()) ++bad;
    }
  });
  CHECK(bad == 0);
  CHECK(tree.stats().nodes > 1);
  CHECK(tree.tenant_count() == 16);
  require_consistent(tree);
}

TEST_CASE("radix tree 6.1.27 rapid_insert_remove_cycles", "[radix_tree][spec][remove]") {
  ApproxRadixTree tree;
  for (int cycle = 0; cycle < 50; ++cycle) {
    const auto t = static_cast<TenantId>(cycle % 5);
    for (int i = 0; i < 10; ++i)
      tree.insert("cycle_" + std::to_string(cycle) + "_" + std::to_string(i), t);
    CHECK(tree.tenant_size(t) > 0);
    REQUIRE(tree.remove_tenant(t));
    const auto s = tree.tenant_sizes();
    CHECK(std::none_of(s.begin(), s.end(), [&](const TenantSize& x) { return x.tenant == t; }));
    CHECK_FALSE(tree.has_tenant(t));
  }
  CHECK(tree.stats().nodes == 1);
  require_consistent(tree);
}

// ---------------------------------------------------------------------------
// Encodings
// ---------------------------------------------------------------------------

TEST_CASE("radix tree 6.1.28 ascii_utf8_consistency", "[radix_tree][spec][utf8]") {
  ApproxRadixTree tree;
  tree.insert("hello", t1);
  tree.insert("你好", t2);
  tree.insert("hello你好", t3);
  for (auto [s, t, n] : {std::tuple{"hello", t1, 5u}, {"你好", t2, 2u}, {"hello你好", t3, 7u}}) {
    const MatchResult m = tree.match(s);
    CHECK(prefix_of(s, m) == s);
    CHECK(m.matched == n);
    CHECK(m.input == n);
  }
  CHECK(tree.match("你好").tenant == t2);
  CHECK(tree.match("hello你好").tenant == t3);
}

TEST_CASE("radix tree 6.1.29 emoji_handling: an emoji is one character",
          "[radix_tree][spec][utf8]") {
  ApproxRadixTree tree;
  tree.insert("hello 👋", t1);
  tree.insert("hello 👋🌍", t2);
  MatchResult m = tree.match("hello 👋");
  CHECK(m.matched == 7);
  CHECK(m.input == 7);
  // Adapted as in 6.1.19 (spec section 9, the tenant choice).
  CHECK(m.tenant == t2);  // t2 used "hello 👋" last
  CHECK(tree.match("hello 👋", kvroute::LowestTenantId{}).tenant == t1);
  m = tree.match("hello 👋🌍");
  CHECK(m.matched == 8);
  CHECK(m.tenant == t2);
  CHECK(tree.tenant_size(t1) == 7);
  CHECK(tree.tenant_size(t2) == 8);
}

// ---------------------------------------------------------------------------
// Eviction edge cases
// ---------------------------------------------------------------------------

TEST_CASE("radix tree 6.1.30 eviction_empty_tree", "[radix_tree][spec][evict]") {
  ApproxRadixTree tree;
  const auto r = tree.evict(100);
  CHECK(r.claims == 0);
  CHECK(r.visited == 0);
  CHECK(tree.tenant_sizes().empty());
  require_consistent(tree);
}

TEST_CASE("radix tree 6.1.31 eviction_zero_max_size: the root survives with size 0",
          "[radix_tree][spec][evict]") {
  ApproxRadixTree tree;
  tree.insert("hello", t1);
  tree.insert("world", t1);
  tree.evict(0);
  CHECK(tree.tenant_sizes() == sizes({{t1, 0}}));
  CHECK(tree.has_tenant(t1));
  CHECK(tree.stats().nodes == 1);
  CHECK(tree.match("hello").matched == 0);
  CHECK(tree.match("hello").tenant == t1);  // still registered at the root
  require_consistent(tree);
}

TEST_CASE("radix tree 6.1.32 eviction_single_tenant_all_entries", "[radix_tree][spec][evict]") {
  ApproxRadixTree tree;
  for (int i = 0; i < 100; ++i) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "entry%03d", i);
    tree.insert(buf, t1);
  }
  CHECK(tree.tenant_size(t1) > 50);
  tree.evict(50);
  CHECK(tree.tenant_size(t1) <= 50);
  CHECK(tree.tenant_size(t1) > 40);  // stops as soon as it is within budget
  require_consistent(tree);
}

// ---------------------------------------------------------------------------
// Tenant choice (the gateway's last_tenant cache)
// ---------------------------------------------------------------------------

TEST_CASE("radix tree 6.1.33 last_tenant_cache_update", "[radix_tree][spec][choice]") {
  // Adapted: the gateway keeps naming the creator t1; kvroute names the most
  // recent user of the node, t2, and still matches all of "hello".
  ApproxRadixTree tree;
  tree.insert("hello", t1);
  CHECK(tree.match("hello").tenant == t1);
  tree.insert("hello", t2);
  const MatchResult m = tree.match("hello");
  CHECK(prefix_of("hello", m) == "hello");
  CHECK(m.tenant == t2);
  CHECK(m.candidates == 2);
}

TEST_CASE("radix tree 6.1.34 stale_cache_after_tenant_removal", "[radix_tree][spec][choice]") {
  ApproxRadixTree tree;
  tree.insert("hello", t1);
  tree.insert("hello", t2);
  tree.match("hello");
  REQUIRE(tree.remove_tenant(t1));
  const MatchResult m = tree.match("hello");
  CHECK(prefix_of("hello", m) == "hello");
  CHECK(m.tenant == t2);
  CHECK(m.candidates == 1);
}

// ---------------------------------------------------------------------------
// Consistency
// ---------------------------------------------------------------------------

TEST_CASE("radix tree 6.1.35 char_count_consistency_after_operations", "[radix_tree][spec]") {
  ApproxRadixTree tree;
  for (int i = 0; i < 50; ++i) {
    tree.insert("prefix" + std::to_string(i), t1);
    tree.insert("other" + std::to_string(i), t2);
  }
  require_consistent(tree);
  for (int i = 0; i < 25; ++i) tree.insert("prefix" + std::to_string(i), t2);
  require_consistent(tree);
  tree.evict(100);
  require_consistent(tree);
  CHECK(tree.tenant_size(t1) <= 100);
  tree.remove_tenant(t1);
  require_consistent(tree);
  CHECK_FALSE(tree.has_tenant(t1));
}

TEST_CASE("radix tree 6.1.36 structure_integrity_after_stress: no phantom tenant, sizes recount",
          "[radix_tree][spec][concurrency]") {
  ApproxRadixTree tree;
  std::vector<std::string> keys;
  for (int i = 0; i < 50; ++i) keys.push_back("key_" + std::to_string(i) + "_value");
  std::atomic<int> bad{0};
  run_threads(8, [&](int i) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(36 + i));
    for (int k = 0; k < 200; ++k) {
      const std::string& s = keys[rng() % keys.size()];
      const auto op = rng() % 10;
      if (op < 7) {
        tree.insert(s, static_cast<TenantId>(i));
      } else if (op < 9) {
        const MatchResult m = tree.match(s);
        if (m.matched > m.input) ++bad;
      } else {
        const auto m = tree.match_for_tenant(s, static_cast<TenantId>(i));
        if (m.matched > m.input) ++bad;
      }
    }
  });
  CHECK(bad == 0);
  for (const auto& s : tree.tenant_sizes()) CHECK(s.size > 0);
  CHECK(tree.tenant_count() == 8);
  require_consistent(tree);
}

// ---------------------------------------------------------------------------
// Boundaries
// ---------------------------------------------------------------------------

TEST_CASE("radix tree 6.1.37 very_long_strings", "[radix_tree][spec]") {
  ApproxRadixTree tree;
  std::mt19937_64 rng(37);
  const std::string s = random_ascii(rng, 10000);
  tree.insert(s, t1);
  MatchResult m = tree.match(s);
  CHECK(m.matched == 10000);
  CHECK(m.tenant == t1);
  m = tree.match(s.substr(0, 5000));
  CHECK(m.matched == 5000);
  CHECK(prefix_of(s, m) == s.substr(0, 5000));
}

TEST_CASE("radix tree 6.1.38 many_tenants_same_path", "[radix_tree][spec]") {
  ApproxRadixTree tree;
  for (TenantId t = 0; t < 100; ++t) tree.insert("shared_path", t);
  const MatchResult m = tree.match("shared_path");
  CHECK(m.matched == 11);
  CHECK(m.candidates == 100);
  // Adapted as in 6.1.19 (spec section 9, the tenant choice).
  CHECK(m.tenant == 99);  // the last to use it
  CHECK(tree.tenant_sizes().size() == 100);
  CHECK(tree.stats().nodes == 2);
  require_consistent(tree);
}

TEST_CASE("radix tree 6.1.39 special_characters", "[radix_tree][spec]") {
  ApproxRadixTree tree;
  const std::vector<std::string> items = {
      "line1\nline2",    "tab\there",    std::string("nul\0byte", 8),
      "nbsp\u00a0space", "path/to/file", "query?a=b&c=d"};
  for (std::size_t i = 0; i < items.size(); ++i) tree.insert(items[i], static_cast<TenantId>(i));
  for (std::size_t i = 0; i < items.size(); ++i) {
    const MatchResult m = tree.match(items[i]);
    CHECK(prefix_of(items[i], m) == items[i]);
    CHECK(m.tenant == static_cast<TenantId>(i));
  }
  CHECK(tree.match(items[3]).matched == 10);  // U+00A0 is one character
}

// 6.1.40 in the spec is the count of the split, partial and UTF-8 variants
// above taken individually; each has its own test case here.

TEST_CASE("radix tree: the header's example holds", "[radix_tree]") {
  kvroute::ApproxRadixTree tree;
  tree.insert("You are a helpful assistant. Hi!", /*tenant=*/0);
  tree.insert("You are a helpful assistant. Bye", /*tenant=*/1);
  kvroute::MatchResult m = tree.match("You are a helpful assistant. Hi there");
  CHECK(m.tenant == 0);
  CHECK(m.matched == 31);
  CHECK(m.input == 37);
  tree.evict(/*budget=*/1 << 20);
  const std::map<TenantId, int> loads = {{0, 9}, {1, 1}};
  auto load = [&](TenantId t) { return loads.at(t); };
  m = tree.match("You are a helpful assistant. ", [&](const kvroute::RadixCandidates& c) noexcept {
    kvroute::TenantId best = kvroute::kNoTenant;
    for (kvroute::RadixCandidate x : c)
      if (best == kvroute::kNoTenant || load(x.tenant) < load(best)) best = x.tenant;
    return best;
  });
  CHECK(m.tenant == 1);
}

// ---------------------------------------------------------------------------
// kvroute: encodings and sizes of input
// ---------------------------------------------------------------------------

TEST_CASE("radix tree: invalid UTF-8 counts one character per bad byte", "[radix_tree][utf8]") {
  ApproxRadixTree tree;
  // A stray continuation byte, an overlong form, a truncated sequence.
  const std::string bad =
      "\x80"
      "a"
      "\xC0\xAF"
      "b"
      "\xE4\xBD";
  tree.insert(bad, t1);
  CHECK(tree.tenant_size(t1) == 7);
  MatchResult m = tree.match(bad);
  CHECK(m.matched == 7);
  CHECK(m.input == 7);
  // "\xE4\xBD" then "\xA0" completes 你 in the query: the bytes agree for two
  // of its three, but no whole character beyond "b" is shared.
  const std::string longer = bad + "\xA0";
  m = tree.match(longer);
  CHECK(m.matched == 5);
  CHECK(m.matched_symbols == 5);
  CHECK(m.input == 6);
  tree.insert(longer, t2);
  CHECK(tree.tenant_size(t2) == 6);
  CHECK(tree.match(longer).matched == 6);
  CHECK(tree.match(bad).tenant == t1);
  require_consistent(tree);
}

TEST_CASE("radix tree: a byte mismatch inside a multi-byte character counts whole characters only",
          "[radix_tree][utf8]") {
  ApproxRadixTree tree;
  tree.insert("ab你", t1);             // 你 = E4 BD A0
  MatchResult m = tree.match("ab佡");  // 佡 = E4 BD A1: two equal bytes
  CHECK(m.matched == 2);
  CHECK(m.matched_symbols == 2);
  CHECK(m.input == 3);
  tree.insert("ab佡", t2);
  // They split after "ab", never inside the character.
  CHECK(tree.debug_node("ab")->fragment == "ab");
  CHECK(tree.debug_node("ab你")->fragment == "你");
  CHECK(tree.debug_node("ab佡")->fragment == "佡");
  CHECK(tree.tenant_size(t2) == 3);
  // Emoji sharing three of four bytes.
  tree.insert("x😀", t3);  // F0 9F 98 80
  m = tree.match("x😁");   // F0 9F 98 81
  CHECK(m.matched == 1);
  CHECK(m.input == 2);
  require_consistent(tree);
}

TEST_CASE("radix tree: NUL is an ordinary symbol", "[radix_tree]") {
  ApproxRadixTree tree;
  const std::string a("a\0b", 3);
  const std::string b("a\0c", 3);
  tree.insert(a, t1);
  tree.insert(b, t2);
  CHECK(tree.match(a).tenant == t1);
  CHECK(tree.match(b).tenant == t2);
  const MatchResult m = tree.match(std::string("a\0", 2));
  CHECK(m.matched == 2);
  CHECK(m.candidates == 2);
  CHECK(tree.tenant_size(t1) == 3);
  CHECK(tree.debug_node(std::string("a\0", 2))->fragment == std::string("a\0", 2));
  const std::string zeros(100, '\0');
  tree.insert(zeros, t3);
  CHECK(tree.match(zeros).matched == 100);
  CHECK(tree.match(zeros).tenant == t3);
  require_consistent(tree);
}

TEST_CASE("radix tree: empty insert registers the tenant at the root only", "[radix_tree]") {
  ApproxRadixTree tree;
  const auto before = tree.stats();
  CHECK(tree.insert("", t1).ok());
  const auto after = tree.stats();
  CHECK(after.nodes == 1);
  CHECK(after.units == 0);
  CHECK(after.claims == 1);
  CHECK(after.bytes > before.bytes);  // the tenant's state and root entry
  CHECK(tree.has_tenant(t1));
  CHECK(tree.tenant_size(t1) == 0);
  CHECK(tree.tenant_nodes(t1) == 0);
  // A registered tenant is the only candidate when nothing matches.
  const MatchResult m = tree.match("anything");
  CHECK(m.tenant == t1);
  CHECK(m.matched == 0);
  CHECK(m.input == 8);
  // Inserting "" again changes nothing but the root recency.
  const auto r1 = tree.insert("", t1);
  const auto r2 = tree.insert("", t1);
  CHECK(r2.recency > r1.recency);
  CHECK(tree.stats().bytes == after.bytes);
  require_consistent(tree);
}

TEST_CASE("radix tree: a 64 MB text is stored, matched, split and evicted", "[radix_tree][large]") {
  // Mixed ASCII, CJK and emoji so that counting is exercised on the whole text.
  const std::string unit = "The quick brown fox 你好世界 jumps 👋 over the lazy dog. ";
  const std::size_t unit_chars = kvroute::detail::utf8_count(unit);
  std::string big;
  big.reserve(64u << 20);
  while (big.size() + unit.size() <= (64u << 20)) big += unit;
  const std::size_t reps = big.size() / unit.size();
  const std::size_t chars = reps * unit_chars;

  ApproxRadixTree tree;
  REQUIRE(tree.insert(big, t1).ok());
  CHECK(tree.tenant_size(t1) == chars);
  CHECK(tree.stats().symbols == big.size());
  MatchResult m = tree.match(big);
  CHECK(m.matched == chars);
  CHECK(m.input == chars);
  CHECK(m.tenant == t1);

  // Diverge at the very last character: one split near the end.
  std::string other = big;
  other.back() = '!';
  REQUIRE(tree.insert(other, t2).ok());
  CHECK(tree.tenant_size(t2) == chars);
  CHECK(tree.stats().units == chars + 1);
  m = tree.match(other);
  CHECK(m.tenant == t2);
  CHECK(m.matched == chars);
  CHECK(tree.match_for_tenant(other, t1).matched == chars - 1);
  CHECK(tree.stats().bytes > big.size());
  CHECK(tree.stats().bytes < big.size() + (1u << 16));

  tree.evict(0);
  CHECK(tree.stats().nodes == 1);
  CHECK(tree.stats().bytes < (1u << 16));
  require_consistent(tree);
}

TEST_CASE("radix tree: rejected inputs are reported, not thrown", "[radix_tree]") {
  ApproxRadixTree tree;
  CHECK(tree.insert("x", kvroute::kMaxTenantId + 1).status ==
        kvroute::InsertStatus::kInvalidTenant);
  CHECK(tree.insert("x", kNoTenant).status == kvroute::InsertStatus::kInvalidTenant);
  CHECK(tree.insert("x", kvroute::kMaxTenantId).ok());
  CHECK(tree.match("x").tenant == kvroute::kMaxTenantId);
  CHECK(tree.tenant_count() == 1);
  CHECK_FALSE(tree.remove_tenant(kNoTenant));
  CHECK(tree.evict_tenant(kNoTenant, 0).claims == 0);
  CHECK(tree.match_for_tenant("x", kNoTenant).found == false);
  require_consistent(tree);
}

// ---------------------------------------------------------------------------
// kvroute: token trees
// ---------------------------------------------------------------------------

TEMPLATE_TEST_CASE("radix tree: a node keeps its first children inline, more in a block",
                   "[radix_tree][tokens][stats]", std::int64_t, std::int32_t, std::uint16_t) {
  using Node = kvroute::detail::RadixNode<TestType>;
  CHECK(Node::child_block_bytes(Node::kInlineChildren) == 0);
  CHECK(Node::child_block_bytes(2 * Node::kInlineChildren) > 0);
  kvroute::BasicApproxRadixTree<TestType> tree;
  const std::vector<TestType> trunk = {1, 2, 3, 4};
  std::vector<std::vector<TestType>> branches;
  for (std::size_t k = 0; k < 6; ++k) {
    std::vector<TestType> v = trunk;
    v.push_back(static_cast<TestType>(40 - k));  // keys arrive out of order
    v.push_back(static_cast<TestType>(100 + k));
    branches.push_back(v);
    REQUIRE(tree.insert(v, k % 2 == 0 ? t1 : t2).ok());
    // The first branch makes the trunk a node of its own at the second.
    if (k > 0) CHECK(tree.debug_node(std::span<const TestType>(trunk))->children == k + 1);
    for (const auto& b : branches) CHECK(tree.match(b).matched == 6);
    require_consistent(tree);  // bytes, sorted keys, parent links
  }
  // Removing children from the block and from inline storage.
  tree.remove_tenant(t2);
  CHECK(tree.debug_node(std::span<const TestType>(trunk))->children == 3);
  for (std::size_t k = 0; k < 6; ++k) {
    CHECK(tree.match(branches[k]).matched == (k % 2 == 0 ? 6u : 4u));
  }
  require_consistent(tree);
  // Down to the trunk and one branch: the last branch, held by the trunk's
  // only tenant, is merged into the trunk's node (from a block of children
  // back to none), once the trunk's last use went on into it (the matches
  // above of t2's branches ended at the trunk).
  tree.match(branches[4]);
  const kvroute::EvictResult r = tree.evict(6);
  CHECK(r.claims == 2);
  CHECK(r.merges == 1);
  const auto trunk_node = tree.debug_node(std::span<const TestType>(trunk));
  REQUIRE(trunk_node.has_value());
  CHECK(trunk_node->children == 0);
  CHECK(trunk_node->units == 6);
  CHECK(tree.tenant_size(t1) == 6);
  require_consistent(tree);
}

TEMPLATE_TEST_CASE("radix tree: a token fragment of up to 8 bytes is kept in its node",
                   "[radix_tree][tokens][stats]", std::int64_t, std::int32_t, std::uint16_t) {
  using Node = kvroute::detail::RadixNode<TestType>;
  constexpr std::size_t kIn = Node::kInlineSymbols;  // 1, 2 and 4 tokens
  CHECK(kIn * sizeof(TestType) == 8);
  kvroute::BasicApproxRadixTree<TestType> tree;
  std::vector<TestType> head = {7};
  tree.insert(head, t1);
  const std::size_t base = tree.stats().bytes;
  // Under {7}: a leaf of exactly kIn tokens costs nothing, one of kIn + 1
  // tokens a buffer of its size (and, for 8-byte ids, which keep one child
  // inline, {7}'s block of two children).
  std::vector<TestType> fits = head;
  std::vector<TestType> over = head;
  for (std::size_t i = 0; i < kIn; ++i) fits.push_back(static_cast<TestType>(10 + i));
  for (std::size_t i = 0; i <= kIn; ++i) over.push_back(static_cast<TestType>(20 + i));
  tree.insert(fits, t1);
  CHECK(tree.stats().bytes == base);
  tree.insert(over, t1);
  const std::size_t buffer = (kIn + 1) * sizeof(TestType);
  CHECK(tree.stats().bytes == base + buffer + Node::child_block_bytes(2));
  require_consistent(tree);
  // Split the buffer after its first token (both parts then fit in their
  // nodes) by a second tenant, then remove it: merged back into a buffer.
  std::vector<TestType> fork = {7, 20, 99};
  tree.insert(fork, t2);
  require_consistent(tree);
  CHECK(tree.match_for_tenant(over, t1).matched == over.size());
  CHECK(tree.match_for_tenant(over, t2).matched == 2);
  CHECK(tree.remove_tenant(t2));
  require_consistent(tree);
  const auto d = tree.debug_node(std::span<const TestType>(over));
  REQUIRE(d.has_value());
  CHECK(d->fragment == std::vector<TestType>(over.begin() + 1, over.end()));
  CHECK(tree.stats().bytes >= base + buffer);
  CHECK(tree.match(fits).matched == fits.size());
}

TEMPLATE_TEST_CASE("radix tree: token ids share the implementation", "[radix_tree][tokens]",
                   std::uint32_t, std::int32_t) {
  kvroute::BasicApproxRadixTree<TestType> tree;
  const std::vector<TestType> sys = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<TestType> a = sys;
  a.insert(a.end(), {10, 11, 12});
  std::vector<TestType> b = sys;
  b.insert(b.end(), {20, 21});
  std::vector<TestType> neg = {static_cast<TestType>(-1), 0, static_cast<TestType>(-1)};
  tree.insert(a, t1);
  tree.insert(b, t2);
  tree.insert(neg, t3);
  CHECK(tree.tenant_size(t1) == 11);
  CHECK(tree.tenant_size(t2) == 10);
  CHECK(tree.tenant_size(t3) == 3);
  auto m = tree.match(a);
  CHECK(m.matched == 11);
  CHECK(m.tenant == t1);
  std::vector<TestType> q = sys;
  q.push_back(99);
  m = tree.match(q);
  CHECK(m.matched == 8);
  CHECK(m.input == 9);
  CHECK(m.candidates == 2);
  CHECK(tree.match_for_tenant(b, t1).matched == 8);
  CHECK(tree.match(neg).tenant == t3);
  CHECK(tree.debug_node(std::span<const TestType>(sys.data(), 8))->fragment == sys);
  tree.evict(8);
  CHECK(tree.tenant_size(t1) == 8);
  CHECK(tree.tenant_size(t2) == 8);
  require_consistent(tree);
  CHECK(tree.remove_tenant(t1));
  require_consistent(tree);
}

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

// ---------------------------------------------------------------------------
// kvroute: accounting
// ---------------------------------------------------------------------------

TEST_CASE("radix tree: a node's only tenant costs no tenant block", "[radix_tree][stats]") {
  using Node = kvroute::detail::RadixNode<char>;
  ApproxRadixTree tree;
  tree.insert("", t1);  // register both tenants (their state, their root claims)
  tree.insert("", t2);
  tree.insert("z", t1);  // the root's child block
  const std::size_t base = tree.stats().bytes;
  CHECK(tree.stats().claims == 3);
  // One node "abc" held by t1: the node and t1's claim on it come from the
  // slabs, its fragment is kept in the node (it fits in 8 bytes); malloc'ed:
  // the root's child block, grown from one entry to two. No tenant block.
  tree.insert("abc", t1);
  const std::size_t one = tree.stats().bytes;
  CHECK(one - base == Node::child_block_bytes(2) - Node::child_block_bytes(1));
  CHECK(tree.stats().claims == 4);
  // A second tenant on it: its claim from the slab, and a block of two
  // (tenant, claim) entries.
  tree.insert("abc", t2);
  CHECK(tree.stats().bytes - one == Node::tenant_block_bytes(2));
  CHECK(Node::tenant_block_bytes(2) == 16);
  CHECK(tree.stats().claims == 5);
  CHECK(tree.check_invariants().empty());
  const MatchResult m = tree.match("abc", kvroute::LowestTenantId{});
  CHECK(m.candidates == 2);
  CHECK(m.tenant == t1);
  // Back to one, then none, then one again: the ids and claims stay right.
  CHECK(tree.remove_tenant(t1));
  CHECK(tree.check_invariants().empty());
  CHECK(tree.match("abc").tenant == t2);
  tree.insert("abd", t1);  // splits "abc": the upper node gets both tenants
  CHECK(tree.check_invariants().empty());
  CHECK(tree.match_for_tenant("abd", t1).matched == 3);
  CHECK(tree.match_for_tenant("abc", t2).matched == 3);
  CHECK(tree.match_for_tenant("abc", t1).matched == 2);
  CHECK(tree.remove_tenant(t2));
  CHECK(tree.remove_tenant(t1));
  CHECK(tree.check_invariants().empty());
  CHECK(tree.stats().nodes == 1);
}

TEST_CASE("radix tree: a fragment of up to 8 bytes is kept in its node", "[radix_tree][stats]") {
  ApproxRadixTree tree;
  tree.insert("", t1);
  tree.insert("q", t1);
  const std::size_t base = tree.stats().bytes;
  // Under "q" (whose first two children are inline: no block to grow):
  tree.insert("q12345678", t1);  // a leaf of 8 bytes: in the node, nothing allocated
  CHECK(tree.stats().bytes == base);
  tree.insert("qabcdefghi", t1);  // 9 bytes: a buffer of exactly 9
  CHECK(tree.stats().bytes == base + 9);
  require_consistent(tree);
  // Splits from a buffer into two nodes' own bytes ("abcdefghi" into "ab"
  // and "cdefghi") and within the node ("12345678" into "1234", "5678").
  tree.insert("qabX", t2);
  tree.insert("q1234Y", t2);
  require_consistent(tree);
  CHECK(tree.debug_node("qab")->fragment == "ab");
  CHECK(tree.debug_node("qabcdefghi")->fragment == "cdefghi");
  CHECK(tree.debug_node("q12345678")->fragment == "5678");
  CHECK(tree.match_for_tenant("qabcdefghi", t1).matched == 10);
  CHECK(tree.match_for_tenant("q12345678", t1).matched == 9);
  CHECK(tree.match("qabX").matched == 4);
  // A split inside the 8 bytes between two three-byte characters: whole
  // characters only.
  const std::string zhongwen = "x\xe4\xb8\xad\xe6\x96\x87";  // "x" + two CJK characters: 7 bytes
  const std::string zhongri = "x\xe4\xb8\xad\xe6\x97\xa5";   // the same first character
  tree.insert(zhongwen, t1);
  tree.insert(zhongri, t2);
  require_consistent(tree);
  CHECK(tree.match_for_tenant(zhongri, t1).matched == 2);
  CHECK(tree.match_for_tenant(zhongwen, t1).matched == 3);  // t1's last use goes through
  // Removing the second tenant merges the pieces back, each into one node
  // again: "abcdefghi" into a buffer, "12345678" and zhongwen into their
  // nodes.
  CHECK(tree.remove_tenant(t2));
  require_consistent(tree);
  CHECK(tree.debug_node("qabcdefghi")->fragment == "abcdefghi");
  CHECK(tree.debug_node("q12345678")->fragment == "12345678");
  CHECK(tree.debug_node(zhongwen)->fragment == zhongwen);
  CHECK(tree.match_for_tenant("qabcdefghi", t1).matched == 10);
  CHECK(tree.match_for_tenant(zhongwen, t1).matched == 3);
}

TEST_CASE("radix tree: stats count nodes, units and every byte allocated", "[radix_tree][stats]") {
  ApproxRadixTree tree;
  CHECK(tree.stats().bytes == 0);
  CHECK(tree.stats().nodes == 1);
  // Registering tenants allocates their state and a page of the id table.
  tree.insert("", t1);
  tree.insert("", t2);
  const auto s0 = tree.stats();
  CHECK(s0.bytes > 0);
  CHECK(s0.bytes < 8192 + kFirstSlabChunks);
  const std::string prompt(4000, 'x');
  tree.insert(prompt + " question one", t1);
  const auto s1 = tree.stats();
  CHECK(s1.units == 4013);
  CHECK(s1.symbols == 4013);
  CHECK(s1.bytes - s0.bytes > 4013);
  CHECK(s1.bytes - s0.bytes < 4013 + 256);  // a long fragment costs little more than its text
  tree.insert(prompt + " question two", t2);
  const auto s2 = tree.stats();
  CHECK(s2.nodes == 4);
  CHECK(s2.units == 4013 + 3);
  CHECK(s2.bytes - s1.bytes < 1024);  // the shared prompt is stored once
  // check_invariants recounts bytes from the structure.
  require_consistent(tree);
  REQUIRE(tree.remove_tenant(t1));
  REQUIRE(tree.remove_tenant(t2));
  const auto s3 = tree.stats();
  CHECK(s3.nodes == 1);
  CHECK(s3.units == 0);
  CHECK(s3.claims == 0);
  // Only the per-tenant states, the id table and the slab's chunk remain.
  CHECK(s3.bytes < 8192 + kFirstSlabChunks);
  require_consistent(tree);
}

TEST_CASE("radix tree: reserved bytes cover what is allocated and fall back after eviction",
          "[radix_tree][stats]") {
  // Both memory settings: the default (2 MB regions mapped plainly) and
  // transparent huge pages asked for.
  for (const bool huge : {false, true}) {
    CAPTURE(huge);
    ApproxRadixTree::Options o;
    o.huge_pages = huge;
    ApproxRadixTree tree(o);
    CHECK(tree.stats().reserved_bytes == 0);
    std::mt19937_64 rng(11);
    // About 8 MB of text: the arena's regions grow to 2 MB ones.
    for (int i = 0; i < 4000; ++i) {
      const std::string text =
          "conversation " + std::to_string(i % 50) + ": " + random_ascii(rng, 2000);
      REQUIRE(tree.insert(text, static_cast<TenantId>(i % 4)).ok());
    }
    const auto full = tree.stats();
    CHECK(full.reserved_bytes >= full.bytes);
    // Headers, rounding and free space: a few percent, not a multiple.
    CHECK(full.reserved_bytes < full.bytes + full.bytes / 4 + 8 * (std::size_t{2} << 20));
    CHECK(tree.match(std::string("conversation 7: ")).matched == 16);
    require_consistent(tree);
    // Evicting nearly everything gives whole regions back. The dozen nodes
    // left keep the regions their fragments and blocks lie in (two or three
    // of the 2 MB ones, depending on where the allocator put them); at
    // least two others come back.
    tree.evict(100);
    const auto small = tree.stats();
    CHECK(small.units <= 4 * 100);
    CHECK(small.reserved_bytes + (std::size_t{4} << 20) <= full.reserved_bytes);  // two regions
    require_consistent(tree);
  }
}

TEST_CASE("radix tree: sizes equal the recount after every operation of a random sequence",
          "[radix_tree][consistency]") {
  // Also with a coarse recency (2 stamps a step), whose stamps stop at a
  // claim that already holds the step and place what they stamp behind it.
  const unsigned shift = GENERATE(0u, 1u);
  ApproxRadixTree tree({.recency_shift = shift});
  std::mt19937_64 rng(2024);
  const std::vector<std::string> stems = {"You are a helpful assistant. ", "系统提示：",
                                          "🙂 emoji ", "", "short"};
  for (int op = 0; op < 600; ++op) {
    const auto t = static_cast<TenantId>(rng() % 5);
    const std::string text = stems[rng() % stems.size()] + random_ascii(rng, rng() % 12);
    switch (rng() % 10) {
      case 0:
        tree.evict(rng() % 60);
        break;
      case 1:
        tree.remove_tenant(t);
        break;
      case 2:
        tree.drop_older_than(t, tree.now() - rng() % 40);
        break;
      case 3:
        tree.match_for_tenant(text, t);
        break;
      case 4:
      case 5:
        tree.match(text);
        break;
      default:
        tree.insert(text, t);
        break;
    }
    INFO("op " << op);
    require_consistent(tree);
  }
}

// The definition that the fast paths must keep: one character at a time,
// as utf8_char_length reads it.
std::size_t count_one_at_a_time(std::string_view s) {
  std::size_t chars = 0;
  for (std::size_t i = 0; i < s.size(); ++chars) {
    i += kvroute::detail::utf8_char_length(s.data() + i, s.data() + s.size());
  }
  return chars;
}

std::size_t prefix_bytes_one_at_a_time(std::string_view s, std::size_t chars) {
  std::size_t i = 0;
  for (; chars > 0 && i < s.size(); --chars) {
    i += kvroute::detail::utf8_char_length(s.data() + i, s.data() + s.size());
  }
  return i;
}

std::size_t ascii_bytes_one_at_a_time(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && static_cast<unsigned char>(s[i]) < 0x80u) ++i;
  return i;
}

TEST_CASE(
    "radix tree: the text unit count and prefix lengths equal a walk one character at a time "
    "on ASCII runs, UTF-8 and invalid bytes",
    "[radix_tree][utf8]") {
  using Traits = kvroute::detail::RadixSymbolTraits<char>;
  std::mt19937_64 rng(2024);
  const std::string pieces[] = {"a",
                                "hello world, this is plain ascii text!",
                                std::string(70, 'x'),
                                "你好",
                                "👋",
                                "é",
                                "\xC3",
                                "\x80",
                                "\xF0\x9F",
                                "\xED\xA0\x80",
                                "\xFF",
                                std::string(1, '\0')};
  for (int round = 0; round < 2000; ++round) {
    std::string s;
    const std::size_t parts = rng() % 40;
    for (std::size_t i = 0; i < parts; ++i) {
      const std::string& p = pieces[rng() % std::size(pieces)];
      const std::size_t reps = rng() % 3 == 0 ? 1 + rng() % 20 : 1;
      for (std::size_t r = 0; r < reps; ++r) s += p;
    }
    // Every suffix and prefix, so that runs start and end at every alignment
    // and every distance from the 16- and 64-byte steps.
    for (std::size_t off = 0; off <= s.size(); off += 1 + rng() % 7) {
      const std::string_view v(s.data() + off, s.size() - off);
      const std::size_t cut = v.empty() ? 0 : rng() % v.size();
      for (const std::string_view x : {v, v.substr(0, cut)}) {
        const std::size_t want = count_one_at_a_time(x);
        REQUIRE(Traits::count(x.data(), x.size()) == want);
        REQUIRE(kvroute::detail::utf8_count(x) == want);
        REQUIRE(kvroute::detail::utf8_count_by<kvroute::detail::ascii_prefix_words>(x) == want);
        // The bytes of the first c characters, c from none to one more
        // than there are.
        const std::size_t c = rng() % (want + 2);
        REQUIRE(kvroute::detail::utf8_prefix_bytes(x, c) == prefix_bytes_one_at_a_time(x, c));
        const std::size_t ascii = ascii_bytes_one_at_a_time(x);
        REQUIRE(kvroute::detail::ascii_prefix(x.data(), x.size()) == ascii);
        REQUIRE(kvroute::detail::ascii_prefix_words(x.data(), x.size()) == ascii);
      }
    }
  }
}

}  // namespace

TEST_CASE("radix tree: stats count the units removed, for eviction metrics", "[radix_tree]") {
  kvroute::ApproxRadixTree tree;
  REQUIRE(tree.insert("hello world", 0).ok());
  REQUIRE(tree.insert("goodbye", 1).ok());
  CHECK(tree.stats().removed_units == 0);
  tree.evict(8);  // tenant 0's one 11-unit leaf goes; tenant 1 (7) stays
  CHECK(tree.stats().removed_units == 11);
  tree.remove_tenant(1);
  CHECK(tree.stats().removed_units == 18);
}

// ---------------------------------------------------------------------------
// kvroute: long fragments are split with one copy, and never hoard memory
// ---------------------------------------------------------------------------

TEST_CASE("radix tree: a split long fragment stays in the part that uses most of its buffer",
          "[radix_tree][stats]") {
  ApproxRadixTree tree;
  const std::size_t base = register_tenants(tree, {t1, t2, t3});
  const std::string a(1000, 'a');
  tree.insert(a, t1);
  const std::size_t one = tree.stats().bytes;
  CHECK(one - base >= 1000);
  // Split at 600: the upper part keeps the buffer (it uses 600 of its
  // 1000), the lower 400 are copied: the tree grows by that copy, b's leaf
  // and two small blocks, not by another 1000.
  const std::string b = a.substr(0, 600) + "tail of b";
  tree.insert(b, t2);
  require_consistent(tree);  // also: no buffer holds too many dead bytes
  const std::size_t two = tree.stats().bytes;
  CHECK(two - one >= 400);
  CHECK(two - one < 400 + 9 + 128);
  CHECK(tree.match(a).matched == 1000);
  CHECK(tree.match(b).matched == b.size());
  CHECK(tree.match_for_tenant(a, t2).matched == 600);
  CHECK(tree.debug_node(a.substr(0, 600))->fragment == a.substr(0, 600));
  CHECK(tree.debug_node(a)->fragment == std::string(400, 'a'));
  // Split the upper part again at 100 and at 1: the lower part keeps the
  // buffer, then a 1-character split copies both parts.
  tree.insert(a.substr(0, 100) + "c", t3);
  tree.insert(a.substr(0, 1) + "d", t3);
  require_consistent(tree);
  CHECK(tree.match(a).matched == 1000);
  CHECK(tree.match_for_tenant(a.substr(0, 100) + "c", t3).matched == 101);
}

TEST_CASE("radix tree: a long text cut down to a few shared characters leaves no dead buffer",
          "[radix_tree][stats]") {
  // The owner of a long text goes, and other tenants keep only its first
  // one and two characters: the tree must shrink to about what they hold,
  // not keep the long buffer alive behind two short nodes.
  ApproxRadixTree tree;
  const std::size_t base = register_tenants(tree, {t1, t2, t3});
  std::string big(200000, 'x');
  for (std::size_t i = 0; i < big.size(); i += 7) big[i] = 'y';
  tree.insert(big, t1);
  tree.insert(big.substr(0, 1) + "b", t2);  // split after 1 character
  tree.insert(big.substr(0, 2) + "c", t3);  // and after 2
  require_consistent(tree);
  CHECK(tree.stats().bytes - base < 2 * big.size() + 4096);
  REQUIRE(tree.remove_tenant(t1));
  require_consistent(tree);
  CHECK(tree.stats().units == 2 + 1 + 1);
  CHECK(tree.stats().bytes - base < 4096);
  CHECK(tree.match(big.substr(0, 2) + "c").matched == 3);
}

TEST_CASE("radix tree: long forked texts stay consistent through random splits and evictions",
          "[radix_tree][consistency]") {
  ApproxRadixTree tree;
  std::mt19937_64 rng(7);
  std::vector<std::string> texts = {std::string(600, 'x')};
  for (int op = 0; op < 800; ++op) {
    const auto t = static_cast<TenantId>(rng() % 4);
    // Fork an earlier text at a random point and add a suffix: splits inside
    // long fragments, again and again inside the same buffers.
    const std::string& from = texts[rng() % texts.size()];
    std::string text = from.substr(0, rng() % (from.size() + 1)) + random_ascii(rng, rng() % 400);
    switch (rng() % 8) {
      case 0:
        tree.evict(200 + rng() % 2000);
        break;
      case 1:
        tree.drop_older_than(t, tree.now() - rng() % 30);
        break;
      case 2:
        if (rng() % 4 == 0) tree.remove_tenant(t);
        break;
      case 3:
        tree.match(text);
        break;
      default:
        tree.insert(text, t);
        if (texts.size() < 64)
          texts.push_back(text);
        else
          texts[rng() % texts.size()] = text;
        break;
    }
    INFO("op " << op);
    require_consistent(tree);
  }
}

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
