#include "kvroute/policies/bucket.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <new>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kvroute/clock.hpp"
#include "kvroute/select_worker.hpp"
#include "support/alloc_counter.hpp"
#include "support/cluster.hpp"

using kvtest::allocations;
using kvtest::counting;

using kvroute::Branch;
using kvroute::Bucket;
using kvroute::WorkerId;
using kvtest::Cluster;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t MAX = Bucket::kMaxLength;
// An absolute threshold no test load reaches: imbalance never triggers.
constexpr std::uint64_t kNever = std::uint64_t{1} << 62;

// Ranges flattened to lo0, hi0, lo1, hi1, ... (Catch prints vectors).
std::vector<std::uint64_t> flat(const std::vector<Bucket::Range>& rs) {
  std::vector<std::uint64_t> out;
  for (const auto& r : rs) {
    out.push_back(r.lo);
    out.push_back(r.hi);
  }
  return out;
}
std::vector<std::uint64_t> flat(const std::vector<std::pair<WorkerId, Bucket::Range>>& bs) {
  std::vector<Bucket::Range> rs;
  for (const auto& b : bs) rs.push_back(b.second);
  return flat(rs);
}
std::vector<WorkerId> owners(const std::vector<std::pair<WorkerId, Bucket::Range>>& bs) {
  std::vector<WorkerId> out;
  for (const auto& b : bs) out.push_back(b.first);
  return out;
}

// Routes one request of `len` ASCII characters; returns the decision.
kvroute::Decision route(Cluster& c, Bucket& p, std::size_t len, std::string_view model = {}) {
  const std::string text(len, 'x');
  return c.select(p, kvroute::RequestView{.text = text, .model = model});
}
void route_all(Cluster& c, Bucket& p, std::initializer_list<std::size_t> lens) {
  for (std::size_t len : lens) route(c, p, len);
}
int route_index(Cluster& c, Bucket& p, std::size_t len) { return c.index_of(route(c, p, len)); }

}  // namespace

// --- The pure functions ------------------------------------------------------

TEST_CASE("bucket: initial split of 0..4096", "[bucket][boundaries]") {
  CHECK(flat(Bucket::initial_split(3, 4096)) ==
        std::vector<std::uint64_t>{0, 1364, 1365, 2729, 2730, MAX});
  CHECK(flat(Bucket::initial_split(4, 4096)) ==
        std::vector<std::uint64_t>{0, 1023, 1024, 2047, 2048, 3071, 3072, MAX});
  CHECK(flat(Bucket::initial_split(1, 4096)) == std::vector<std::uint64_t>{0, MAX});
  CHECK(Bucket::initial_split(0, 4096).empty());
  // More workers than lengths: one length each, never an inverted range.
  CHECK(flat(Bucket::initial_split(3, 2)) == std::vector<std::uint64_t>{0, 0, 1, 1, 2, MAX});
}

TEST_CASE("bucket: rebucket, the spec's worked example", "[bucket][boundaries]") {
  // Total 100 over 3 workers: 33 per bucket.
  const std::vector<std::uint64_t> lengths{5, 10, 15, 20, 24, 26};
  CHECK(flat(Bucket::rebucket(lengths, 3, 33)) ==
        std::vector<std::uint64_t>{0, 20, 21, 26, 27, MAX});
}

TEST_CASE("bucket: rebucket, a completing length at or below upper extends by per_bucket",
          "[bucket][boundaries]") {
  // The 6.7 load_balancing_conditions window: 33, 34, 34 -> ends 33 and 67.
  const std::vector<std::uint64_t> lengths{33, 34, 34};
  CHECK(flat(Bucket::rebucket(lengths, 3, 101 / 3)) ==
        std::vector<std::uint64_t>{0, 33, 34, 67, 68, MAX});
}

TEST_CASE("bucket: rebucket, the phases of adjust_boundary_1/2", "[bucket][boundaries]") {
  CHECK(flat(Bucket::rebucket(std::vector<std::uint64_t>{10, 20, 30, 40, 48, 57}, 3, 205 / 3)) ==
        std::vector<std::uint64_t>{0, 40, 41, 57, 58, MAX});
  CHECK(flat(Bucket::rebucket(std::vector<std::uint64_t>{5, 10, 15, 20, 23, 27}, 3, 100 / 3)) ==
        std::vector<std::uint64_t>{0, 20, 21, 27, 28, MAX});
  CHECK(flat(Bucket::rebucket(std::vector<std::uint64_t>{7, 7, 10}, 3, 24 / 3)) ==
        std::vector<std::uint64_t>{0, 7, 8, 10, 11, MAX});
}

