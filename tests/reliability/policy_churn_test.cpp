// Policies under churn, a property test per policy: a seeded random stream
// of requests (text, tokens, routing keys, implicit keys, target-worker
// headers naming present, removed and unknown workers, three models) mixed
// with worker adds and removes, health and circuit flips, load changes,
// clock jumps and maintain() never yields a removed or unavailable worker,
// never crashes, and every decision reports a branch from the policy's
// documented list (kAllowedBranches below); "no worker" comes back exactly
// when the request's model group has no available worker, or as a policy
// miss from that list.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kvroute/decision.hpp"
#include "kvroute/load_tracker.hpp"
#include "kvroute/policy.hpp"
#include "kvroute/select_worker.hpp"
#include "kvroute/worker_set.hpp"
#include "support/all_policies.hpp"

namespace {

using kvroute::Branch;

// The branches each policy documents (its header), besides kNoWorkers and
// kNoHealthyWorkers, which select_worker reports before calling it.
template <class P>
const std::set<Branch> kAllowedBranches;
template <>
const std::set<Branch> kAllowedBranches<kvroute::RoundRobin> = {Branch::kRoundRobin};
template <>
const std::set<Branch> kAllowedBranches<kvroute::Random> = {Branch::kRandom};
template <>
const std::set<Branch> kAllowedBranches<kvroute::PowerOfTwo> = {Branch::kPowerOfTwo,
                                                                Branch::kSingleWorker};
template <>
const std::set<Branch> kAllowedBranches<kvroute::ConsistentHashing> = {
    Branch::kTargetWorkerHit, Branch::kTargetWorkerMiss, Branch::kRoutingKeyHit,
    Branch::kImplicitKeyHit,  Branch::kBoundedLoadSpill, Branch::kRandomFallback};
template <>
const std::set<Branch> kAllowedBranches<kvroute::PrefixHash> = {
    Branch::kRingHit, Branch::kLoadBalanceWalk, Branch::kRandomFallback};
template <>
const std::set<Branch> kAllowedBranches<kvroute::Manual> = {
    Branch::kNoRoutingId, Branch::kVacant, Branch::kOccupiedHit, Branch::kOccupiedMiss};
template <>
const std::set<Branch> kAllowedBranches<kvroute::Bucket> = {
    Branch::kBucketHit, Branch::kBucketNeighbor, Branch::kBucketImbalanced,
    Branch::kRandomFallback};
template <>
const std::set<Branch> kAllowedBranches<kvroute::CacheAware> = {
    Branch::kCacheHit, Branch::kCacheMiss, Branch::kImbalanced};
template <>
const std::set<Branch> kAllowedBranches<kvroute::LeastPrefill> = {
    Branch::kCacheHit, Branch::kCacheMiss, Branch::kLeastPrefill};

struct Req {
  std::string text;
  std::vector<std::uint32_t> tokens;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string model;
};

TEMPLATE_LIST_TEST_CASE("churn: never a removed or unavailable worker, only documented branches",
                        "[churn]", kvtest::AllPolicies) {
  const std::set<Branch>& allowed = kAllowedBranches<TestType>;
  REQUIRE_FALSE(allowed.empty());
  std::set<Branch> seen;
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    kvroute::ManualClock clock;
    auto p = kvtest::Factory<TestType>::make(seed, clock);
    kvroute::WorkerSet workers;
    kvroute::LoadTracker load;
    std::mt19937_64 rng(seed);
    std::map<std::uint32_t, std::string> live;  // id -> url
    std::set<std::uint32_t> removed;
    std::vector<kvroute::LoadGuard> guards;
    const std::string models[] = {"", "m1", "m2"};
    int next_url = 0;
    auto add = [&] {
      const std::string url = "http://w" + std::to_string(next_url++) + ":8000";
      auto id = workers.add({.url = url, .model = models[rng() % 3], .healthy = rng() % 4 != 0});
      REQUIRE(id.ok());
      live[id->value] = url;
      if (const kvroute::Worker* w = workers.snapshot()->find(*id)) {
        kvroute::notify_worker_added(*p, *w);
      }
    };
    for (int i = 0; i < 4; ++i) add();

    for (int step = 0; step < 2500; ++step) {
      const std::uint64_t op = rng() % 100;
      if (op < 4) {
        add();
      } else if (op < 8 && !live.empty()) {
        auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
        const kvroute::WorkerId id{it->first};
        REQUIRE(workers.remove(id).ok());
        kvroute::notify_worker_removed(*p, id);
        removed.insert(it->first);
        live.erase(it);
      } else if (op < 16 && !live.empty()) {
        auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
        const kvroute::WorkerId id{it->first};
        if (rng() % 3 == 0) {
          REQUIRE(workers.set_circuit_open(id, rng() % 2 == 0).ok());
        } else {
          REQUIRE(workers.set_healthy(id, rng() % 2 == 0).ok());
        }
      } else if (op < 20) {
        clock.advance(std::chrono::milliseconds(rng() % 200000));
        if constexpr (kvroute::detail::HasMaintain<TestType>) p->maintain();
      } else if (op < 24) {
        if (!guards.empty())
          guards.erase(guards.begin() + static_cast<long>(rng() % guards.size()));
      } else {
        Req r;
        const std::uint64_t shape = rng() % 4;
        if (shape != 0) {
          r.text = std::string(rng() % 3 == 0 ? "You are a helpful assistant. " : "") + "q" +
                   std::to_string(rng() % 50) + std::string(rng() % 80, 'x');
        }
        if (shape == 2) {
          for (std::uint64_t t = rng() % 64; t > 0; --t)
            r.tokens.push_back(static_cast<std::uint32_t>(rng() % 1000));
        }
        switch (rng() % 7) {
          case 0:
            r.headers.push_back({"x-smg-routing-key", "user-" + std::to_string(rng() % 20)});
            break;
          case 1:
            r.headers.push_back({"authorization", "Bearer " + std::to_string(rng() % 20)});
            break;
          case 2:
            r.headers.push_back({"x-smg-routing-key", ""});
            break;
          case 3:
            r.headers.push_back({"x-smg-target-worker",
                                 std::to_string(rng() % static_cast<std::uint64_t>(next_url + 2))});
            break;
          case 4:
            r.headers.push_back(
                {"x-smg-target-worker",
                 "http://w" + std::to_string(rng() % static_cast<std::uint64_t>(next_url + 2)) +
                     ":8000"});
            break;
          default:
            break;
        }
        r.model = models[rng() % 3];
        std::vector<kvroute::Header> hv;
        for (const auto& [k, v] : r.headers) hv.push_back({k, v});
        const kvroute::RequestView view{
            .text = r.text, .tokens = r.tokens, .headers = hv, .model = r.model};
        auto snap = workers.snapshot();
        const kvroute::Decision d = kvroute::select_worker(*p, view, *snap, load);
        const kvroute::ModelGroup& g = snap->group(r.model);
        if (d) {
          INFO("branch " << kvroute::to_string(d.branch));
          REQUIRE(allowed.count(d.branch) == 1);
          REQUIRE(removed.count(d.worker->id.value) == 0);
          REQUIRE(live.count(d.worker->id.value) == 1);
          REQUIRE(live[d.worker->id.value] == d.worker->url);
          REQUIRE(snap->find(d.worker->id) == d.worker);
          REQUIRE(d.worker->available());
          REQUIRE(std::find(g.available().begin(), g.available().end(), d.worker) !=
                  g.available().end());
          seen.insert(d.branch);
          if (rng() % 2 == 0 && guards.size() < 64) guards.push_back(load.dispatch(d.worker->id));
        } else if (g.members().empty()) {
          REQUIRE(d.branch == Branch::kNoWorkers);
        } else if (g.available().empty()) {
          REQUIRE(d.branch == Branch::kNoHealthyWorkers);
        } else {
          INFO("policy miss, branch " << kvroute::to_string(d.branch));
          REQUIRE(d.reason() == kvroute::NoWorker::kPolicyMiss);
          REQUIRE(allowed.count(d.branch) == 1);
          seen.insert(d.branch);
        }
      }
    }
    guards.clear();
    for (const auto& [id, url] : live) CHECK(load.in_flight(kvroute::WorkerId{id}) == 0);
  }
  // The stream reaches more than one branch where the policy has several.
  if (allowed.size() > 1) CHECK(seen.size() > 1);
}

}  // namespace
