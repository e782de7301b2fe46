// detail::BlockArena (kvroute/detail/radix/arena.hpp), the radix tree's memory for
// fragments and blocks: blocks are aligned, distinct and keep what was
// written to them; freed neighbours merge so that the space is reusable at
// any size; a region whose blocks are all free goes back to the system
// (beyond one spare per shard); requests above kMaxBlock go to malloc; a
// fresh region's pages are prefaulted, or held back while the thread
// defers its prefaults; and threads that allocate and free each other's
// blocks corrupt nothing (also under ThreadSanitizer and AddressSanitizer).

#include "kvroute/detail/radix/arena.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace {

using kvroute::detail::BlockArena;
using kvroute::detail::kHugeBytes;

struct Live {
  unsigned char* p;
  std::size_t n;
  unsigned char fill;
};

void fill(const Live& b) { std::memset(b.p, b.fill, b.n); }

bool intact(const Live& b) {
  for (std::size_t i = 0; i < b.n; ++i) {
    if (b.p[i] != b.fill) return false;
  }
  return true;
}

// The allocator itself, also under AddressSanitizer (where the tree's arena
// passes its requests to malloc).
BlockArena make_arena() { return BlockArena(/*huge_pages=*/false, /*direct=*/false); }

}  // namespace

TEST_CASE("arena: blocks are aligned, distinct and keep their bytes", "[arena]") {
  BlockArena arena = make_arena();
  CHECK(arena.reserved_bytes() == 0);
  std::mt19937_64 rng(7);
  std::vector<Live> live;
  std::map<std::uintptr_t, std::size_t> spans;  // start -> length
  for (int i = 0; i < 20000; ++i) {
    // Mostly small, some up to 64 KB: the tree's fragment sizes.
    const std::size_t n = (rng() % 8 == 0) ? 1 + rng() % 65536 : 1 + rng() % 600;
    auto* p = static_cast<unsigned char*>(arena.allocate(n));
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % 16 == 0);
    Live b{p, n, static_cast<unsigned char>(i)};
    fill(b);
    live.push_back(b);
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    auto next = spans.lower_bound(a);
    if (next != spans.end()) CHECK(a + n <= next->first);
    if (next != spans.begin()) {
      auto prev = std::prev(next);
      CHECK(prev->first + prev->second <= a);
    }
    spans[a] = n;
    // Free a random live block now and then, so that the free lists, the
    // merging and the reuse all take part.
    if (rng() % 3 == 0) {
      const std::size_t k = rng() % live.size();
      REQUIRE(intact(live[k]));
      spans.erase(reinterpret_cast<std::uintptr_t>(live[k].p));
      arena.deallocate(live[k].p, live[k].n);
      live[k] = live.back();
      live.pop_back();
    }
  }
  std::size_t bytes = 0;
  for (const Live& b : live) {
    CHECK(intact(b));
    bytes += b.n;
  }
  // Held: the live bytes plus headers, rounding and free space; never
  // wildly more.
  CHECK(arena.reserved_bytes() >= bytes);
  CHECK(arena.reserved_bytes() < 2 * bytes + 4 * kHugeBytes);
  for (const Live& b : live) arena.deallocate(b.p, b.n);
  // One thread uses one shard: at most its spare region is left.
  CHECK(arena.reserved_bytes() <= kHugeBytes);
}

TEST_CASE("arena: freed neighbours merge into one reusable block", "[arena]") {
  BlockArena arena = make_arena();
  // Fill the first region with small blocks, free them all in an order
  // that merges with the previous and the next block alike, and ask for one
  // block as large as all of them: it fits without a new region.
  std::vector<void*> small;
  void* first = arena.allocate(1000);
  REQUIRE(first != nullptr);
  const std::size_t one_region = arena.reserved_bytes();
  CHECK(one_region == BlockArena::kFirstRegion);
  while (arena.reserved_bytes() == one_region) {
    void* p = arena.allocate(1000);
    REQUIRE(p != nullptr);
    small.push_back(p);
  }
  // The last allocation opened a second region; the rest lie in the first.
  arena.deallocate(small.back(), 1000);
  small.pop_back();
  CHECK(small.size() > 40);
  for (std::size_t i = 0; i < small.size(); i += 2) arena.deallocate(small[i], 1000);
  for (std::size_t i = 1; i < small.size(); i += 2) arena.deallocate(small[i], 1000);
  const std::size_t before = arena.reserved_bytes();
  void* big = arena.allocate(1000 * small.size());
  REQUIRE(big != nullptr);
  CHECK(arena.reserved_bytes() == before);
  // It starts where the first freed block did: right after `first`.
  CHECK(static_cast<char*>(big) > static_cast<char*>(first));
  CHECK(static_cast<char*>(big) < static_cast<char*>(first) + 1100);
  arena.deallocate(big, 1000 * small.size());
  arena.deallocate(first, 1000);
}