TEST_CASE("bucket: rebucket when the lengths run out", "[bucket][boundaries]") {
  SECTION("the first bucket takes everything") {
    CHECK(flat(Bucket::rebucket(std::vector<std::uint64_t>{100}, 3, 33)) ==
          std::vector<std::uint64_t>{0, 100, 101, 134, 135, MAX});
  }
  SECTION("before the first bucket is full") {
    CHECK(flat(Bucket::rebucket(std::vector<std::uint64_t>{5, 5}, 4, 33)) ==
          std::vector<std::uint64_t>{0, 33, 34, 67, 68, 101, 102, MAX});
  }
  SECTION("no lengths at all") {
    CHECK(flat(Bucket::rebucket({}, 3, 10)) == std::vector<std::uint64_t>{0, 10, 11, 21, 22, MAX});
  }
  SECTION("one or zero workers") {
    CHECK(flat(Bucket::rebucket(std::vector<std::uint64_t>{1, 2, 3}, 1, 6)) ==
          std::vector<std::uint64_t>{0, MAX});
    CHECK(Bucket::rebucket(std::vector<std::uint64_t>{1, 2, 3}, 0, 6).empty());
  }
  SECTION("huge lengths saturate instead of wrapping") {
    const auto r = Bucket::rebucket(std::vector<std::uint64_t>{MAX - 1, MAX}, 3, MAX);
    for (std::size_t i = 0; i < r.size(); ++i) {
      CHECK(r[i].lo <= r[i].hi);
      if (i > 0) CHECK(r[i].lo >= r[i - 1].hi);
    }
    CHECK(r.back().hi == MAX);
  }
}

// --- Placement -----------------------------------------------------------------

TEST_CASE("bucket: fresh state uses the initial split and lengths go to their bucket", "[bucket]") {
  Cluster c(3);
  Bucket p({.balance_abs_threshold = kNever});
  CHECK(p.boundaries("").empty());
  struct Case {
    std::size_t len;
    int worker;
  };
  for (const Case& k : {Case{0, 0}, Case{1364, 0}, Case{1365, 1}, Case{2729, 1}, Case{2730, 2},
                        Case{100000, 2}, Case{7, 0}}) {
    const auto d = route(c, p, k.len);
    CHECK(c.index_of(d) == k.worker);
    CHECK(d.branch == Branch::kBucketHit);
  }
  CHECK(flat(p.boundaries("")) == std::vector<std::uint64_t>{0, 1364, 1365, 2729, 2730, MAX});
  CHECK(owners(p.boundaries("")) == c.ids);
}

TEST_CASE("bucket: length counts code points, not bytes", "[bucket]") {
  Cluster c(3);
  Bucket p({.balance_abs_threshold = kNever});
  std::string text;
  for (int i = 0; i < 1365; ++i) text += "\xC3\xA9";  // U+00E9, 2 bytes
  // 1365 characters (bucket 1); 2730 bytes would be bucket 2.
  CHECK(c.pick(p, kvroute::RequestView{.text = text}) == 1);
  const auto chars = p.window_chars("");
  REQUIRE(chars.size() == 3);
  CHECK(chars[1].second == 1365);
}

