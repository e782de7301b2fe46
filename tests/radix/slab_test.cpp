// detail::UnitSlab (kvroute/detail/radix/slab.hpp), the radix tree's store of
// nodes and claims: indices stay valid and distinct, large blocks never
// straddle a chunk, freed blocks are reused, fresh small blocks come from
// the other end of the range than large ones (a claim's line is not a
// node's), each thread carves a chunk of its own and takes
// what other threads released before the slab grows, and concurrent
// alloc/release from several threads hand out no block twice (also under
// ThreadSanitizer).

#include "kvroute/detail/radix/slab.hpp"

#include "kvroute/detail/radix/node.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using Slab = kvroute::detail::UnitSlab<24>;
using kvroute::detail::kNilIndex;

}  // namespace

TEST_CASE("slab: blocks are distinct, stay put and are reused after release", "[slab]") {
  Slab slab;
  CHECK(slab.bytes() == 0);
  CHECK(slab.live() == 0);
  std::vector<std::uint32_t> ones;
  std::vector<std::uint32_t> twos;
  for (int i = 0; i < 2000; ++i) {
    const std::uint32_t a = slab.alloc(1);
    const std::uint32_t b = slab.alloc(2);
    REQUIRE(a != kNilIndex);
    REQUIRE(b != kNilIndex);
    std::memset(slab.at(a), 0x11, 24);
    std::memset(slab.at(b), 0x22, 48);
    ones.push_back(a);
    twos.push_back(b);
  }
  CHECK(slab.live() == 2000 * 3);
  // Every unit belongs to one block; a two-unit block is contiguous memory
  // within one chunk.
  std::set<std::uint32_t> units;
  for (std::uint32_t a : ones) CHECK(units.insert(a).second);
  for (std::uint32_t b : twos) {
    CHECK(units.insert(b).second);
    CHECK(units.insert(b + 1).second);
    CHECK((b >> Slab::kChunkBits) == ((b + 1) >> Slab::kChunkBits));
    CHECK(static_cast<char*>(slab.at(b)) + 24 == slab.at(b + 1));
  }
  for (std::uint32_t a : ones) CHECK(*static_cast<unsigned char*>(slab.at(a)) == 0x11);
  for (std::uint32_t b : twos) CHECK(static_cast<unsigned char*>(slab.at(b))[47] == 0x22);
  const std::size_t bytes = slab.bytes();
  CHECK(bytes >= 6000 * 24);
  CHECK(bytes < 6000 * 24 + 2 * Slab::kChunkBytes);
  // Released blocks come back before the slab grows.
  for (std::uint32_t a : ones) slab.release(a, 1);
  for (std::uint32_t b : twos) slab.release(b, 2);
  CHECK(slab.live() == 0);
  std::set<std::uint32_t> again;
  for (int i = 0; i < 2000; ++i) {
    again.insert(slab.alloc(1));
    again.insert(slab.alloc(2));
  }
  CHECK(again.size() == 4000);
  CHECK(slab.bytes() == bytes);
}

TEST_CASE("slab: fresh small blocks come from the other end of the range", "[slab]") {
  Slab slab;
  std::uint32_t two = 0;
  std::uint32_t one = 0;
  REQUIRE(slab.alloc_pair(two, one));
  CHECK(two == 0);
  CHECK(one == Slab::kChunkUnits - 1);
  // Fill the chunk from both ends until one unit is left between them: a
  // two-unit block no longer fits and starts the next chunk, and the unit
  // left goes to the next one-unit request.
  std::uint32_t low = 2;
  std::uint32_t high = Slab::kChunkUnits - 1;
  while (high - low > 1) {
    if (high - low >= 4) {
      REQUIRE(slab.alloc(2) == low);
      low += 2;
    }
    REQUIRE(slab.alloc(1) == high - 1);
    --high;
  }
  REQUIRE(high - low == 1);
  CHECK(slab.alloc(2) == Slab::kChunkUnits);
  CHECK(slab.alloc(1) == low);
  CHECK(slab.live() == Slab::kChunkUnits + 2);
}

