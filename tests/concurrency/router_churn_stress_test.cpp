// Concurrency stress of whole routers: threads select (and hold load guards
// for a while), insert straight into cache_aware's tree, run maintain()
// (eviction), add and remove workers and flip their health, for a bounded
// number of operations. Afterwards: every decision named a worker that was
// in its snapshot and available; the tree is exactly consistent
// (check_invariants, tenant_sizes == recount_sizes); after a final
// maintain() no tenant is left for a removed worker; and every load count
// is back to zero once all guards are gone. Runs under ThreadSanitizer in
// the tsan preset; sized to take a few seconds there on two cores.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kvroute/router.hpp"
#include "support/all_policies.hpp"

namespace {

template <class P>
std::unique_ptr<kvroute::Router<P>> make_router(const kvroute::Clock& clock) {
  if constexpr (std::is_same_v<P, kvroute::CacheAware>) {
    return std::make_unique<kvroute::Router<P>>(
        kvroute::CacheAware::Options{.balance_abs_threshold = 4,
                                     .eviction_interval = std::chrono::milliseconds(1),
                                     .max_tree_size = 512,
                                     .clock = &clock,
                                     .seed = 3});
  } else if constexpr (std::is_same_v<P, kvroute::RoundRobin>) {
    return std::make_unique<kvroute::Router<P>>();
  } else if constexpr (std::is_same_v<P, kvroute::Manual> || std::is_same_v<P, kvroute::Bucket>) {
    return std::make_unique<kvroute::Router<P>>(typename P::Options{.clock = &clock, .seed = 3});
  } else {
    return std::make_unique<kvroute::Router<P>>(typename P::Options{.seed = 3});
  }
}

std::string prompt(std::mt19937_64& rng) {
  static const char* const kSystem[] = {"You are a helpful assistant. ",
                                        "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C ", ""};
  std::string s = kSystem[rng() % 3];
  s += "user " + std::to_string(rng() % 40) + ": ";
  for (std::uint64_t n = rng() % 60; n > 0; --n) s += static_cast<char>('a' + rng() % 4);
  return s;
}

TEMPLATE_LIST_TEST_CASE("stress: routers under selection, eviction and worker churn",
                        "[concurrency]", kvtest::AllPolicies) {
  const kvroute::Clock& clock = kvroute::Clock::steady();
  auto router = make_router<TestType>(clock);
  std::mutex ids_mu;
  std::vector<kvroute::WorkerId> all_ids;  // every id ever added
  for (int i = 0; i < 6; ++i) {
    auto id = router->add_worker({.url = "http://w" + std::to_string(i) + ":8000"});
    REQUIRE(id.ok());
    all_ids.push_back(*id);
  }
  constexpr int kSelectors = 2;
  constexpr int kSelectsPerThread = std::is_same_v<TestType, kvroute::CacheAware> ? 20000 : 6000;
  std::atomic<int> bad{0};
  std::atomic<int> running{kSelectors};
  std::vector<std::thread> threads;
  for (int t = 0; t < kSelectors; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 11);
      std::vector<kvroute::LoadGuard> held;
      for (int i = 0; i < kSelectsPerThread; ++i) {
        const std::string text = prompt(rng);
        const std::string key = "k" + std::to_string(rng() % 16);
        const kvroute::Header h[] = {{"x-smg-routing-key", key}};
        kvroute::Selection s = router->select({.text = text, .headers = h});
        if (s) {
          const kvroute::Worker* w = s.snapshot->find(s.decision.worker->id);
          if (w != s.decision.worker || !w->available()) bad.fetch_add(1);
          held.push_back(router->dispatch(s));
          if (held.size() > 8) held.erase(held.begin() + static_cast<long>(rng() % held.size()));
        } else if (s.decision.reason() == kvroute::NoWorker::kNone) {
          bad.fetch_add(1);
        }
      }
      held.clear();
      running.fetch_sub(1);
    });
  }
  // Worker churn: removes, re-adds under new URLs, health and circuit flips.
  threads.emplace_back([&] {
    std::mt19937_64 rng(5);
    int next = 100;
    while (running.load() > 0) {
      kvroute::WorkerId id;
      {
        std::lock_guard<std::mutex> l(ids_mu);
        id = all_ids[rng() % all_ids.size()];
      }
      switch (rng() % 4) {
        case 0:
          if (router->remove_worker(id).ok()) {
            auto again =
                router->add_worker({.url = "http://re" + std::to_string(next++) + ":8000"});
            if (again.ok()) {
              std::lock_guard<std::mutex> l(ids_mu);
              all_ids.push_back(*again);
            }
          }
          break;
        case 1:
          router->set_healthy(id, rng() % 2 == 0).IgnoreError();
          break;
        case 2:
          router->circuits().set_circuit_open(id, rng() % 3 == 0).IgnoreError();
          break;
        default:
          router->set_healthy(id, true).IgnoreError();
          break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  // Maintenance, and (cache_aware) inserts straight into the tree.
  threads.emplace_back([&] {
    std::mt19937_64 rng(9);
    while (running.load() > 0) {
      router->maintain();
      if constexpr (std::is_same_v<TestType, kvroute::CacheAware>) {
        if (kvroute::ApproxRadixTree* tree = router->policy().tree("")) {
          for (int i = 0; i < 20; ++i) {
            // Tenants that are not workers: never removed, evicted only.
            tree->insert(prompt(rng), static_cast<kvroute::TenantId>(1000 + rng() % 4));
          }
          tree->evict(64);
        }
      }
      std::this_thread::yield();
    }
  });
  for (auto& th : threads) th.join();
  CHECK(bad.load() == 0);

  // Quiescent: final sweep, then the invariants. (A selection that read its
  // snapshot before a removal may have inserted for the removed worker after
  // an earlier sweep; every sweep removes all removed workers again.)
  router->maintain();
  auto snap = router->workers().snapshot();
  if constexpr (std::is_same_v<TestType, kvroute::CacheAware>) {
    kvroute::ApproxRadixTree* tree = router->policy().tree("");
    REQUIRE(tree != nullptr);
    CHECK(tree->check_invariants() == "");
    CHECK(tree->recount_sizes() == tree->tenant_sizes());
    std::set<std::uint32_t> live;
    for (const auto& w : snap->workers()) live.insert(w.id.value);
    for (const kvroute::TenantSize& ts : tree->tenant_sizes()) {
      INFO("tenant " << ts.tenant);
      CHECK((live.count(ts.tenant) == 1 || ts.tenant >= 1000));
      CHECK(ts.size <= 512);
    }
  }
  for (kvroute::WorkerId id : all_ids) CHECK(router->load().in_flight(id) == 0);
}

}  // namespace