TEST_CASE("bucket: a membership change re-splits 0..4096, never collapsing into bucket 0",
          "[bucket]") {
  Cluster c(3);
  Bucket p({.balance_abs_threshold = kNever});
  REQUIRE(route_index(c, p, 10) == 0);

  SECTION("a worker added") {
    c.add();
    CHECK(route_index(c, p, 3000) == 2);  // the gateway: worker 0
    CHECK(flat(p.boundaries("")) ==
          std::vector<std::uint64_t>{0, 1023, 1024, 2047, 2048, 3071, 3072, MAX});
    CHECK(route_index(c, p, 3500) == 3);
    CHECK(route_index(c, p, 1500) == 1);
  }
  SECTION("a worker removed") {
    c.remove(1);
    p.on_worker_removed(c.ids[1]);
    const auto d = route(c, p, 2100);
    CHECK(c.index_of(d) == 2);  // the gateway: gap MAX / 2, worker 0
    CHECK(d.branch == Branch::kBucketHit);
    CHECK(route_index(c, p, 2047) == 0);
    CHECK(flat(p.boundaries("")) == std::vector<std::uint64_t>{0, 2047, 2048, MAX});
    CHECK(owners(p.boundaries("")) == std::vector<WorkerId>{c.ids[0], c.ids[2]});
  }
}

TEST_CASE("bucket: health flips keep adjusted boundaries and an old snapshot never re-initialises",
          "[bucket]") {
  kvroute::ManualClock clock;
  Cluster c(3);
  Bucket p({.balance_abs_threshold = kNever, .adjust_interval = 3s, .clock = &clock});
  route_all(c, p, {5, 10, 15, 20, 24, 26});
  clock.advance(4s);
  route(c, p, 1);
  const auto adjusted = flat(p.boundaries(""));
  REQUIRE(adjusted == std::vector<std::uint64_t>{0, 20, 21, 26, 27, MAX});

  c.set_healthy(1, false);
  route(c, p, 1);
  c.set_healthy(1, true);
  route(c, p, 1);
  CHECK(flat(p.boundaries("")) == adjusted);

  auto old = c.workers.snapshot();
  c.add();
  route(c, p, 1);
  const auto four = flat(p.boundaries(""));
  CHECK(four == std::vector<std::uint64_t>{0, 1023, 1024, 2047, 2048, 3071, 3072, MAX});
  // A selection still holding the 3-worker snapshot.
  const std::string text(3500, 'x');
  const auto d = kvroute::select_worker(p, {.text = text}, *old, c.load);
  REQUIRE(d);
  CHECK(d.id() == c.ids[2]);  // bucket 3's owner is not in it: the neighbour
  CHECK(d.branch == Branch::kBucketNeighbor);
  CHECK(flat(p.boundaries("")) == four);
}

// --- Imbalance -------------------------------------------------------------------

TEST_CASE("bucket: load_balancing_conditions (abs 32, rel 1.0001, 10 s) with a manual clock",
          "[bucket][balance]") {
  kvroute::ManualClock clock;
  Cluster c(3);
  Bucket p({.balance_abs_threshold = 32,
            .balance_rel_threshold = 1.0001,
            .adjust_interval = 10s,
            .clock = &clock});
  CHECK(route(c, p, 33).branch == Branch::kBucketHit);
  CHECK(route(c, p, 34).branch == Branch::kBucketImbalanced);
  CHECK(route(c, p, 34).branch == Branch::kBucketImbalanced);
  clock.advance(11s);

  // The adjustment due at 10 s sees 33, 34, 34; the window then expires.
  const auto first = route(c, p, 33);
  CHECK(flat(p.boundaries("")) == std::vector<std::uint64_t>{0, 33, 34, 67, 68, MAX});
  CHECK(c.index_of(first) == 0);
  CHECK(first.branch == Branch::kBucketHit);
  const auto second = route(c, p, 33);
  const auto third = route(c, p, 33);
  CHECK(second.branch == Branch::kBucketImbalanced);
  CHECK(third.branch == Branch::kBucketImbalanced);
  CHECK(c.index_of(second) != 0);
  CHECK(c.index_of(third) != 0);
  CHECK(c.index_of(second) != c.index_of(third));
}

