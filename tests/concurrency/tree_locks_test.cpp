// The radix tree's own locks (kvroute/detail/rw_lock.hpp): mutual exclusion
// of SpinMutex through its spinning and its sleeping paths, and RwLock's
// readers-share / writer-alone rule. Built to run under ThreadSanitizer too,
// which checks that the locks order the protected writes.

#include "kvroute/detail/rw_lock.hpp"

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
      // Now and then hold it long enough that the others give up spinning
      // and sleep, so unlock must wake them.
      if (id == 0 && i % 2000 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      --inside;
    }
  });
  CHECK_FALSE(overlap);
  CHECK(counter == std::int64_t{kThreads} * kIters);
  CHECK(mu.try_lock());
  CHECK_FALSE(mu.try_lock());
  mu.unlock();
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
