// detail::EpochDomain (kvroute/detail/radix/epoch.hpp), epoch-based reclamation
// for lock-free readers: nothing retired is reclaimed while a section that
// may hold it is open, everything is reclaimed once the sections close, a
// domain out of slots hands out unprotected sections instead of waiting,
// and under concurrent readers and writers no reader ever sees a reclaimed
// object (checked by a poison value here, and by AddressSanitizer and
// ThreadSanitizer in those builds).

#include "kvroute/detail/radix/epoch.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

using kvroute::detail::EpochDomain;
using kvroute::detail::Retired;

// An owner that counts what the domain hands back.
struct Counter {
  std::atomic<int> reclaimed{0};
  static void reclaim(void* self, const Retired& r) noexcept {
    static_cast<Counter*>(self)->reclaimed.fetch_add(static_cast<int>(r.size));
  }
};

// The object the stress test publishes, retires and frees.
struct Box {
  static constexpr std::uint64_t kLive = 0x600DF00D;
  static constexpr std::uint64_t kDead = 0xDEADBEEF;
  std::uint64_t state = kLive;
  std::uint64_t value = 0;
};

void free_box(void*, const Retired& r) noexcept {
  auto* b = static_cast<Box*>(r.ptr);
  b->state = Box::kDead;  // a reader that still saw it would notice
  delete b;
}

}  // namespace

TEST_CASE("epoch: nothing is reclaimed while a section that may hold it is open", "[epoch]") {
  Counter c;
  EpochDomain d(&c, &Counter::reclaim);
  EpochDomain::Section reader = d.enter();
  REQUIRE(reader.protects());
  {
    EpochDomain::Section writer = d.enter();
    REQUIRE(writer.protects());
    d.retire({nullptr, 1, 0});
    d.retire({nullptr, 1, 0});
  }
  CHECK(d.pending() == 2);
  d.collect();
  d.collect();
  CHECK(c.reclaimed == 0);  // the reader entered before the objects were retired
  CHECK(d.pending() == 2);
  reader.leave();
  CHECK(d.collect() == 2);
  CHECK(c.reclaimed == 2);
  CHECK(d.pending() == 0);
}

TEST_CASE("epoch: a section entered once the epoch has moved on does not hold back older objects",
          "[epoch]") {
  Counter c;
  EpochDomain d(&c, &Counter::reclaim);
  EpochDomain::Section early = d.enter();
  {
    EpochDomain::Section w = d.enter();
    d.retire({nullptr, 1, 0});
  }
  d.collect();  // the epoch moves on once; `early` stops it there
  CHECK(c.reclaimed == 0);
  early.leave();
  EpochDomain::Section late = d.enter();  // at the newer epoch
  REQUIRE(late.protects());
  d.collect();
  CHECK(c.reclaimed == 1);  // reclaimed while `late` is still open
}

TEST_CASE("epoch: a writer's own list is reclaimed as it retires, in batches", "[epoch]") {
  Counter c;
  EpochDomain d(&c, &Counter::reclaim);
  // One section per retire, as an insert that splits one node per call.
  for (std::size_t i = 0; i < 10 * EpochDomain::kBatch; ++i) {
    EpochDomain::Section s = d.enter();
    d.retire({nullptr, 1, 0});
  }
  // Without any collect(), most of it is already back.
  CHECK(c.reclaimed >= static_cast<int>(8 * EpochDomain::kBatch));
  CHECK(d.pending() + static_cast<std::size_t>(c.reclaimed) == 10 * EpochDomain::kBatch);
  d.collect();
  CHECK(d.pending() == 0);
  CHECK(c.reclaimed == static_cast<int>(10 * EpochDomain::kBatch));
}

