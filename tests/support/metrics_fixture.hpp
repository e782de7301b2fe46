// Test support: a registry filled the way a router fills it (used by the
// metrics test and by the exposition program that promtool checks).
#ifndef KVROUTE_TESTS_SUPPORT_METRICS_FIXTURE_HPP_
#define KVROUTE_TESTS_SUPPORT_METRICS_FIXTURE_HPP_

#include <chrono>
#include <string>

#include "kvroute/circuit_breaker.hpp"
#include "kvroute/metrics.hpp"
#include "kvroute/policies/cache_aware.hpp"
#include "kvroute/router.hpp"

namespace kvtest {

inline std::string render_sample_metrics() {
  kvroute::ManualClock clock;
  kvroute::Router<kvroute::CacheAware> router(kvroute::CacheAware::Options{.clock = &clock});
  auto a = *router.add_worker({.url = "http://10.0.0.1:30000"});
  auto b = *router.add_worker({.url = "http://10.0.0.2:30000", .model = "llama \"3\""});
  kvroute::Breakers breakers(router.circuits(), {.failure_threshold = 2, .clock = &clock});
  kvroute::MetricsRegistry registry;
  kvroute::RouterMetrics metrics(registry, "cache_aware");
  std::vector<kvroute::LoadGuard> guards;
  for (int i = 0; i < 20; ++i) {
    const std::string text = "prompt " + std::to_string(i % 3);
    auto s = router.select({.text = text});
    metrics.record(s.decision, std::chrono::microseconds(1 + i));
    if (i % 4 == 0) guards.push_back(router.dispatch(s));
  }
  breakers.record(b, breakers.acquire(b), false);
  breakers.record(b, breakers.acquire(b), false);
  metrics.record_retry();
  metrics.record_retries_exhausted();
  metrics.observe_workers(*router.workers().snapshot(), router.load(), &breakers);
  metrics.observe_tree("", *router.policy().tree(""));
  (void)a;
  return registry.render();
}

}  // namespace kvtest

#endif  // KVROUTE_TESTS_SUPPORT_METRICS_FIXTURE_HPP_
