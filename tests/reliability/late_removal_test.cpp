// A selection that read its snapshot before a worker's removal may insert for
// that worker after the removal, and after any number of sweeps. Found by the
// reliability work (the policies first forgot removed ids after one sweep, so
// such a late insert stayed in the tree for good); the tree-keeping policies
// now remember every removed id and each sweep removes them all again.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "kvroute/policies/cache_aware.hpp"
#include "kvroute/policies/least_prefill.hpp"
#include "kvroute/router.hpp"
#include "kvroute/select_worker.hpp"

TEMPLATE_TEST_CASE("late removal: a removed worker inserted after the sweep is swept again",
                   "[reliability]", kvroute::CacheAware, kvroute::LeastPrefill) {
  kvroute::Router<TestType> router;
  auto a = router.add_worker({.url = "http://a:1"});
  REQUIRE(a.ok());
  const std::shared_ptr<const kvroute::WorkerSnapshot> old = router.workers().snapshot();

  REQUIRE(router.remove_worker(*a).ok());
  router.maintain();  // the sweep that follows the removal

  // The selection that started before the removal completes now.
  const kvroute::Decision d =
      kvroute::select_worker(router.policy(), {.text = "hello world"}, *old, router.load());
  REQUIRE(d);
  REQUIRE(d.worker->id == *a);
  const kvroute::ApproxRadixTree* tree = router.policy().tree("");
  REQUIRE(tree != nullptr);
  CHECK(tree->has_tenant(a->value));  // the late insert landed

  router.maintain();  // any later sweep
  CHECK_FALSE(tree->has_tenant(a->value));
}