TEST_CASE("bucket: load_balancing_conditions, the two threshold variants", "[bucket][balance]") {
  Cluster c(3);
  SECTION("abs 30, rel 2.0: lengths 20, 8, then a request -> W0") {
    Bucket p({.balance_abs_threshold = 30, .balance_rel_threshold = 2.0});
    CHECK(route_index(c, p, 20) == 0);
    CHECK(route_index(c, p, 8) == 0);  // 20 - 0 is not > 30
    const auto d = route(c, p, 7);
    CHECK(c.index_of(d) == 0);
    CHECK(d.branch == Branch::kBucketHit);
  }
  SECTION("abs 5, rel 3.0: lengths 15, 5, 10, then a request -> W0") {
    Bucket p({.balance_abs_threshold = 5, .balance_rel_threshold = 3.0});
    CHECK(route_index(c, p, 15) == 0);
    CHECK(route(c, p, 5).branch == Branch::kBucketImbalanced);
    CHECK(route(c, p, 10).branch == Branch::kBucketImbalanced);
    // 15, 5, 10: 15 - 5 > 5 but 15 > 3 * 5 is false (both strict).
    const auto d = route(c, p, 7);
    CHECK(c.index_of(d) == 0);
    CHECK(d.branch == Branch::kBucketHit);
  }
}

TEST_CASE("bucket: the thresholds are strict", "[bucket][balance]") {
  Cluster c(2);
  SECTION("difference equal to abs is balanced") {
    Bucket p({.balance_abs_threshold = 32, .balance_rel_threshold = 1.0});
    route(c, p, 32);  // W0: 32, W1: 0
    CHECK(route(c, p, 1).branch == Branch::kBucketHit);
    // W0: 33, W1: 0
    const auto d = route(c, p, 1);
    CHECK(d.branch == Branch::kBucketImbalanced);
    CHECK(c.index_of(d) == 1);
  }
  SECTION("max equal to rel * min is balanced") {
    Bucket p({.balance_abs_threshold = 0, .balance_rel_threshold = 2.0, .initial_max_length = 20});
    // Buckets [0,9], [10,MAX].
    route(c, p, 20);                                               // W1: 20
    REQUIRE(route(c, p, 10).branch == Branch::kBucketImbalanced);  // W0: 10
    // 20 == 2 * 10: balanced, so a short request stays in bucket 0.
    const auto d = route(c, p, 1);
    CHECK(d.branch == Branch::kBucketHit);
    CHECK(c.index_of(d) == 0);
  }
}

TEST_CASE("bucket: imbalance ties are broken at random", "[bucket][balance]") {
  Cluster c(3);
  std::vector<int> counts(3);
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    Bucket p({.seed = seed});
    REQUIRE(route_index(c, p, 100) == 0);
    const auto d = route(c, p, 100);  // W1 and W2 tie at 0 windowed chars
    REQUIRE(d.branch == Branch::kBucketImbalanced);
    ++counts[static_cast<std::size_t>(c.index_of(d))];
  }
  CHECK(counts[0] == 0);
  CHECK(counts[1] > 60);
  CHECK(counts[2] > 60);
}

TEST_CASE("bucket: the imbalance test reads only healthy workers", "[bucket][balance]") {
  Cluster c(3);
  Bucket p;
  REQUIRE(route_index(c, p, 100) == 0);  // W0: 100
  c.set_healthy(0, false);
  // W1 and W2 are both at 0: balanced, so bucket 0's neighbour, not an
  // imbalance pick driven by unhealthy W0's window.
  const auto d = route(c, p, 10);
  CHECK(d.branch == Branch::kBucketNeighbor);
  CHECK(c.index_of(d) == 1);
}

// --- Unhealthy owners ------------------------------------------------------------

TEST_CASE("bucket: an unhealthy owner hands over to the nearest healthy bucket", "[bucket]") {
  SECTION("3 workers") {
    Cluster c(3);
    Bucket p({.balance_abs_threshold = kNever});
    c.set_healthy(1, false);
    auto d = route(c, p, 1500);  // bucket 1; buckets 0 and 2 tie: the lower
    CHECK(c.index_of(d) == 0);
    CHECK(d.branch == Branch::kBucketNeighbor);
    c.set_healthy(0, false);
    d = route(c, p, 10);  // bucket 0 -> 1 (unhealthy) -> 2
    CHECK(c.index_of(d) == 2);
    CHECK(d.branch == Branch::kBucketNeighbor);
    CHECK(route(c, p, 3000).branch == Branch::kBucketHit);
  }
  SECTION("5 workers: the walk goes outward, lower first") {
    Cluster c(5);
    Bucket p({.balance_abs_threshold = kNever, .initial_max_length = 500});
    // Buckets of 100: W0 [0,99] ... W4 [400,MAX].
    c.set_healthy(2, false);
    CHECK(route_index(c, p, 250) == 1);
    c.set_healthy(1, false);
    CHECK(route_index(c, p, 250) == 3);
    c.set_healthy(3, false);
    CHECK(route_index(c, p, 250) == 0);
    CHECK(route_index(c, p, 150) == 0);
    CHECK(route_index(c, p, 350) == 4);
  }
  SECTION("never the unhealthy worker, whatever the length or load") {
    Cluster c(4);
    Bucket p({.balance_abs_threshold = 100});
    c.set_healthy(2, false);
    for (std::size_t i = 0; i < 400; ++i) {
      const auto d = route(c, p, (i * 977) % 5000);
      REQUIRE(d);
      REQUIRE(c.index_of(d) != 2);
    }
  }
}

