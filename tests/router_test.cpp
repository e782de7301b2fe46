#include "kvroute/router.hpp"

#include <catch2/catch.hpp>
#include <set>
#include <type_traits>
#include <vector>

#include "kvroute/policies/bucket.hpp"
#include "kvroute/policies/cache_aware.hpp"
#include "kvroute/policies/least_prefill.hpp"
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
  void on_workers_changed(const kvroute::WorkerSnapshot& s) { sizes.push_back(s.size()); }
  void maintain() { ++maintained; }
  std::vector<std::size_t> sizes;  // the membership each on_workers_changed saw
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
  // After each change that took effect (one add, one batch, one removal).
  CHECK(router.policy().sizes == std::vector<std::size_t>{1, 3, 2});
  CHECK(router.policy().maintained == 1);
}

TEST_CASE("router: the worker set is read-only through the router", "[router]") {
  // A removal through workers() would skip the policy's notification.
  Router<Recorder> router;
  static_assert(std::is_const_v<std::remove_reference_t<decltype(router.workers())>>);
  auto a = *router.add_worker({.url = "http://a"});
  CHECK(router.workers().snapshot()->size() == 1);
  // Circuit breakers get a switch that does only their one change.
  kvroute::CircuitSwitch circuits = router.circuits();
  REQUIRE(circuits.set_circuit_open(a, true).ok());
  CHECK(router.select({}).decision.reason() == NoWorker::kNoHealthyWorkers);
  REQUIRE(circuits.set_circuit_open(a, false).ok());
  CHECK(router.select({}));
  CHECK(circuits.set_circuit_open(kvroute::WorkerId{99}, true).code() ==
        absl::StatusCode::kNotFound);
}

TEST_CASE("router: a model's tree and buckets exist once its workers register", "[router]") {
  Router<kvroute::CacheAware> ca;
  CHECK(ca.policy().tree("llama") == nullptr);
  REQUIRE(ca.add_worker({.url = "http://a", .model = "llama"}).ok());
  CHECK(ca.policy().tree("llama") != nullptr);  // before any request
  CHECK(ca.policy().tree("") != nullptr);       // the all-workers group's
  CHECK(ca.policy().tree("qwen") == nullptr);
  Router<kvroute::LeastPrefill> lp;
  REQUIRE(lp.add_worker({.url = "http://a", .model = "qwen"}).ok());
  CHECK(lp.policy().tree("qwen") != nullptr);
  Router<kvroute::Bucket> bucket;
  REQUIRE(bucket.add_worker({.url = "http://a", .model = "llama"}).ok());
  REQUIRE(bucket.add_worker({.url = "http://b", .model = "llama"}).ok());
  const auto ranges = bucket.policy().boundaries("llama");
  REQUIRE(ranges.size() == 2);  // before any request
  CHECK(ranges[0].second.lo == 0);
  CHECK(ranges[1].second.lo > 0);
  // A removal re-splits them at once.
  REQUIRE(bucket.remove_worker(ranges[0].first).ok());
  CHECK(bucket.policy().boundaries("llama").size() == 1);
}
