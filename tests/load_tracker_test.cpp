#include "kvroute/load_tracker.hpp"

#include <catch2/catch.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

using kvroute::LoadGuard;
using kvroute::LoadTracker;
using kvroute::WorkerId;

TEST_CASE("load_tracker: a guard raises the count and lowers it once", "[load_tracker]") {
  LoadTracker load;
  const WorkerId w{3};
  CHECK(load.in_flight(w) == 0);
  {
    LoadGuard g = load.dispatch(w, {.tokens = 512});
    CHECK(g.active());
    CHECK(load.in_flight(w) == 1);
    CHECK(load.in_flight_tokens(w) == 512);
    g.release_tokens();
    CHECK(load.in_flight_tokens(w) == 0);
    CHECK(load.in_flight(w) == 1);
    g.release();
    CHECK_FALSE(g.active());
    CHECK(load.in_flight(w) == 0);
    g.release();  // idempotent
    CHECK(load.in_flight(w) == 0);
  }
  CHECK(load.in_flight(w) == 0);
  CHECK(load.processed(w) == 1);
}

TEST_CASE("load_tracker: every end path lowers the count", "[load_tracker]") {
  LoadTracker load;
  const WorkerId w{0};
  SECTION("destruction (error or cancel)") {
    { auto g = load.dispatch(w); }
  }
  SECTION("exception unwinding") {
    try {
      auto g = load.dispatch(w);
      throw std::runtime_error("upstream failed");
    } catch (const std::runtime_error&) {
    }
  }
  SECTION("move into a longer-lived owner, then release") {
    LoadGuard outer;
    {
      auto g = load.dispatch(w);
      outer = std::move(g);
      CHECK_FALSE(g.active());
    }
    CHECK(load.in_flight(w) == 1);
    outer.release();
  }
  SECTION("move-assign over an active guard releases the old one") {
    auto g1 = load.dispatch(w);
    auto g2 = load.dispatch(w);
    CHECK(load.in_flight(w) == 2);
    g1 = std::move(g2);
    CHECK(load.in_flight(w) == 1);
  }
  CHECK(load.in_flight(w) == 0);
}

TEST_CASE("load_tracker: invalid ids are inert, not errors", "[load_tracker]") {
  LoadTracker load;
  auto g = load.dispatch(WorkerId{});
  CHECK_FALSE(g.active());
  CHECK(load.in_flight(WorkerId{}) == 0);
  auto far = load.dispatch(WorkerId{kvroute::kMaxWorkerIds});
  CHECK_FALSE(far.active());
  CHECK_FALSE(load.reserve(WorkerId{}));
  CHECK(load.reserve(WorkerId{kvroute::kMaxWorkerIds - 1}));
}

TEST_CASE("load_tracker: distinct routing keys per worker", "[load_tracker]") {
  LoadTracker load;
  const WorkerId w{1}, v{2};
  auto a1 = load.dispatch(w, {.routing_key = "alice"});
  auto a2 = load.dispatch(w, {.routing_key = "alice"});
  auto b = load.dispatch(w, {.routing_key = "bob"});
  auto other = load.dispatch(v, {.routing_key = "alice"});
  CHECK(load.active_keys(w) == 2);
  CHECK(load.active_keys(v) == 1);
  a1.release();
  CHECK(load.active_keys(w) == 2);  // alice still has a request in flight
  a2.release();
  CHECK(load.active_keys(w) == 1);
  b.release();
  CHECK(load.active_keys(w) == 0);
  CHECK(load.active_keys(v) == 1);
}

TEST_CASE("load_tracker: reported loads have three states", "[load_tracker]") {
  LoadTracker load;
  const WorkerId w{5};
  CHECK(load.reported(w).state == kvroute::ReportedLoad::State::kUnknown);
  load.report_load(w, 1234);
  CHECK(load.reported(w).state == kvroute::ReportedLoad::State::kKnown);
  CHECK(load.reported(w).value == 1234);
  load.report_load(w, -5);  // clamps
  CHECK(load.reported(w).value == 0);
  load.report_load_failed(w);
  CHECK(load.reported(w).state == kvroute::ReportedLoad::State::kFailed);
  load.clear_report(w);
  CHECK(load.reported(w).state == kvroute::ReportedLoad::State::kUnknown);
}

TEST_CASE("load_tracker: min/max snapshot", "[load_tracker]") {
  kvroute::WorkerSet ws;
  LoadTracker load;
  std::vector<kvroute::WorkerId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(*ws.add({.url = "http://w" + std::to_string(i)}));
  std::vector<LoadGuard> guards;
  for (int i = 0; i < 5; ++i) guards.push_back(load.dispatch(ids[1]));
  guards.push_back(load.dispatch(ids[2]));
  auto snap = ws.snapshot();
  auto st = load.stats(snap->group("").members());
  CHECK(st.min == 0);
  CHECK(st.max == 5);
  CHECK(st.sum == 6);
  CHECK(load.stats({}).sum == 0);
}

TEST_CASE("load_tracker: concurrent dispatch and release balance to zero", "[load_tracker]") {
  LoadTracker load;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&load, t] {
      for (int i = 0; i < 2000; ++i) {
        // Ids spread over several chunks so chunk allocation races too.
        const WorkerId w{static_cast<std::uint32_t>((i * 7 + t) % 3000)};
        auto g = load.dispatch(w, {.tokens = 3, .routing_key = (i % 2) ? "k" : ""});
        if (i % 3 == 0) g.release();
      }
    });
  }
  for (auto& th : threads) th.join();
  std::uint64_t processed = 0;
  for (std::uint32_t i = 0; i < 3000; ++i) {
    REQUIRE(load.in_flight(WorkerId{i}) == 0);
    REQUIRE(load.in_flight_tokens(WorkerId{i}) == 0);
    REQUIRE(load.active_keys(WorkerId{i}) == 0);
    processed += load.processed(WorkerId{i});
  }
  CHECK(processed == 8000);
}

TEST_CASE("load_tracker: set_tokens corrects a guard's token load", "[load_tracker]") {
  LoadTracker load;
  const WorkerId w{1};
  LoadGuard a = load.dispatch(w, {.tokens = 1000});
  LoadGuard b = load.dispatch(w, {.tokens = 200});
  CHECK(load.in_flight_tokens(w) == 1200);
  a.set_tokens(300);  // the server had 700 of a's tokens cached
  CHECK(a.tokens() == 300);
  CHECK(load.in_flight_tokens(w) == 500);
  CHECK(load.in_flight(w) == 2);
  a.set_tokens(450);
  CHECK(load.in_flight_tokens(w) == 650);
  a.release_tokens();
  CHECK(a.tokens() == 0);
  CHECK(load.in_flight_tokens(w) == 200);
  a.set_tokens(50);  // still in flight: the guard may carry tokens again
  CHECK(load.in_flight_tokens(w) == 250);
  a.release();
  a.set_tokens(70);  // inactive: no-op
  CHECK(load.in_flight_tokens(w) == 200);
  b.release();
  CHECK(load.in_flight_tokens(w) == 0);
  CHECK(load.in_flight(w) == 0);
}
