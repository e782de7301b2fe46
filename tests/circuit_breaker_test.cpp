#include "kvroute/circuit_breaker.hpp"

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "kvroute/policies/round_robin.hpp"
#include "kvroute/router.hpp"

using kvroute::CircuitBreaker;
using State = kvroute::CircuitBreaker::State;
using std::chrono::seconds;

namespace {
void fail(CircuitBreaker& b, int n) {
  for (int i = 0; i < n; ++i) b.record(b.acquire(), false);
}
void succeed(CircuitBreaker& b, int n) {
  for (int i = 0; i < n; ++i) b.record(b.acquire(), true);
}
}  // namespace

TEST_CASE("circuit_breaker: defaults are the gateway's", "[circuit_breaker]") {
  CircuitBreaker::Options o;
  CHECK(o.failure_threshold == 10);
  CHECK(o.success_threshold == 3);
  CHECK(o.open_timeout == seconds(60));
  CHECK(o.window == seconds(120));
  CHECK(o.validate().ok());
}

TEST_CASE("circuit_breaker: 10 failures open, 60 s later half-open, 3 successes close",
          "[circuit_breaker]") {
  kvroute::ManualClock clock;
  CircuitBreaker b({.clock = &clock});
  fail(b, 9);
  CHECK(b.state() == State::kClosed);
  fail(b, 1);
  CHECK(b.state() == State::kOpen);
  CHECK_FALSE(b.acquire());
  clock.advance(seconds(59));
  CHECK(b.state() == State::kOpen);
  clock.advance(seconds(1));
  CHECK(b.state() == State::kHalfOpen);
  succeed(b, 2);
  CHECK(b.state() == State::kHalfOpen);
  succeed(b, 1);
  CHECK(b.state() == State::kClosed);
}

TEST_CASE("circuit_breaker: one failure in half-open re-opens", "[circuit_breaker]") {
  kvroute::ManualClock clock;
  CircuitBreaker b({.clock = &clock});
  fail(b, 10);
  clock.advance(seconds(60));
  succeed(b, 2);
  fail(b, 1);
  CHECK(b.state() == State::kOpen);
  clock.advance(seconds(30));
  CHECK(b.state() == State::kOpen);  // the timeout restarts from the re-open
}

TEST_CASE("circuit_breaker: a success resets the failure run", "[circuit_breaker]") {
  CircuitBreaker b;
  fail(b, 9);
  succeed(b, 1);
  fail(b, 9);
  CHECK(b.state() == State::kClosed);
}

TEST_CASE("circuit_breaker: failures must fall within the window", "[circuit_breaker]") {
  // The gateway stores the window but never uses it.
  kvroute::ManualClock clock;
  CircuitBreaker b({.clock = &clock});
  for (int i = 0; i < 10; ++i) {
    fail(b, 1);
    clock.advance(seconds(20));  // 10 failures over 180 s > 120 s window
  }
  CHECK(b.state() == State::kClosed);
  fail(b, 9);  // a fresh run inside one window
  CHECK(b.state() == State::kOpen);
}

TEST_CASE("circuit_breaker: half-open admits a limited number of probes", "[circuit_breaker]") {
  kvroute::ManualClock clock;
  CircuitBreaker b({.half_open_max_probes = 2, .clock = &clock});
  fail(b, 10);
  clock.advance(seconds(60));
  auto p1 = b.acquire();
  auto p2 = b.acquire();
  auto p3 = b.acquire();
  CHECK(p1);
  CHECK(p2);
  CHECK_FALSE(p3);  // the gateway admits everything
  CHECK_FALSE(b.admits());
  b.record(p1, true);
  CHECK(b.admits());  // a probe slot freed
}

TEST_CASE("circuit_breaker: bad options name the field", "[circuit_breaker]") {
  CircuitBreaker::Options o;
  o.failure_threshold = 0;
  CHECK_THAT(std::string(o.validate().message()), Catch::Contains("failure_threshold"));
  o = {};
  o.open_timeout = std::chrono::nanoseconds(-1);
  CHECK_THAT(std::string(o.validate().message()), Catch::Contains("open_timeout"));
  o = {};
  o.half_open_max_probes = 0;
  CHECK_THAT(std::string(o.validate().message()), Catch::Contains("half_open_max_probes"));
}

TEST_CASE("breakers: an open circuit keeps the worker out of selection", "[circuit_breaker]") {
  kvroute::ManualClock clock;
  kvroute::Router<kvroute::RoundRobin> router;
  auto a = *router.add_worker({.url = "http://a"});
  auto b = *router.add_worker({.url = "http://b"});
  kvroute::Breakers breakers(router.circuits(), {.failure_threshold = 3, .clock = &clock});
  for (int i = 0; i < 3; ++i) breakers.record(a, breakers.acquire(a), false);
  CHECK(breakers.state(a) == State::kOpen);
  for (int i = 0; i < 10; ++i) CHECK(router.select({}).worker().id == b);
  // After the timeout a refresh lets it back in, half-open, for one probe.
  clock.advance(seconds(60));
  breakers.refresh();
  CHECK(breakers.state(a) == State::kHalfOpen);
  bool saw_a = false;
  for (int i = 0; i < 4 && !saw_a; ++i) saw_a = router.select({}).worker().id == a;
  REQUIRE(saw_a);
  auto probe = breakers.acquire(a);
  REQUIRE(probe);
  // Saturated: out of selection again until the probe returns.
  for (int i = 0; i < 6; ++i) CHECK(router.select({}).worker().id == b);
  breakers.record(a, probe, true);
  for (int i = 0; i < 2; ++i) breakers.record(a, breakers.acquire(a), true);
  CHECK(breakers.state(a) == State::kClosed);
  CHECK(router.workers().snapshot()->find(a)->available());
  // A removed worker's breaker is harmless and can be forgotten.
  REQUIRE(router.remove_worker(b).ok());
  breakers.record(b, breakers.acquire(b), false);
  breakers.forget(b);
  CHECK(breakers.state(b) == State::kClosed);
}

TEST_CASE("breakers: concurrent outcomes from several threads", "[circuit_breaker][concurrency]") {
  kvroute::WorkerSet ws;
  std::vector<kvroute::WorkerId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(*ws.add({.url = "http://w" + std::to_string(i)}));
  kvroute::ManualClock clock;
  kvroute::Breakers breakers(ws, {.failure_threshold = 5, .clock = &clock});
  std::vector<std::thread> th;
  for (int t = 0; t < 3; ++t) {
    th.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        const auto id = ids[static_cast<std::size_t>((i + t) % 4)];
        auto p = breakers.acquire(id);
        if (p) breakers.record(id, p, (i % 7) != 0 || id == ids[0]);
        if (i % 50 == 0) {
          clock.advance(seconds(10));
          breakers.refresh();
        }
      }
    });
  }
  for (auto& x : th) x.join();
  breakers.refresh();
  // Worker 0 never failed: closed and available.
  CHECK(breakers.state(ids[0]) == State::kClosed);
  auto snap = ws.snapshot();
  for (auto id : ids) {
    CHECK(snap->find(id)->available() == (breakers.state(id) != State::kOpen));
  }
}
