// The radix tree's own locks (kvroute/detail/radix/rw_lock.hpp): mutual exclusion
// of SpinMutex through its spinning and its sleeping paths, the waiters'
// spin by the clock, RwLock's readers-share / writer-alone rule, and
// RwLock's version, which optimistic readers check instead of locking.
// Built to run under ThreadSanitizer too, which checks that the locks
// order the protected writes.

#include "kvroute/detail/radix/rw_lock.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 4;

template <class F>
void run_threads(int n, F f) {
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) pool.emplace_back(f, i);
  for (auto& t : pool) t.join();
}

}  // namespace

TEST_CASE("tree locks: SpinMutex excludes, whether waiters spin or sleep", "[locks]") {
  kvroute::detail::SpinMutex mu;
  std::int64_t counter = 0;  // plain: only the mutex orders its writes
  int inside = 0;
  bool overlap = false;
  constexpr int kIters = 20000;
  run_threads(kThreads, [&](int id) {
    for (int i = 0; i < kIters; ++i) {
      std::lock_guard<kvroute::detail::SpinMutex> g(mu);
      overlap = overlap || ++inside != 1;
      ++counter;
      // Now and then hold it long enough (four times kSpinBeforeSleep)
      // that the others give up spinning and sleep, so unlock must wake
      // them.
      if (id == 0 && i % 2000 == 0)
        std::this_thread::sleep_for(4 * kvroute::detail::kSpinBeforeSleep);
      --inside;
    }
  });
  CHECK_FALSE(overlap);
  CHECK(counter == std::int64_t{kThreads} * kIters);
  CHECK(mu.try_lock());
  CHECK_FALSE(mu.try_lock());
  mu.unlock();
}

TEST_CASE("tree locks: a waiter spins for kSpinBeforeSleep by the clock, then stops", "[locks]") {
  // Not a speed check: only that the spin ends, no sooner than its budget
  // after it began, and that once over it stays over (a waiter that woke
  // from its sleep goes straight back to it).
  using Clock = std::chrono::steady_clock;
  static_assert(kvroute::detail::kSpinBeforeSleep.count() > 0);
  kvroute::detail::SpinWait w;
  const Clock::time_point t0 = Clock::now();
  std::size_t pauses = 0;
  while (w.pause()) ++pauses;
  const Clock::duration spun = Clock::now() - t0;
  CHECK(pauses > 0);
  CHECK(spun >= kvroute::detail::kSpinBeforeSleep);
  CHECK(spun < std::chrono::seconds(1));  // it ends (only a stalled thread takes long)
  CHECK_FALSE(w.pause());
  CHECK_FALSE(w.pause());
}

TEST_CASE("tree locks: RwLock lets readers share and a writer hold it alone", "[locks]") {
  kvroute::detail::RwLock lock;
  std::atomic<int> readers{0};
  std::atomic<int> max_readers{0};
  int writers = 0;  // under the exclusive hold
  std::int64_t value = 0;
  std::atomic<bool> bad{false};  // readers write it side by side
  constexpr int kIters = 5000;
  run_threads(kThreads, [&](int id) {
    for (int i = 0; i < kIters; ++i) {
      if ((i + id) % 4 == 0) {
        lock.lock();
        if (++writers != 1 || readers.load() != 0) bad = true;
        ++value;
        --writers;
        if (i % 3 == 0) {  // sometimes hand over to readers without a gap
          lock.downgrade();
          readers.fetch_add(1);
          readers.fetch_sub(1);
          lock.unlock_shared();
        } else {
          lock.unlock();
        }
      } else {
        lock.lock_shared();
        const int now = readers.fetch_add(1) + 1;
        int seen = max_readers.load();
        while (now > seen && !max_readers.compare_exchange_weak(seen, now)) {
        }
        if (value < 0) bad = true;  // a read of the writers' data
        readers.fetch_sub(1);
        lock.unlock_shared();
      }
    }
  });
  CHECK_FALSE(bad);
  CHECK(value == std::int64_t{kThreads} * kIters / 4);
}

TEST_CASE("tree locks: RwLock waiters that outlast the spin sleep and the unlock wakes them",
          "[locks]") {
  // Holds far longer than a waiter spins (kSpinBeforeSleep), so that
  // both kinds of waiter reach the futex sleep and need the unlock's wake.
  static_assert(std::chrono::milliseconds(20) >= 100 * kvroute::detail::kSpinBeforeSleep);
  kvroute::detail::RwLock lock;
  std::atomic<bool> reader_in{false};
  std::atomic<bool> writer_in{false};
  const auto write_once = [&] {
    lock.lock();
    writer_in = true;
    lock.unlock();
  };
  lock.lock();
  std::thread reader([&] {
    lock.lock_shared();
    reader_in = true;
    lock.unlock_shared();
  });
  std::thread writer(write_once);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(reader_in.load());
  CHECK_FALSE(writer_in.load());
  lock.unlock();
  reader.join();
  writer.join();
  CHECK(reader_in.load());
  CHECK(writer_in.load());

  // A writer waiting for a reader that holds on.
  writer_in = false;
  lock.lock_shared();
  std::thread late_writer(write_once);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(writer_in.load());
  lock.unlock_shared();
  late_writer.join();
  CHECK(writer_in.load());
}

