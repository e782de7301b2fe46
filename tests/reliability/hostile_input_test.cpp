// Hostile input: what each bad input gets, one test per row of
// README.md "Bad input" (rows already covered elsewhere point
// at those tests there). Every policy must return a valid decision (or a
// documented "no worker" value) and never crash, throw or hang.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kvroute/policies/cache_aware.hpp"
#include "kvroute/policies/consistent_hashing.hpp"
#include "kvroute/router.hpp"
#include "support/all_policies.hpp"
#include "support/cluster.hpp"

namespace {

using kvroute::Branch;

// Every policy routes `r` to a healthy worker of the cluster (or, for
// consistent_hashing's strict target header, a documented miss).
template <class P>
void routes(P& p, kvtest::Cluster& c, const kvroute::RequestView& r) {
  const kvroute::Decision d = c.select(p, r);
  if (!d) {
    INFO("branch " << kvroute::to_string(d.branch));
    REQUIRE(d.reason() == kvroute::NoWorker::kPolicyMiss);
    REQUIRE(d.branch == Branch::kTargetWorkerMiss);
    return;
  }
  REQUIRE(c.index_of(d) >= 0);
  REQUIRE(d.worker->available());
}

TEMPLATE_LIST_TEST_CASE("hostile: bad text, tokens and header bytes route like any request",
                        "[hostile]", kvtest::AllPolicies) {
  kvroute::ManualClock clock;
  auto p = kvtest::Factory<TestType>::make(1, clock);
  kvtest::Cluster c(4);
  const std::string invalid_utf8 = "\xFF\xFE\xC3(\xE0\x80\x80\xED\xA0\x80\xF4\x90\x80\x80\x80";
  const std::string nul = std::string("sys\0prompt\0", 11);
  const std::string ctl = std::string("k\r\n\x01\x7F\0\xFF", 7);
  const std::vector<std::uint32_t> extreme_tokens = {0, 0xFFFFFFFFu, 0x80000000u, 1};
  const kvroute::Header ctl_key[] = {{"x-smg-routing-key", ctl}};
  const kvroute::Header ctl_auth[] = {{"authorization", ctl}, {"cookie", ctl}};
  const kvroute::Header ctl_target[] = {{"x-smg-target-worker", ctl}};
  const kvroute::Header ctl_name[] = {{std::string_view("x-smg-routing-key\0", 18), "v"}};
  const kvroute::Header empty_key[] = {{"x-smg-routing-key", ""}};
  for (int round = 0; round < 3; ++round) {
    routes(*p, c, {.text = invalid_utf8});
    routes(*p, c, {.text = nul});
    routes(*p, c, {});                                      // empty text, nothing else
    routes(*p, c, {.text = "", .tokens = extreme_tokens});  // tokens only
    routes(*p, c, {.text = invalid_utf8, .headers = ctl_key});
    routes(*p, c, {.text = nul, .headers = ctl_auth});
    routes(*p, c, {.headers = ctl_target});
    routes(*p, c, {.headers = ctl_name});
    routes(*p, c, {.headers = empty_key});
    routes(*p, c, {.text = "hi", .model = std::string_view("m\0\xFF", 3)});  // unknown model
    clock.advance(std::chrono::seconds(1));
  }
}

TEST_CASE("hostile: header values with control bytes are opaque, stable keys") {
  kvroute::ConsistentHashing ch;
  kvtest::Cluster c(8);
  const std::string a = std::string("user\0\r\n\x01", 8);
  const std::string b = std::string("user\0\r\n\x02", 8);
  const kvroute::Header ha[] = {{"x-smg-routing-key", a}};
  const kvroute::Header hb[] = {{"x-smg-routing-key", b}};
  const kvroute::Decision first = c.select(ch, {.headers = ha});
  REQUIRE(first);
  CHECK(first.branch == Branch::kRoutingKeyHit);
  for (int i = 0; i < 20; ++i) CHECK(c.select(ch, {.headers = ha}).worker == first.worker);
  // A key that differs only in a control byte is another key (it may land
  // anywhere, but deterministically).
  const kvroute::Decision other = c.select(ch, {.headers = hb});
  REQUIRE(other);
  CHECK(c.select(ch, {.headers = hb}).worker == other.worker);
  // A target header with control bytes names no worker: a strict miss.
  const std::string target = std::string("http://w0:8000\0", 15);
  const kvroute::Header t[] = {{"x-smg-target-worker", target}};
  CHECK(c.select(ch, {.headers = t}).branch == Branch::kTargetWorkerMiss);
}

TEST_CASE("hostile: NUL and invalid UTF-8 are ordinary characters in cache_aware's tree") {
  kvroute::Router<kvroute::CacheAware> router(kvroute::CacheAware::Options{.seed = 1});
  REQUIRE(router.add_worker({.url = "http://a:1"}).ok());
  REQUIRE(router.add_worker({.url = "http://b:1"}).ok());
  const std::string p1 = std::string("\xFF\0\xC3 shared system prompt \0\xFF one", 31);
  kvroute::Selection s = router.select({.text = p1});
  REQUIRE(s);
  // The same bytes match fully: a cache hit on the same worker.
  kvroute::Selection again = router.select({.text = p1});
  REQUIRE(again);
  CHECK(again.decision.branch == Branch::kCacheHit);
  CHECK(again.worker().id == s.worker().id);
  const kvroute::ApproxRadixTree* tree = router.policy().tree("");
  REQUIRE(tree != nullptr);
  CHECK(tree->check_invariants() == "");
}

TEST_CASE("hostile: a text far over max_tree_size routes and leaves the tree within budget") {
  constexpr std::uint64_t kBudget = 1000;
  kvroute::Router<kvroute::CacheAware> router(
      kvroute::CacheAware::Options{.max_tree_size = kBudget, .seed = 1});
  REQUIRE(router.add_worker({.url = "http://a:1"}).ok());
  REQUIRE(router.add_worker({.url = "http://b:1"}).ok());
  const std::string huge(16u << 20, 'x');  // 16 MB, 16 Mi characters
  kvroute::Selection s = router.select({.text = huge});
  REQUIRE(s);
  const kvroute::ApproxRadixTree* tree = router.policy().tree("");
  REQUIRE(tree != nullptr);
  for (const kvroute::TenantSize& t : tree->tenant_sizes()) CHECK(t.size <= kBudget);
  CHECK(tree->stats().bytes < (1u << 20));  // the 16 MB text was not kept
}

TEMPLATE_LIST_TEST_CASE("hostile: a 16 MB text routes through every policy", "[hostile][large]",
                        kvtest::AllPolicies) {
  kvroute::ManualClock clock;
  auto p = kvtest::Factory<TestType>::make(1, clock);
  kvtest::Cluster c(3);
  const std::string huge(16u << 20, 'y');
  routes(*p, c, {.text = huge});
  routes(*p, c, {.text = huge});
}

// 10^5 workers. The ring policies build a ring of 150 points (16 bytes
// each) per member on the first selection after a membership change: 240 MB
// and seconds of CPU at 10^5 workers, so they run with 10^4 here (the cost
// is linear; see README.md, "Bad input").
TEMPLATE_LIST_TEST_CASE("hostile: 100000 workers", "[hostile][large]", kvtest::AllPolicies) {
  constexpr bool kRing = std::is_same_v<TestType, kvroute::ConsistentHashing> ||
                         std::is_same_v<TestType, kvroute::PrefixHash>;
  constexpr int kWorkers = kRing ? 10000 : 100000;
  kvroute::ManualClock clock;
  auto p = kvtest::Factory<TestType>::make(1, clock);
  kvroute::WorkerSet workers;
  kvroute::LoadTracker load;
  std::vector<kvroute::WorkerSpec> specs;
  for (int i = 0; i < kWorkers; ++i) specs.push_back({.url = "http://w" + std::to_string(i)});
  auto ids = workers.add(specs);
  REQUIRE(ids.ok());
  REQUIRE(ids->size() == static_cast<std::size_t>(kWorkers));
  auto snap = workers.snapshot();
  for (kvroute::WorkerId id : *ids) {
    load.reserve(id);
    if (const kvroute::Worker* w = snap->find(id)) kvroute::notify_worker_added(*p, *w);
  }
  const kvroute::Header key[] = {{"x-smg-routing-key", "session"}};
  for (int i = 0; i < 20; ++i) {
    const kvroute::Decision d = kvroute::select_worker(
        *p, {.text = "hello " + std::to_string(i), .headers = key}, *snap, load);
    REQUIRE(d);
    REQUIRE(snap->find(d.worker->id) == d.worker);
  }
}

TEST_CASE("hostile: duplicate URLs and unknown ids through Router are errors, not state") {
  kvroute::Router<kvroute::CacheAware> router;
  auto a = router.add_worker({.url = "http://a:1"});
  REQUIRE(a.ok());
  CHECK(router.add_worker({.url = "http://a:1"}).status().code() ==
        absl::StatusCode::kAlreadyExists);
  const std::vector<kvroute::WorkerSpec> batch = {{.url = "http://b:1"}, {.url = "http://b:1"}};
  CHECK(router.add_workers(batch).status().code() == absl::StatusCode::kAlreadyExists);
  CHECK(router.workers().snapshot()->size() == 1);
  CHECK(router.remove_worker(kvroute::WorkerId{12345}).code() == absl::StatusCode::kNotFound);
  CHECK(router.set_healthy(kvroute::WorkerId{12345}, false).code() == absl::StatusCode::kNotFound);
  CHECK(router.remove_worker(kvroute::WorkerId{}).code() == absl::StatusCode::kNotFound);
  // Guards for unknown ids are inert.
  { auto g = router.load().dispatch(kvroute::WorkerId{99999}); }
  CHECK(router.load().in_flight(kvroute::WorkerId{99999}) == 0);
  kvroute::Selection s = router.select({.text = "x"});
  REQUIRE(s);
  CHECK(s.worker().id == *a);
}

TEST_CASE("hostile: tree tenant ids past kMaxTenantId are rejected") {
  kvroute::ApproxRadixTree tree;
  CHECK(tree.insert("abc", kvroute::kMaxTenantId + 1).status ==
        kvroute::InsertStatus::kInvalidTenant);
  CHECK(tree.insert("abc", kvroute::kNoTenant).status == kvroute::InsertStatus::kInvalidTenant);
  CHECK(tree.tenant_count() == 0);
  CHECK_FALSE(tree.remove_tenant(kvroute::kNoTenant));
  CHECK(tree.evict_tenant(kvroute::kNoTenant, 0).claims == 0);
  CHECK_FALSE(tree.match_for_tenant("abc", kvroute::kNoTenant).found);
}

// Hand-built Options skip parse_policy_flags' validation (which rejects these
// values with a Status, see config tests): the policy must still choose a
// healthy worker.
TEST_CASE("hostile: NaN, negative and huge hand-built options still route") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  kvtest::Cluster c(4);
  c.set_load(0, 100);
  for (double v : {nan, -1.0, -inf, inf, 1e308, 0.0}) {
    INFO("value " << v);
    kvroute::CacheAware ca(kvroute::CacheAware::Options{
        .cache_threshold = v,
        .balance_abs_threshold = std::numeric_limits<std::uint64_t>::max(),
        .balance_rel_threshold = v,
        .eviction_interval = std::chrono::nanoseconds::min(),
        .max_tree_size = v < 0 ? 0 : std::numeric_limits<std::uint64_t>::max()});
    kvroute::ConsistentHashing ch(kvroute::ConsistentHashing::Options{.bounded_load_factor = v});
    kvroute::PrefixHash ph(kvroute::PrefixHash::Options{
        .prefix_token_count = v < 0 ? 1 : std::numeric_limits<std::size_t>::max(),
        .load_factor = v});
    kvroute::Bucket bu(kvroute::Bucket::Options{
        .balance_abs_threshold = 0,
        .balance_rel_threshold = v,
        .adjust_interval =
            std::chrono::nanoseconds(v < 0 ? 1 : std::numeric_limits<std::int64_t>::max()),
        .initial_max_length = v < 0 ? 0 : std::numeric_limits<std::uint64_t>::max()});
    const kvroute::Header key[] = {{"x-smg-routing-key", "s"}};
    for (int i = 0; i < 10; ++i) {
      const std::string text = "prompt " + std::to_string(i % 3);
      const kvroute::RequestView r{.text = text, .headers = key};
      routes(ca, c, r);
      routes(ch, c, r);
      routes(ph, c, r);
      routes(bu, c, r);
      ca.maintain();
      bu.maintain();
    }
  }
}

}  // namespace
