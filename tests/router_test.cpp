#include "kvroute/router.hpp"

#include <catch2/catch.hpp>
#include <set>
#include <vector>

#include "kvroute/policies/round_robin.hpp"

using kvroute::Branch;
using kvroute::NoWorker;
using kvroute::Router;

namespace {
// Records the hooks Router calls.
struct Recorder {
  std::vector<std::uint32_t> added, removed;
  int maintained = 0;
  kvroute::RoundRobin inner;
  std::string_view name() const noexcept { return "recorder"; }
  kvroute::Decision choose(const kvroute::RequestView& r, const kvroute::ClusterView& c) noexcept {
    return inner.choose(r, c);
  }
  void on_worker_added(const kvroute::Worker& w) { added.push_back(w.id.value); }
  void on_worker_removed(kvroute::WorkerId id) { removed.push_back(id.value); }
  void maintain() { ++maintained; }
};
static_assert(kvroute::Policy<Recorder>);
}  // namespace

TEST_CASE("router: select, dispatch and release", "[router]") {
  Router<kvroute::RoundRobin> router;
  auto a = *router.add_worker({.url = "http://a"});
  auto s = router.select({.text = "hi"});
  REQUIRE(s);
  CHECK(s.worker().id == a);
  CHECK(s.decision.branch == Branch::kRoundRobin);
  {
    auto g = router.dispatch(s, {.tokens = 10});
    CHECK(router.load().in_flight(a) == 1);
  }
  CHECK(router.load().in_flight(a) == 0);
}

TEST_CASE("router: no workers and no healthy workers are values", "[router]") {
  Router<kvroute::RoundRobin> router;
  auto s = router.select({});
  CHECK_FALSE(s);
  CHECK(s.decision.reason() == NoWorker::kNoWorkers);
  CHECK_FALSE(router.dispatch(s).active());
  auto a = *router.add_worker({.url = "http://a"});
  REQUIRE(router.set_healthy(a, false).ok());
  s = router.select({});
  CHECK(s.decision.reason() == NoWorker::kNoHealthyWorkers);
  CHECK(s.decision.branch == Branch::kNoHealthyWorkers);
  REQUIRE(router.set_healthy(a, true).ok());
  CHECK(router.select({}));
}

TEST_CASE("router: requests go to their model's workers", "[router]") {
  Router<kvroute::RoundRobin> router;
  auto llama = *router.add_worker({.url = "http://llama", .model = "llama"});
  auto qwen = *router.add_worker({.url = "http://qwen", .model = "qwen"});
  for (int i = 0; i < 6; ++i) {
    CHECK(router.select({.model = "llama"}).worker().id == llama);
    CHECK(router.select({.model = "qwen"}).worker().id == qwen);
  }
  // No worker declares "mistral" and none is model-less.
  CHECK(router.select({.model = "mistral"}).decision.reason() == NoWorker::kNoWorkers);
  // An empty model may go anywhere.
  std::set<std::uint32_t> seen;
  for (int i = 0; i < 4; ++i) seen.insert(router.select({}).worker().id.value);
  CHECK(seen.size() == 2);
}

TEST_CASE("router: a worker removed mid-flight", "[router]") {
  Router<kvroute::RoundRobin> router;
  auto a = *router.add_worker({.url = "http://a"});
  auto b = *router.add_worker({.url = "http://b"});
  auto s = router.select({});
  REQUIRE(s);
  const auto chosen = s.worker().id;
  auto guard = router.dispatch(s);
  REQUIRE(router.remove_worker(chosen).ok());
  // The selection's snapshot still holds the worker: nothing dangles.
  CHECK(s.worker().id == chosen);
  CHECK_FALSE(s.worker().url.empty());
  // New selections never return it.
  for (int i = 0; i < 10; ++i) CHECK(router.select({}).worker().id != chosen);
  // Its guard still ends the load it started.
  guard.release();
  CHECK(router.load().in_flight(chosen) == 0);
  CHECK(router.remove_worker(chosen).code() == absl::StatusCode::kNotFound);
  (void)a;
  (void)b;
}

TEST_CASE("router: the policy hears of added and removed workers", "[router]") {
  Router<Recorder> router;
  auto a = *router.add_worker({.url = "http://a"});
  std::vector<kvroute::WorkerSpec> more = {{.url = "http://b"}, {.url = "http://c"}};
  REQUIRE(router.add_workers(more).ok());
  REQUIRE(router.remove_worker(a).ok());
  CHECK(router.remove_worker(a).code() == absl::StatusCode::kNotFound);
  CHECK_FALSE(router.add_worker({.url = "http://b"}).ok());
  router.maintain();
  CHECK(router.policy().added == std::vector<std::uint32_t>{0, 1, 2});
  CHECK(router.policy().removed == std::vector<std::uint32_t>{0});
  CHECK(router.policy().maintained == 1);
}