TEST_CASE("arena: empty regions go back to the system, one spare kept", "[arena]") {
  BlockArena arena = make_arena();
  std::vector<void*> blocks;
  // About 12 MB of 100 KB blocks: regions of 64 KB, 128 KB and so on up to
  // several of 2 MB.
  for (int i = 0; i < 120; ++i) {
    void* p = arena.allocate(100 << 10);
    REQUIRE(p != nullptr);
    std::memset(p, 0x5a, 100 << 10);
    blocks.push_back(p);
  }
  CHECK(arena.reserved_bytes() >= 120u * (100u << 10));
  for (void* p : blocks) arena.deallocate(p, 100 << 10);
  CHECK(arena.reserved_bytes() <= kHugeBytes);
  // The spare is used again before anything new is mapped.
  const std::size_t spare = arena.reserved_bytes();
  void* p = arena.allocate(100 << 10);
  REQUIRE(p != nullptr);
  CHECK(arena.reserved_bytes() == spare);
  arena.deallocate(p, 100 << 10);
}

TEST_CASE("arena: a first request of any size up to kMaxBlock gets a region that fits it",
          "[arena]") {
  // Sizes just under each region size (64 KB, 128 KB, 256 KB) and at the
  // limit: the new region must hold the request rounded up to its class.
  std::vector<std::size_t> sizes;
  for (std::size_t region = BlockArena::kFirstRegion; region <= 4 * BlockArena::kFirstRegion;
       region *= 2) {
    for (std::size_t d = 0; d < 200; d += 7) sizes.push_back(region - d);
  }
  sizes.push_back(BlockArena::kMaxBlock);
  for (const std::size_t n : sizes) {
    CAPTURE(n);
    BlockArena arena = make_arena();
    auto* p = static_cast<unsigned char*>(arena.allocate(n));
    REQUIRE(p != nullptr);
    std::memset(p, 0x77, n);
    auto* q = static_cast<unsigned char*>(arena.allocate(n));
    REQUIRE(q != nullptr);
    std::memset(q, 0x33, n);
    CHECK(p[n - 1] == 0x77);
    arena.deallocate(p, n);
    arena.deallocate(q, n);
  }
}

#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
namespace {

// Whether every page of [p, p + n) is in memory (mincore).
bool resident(const void* p, std::size_t n) {
  const std::size_t page = 4096;
  const auto a = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{page - 1};
  const std::size_t len = reinterpret_cast<std::uintptr_t>(p) + n - a;
  std::vector<unsigned char> vec((len + page - 1) / page);
  // NOLINTNEXTLINE(performance-no-int-to-ptr): an address mincore reads
  if (::mincore(reinterpret_cast<void*>(a), len, vec.data()) != 0) return false;
  return std::all_of(vec.begin(), vec.end(), [](unsigned char v) { return (v & 1u) != 0; });
}

bool kernel_can_populate() {
  void* m = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  const bool ok = ::madvise(m, 4096, MADV_POPULATE_WRITE) == 0;
  ::munmap(m, 4096);
  return ok;
}

// The block size of the prefault tests: about 20 a 2 MB region.
constexpr std::size_t kBlock = 100 << 10;

// Allocates kBlock blocks into `into` until one comes from a freshly mapped
// 2 MB region (the last one added).
void allocate_up_to_a_mapped_region(BlockArena& a, std::vector<void*>& into) {
  for (;;) {
    const std::size_t before = a.reserved_bytes();
    void* p = a.allocate(kBlock);
    REQUIRE(p != nullptr);
    into.push_back(p);
    if (a.reserved_bytes() - before == kHugeBytes) return;
  }
}

}  // namespace

TEST_CASE("arena: a fresh 2 MB region's pages are in memory before its blocks are written",
          "[arena]") {
  if (!kernel_can_populate()) {
    WARN("this kernel has no MADV_POPULATE_WRITE: the arena's pages fault one at a time");
    return;
  }
  BlockArena arena = make_arena();
  // 100 KB blocks until a 2 MB region is mapped; then every block taken
  // from it is in memory before anything is written to it, the whole
  // region through.
  std::vector<void*> blocks;
  allocate_up_to_a_mapped_region(arena, blocks);
  for (std::size_t checked = 0; checked < 30; ++checked) {
    if (checked > 0) {
      void* p = arena.allocate(kBlock);
      REQUIRE(p != nullptr);
      blocks.push_back(p);
    }
    CAPTURE(checked);
    CHECK(resident(blocks.back(), kBlock));
    std::memset(blocks.back(), 0x3c, kBlock);
  }
  for (void* p : blocks) arena.deallocate(p, kBlock);
}

