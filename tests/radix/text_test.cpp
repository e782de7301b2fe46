// What the tree takes as text: invalid UTF-8, NUL, empty and very long
// texts, the unit count's fast paths, and token trees.
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

namespace {

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

}  // namespace

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