// --- Window ------------------------------------------------------------------------

TEST_CASE("bucket: the window forgets requests older than adjust_interval", "[bucket][window]") {
  kvroute::ManualClock clock;
  Cluster c(3);
  Bucket p({.adjust_interval = 5s, .clock = &clock});
  REQUIRE(route_index(c, p, 100) == 0);
  // W0 holds 100 windowed characters: imbalanced.
  CHECK(route(c, p, 100).branch == Branch::kBucketImbalanced);
  clock.advance(1s);
  CHECK(route(c, p, 100).branch == Branch::kBucketImbalanced);
  auto chars = p.window_chars("");
  CHECK(chars[0].second + chars[1].second + chars[2].second == 300);

  // At exactly 5 s the first requests still count...
  clock.advance(4s);
  p.maintain();
  chars = p.window_chars("");
  CHECK(chars[0].second + chars[1].second + chars[2].second == 300);
  // ...and past it they are gone, through maintain() alone.
  clock.advance(1ns);
  p.maintain();
  chars = p.window_chars("");
  CHECK(chars[0].second + chars[1].second + chars[2].second == 100);
  clock.advance(1s);
  p.maintain();
  for (const auto& [id, n] : p.window_chars("")) CHECK(n == 0);

  const auto d = route(c, p, 100);
  CHECK(c.index_of(d) == 0);
  CHECK(d.branch == Branch::kBucketHit);
}

TEST_CASE("bucket: the window survives a membership change", "[bucket][window]") {
  Cluster c(3);
  Bucket p({.balance_abs_threshold = kNever});
  route(c, p, 100);   // W0
  route(c, p, 2000);  // W1
  c.add();
  route(c, p, 5000);  // re-initialised over 4 workers; W3
  const auto chars = p.window_chars("");
  REQUIRE(chars.size() == 4);
  CHECK(chars[0].second == 100);
  CHECK(chars[1].second == 2000);
  CHECK(chars[2].second == 0);
  CHECK(chars[3].second == 5000);
}

// --- Adjustment ---------------------------------------------------------------------

TEST_CASE("bucket: adjust_boundary_1 with a manual clock", "[bucket][adjust]") {
  kvroute::ManualClock clock;
  Cluster c(3);
  Bucket p({.adjust_interval = 3s, .clock = &clock});  // ticks at 3, 6, 9, ... s
  route_all(c, p, {5, 10, 15, 20, 24, 26});
  CHECK(flat(p.boundaries("")) == std::vector<std::uint64_t>{0, 1364, 1365, 2729, 2730, MAX});

  // t = 4 s: the first request runs the 3 s adjustment (per bucket 33).
  clock.advance(4s);
  for (std::size_t len : std::initializer_list<std::size_t>{6, 12, 18, 24, 28, 32}) {
    route(c, p, len);
    CHECK(flat(p.boundaries("")) == std::vector<std::uint64_t>{0, 20, 21, 26, 27, MAX});
  }
  // t = 8 s: the 6 s adjustment sees per bucket 40, < 2 x 33: unchanged.
  clock.advance(4s);
  route_all(c, p, {10, 20, 30, 40, 48, 57});
  CHECK(flat(p.boundaries("")) == std::vector<std::uint64_t>{0, 20, 21, 26, 27, MAX});
  // t = 12 s: the 9 s adjustment sees per bucket 68, > 2 x 33.
  clock.advance(4s);
  route(c, p, 1);
  CHECK(flat(p.boundaries("")) == std::vector<std::uint64_t>{0, 40, 41, 57, 58, MAX});
}

