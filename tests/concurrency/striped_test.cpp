// detail::StripedCounters and detail::thread_ordinal (kvroute/detail/
// striped.hpp), what keeps the radix tree's counters off shared cache lines:
// sums are exact once the adders are done (also when a thread only ever
// subtracts on its stripe, and with more threads than stripes), each thread
// keeps one ordinal and no two threads share one, and the stripes really
// are line-sized (also under ThreadSanitizer: the counters are atomics).

#include "kvroute/detail/striped.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <cstddef>
#include <set>
#include <thread>
#include <vector>

namespace {

using kvroute::detail::StripedCounters;
using kvroute::detail::thread_ordinal;

template <class F>
void run_threads(int n, F f) {
  std::vector<std::thread> pool;
  for (int k = 0; k < n; ++k) pool.emplace_back(f, k);
  for (auto& t : pool) t.join();
}

}  // namespace

TEST_CASE("striped counters: a fresh set reads zero and single-thread sums are exact",
          "[striped]") {
  StripedCounters<3> c;
  for (std::size_t f = 0; f < 3; ++f) CHECK(c.load(f) == 0);
  c.add(0, 5);
  c.add(1, 7);
  c.sub(0, 2);
  CHECK(c.load(0) == 3);
  CHECK(c.load(1) == 7);
  CHECK(c.load(2) == 0);
}

TEST_CASE("striped counters: adds and subtracts from many threads sum exactly", "[striped]") {
  // More threads than stripes, so some share a stripe; half the threads
  // only subtract what the others added (their stripes wrap below zero).
  constexpr int kThreads = static_cast<int>(StripedCounters<2>::kStripes) + 4;
  constexpr std::size_t kOps = 20000;
  StripedCounters<2> c;
  run_threads(kThreads, [&](int k) {
    for (std::size_t i = 0; i < kOps; ++i) {
      if (k % 2 == 0) {
        c.add(0, 3);
        c.add(1, 1);
      } else {
        c.sub(0, 1);
      }
    }
  });
  const auto adders = static_cast<std::size_t>((kThreads + 1) / 2);
  const auto subtractors = static_cast<std::size_t>(kThreads / 2);
  CHECK(c.load(0) == adders * kOps * 3 - subtractors * kOps);
  CHECK(c.load(1) == adders * kOps);
}

TEST_CASE("striped counters: each stripe takes a cache line of its own", "[striped]") {
  CHECK(sizeof(StripedCounters<1>) == StripedCounters<1>::kStripes * kvroute::detail::kCacheLine);
  CHECK(alignof(StripedCounters<1>) == kvroute::detail::kCacheLine);
}

TEST_CASE("thread ordinal: fixed per thread, distinct between threads", "[striped]") {
  const std::size_t mine = thread_ordinal();
  CHECK(thread_ordinal() == mine);
  constexpr int kThreads = 8;
  std::vector<std::size_t> seen(kThreads);
  std::atomic<int> unstable{0};
  run_threads(kThreads, [&](int k) {
    const std::size_t first = thread_ordinal();
    for (int i = 0; i < 100; ++i) {
      if (thread_ordinal() != first) unstable.fetch_add(1);
    }
    seen[static_cast<std::size_t>(k)] = first;
  });
  CHECK(unstable == 0);
  std::set<std::size_t> distinct(seen.begin(), seen.end());
  distinct.insert(mine);
  CHECK(distinct.size() == kThreads + 1);
}
