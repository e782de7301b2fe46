// One contract for all policies (policy.hpp's semantic requirements), checked
// for every shipped policy.
#include <atomic>
#include <catch2/catch.hpp>
#include <set>
#include <thread>
#include <vector>

#include "kvroute/select_worker.hpp"
#include "support/all_policies.hpp"
#include "support/alloc_counter.hpp"
#include "support/cluster.hpp"
#include "support/requests.hpp"

using kvroute::Branch;
using kvroute::NoWorker;
using kvtest::Cluster;
using kvtest::Factory;
using kvtest::RequestMix;

namespace {

bool known_branch(Branch b) {
  for (Branch x : kvroute::kAllBranches) {
    if (x == b) return true;
  }
  return false;
}

// A decision is acceptable if it names a healthy member of `snap` (for the
// request's model), or names none with a reason other than the cluster ones.
void check_decision(const kvroute::Decision& d, const kvroute::WorkerSnapshot& snap,
                    std::string_view model) {
  REQUIRE(known_branch(d.branch));
  if (!d) {
    // The cluster had healthy workers, so only a policy-specific miss is ok.
    REQUIRE(d.reason() == NoWorker::kPolicyMiss);
    return;
  }
  const kvroute::Worker* w = snap.find(d.worker->id);
  REQUIRE(w != nullptr);
  REQUIRE(w == d.worker);
  REQUIRE(w->available());
  REQUIRE((w->model.empty() || model.empty() || w->model == model));
  REQUIRE(d.branch != Branch::kNoWorkers);
  REQUIRE(d.branch != Branch::kNoHealthyWorkers);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("contract: picks only healthy, present workers", "[contract]",
                        kvtest::AllPolicies) {
  kvroute::ManualClock clock;
  auto p = Factory<TestType>::make(7, clock);
  Cluster c(6);
  c.set_healthy(1, false);
  c.set_healthy(4, false);
  c.remove(5);
  RequestMix mix(400);
  std::set<int> chosen;
  for (std::size_t i = 0; i < mix.size(); ++i) {
    if (i == 200) c.set_healthy(4, true);
    auto snap = c.workers.snapshot();
    auto d = kvroute::select_worker(*p, mix.view(i), *snap, c.load);
    check_decision(d, *snap, "");
    if (d) chosen.insert(c.index_of(d));
    clock.advance(std::chrono::milliseconds(50));
  }
  CHECK(chosen.count(1) == 0);
  CHECK(chosen.count(5) == 0);
  CHECK(chosen.size() >= 2);  // the mix spreads over several workers
}

TEMPLATE_LIST_TEST_CASE("contract: zero workers and all-unhealthy are values", "[contract]",
                        kvtest::AllPolicies) {
  kvroute::ManualClock clock;
  auto p = Factory<TestType>::make(7, clock);
  RequestMix mix(20);
  Cluster empty(0);
  Cluster down(3);
  for (std::size_t i = 0; i < 3; ++i) down.set_healthy(i, false);
  for (std::size_t i = 0; i < mix.size(); ++i) {
    CHECK(empty.select(*p, mix.view(i)).reason() == NoWorker::kNoWorkers);
    CHECK(down.select(*p, mix.view(i)).reason() == NoWorker::kNoHealthyWorkers);
    // Called directly, without select_worker's guard, the policy agrees.
    kvroute::ClusterView none{};
    CHECK_FALSE(p->choose(mix.view(i), none));
    auto snap = down.workers.snapshot();
    kvroute::ClusterView all_down(*snap, snap->group(""), &down.load);
    CHECK(p->choose(mix.view(i), all_down).reason() == NoWorker::kNoHealthyWorkers);
  }
}

TEMPLATE_LIST_TEST_CASE("contract: one worker gets every request", "[contract]",
                        kvtest::AllPolicies) {
  kvroute::ManualClock clock;
  auto p = Factory<TestType>::make(7, clock);
  Cluster c(1);
  RequestMix mix(100);
  for (std::size_t i = 0; i < mix.size(); ++i) {
    auto d = c.select(*p, mix.view(i));
    REQUIRE(c.index_of(d) == 0);
  }
}

TEMPLATE_LIST_TEST_CASE("contract: deterministic given a seed", "[contract]", kvtest::AllPolicies) {
  kvroute::ManualClock clock_a, clock_b;
  auto a = Factory<TestType>::make(99, clock_a);
  auto b = Factory<TestType>::make(99, clock_b);
  Cluster ca(5), cb(5);
  RequestMix mix(300);
  for (std::size_t i = 0; i < mix.size(); ++i) {
    const int pa = ca.pick(*a, mix.view(i));
    const int pb = cb.pick(*b, mix.view(i));
    REQUIRE(pa == pb);
    // Feed the same load back into both clusters.
    if (pa >= 0) ca.set_load(static_cast<std::size_t>(pa), static_cast<std::int64_t>(i % 3));
    if (pb >= 0) cb.set_load(static_cast<std::size_t>(pb), static_cast<std::int64_t>(i % 3));
    clock_a.advance(std::chrono::milliseconds(10));
    clock_b.advance(std::chrono::milliseconds(10));
  }
}

TEMPLATE_LIST_TEST_CASE("contract: concurrent selection during churn", "[contract][concurrency]",
                        kvtest::AllPolicies) {
  kvroute::ManualClock clock;
  auto p = Factory<TestType>::make(5, clock);
  kvroute::WorkerSet workers;
  kvroute::LoadTracker load;
  std::vector<kvroute::WorkerId> ids;
  for (int i = 0; i < 6; ++i) {
    ids.push_back(*workers.add({.url = "http://w" + std::to_string(i) + ":8000"}));
  }
  RequestMix mix(200);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t i = 0; i < 1500; ++i) {
        auto snap = workers.snapshot();
        auto d = kvroute::select_worker(*p, mix.view(i + static_cast<std::size_t>(t)), *snap, load);
        if (d) {
          const kvroute::Worker* w = snap->find(d.worker->id);
          if (w == nullptr || !w->available()) bad.fetch_add(1);
          auto g = load.dispatch(d.worker->id);
        } else if (d.reason() != NoWorker::kPolicyMiss &&
                   d.reason() != NoWorker::kNoHealthyWorkers &&
                   d.reason() != NoWorker::kNoWorkers) {
          bad.fetch_add(1);
        }
      }
    });
  }
  threads.emplace_back([&] {
    std::size_t k = 0;
    while (!stop.load()) {
      const auto id = ids[k % ids.size()];
      workers.set_healthy(id, (k / ids.size()) % 2 == 1).IgnoreError();
      if (k % 7 == 0) {
        if (workers.remove(id).ok()) {
          notify_worker_removed(*p, id);
          auto again = workers.add({.url = "http://re" + std::to_string(k) + ":8000"});
          if (again.ok()) ids[k % ids.size()] = *again;
        }
      }
      clock.advance(std::chrono::milliseconds(100));
      if constexpr (kvroute::detail::HasMaintain<TestType>) {
        if (k % 5 == 0) p->maintain();
      }
      ++k;
      std::this_thread::yield();
    }
  });
  for (int t = 0; t < 3; ++t) threads[static_cast<std::size_t>(t)].join();
  stop.store(true);
  threads.back().join();
  CHECK(bad.load() == 0);
  for (auto& w : workers.snapshot()->workers()) CHECK(load.in_flight(w.id) == 0);
}