TEST_CASE("bucket: adjust_boundary_2 with a manual clock", "[bucket][adjust]") {
  kvroute::ManualClock clock;
  Cluster c(3);
  Bucket p({.adjust_interval = 3s, .clock = &clock});
  route(c, p, 1);  // creates the state at t = 0
  CHECK(flat(p.boundaries("")) == std::vector<std::uint64_t>{0, 1364, 1365, 2729, 2730, MAX});
  clock.advance(1s);
  route_all(c, p, {5, 10, 15, 20, 23, 27});  // + the 1: 101
  clock.advance(3s);                         // t = 4 s, the 3 s tick
  route_all(c, p, {7, 7, 10});
  CHECK(flat(p.boundaries("")) == std::vector<std::uint64_t>{0, 20, 21, 27, 28, MAX});
  // t = 8 s, the 6 s tick: per bucket 8, shrunk more than 2x.
  clock.advance(4s);
  p.maintain();
  CHECK(flat(p.boundaries("")) == std::vector<std::uint64_t>{0, 7, 8, 10, 11, MAX});
}

TEST_CASE("bucket: not_adjust_boundary: exactly 2x is not a change", "[bucket][adjust]") {
  kvroute::ManualClock clock;
  Cluster c(3);
  Bucket p({.adjust_interval = 3s, .clock = &clock});
  route_all(c, p, {5, 10, 15, 20, 24, 26});
  clock.advance(4s);
  // Per bucket 66 = 2 x 33 at the 6 s tick.
  route_all(c, p, {10, 20, 30, 40, 48, 50});
  REQUIRE(flat(p.boundaries("")) == std::vector<std::uint64_t>{0, 20, 21, 26, 27, MAX});
  clock.advance(4s);
  p.maintain();
  CHECK(flat(p.boundaries("")) == std::vector<std::uint64_t>{0, 20, 21, 26, 27, MAX});
  // And an empty window adjusts nothing.
  clock.advance(10s);
  p.maintain();
  CHECK(flat(p.boundaries("")) == std::vector<std::uint64_t>{0, 20, 21, 26, 27, MAX});
}

TEST_CASE("bucket: a re-initialisation resets the 2x gate", "[bucket][adjust]") {
  kvroute::ManualClock clock;
  Cluster c(3);
  Bucket p({.adjust_interval = 3s, .clock = &clock});
  route_all(c, p, {5, 10, 15, 20, 24, 26});
  clock.advance(4s);
  p.maintain();
  REQUIRE(flat(p.boundaries("")) == std::vector<std::uint64_t>{0, 20, 21, 26, 27, MAX});
  c.add();
  // Four workers, per bucket 25: within 2x of 33, yet re-bucketed since the
  // even split is not an adjustment.
  route_all(c, p, {5, 10, 15, 20, 24, 26});
  REQUIRE(flat(p.boundaries("")) ==
          std::vector<std::uint64_t>{0, 1023, 1024, 2047, 2048, 3071, 3072, MAX});
  clock.advance(3s);
  p.maintain();
  // 5, 10, 15 | 20, 24 | 26 | rest, per bucket 25.
  CHECK(flat(p.boundaries("")) == std::vector<std::uint64_t>{0, 15, 16, 24, 25, 26, 27, MAX});
}

TEST_CASE("bucket: adjustment and request lengths routed to each bucket", "[bucket][adjust]") {
  kvroute::ManualClock clock;
  Cluster c(3);
  Bucket p({.balance_abs_threshold = kNever, .adjust_interval = 3s, .clock = &clock});
  route_all(c, p, {5, 10, 15, 20, 24, 26});
  clock.advance(4s);
  CHECK(route_index(c, p, 20) == 0);
  CHECK(route_index(c, p, 21) == 1);
  CHECK(route_index(c, p, 26) == 1);
  CHECK(route_index(c, p, 27) == 2);
  CHECK(route_index(c, p, 1000) == 2);
}

// --- Models, removal, no workers ---------------------------------------------------------