TEST_CASE("epoch: out of slots, a section is unprotected and retiring still works", "[epoch]") {
  Counter c;
  EpochDomain d(&c, &Counter::reclaim);
  std::vector<EpochDomain::Section> held;
  // One thread may hold several sections; it takes a slot each time until
  // the probes from its home slot find none free.
  for (std::size_t i = 0; i < EpochDomain::kSlots; ++i) held.push_back(d.enter());
  std::size_t unprotected = 0;
  for (const auto& s : held) unprotected += s.protects() ? 0 : 1;
  CHECK(unprotected > 0);
  CHECK(d.unprotected() == unprotected);
  EpochDomain::Section extra = d.enter();
  CHECK_FALSE(extra.protects());
  d.retire({nullptr, 1, 0});  // to the list of one of the thread's open sections
  CHECK(d.pending() == 1);
  held.clear();
  extra.leave();
  d.retire({nullptr, 1, 0});  // no section open on this thread: the shared list
  CHECK(d.pending() == 2);
  d.collect();
  CHECK(c.reclaimed == 2);
  CHECK(d.pending() == 0);
}

TEST_CASE("epoch: the destructor reclaims what is still retired", "[epoch]") {
  Counter c;
  {
    EpochDomain d(&c, &Counter::reclaim);
    EpochDomain::Section s = d.enter();
    d.retire({nullptr, 3, 0});
  }
  CHECK(c.reclaimed == 3);
}

TEST_CASE("epoch: moving a section hands over its slot, once", "[epoch]") {
  Counter c;
  EpochDomain d(&c, &Counter::reclaim);
  EpochDomain::Section a = d.enter();
  EpochDomain::Section b = std::move(a);
  CHECK_FALSE(a.protects());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  CHECK(b.protects());
  {
    EpochDomain::Section w = d.enter();
    d.retire({nullptr, 1, 0});
  }
  d.collect();
  d.collect();
  CHECK(c.reclaimed == 0);  // b still holds the slot a entered
  b = EpochDomain::Section();
  d.collect();
  CHECK(c.reclaimed == 1);
}

TEST_CASE("epoch: concurrent readers never see a reclaimed object", "[epoch][stress]") {
  EpochDomain d(nullptr, &free_box);
  std::atomic<Box*> current{new Box};
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> reads{0};
  std::atomic<int> bad{0};
  auto reader = [&] {
    std::uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      EpochDomain::Section s = d.enter();
      if (!s.protects()) continue;
      const Box* b = current.load(std::memory_order_acquire);
      // Read it a few times: a reclaim in between would show.
      for (int k = 0; k < 4; ++k) {
        if (b->state != Box::kLive) bad.fetch_add(1);
      }
      ++n;
    }
    reads.fetch_add(n);
  };
  auto writer = [&](std::uint64_t seed) {
    for (std::uint64_t i = 0; i < 20000; ++i) {
      EpochDomain::Section s = d.enter();
      Box* fresh = new Box;
      fresh->value = seed + i;
      Box* old = current.exchange(fresh, std::memory_order_acq_rel);
      d.retire({old, sizeof(Box), 0});
      if (i % 1000 == 0) {
        s.leave();
        d.collect();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int r = 0; r < 3; ++r) pool.emplace_back(reader);
  std::thread w1(writer, 0);
  std::thread w2(writer, 1u << 20);
  w1.join();
  w2.join();
  stop = true;
  for (auto& t : pool) t.join();
  CHECK(bad == 0);
  CHECK(reads > 0);
  d.collect();
  CHECK(d.pending() == 0);  // no reader left: everything retired is back
  delete current.load();
}

TEST_CASE("epoch: objects retired outside any section are reclaimed in batches too", "[epoch]") {
  Counter c;
  EpochDomain d(&c, &Counter::reclaim);
  // A thread with no section open (as an eviction) retires to the shared
  // list; without a single collect() that list still gets reclaimed.
  for (std::size_t i = 0; i < 10 * EpochDomain::kBatch; ++i) d.retire({nullptr, 1, 0});
  CHECK(c.reclaimed >= static_cast<int>(8 * EpochDomain::kBatch));
  CHECK(d.pending() + static_cast<std::size_t>(c.reclaimed) == 10 * EpochDomain::kBatch);
}