TEST_CASE("slab: nodes and claims of the radix tree lie on separate lines", "[slab]") {
  using Tree = kvroute::detail::UnitSlab<8, 3, 7, 11>;
  static_assert(std::is_same_v<Tree, kvroute::detail::RadixSlab>);
  Tree slab;
  // A leaf and its claim per request, a split's node and a copy of its
  // claim, as the tree's inserts allocate them: until the two ends meet, no
  // 64-byte line holds both a node and a claim.
  std::set<std::uintptr_t> node_lines;
  std::set<std::uintptr_t> claim_lines;
  const auto lines = [](const void* p, std::size_t bytes, std::set<std::uintptr_t>& into) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    for (std::uintptr_t l = a / 64; l <= (a + bytes - 1) / 64; ++l) into.insert(l);
  };
  std::uint32_t low = 0;                   // nodes from the chunk's start up
  std::uint32_t high = Tree::kChunkUnits;  // claims from its end down
  for (int i = 0; i < 40; ++i) {
    std::uint32_t leaf = 0;
    std::uint32_t claim = 0;
    REQUIRE(slab.alloc_pair(leaf, claim));
    const std::uint32_t lower = slab.alloc(7);
    const std::uint32_t copy = slab.alloc(3);
    REQUIRE(leaf == low);
    REQUIRE(lower == low + 7);
    REQUIRE(claim == high - 3);
    REQUIRE(copy == high - 6);
    low += 14;
    high -= 6;
    for (std::uint32_t n : {leaf, lower}) lines(slab.at(n), 56, node_lines);
    for (std::uint32_t c : {claim, copy}) lines(slab.at(c), 24, claim_lines);
  }
  for (std::uintptr_t l : claim_lines) CHECK(node_lines.count(l) == 0);
  // Released blocks are reused by size.
  std::uint32_t large = 0;
  std::uint32_t small = 0;
  REQUIRE(slab.alloc_pair(large, small));
  slab.release(large, 7);
  slab.release(small, 3);
  CHECK(slab.alloc(3) == small);
  CHECK(slab.alloc(7) == large);
  low += 7;
  high -= 3;
  // Nodes until fewer than 7 units are left between the ends (6 here): the
  // next node starts the second chunk, and the 6 units become two claims.
  while (high - low >= 7) {
    REQUIRE(slab.alloc(7) == low);
    low += 7;
  }
  REQUIRE(high - low == 6);
  CHECK(slab.alloc(7) == Tree::kChunkUnits);
  CHECK(slab.alloc(3) == low + 3);
  CHECK(slab.alloc(3) == low);
  CHECK(slab.alloc(3) == 2 * Tree::kChunkUnits - 3);
}

TEST_CASE("slab: concurrent alloc and release never hand out a block twice", "[slab][threads]") {
  Slab slab;
  constexpr int kThreads = 4;
  constexpr int kRounds = 20000;
  std::vector<std::thread> pool;
  std::vector<int> bad(static_cast<std::size_t>(kThreads), 0);
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      int& my_bad = bad[static_cast<std::size_t>(t)];
      std::vector<std::pair<std::uint32_t, unsigned>> mine;
      for (int r = 0; r < kRounds; ++r) {
        const unsigned n = (r % 3 == 0) ? 2u : 1u;
        const std::uint32_t i = slab.alloc(n);
        if (i == kNilIndex) {
          ++my_bad;
          continue;
        }
        // Stamp the block with its owner; any other thread's stamp means
        // the block was handed out twice.
        std::memset(slab.at(i), t + 1, 24 * n);
        mine.emplace_back(i, n);
        if (mine.size() > 64) {
          for (auto [j, m] : mine) {
            const auto* p = static_cast<const unsigned char*>(slab.at(j));
            if (p[4] != t + 1 || p[24 * m - 1] != t + 1) ++my_bad;
            slab.release(j, m);
          }
          mine.clear();
        }
      }
      for (auto [j, m] : mine) slab.release(j, m);
    });
  }
  for (auto& th : pool) th.join();
  for (int b : bad) CHECK(b == 0);
  CHECK(slab.live() == 0);
}

TEST_CASE("slab: threads carve chunks of their own and reuse each other's releases before growing",
          "[slab][threads]") {
  Slab slab;
  const auto on_a_new_thread = [](auto&& f) { std::thread(f).join(); };
  std::vector<std::uint32_t> first;
  on_a_new_thread([&] {
    for (int i = 0; i < 100; ++i) first.push_back(slab.alloc(1));
  });
  const std::size_t one_chunk = slab.bytes();
  // A second thread starts a chunk of its own rather than continuing the
  // first thread's (whose rest stays with the first thread's shard).
  std::uint32_t second = kNilIndex;
  on_a_new_thread([&] { second = slab.alloc(1); });
  REQUIRE(second != kNilIndex);
  CHECK((second >> Slab::kChunkBits) != (first.front() >> Slab::kChunkBits));
  CHECK(slab.bytes() == one_chunk + Slab::kChunkBytes);
  // A third thread releases the first thread's blocks; a fourth, with no
  // chunk of its own yet, gets exactly those back and the slab does not grow.
  on_a_new_thread([&] {
    for (std::uint32_t i : first) slab.release(i, 1);
  });
  const std::size_t bytes = slab.bytes();
  std::set<std::uint32_t> again;
  on_a_new_thread([&] {
    for (int i = 0; i < 100; ++i) again.insert(slab.alloc(1));
  });
  CHECK(again == std::set<std::uint32_t>(first.begin(), first.end()));
  CHECK(slab.bytes() == bytes);
  CHECK(slab.live() == 101);
}