TEST_CASE("bucket: each model has its own buckets", "[bucket]") {
  Cluster c(0);
  c.add("llama");
  c.add("llama");
  c.add("qwen");
  c.add("qwen");
  c.add("qwen");
  Bucket p({.balance_abs_threshold = kNever});
  CHECK(c.index_of(route(c, p, 3000, "llama")) == 1);
  CHECK(c.index_of(route(c, p, 3000, "qwen")) == 4);
  CHECK(flat(p.boundaries("llama")) == std::vector<std::uint64_t>{0, 2047, 2048, MAX});
  CHECK(flat(p.boundaries("qwen")) == std::vector<std::uint64_t>{0, 1364, 1365, 2729, 2730, MAX});
  CHECK(p.boundaries("").empty());
}

TEST_CASE("bucket: the model-less group of an undeclared model has buckets of its own",
          "[bucket]") {
  Bucket p({.balance_abs_threshold = kNever});
  SECTION("all-workers group first") {
    Cluster c(0);
    c.add();  // W0: any model
    c.add("llama");
    CHECK(c.index_of(route(c, p, 3000)) == 1);  // "" = every worker
    CHECK(owners(p.boundaries("")) == c.ids);
    // "mistral" is undeclared: only the model-less W0 serves it.
    for (int i = 0; i < 3; ++i) {
      CHECK(c.index_of(route(c, p, 3000, "mistral")) == 0);
      CHECK(owners(p.boundaries("")) == c.ids);
      CHECK(c.index_of(route(c, p, 3000)) == 1);
    }
  }
  SECTION("undeclared model first, both groups changed by the same add") {
    Cluster c(0);
    c.add("llama");  // W0
    c.add();         // W1: any model
    CHECK(c.index_of(route(c, p, 10, "mistral")) == 1);
    const auto d = route(c, p, 10);
    CHECK(c.index_of(d) == 0);
    CHECK(d.branch == Branch::kBucketHit);
    CHECK(owners(p.boundaries("")) == c.ids);
  }
}

TEST_CASE("bucket: a removed worker is never returned", "[bucket]") {
  Cluster c(3);
  Bucket p;
  route_all(c, p, {10, 1500, 3000, 10, 1500});
  const WorkerId gone = c.ids[0];
  c.remove(0);
  p.on_worker_removed(gone);
  for (std::size_t i = 0; i < 300; ++i) {
    const auto d = route(c, p, (i * 613) % 4000);
    REQUIRE(d);
    REQUIRE(d.id() != gone);
  }
  for (const auto& [id, n] : p.window_chars("")) CHECK(id != gone);
}

TEST_CASE("bucket: on_worker_removed forgets the worker's windowed characters", "[bucket]") {
  Cluster c(3);
  Bucket p({.balance_abs_threshold = kNever});
  route(c, p, 100);
  route(c, p, 2000);
  p.on_worker_removed(c.ids[1]);
  const auto chars = p.window_chars("");
  REQUIRE(chars.size() == 3);
  CHECK(chars[0].second == 100);
  CHECK(chars[1].second == 0);
}

TEST_CASE("bucket: no healthy workers or no workers gives none", "[bucket]") {
  Bucket p;
  const std::string text(10, 'x');
  SECTION("all unhealthy") {
    Cluster c(2);
    c.set_healthy(0, false);
    c.set_healthy(1, false);
    CHECK(c.select(p, {.text = text}).reason() == kvroute::NoWorker::kNoHealthyWorkers);
    auto snap = c.workers.snapshot();
    const kvroute::ClusterView view(*snap, snap->group(""), &c.load);
    const auto d = p.choose({.text = text}, view);
    CHECK_FALSE(d);
    CHECK(d.branch == Branch::kNoHealthyWorkers);
  }
  SECTION("no workers") {
    Cluster c(0);
    CHECK(c.select(p, {.text = text}).reason() == kvroute::NoWorker::kNoWorkers);
    const auto d = p.choose({.text = text}, kvroute::ClusterView{});
    CHECK_FALSE(d);
    CHECK(d.branch == Branch::kNoWorkers);
  }
}