TEST_CASE("arena: a DeferPrefaults holds its thread's prefaults back until run()", "[arena]") {
  if (!kernel_can_populate()) {
    WARN("this kernel has no MADV_POPULATE_WRITE: the arena's pages fault one at a time");
    return;
  }
  // 100 KB blocks until one comes from a fresh 2 MB region (prefaulted at
  // once: nothing defers).
  BlockArena arena = make_arena();
  BlockArena other = make_arena();
  std::vector<void*> blocks;
  std::vector<void*> others;
  allocate_up_to_a_mapped_region(arena, blocks);
  allocate_up_to_a_mapped_region(other, others);
  REQUIRE(resident(blocks.back(), kBlock));
  // Where the system backs the region with a huge page anyway (transparent
  // huge pages "always"), every page is in memory from the first fault.
  if (resident(static_cast<char*>(blocks.back()) + (1 << 20), 4096)) {
    WARN("this system backs the arena's regions with huge pages: nothing to prefault");
    for (void* p : blocks) arena.deallocate(p, kBlock);
    for (void* p : others) other.deallocate(p, kBlock);
    return;
  }
  {
    BlockArena::DeferPrefaults later(arena);
    void* q = arena.allocate(kBlock);  // reaches past the first 128 KB step
    REQUIRE(q != nullptr);
    blocks.push_back(q);
    CHECK_FALSE(resident(q, kBlock));
    {
      // A nested one holds nothing back itself: the outer one keeps it.
      BlockArena::DeferPrefaults inner(arena);
      void* r = arena.allocate(kBlock);
      REQUIRE(r != nullptr);
      blocks.push_back(r);
      inner.run();
      CHECK_FALSE(resident(r, kBlock));
    }
    // Another arena's allocations are not held back.
    void* o = other.allocate(kBlock);
    REQUIRE(o != nullptr);
    others.push_back(o);
    CHECK(resident(o, kBlock));
    later.run();
    CHECK(resident(q, kBlock));
    CHECK(resident(blocks.back(), kBlock));
    // After run(), allocations prefault at once again.
    void* s = arena.allocate(kBlock);
    REQUIRE(s != nullptr);
    blocks.push_back(s);
    CHECK(resident(s, kBlock));
  }
  {
    // Three blocks: at least one reaches past what is prefaulted so far.
    BlockArena::DeferPrefaults off(arena, /*enabled=*/false);
    for (int i = 0; i < 3; ++i) {
      void* t = arena.allocate(kBlock);
      REQUIRE(t != nullptr);
      blocks.push_back(t);
      CAPTURE(i);
      CHECK(resident(t, kBlock));
    }
  }
  {
    // A block this thread frees in the region held back drops what is held
    // (the region could go back to the system before run()).
    BlockArena::DeferPrefaults later(arena);
    void* u = arena.allocate(kBlock);
    REQUIRE(u != nullptr);
    void* v = arena.allocate(kBlock);
    REQUIRE(v != nullptr);
    blocks.push_back(v);
    CHECK_FALSE(resident(v, kBlock));
    arena.deallocate(u, kBlock);
    later.run();
    CHECK_FALSE(resident(v, kBlock));
  }
  for (void* p : blocks) arena.deallocate(p, kBlock);
  for (void* p : others) other.deallocate(p, kBlock);
}
#endif

TEST_CASE("arena: requests above kMaxBlock go to malloc and are counted", "[arena]") {
  BlockArena arena = make_arena();
  const std::size_t n = BlockArena::kMaxBlock + 1;
  auto* p = static_cast<unsigned char*>(arena.allocate(n));
  REQUIRE(p != nullptr);
  CHECK(arena.reserved_bytes() == n);
  std::memset(p, 1, n);
  arena.deallocate(p, n);
  CHECK(arena.reserved_bytes() == 0);
  // A null pointer is a no-op, as for free().
  arena.deallocate(nullptr, 10);
  CHECK(arena.reserved_bytes() == 0);
}

TEST_CASE("arena: threads free each other's blocks without corrupting any", "[arena]") {
  BlockArena arena = make_arena();
  constexpr int kThreads = 4;
  constexpr int kRounds = 20000;
  // A shared pile: each thread allocates, fills, and pushes; then pops a
  // block (often another thread's), checks it and frees it.
  std::mutex mu;
  std::vector<Live> pile;
  std::atomic<int> corrupt{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<unsigned>(t) + 1);
      for (int i = 0; i < kRounds; ++i) {
        const std::size_t n = (rng() % 16 == 0) ? 1 + rng() % 20000 : 1 + rng() % 300;
        auto* p = static_cast<unsigned char*>(arena.allocate(n));
        if (p == nullptr) {
          failed.fetch_add(1);
          continue;
        }
        Live b{p, n, static_cast<unsigned char>(t * 50 + i % 50)};
        fill(b);
        Live victim{nullptr, 0, 0};
        {
          std::lock_guard<std::mutex> g(mu);
          pile.push_back(b);
          if (pile.size() > 64 || rng() % 2 == 0) {
            const std::size_t k = rng() % pile.size();
            victim = pile[k];
            pile[k] = pile.back();
            pile.pop_back();
          }
        }
        if (victim.p != nullptr) {
          if (!intact(victim)) corrupt.fetch_add(1);
          arena.deallocate(victim.p, victim.n);
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  CHECK(failed.load() == 0);
  CHECK(corrupt.load() == 0);
  for (const Live& b : pile) {
    CHECK(intact(b));
    arena.deallocate(b.p, b.n);
  }
  // Every shard is empty: at most a spare region each.
  CHECK(arena.reserved_bytes() <= kThreads * kHugeBytes);
}
