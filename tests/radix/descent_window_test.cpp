// The window of an insert's optimistic descent: between its lock-free walk
// and the lock it ends with, the insert holds no node lock, so another
// thread may split the node it stopped in, or unlink it. The insert must
// notice (the node's version moved on) and walk again, never go on from
// what it read before. A stress test meets this window only by chance; here
// the tree's test hook (detail::RadixTestAccess) runs the other thread's
// change inside it.

#include "kvroute/radix_tree.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

namespace {

using kvroute::ApproxRadixTree;
using kvroute::MatchResult;
using kvroute::RadixCandidates;
using kvroute::TenantId;

// Runs `change` on a thread of its own, once, inside the first descent's
// window that follows arm(); the descending thread waits for it. (The
// change only records what it saw: Catch2's assertions belong to the main
// thread.)
class Window {
 public:
  explicit Window(ApproxRadixTree& tree) : tree_(tree) {}
  ~Window() { kvroute::detail::RadixTestAccess::set_before_descent_lock(tree_, nullptr, nullptr); }
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  void arm(std::function<void()> change) {
    change_ = std::move(change);
    kvroute::detail::RadixTestAccess::set_before_descent_lock(
        tree_,
        [](void* self) {
          auto* w = static_cast<Window*>(self);
          // The change's own descents pass here too: only the first runs it.
          if (w->calls_.fetch_add(1) != 0) return;
          std::thread(w->change_).join();
        },
        this);
  }
  int calls() const { return calls_.load(); }

 private:
  ApproxRadixTree& tree_;
  std::function<void()> change_;
  std::atomic<int> calls_{0};
};

// The insert under test, through either entry point.
void insert_via(ApproxRadixTree& tree, bool match_and_insert, std::string_view text, TenantId t) {
  if (match_and_insert) {
    const auto r = tree.match_and_insert(
        text, [t](const RadixCandidates&, const MatchResult&) noexcept { return t; });
    REQUIRE(r.inserted);
    REQUIRE(r.insert.ok());
  } else {
    REQUIRE(tree.insert(text, t).ok());
  }
}

// What the inserts under test add: a new leaf's text longer than a node
// holds, so that the descent fills a buffer for it before its lock (freed
// when the lock finds the node changed: the next walk may end elsewhere).
constexpr std::string_view kTail = "abcdefZZZZZZZZZZ";

}  // namespace

TEST_CASE("descent window: a split of the node the insert stopped in sends it back to the root",
          "[radix_tree][concurrency]") {
  const bool via_match = GENERATE(false, true);
  ApproxRadixTree tree;
  REQUIRE(tree.insert("abcdefgh", 0).ok());
  Window window(tree);
  // The insert stops two characters into "efgh" of the one node
  // "abcdefgh"; meanwhile the node is split after "abcd", and keeps only
  // that part. Going on with what it read would hang "ZZZZZZZZZZ" below
  // "abcd".
  bool split = false;
  window.arm([&] { split = tree.insert("abcdXY", 1).ok(); });
  insert_via(tree, via_match, kTail, 0);
  CHECK(split);
  CHECK(window.calls() == 3);  // the insert's first walk, the change's, the insert's second
  CHECK(tree.check_invariants().empty());
  CHECK(tree.match_for_tenant(kTail, 0).matched == kTail.size());
  CHECK(tree.match_for_tenant("abcdefgh", 0).matched == 8);
  CHECK(tree.match_for_tenant("abcdXY", 1).matched == 6);
  CHECK_FALSE(tree.debug_node("abcdZZZZZZZZZZ").has_value());
  CHECK(tree.tenant_size(0) == 18);  // "abcdef" + "gh" + "ZZZZZZZZZZ"
}