TEST_CASE("bucket: defaults and name", "[bucket]") {
  const Bucket::Options o;
  CHECK(o.balance_abs_threshold == 32);
  CHECK(o.balance_rel_threshold == 1.0001);
  CHECK(o.adjust_interval == 5s);
  CHECK(o.initial_max_length == 4096);
  CHECK(o.clock == &kvroute::Clock::steady());
  CHECK(Bucket().name() == "bucket");
}

TEST_CASE("bucket: equal seeds give equal decisions", "[bucket]") {
  Cluster c(4);
  Bucket a({.seed = 9});
  Bucket b({.seed = 9});
  for (std::size_t i = 0; i < 200; ++i) {
    const std::size_t len = (i * 131) % 5000;
    REQUIRE(route_index(c, a, len) == route_index(c, b, len));
  }
}

TEST_CASE("bucket: the steady state does not allocate", "[bucket]") {
  kvroute::ManualClock clock;
  Cluster c(4);
  c.set_healthy(1, false);  // the neighbour walk runs too
  // Default thresholds (mostly imbalanced) and never imbalanced.
  Bucket a({.adjust_interval = 1s, .clock = &clock});
  Bucket b({.balance_abs_threshold = kNever, .adjust_interval = 1s, .clock = &clock});
  const std::string text(5000, 'x');
  auto snap = c.workers.snapshot();
  std::vector<Branch> seen;
  seen.reserve(20000);
  auto run = [&](int n) {
    for (int i = 0; i < n; ++i) {
      clock.advance(1ms);  // each window holds about 1000 requests
      const std::size_t len = static_cast<std::size_t>((i * 7919) % 5000);
      const kvroute::RequestView r{.text = std::string_view(text).substr(0, len)};
      seen.push_back(kvroute::select_worker(a, r, *snap, c.load).branch);
      seen.push_back(kvroute::select_worker(b, r, *snap, c.load).branch);
    }
  };
  run(5000);  // warm-up: states, window rings, adjustment scratch
  const auto before_a = flat(a.boundaries(""));
  const auto before_b = flat(b.boundaries(""));
  seen.clear();
  counting = true;
  run(5000);
  counting = false;
  CHECK(allocations == 0);
  // Steady traffic: the 2x gate keeps the boundaries; every path ran.
  CHECK(flat(a.boundaries("")) == before_a);
  CHECK(flat(b.boundaries("")) == before_b);
  for (Branch br : {Branch::kBucketHit, Branch::kBucketNeighbor, Branch::kBucketImbalanced}) {
    CHECK(std::count(seen.begin(), seen.end(), br) > 0);
  }
}

// --- Concurrency (run under TSan) ----------------------------------------------------

TEST_CASE("bucket: concurrent choose, maintenance, removals and health flips",
          "[bucket][concurrency]") {
  kvroute::ManualClock clock;
  Cluster c(4);
  Bucket p({.adjust_interval = 20ms, .clock = &clock});
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::string text(6000, 'x');
      for (int i = 0; i < 3000; ++i) {
        const std::size_t len = static_cast<std::size_t>((i * 37 + t * 11) % 6000);
        auto snap = c.workers.snapshot();
        const std::string_view model = (i % 5 == 0) ? "other" : "";
        const auto d = kvroute::select_worker(
            p, {.text = std::string_view(text).substr(0, len), .model = model}, *snap, c.load);
        if (!d || !d.worker->healthy) ++bad;
      }
    });
  }
  threads.emplace_back([&] {
    int i = 0;
    while (!stop.load()) {
      clock.advance(1ms);
      if (++i % 30 == 0) p.maintain();
      if (i % 50 == 0) (void)p.boundaries("");
      std::this_thread::yield();
    }
  });
  threads.emplace_back([&] { kvtest::churn_membership(c, p); });
  for (std::size_t i = 0; i < 4; ++i) threads[i].join();
  stop.store(true);
  for (std::size_t i = 4; i < threads.size(); ++i) threads[i].join();
  CHECK(bad.load() == 0);
  // The buckets still tile [0, MAX] over the current members.
  route(c, p, 1);
  const auto b = p.boundaries("");
  REQUIRE(b.size() == 3);
  CHECK(b.front().second.lo == 0);
  CHECK(b.back().second.hi == MAX);
  for (std::size_t i = 1; i < b.size(); ++i) CHECK(b[i].second.lo == b[i - 1].second.hi + 1);
}