TEMPLATE_LIST_TEST_CASE("contract: the steady-state path does not allocate", "[contract]",
                        kvtest::AllPolicies) {
  kvroute::ManualClock clock;
  auto p = Factory<TestType>::make(3, clock);
  Cluster c(4);
  RequestMix mix(64);
  auto snap = c.workers.snapshot();
  // Warm-up: the first sight of a ring, a model, a key or a window may
  // allocate; repeating the same requests afterwards must not.
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < mix.size(); ++i) {
      (void)kvroute::select_worker(*p, mix.view(i), *snap, c.load);
    }
  }
  kvtest::allocations = 0;
  kvtest::counting = true;
  std::size_t chosen = 0;
  for (std::size_t i = 0; i < mix.size(); ++i) {
    chosen += kvroute::select_worker(*p, mix.view(i), *snap, c.load) ? 1 : 0;
  }
  kvtest::counting = false;
  if constexpr (kvtest::kAllocationFree<TestType>) CHECK(kvtest::allocations == 0);
  CHECK(chosen == mix.size());
}

TEMPLATE_LIST_TEST_CASE("contract: excluded and circuit-open workers are never chosen",
                        "[contract]", kvtest::AllPolicies) {
  kvroute::ManualClock clock;
  auto p = Factory<TestType>::make(11, clock);
  Cluster c(5);
  REQUIRE(c.workers.set_circuit_open(c.ids[3], true).ok());
  RequestMix mix(300);
  const kvroute::WorkerId avoid[] = {c.ids[0], c.ids[4]};
  std::set<int> chosen;
  for (std::size_t i = 0; i < mix.size(); ++i) {
    auto snap = c.workers.snapshot();
    auto d = kvroute::select_worker(*p, mix.view(i), *snap, c.load, avoid);
    check_decision(d, *snap, "");
    if (d) chosen.insert(c.index_of(d));
  }
  CHECK(chosen.count(0) == 0);
  CHECK(chosen.count(3) == 0);
  CHECK(chosen.count(4) == 0);
  CHECK_FALSE(chosen.empty());
  // Excluding every available worker leaves none.
  const kvroute::WorkerId all[] = {c.ids[0], c.ids[1], c.ids[2], c.ids[4]};
  auto snap = c.workers.snapshot();
  CHECK(kvroute::select_worker(*p, mix.view(0), *snap, c.load, all).reason() ==
        kvroute::NoWorker::kNoHealthyWorkers);
}