TEST_CASE("tree locks: a reader that found every reader slot taken wakes when one frees up",
          "[locks]") {
  // 1023 shared holds fill the reader count (the root of a busy tree can
  // have that many); the next reader sleeps until one of them leaves, with
  // no writer anywhere to wake it.
  kvroute::detail::RwLock lock;
  constexpr int kSlots = 1023;
  for (int i = 0; i < kSlots; ++i) lock.lock_shared();
  std::atomic<bool> reader_in{false};
  std::thread reader([&] {
    lock.lock_shared();
    reader_in = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past its spin
  CHECK_FALSE(reader_in.load());
  lock.unlock_shared();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!reader_in.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(reader_in.load());
  if (!reader_in.load()) {
    // Release everything and wake it with a writer, so the test ends.
    for (int i = 1; i < kSlots; ++i) lock.unlock_shared();
    lock.lock();
    lock.unlock();
    reader.join();
    lock.unlock_shared();
    return;
  }
  reader.join();
  for (int i = 0; i < kSlots; ++i) lock.unlock_shared();  // 1022 of ours and the reader's
  lock.lock();                                            // free again
  lock.unlock();
}

TEST_CASE("tree locks: RwLock's version moves on with every exclusive hold, not with readers",
          "[locks]") {
  kvroute::detail::RwLock l;
  const std::uint32_t t0 = l.read_begin();
  REQUIRE(kvroute::detail::RwLock::readable(t0));
  CHECK(l.validate(t0));
  l.lock_shared();
  l.lock_shared();
  CHECK(l.same_version(t0));  // readers leave the version alone
  l.unlock_shared();
  l.unlock_shared();
  CHECK(l.validate(t0));
  l.lock();
  CHECK_FALSE(kvroute::detail::RwLock::readable(l.read_begin()));
  CHECK_FALSE(l.validate(t0));  // a writer is in
  l.unlock();
  CHECK_FALSE(l.validate(t0));  // and has changed the version
  const std::uint32_t t1 = l.read_begin();
  CHECK(l.validate(t1));
  l.lock();
  l.downgrade();  // the writer's changes are published here
  CHECK_FALSE(l.same_version(t1));
  const std::uint32_t t2 = l.read_begin();
  REQUIRE(kvroute::detail::RwLock::readable(t2));  // held shared now
  l.unlock_shared();
  CHECK(l.validate(t2));
  // The version wraps inside its bits without touching the flags.
  for (int i = 0; i < (1 << 19) + 3; ++i) {
    l.lock();
    l.unlock();
  }
  l.lock_shared();
  l.unlock_shared();
  l.lock();  // still a plain, free lock
  l.unlock();
  CHECK(kvroute::detail::RwLock::readable(l.read_begin()));
}

TEST_CASE("tree locks: a reader sees a version wrap that its token alone would miss", "[locks]") {
  // The version word comes back to the same value after 2^19 holds of one
  // lock; the count of wraps says that it did.
  kvroute::detail::RwLock l;
  const std::uint64_t before = kvroute::detail::RwLock::wraps();
  const std::uint32_t t = l.read_begin();
  CHECK_FALSE(kvroute::detail::RwLock::wrapped_since(before));
  for (int i = 0; i < (1 << 19) - 1; ++i) {
    l.lock();
    l.unlock();
  }
  CHECK_FALSE(l.validate(t));
  CHECK_FALSE(kvroute::detail::RwLock::wrapped_since(before));  // not wrapped yet
  l.lock();
  l.downgrade();             // downgrades move the version on too
  CHECK(l.same_version(t));  // the word alone says "unchanged"
  l.unlock_shared();
  CHECK(l.validate(t));
  CHECK(kvroute::detail::RwLock::wrapped_since(before));
  // After the wrap, a fresh count is current again.
  const std::uint64_t after = kvroute::detail::RwLock::wraps();
  CHECK(after == before + 1);
  l.lock();
  l.unlock();
  CHECK_FALSE(kvroute::detail::RwLock::wrapped_since(after));
}

TEST_CASE("tree locks: an optimistic reader never accepts a half-written pair", "[locks]") {
  // A writer keeps a == b under the exclusive lock; readers copy both
  // without the lock and keep the copy only when validate() says no writer
  // came in between. (Relaxed atomics stand in for the tree's plain fields,
  // so the test is free of data races and runs under ThreadSanitizer too.)
  kvroute::detail::RwLock l;
  std::atomic<std::uint64_t> a{0}, b{0};  // relaxed: the lock's version orders them
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  std::atomic<long> accepted{0};
  std::thread writer([&] {
    // At least 200,000 holds, and on until the readers have accepted some
    // snapshots: on a loaded machine the readers may not be scheduled
    // before 200,000 holds are over (the cap only bounds a broken lock).
    for (std::uint64_t i = 1;
         i <= 200000 || (accepted.load(std::memory_order_relaxed) < 100 && i < 20000000); ++i) {
      l.lock();
      a.store(i, std::memory_order_relaxed);
      b.store(i, std::memory_order_relaxed);
      l.unlock();
    }
    stop = true;
  });
  run_threads(2, [&](int) {
    while (!stop.load(std::memory_order_relaxed)) {
      const std::uint32_t t = l.read_begin();
      if (!kvroute::detail::RwLock::readable(t)) continue;
      const std::uint64_t x = a.load(std::memory_order_relaxed);
      const std::uint64_t y = b.load(std::memory_order_relaxed);
      if (!l.validate(t)) continue;
      if (x != y) torn.fetch_add(1);
      accepted.fetch_add(1, std::memory_order_relaxed);
    }
  });
  writer.join();
  CHECK(torn == 0);
  CHECK(accepted > 0);
}