TEST_CASE("descent window: an eviction that unlinks the node sends the insert back to the root",
          "[radix_tree][concurrency]") {
  const bool via_match = GENERATE(false, true);
  ApproxRadixTree tree;
  REQUIRE(tree.insert("abcdefgh", 0).ok());
  Window window(tree);
  // Tenant 0's only node goes while the insert is about to lock it: an
  // insert into the unlinked node would be lost.
  std::size_t unlinked = 0;
  window.arm([&] { unlinked = tree.evict_tenant(0, 0).nodes; });
  insert_via(tree, via_match, kTail, 0);
  CHECK(unlinked == 1);
  CHECK(window.calls() == 2);  // the insert's first walk (eviction has no descent), its second
  CHECK(tree.check_invariants().empty());
  const auto m = tree.match(kTail);
  CHECK(m.tenant == 0);
  CHECK(m.matched == kTail.size());
  CHECK(tree.tenant_size(0) == kTail.size());
  CHECK(tree.stats().nodes == 2);  // the root and kTail
}

TEST_CASE("descent window: a new child where the insert meant to add one is found on the next walk",
          "[radix_tree][concurrency]") {
  const bool via_match = GENERATE(false, true);
  ApproxRadixTree tree;
  REQUIRE(tree.insert("abcd", 0).ok());
  Window window(tree);
  // The walk finds no child for "e" below "abcd" and fills a buffer with
  // the text from "e" on for the new leaf; another insert adds that child
  // in the window. A second child for "e" would break the tree. The next
  // walk ends in "abcd" (insert: tenant 0 does not hold "efgh", so it goes
  // on into it with lock coupling) or two characters into "efgh"
  // (match_and_insert, with a buffer of its own).
  bool added = false;
  window.arm([&] { added = tree.insert("abcdefgh", 1).ok(); });
  insert_via(tree, via_match, kTail, 0);
  CHECK(added);
  // The insert's walks and the change's; match_and_insert's second walk
  // ends in tenant 1's "efgh", so it goes on as a separate insert: one walk
  // more.
  CHECK(window.calls() == (via_match ? 4 : 3));
  CHECK(tree.check_invariants().empty());
  const auto below = tree.debug_node("abcd");
  REQUIRE(below.has_value());
  CHECK(below->children == 1);
  CHECK(tree.match_for_tenant(kTail, 0).matched == kTail.size());
  CHECK(tree.match_for_tenant("abcdefgh", 1).matched == 8);
}

TEST_CASE("descent window: a node held exactly 2^19 times meanwhile still sends the insert back",
          "[radix_tree][concurrency]") {
  // The node's lock word repeats its version after 2^19 exclusive holds:
  // the split in the window, then holds until the word is what the walk
  // read. Taking that word for "unchanged" would hang the new leaf below
  // the split node's shortened fragment.
  const bool via_match = GENERATE(false, true);
  ApproxRadixTree tree;
  REQUIRE(tree.insert("abcdefgh", 0).ok());
  kvroute::detail::RwLock* lock =
      kvroute::detail::RadixTestAccess::node_lock(tree, std::string_view("abcdefgh"));
  REQUIRE(lock != nullptr);
  const std::uint32_t seen = lock->read_begin();
  Window window(tree);
  std::uint64_t holds = 0;
  window.arm([&] {
    REQUIRE_NOTHROW(tree.insert("abcdXY", 1));  // splits the node: it keeps "abcd"
    while (lock->read_begin() != seen) {
      lock->lock();
      lock->unlock();
      ++holds;
    }
  });
  insert_via(tree, via_match, kTail, 0);
  CHECK(holds > 0);
  CHECK(holds < (std::uint64_t{1} << 19));
  CHECK(tree.check_invariants().empty());
  CHECK(tree.match_for_tenant(kTail, 0).matched == kTail.size());
  CHECK(tree.match_for_tenant("abcdefgh", 0).matched == 8);
  CHECK(tree.match_for_tenant("abcdXY", 1).matched == 6);
  CHECK_FALSE(tree.debug_node("abcdZZZZZZZZZZ").has_value());
  CHECK(tree.tenant_size(0) == 18);
}
