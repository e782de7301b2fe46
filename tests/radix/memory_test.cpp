// Memory: the node and claim layout, byte accounting, reserved bytes,
// sizes against recounts, and how long fragments are split.
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

// The layout the header documents (64-bit): 56-byte nodes (two children
// inline), 24-byte claims.
static_assert(sizeof(void*) != 8 || sizeof(kvroute::detail::RadixNode<char>) == 56);
static_assert(sizeof(void*) != 8 || sizeof(kvroute::detail::RadixNode<std::uint32_t>) == 56);
static_assert(sizeof(void*) != 8 || sizeof(kvroute::detail::RadixNode<std::int64_t>) == 56);
static_assert(kvroute::detail::RadixNode<char>::kInlineChildren == 2);
static_assert(kvroute::detail::RadixNode<std::int64_t>::kInlineChildren == 1);
static_assert(sizeof(kvroute::detail::RadixClaim) == 24);

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
