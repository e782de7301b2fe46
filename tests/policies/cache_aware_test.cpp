// cache_aware: the gateway's behaviours (spec 6.2) and the flaws we fixed.
#include "kvroute/policies/cache_aware.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/cluster.hpp"

using kvroute::Branch;
using kvroute::CacheAware;
using kvtest::Cluster;

namespace {
CacheAware::Options no_eviction(CacheAware::Options o = {}) {
  o.eviction_interval = std::chrono::nanoseconds(0);
  return o;
}
// Exact recency (the default keeps it in steps of 64 stamps): for the tests
// that tell requests a single stamp apart.
CacheAware::Options exact_recency(CacheAware::Options o = {}) {
  o = no_eviction(o);
  o.recency_shift = 0;
  return o;
}
}  // namespace

// 6.2.1 balanced_load (the gateway's test uses threshold 0.5).
TEST_CASE("cache_aware 6.2.1: balanced load keeps a text on its worker", "[cache_aware]") {
  Cluster c(2);
  CacheAware ca(no_eviction({.cache_threshold = 0.5}));
  auto first = c.select(ca, {.text = "hello world"});
  REQUIRE(first);
  CHECK(first.branch == Branch::kCacheMiss);  // cold tree
  auto again = c.select(ca, {.text = "hello world"});
  CHECK(again.worker->id == first.worker->id);
  CHECK(again.branch == Branch::kCacheHit);
  CHECK(again.claimed == 11);
  auto prefix = c.select(ca, {.text = "hello"});
  CHECK(prefix.worker->id == first.worker->id);
  CHECK(prefix.branch == Branch::kCacheHit);
}

// 6.2.2 imbalanced_load: (0.5, abs 5, rel 2.0), W0 at 20, W1 at 0.
TEST_CASE("cache_aware 6.2.2: an imbalanced pool goes to the least loaded", "[cache_aware]") {
  Cluster c(2);
  CacheAware ca(no_eviction(
      {.cache_threshold = 0.5, .balance_abs_threshold = 5, .balance_rel_threshold = 2.0}));
  c.set_load(0, 20);
  for (int i = 0; i < 5; ++i) {
    auto d = c.select(ca, {.text = "test"});
    REQUIRE(c.index_of(d) == 1);
    CHECK(d.branch == Branch::kImbalanced);
  }
  // The imbalanced branch still inserts: the text now belongs to W1.
  c.set_load(0, 0);
  CHECK(c.pick(ca, {.text = "test"}) == 1);
}

TEST_CASE("cache_aware: the balance test needs both thresholds, strictly", "[cache_aware]") {
  CacheAware::Options o = no_eviction();  // abs 64, rel 1.5
  SECTION("max - min == 64 is balanced") {
    Cluster c(2);
    CacheAware ca(o);
    c.set_load(0, 64);
    CHECK(c.select(ca, {.text = "x"}).branch != Branch::kImbalanced);
  }
  SECTION("max - min == 65 with min 0 is imbalanced") {
    Cluster c(2);
    CacheAware ca(o);
    c.set_load(0, 65);
    auto d = c.select(ca, {.text = "x"});
    CHECK(d.branch == Branch::kImbalanced);
    CHECK(c.index_of(d) == 1);
  }
  SECTION("a large spread under the relative threshold is balanced") {
    Cluster c(2);
    CacheAware ca(o);
    c.set_load(0, 300);
    c.set_load(1, 200);  // 300 <= 1.5 * 200
    CHECK(c.select(ca, {.text = "x"}).branch != Branch::kImbalanced);
  }
  SECTION("unhealthy workers do not count (the gateway counts them)") {
    Cluster c(3);
    CacheAware ca(o);
    c.set_load(2, 500);
    c.set_healthy(2, false);
    CHECK(c.select(ca, {.text = "x"}).branch != Branch::kImbalanced);
  }
}

// 6.2.3 worker_removal.
TEST_CASE("cache_aware 6.2.3: a removed worker's text moves on", "[cache_aware]") {
  Cluster c(2);
  CacheAware ca(no_eviction());
  const int w1 = c.pick(ca, {.text = "test1"});
  c.pick(ca, {.text = "test2"});
  REQUIRE(w1 >= 0);
  c.remove(static_cast<std::size_t>(w1));
  ca.on_worker_removed(c.ids[static_cast<std::size_t>(w1)]);
  const auto* tree = ca.tree("");
  REQUIRE(tree != nullptr);
  CHECK_FALSE(tree->has_tenant(c.ids[static_cast<std::size_t>(w1)].value));
  CHECK(c.pick(ca, {.text = "test1"}) == 1 - w1);
}

// 6.2.4 without_mesh: one worker.
TEST_CASE("cache_aware 6.2.4: a single worker is always chosen", "[cache_aware]") {
  Cluster c(1);
  CacheAware ca(no_eviction());
  for (std::string_view t : {"a", "b", "", "a longer text"}) CHECK(c.pick(ca, {.text = t}) == 0);
}

// 6.2.5 (mesh sync between router replicas) has no counterpart: kvroute
// has no networking inside.
//
// 6.2.6-8: models. The gateway keys trees by the first healthy worker's
// model; kvroute keys them by the request's model. Adapted: the gateway
// folds "" and "unknown" into one tree (a name its workers get when they
// report none); here "" is "no model" and "unknown" a model name like any
// other, so each has its own tree (README, "Differences").
TEST_CASE("cache_aware 6.2.6-8: one tree per request model", "[cache_aware]") {
  Cluster c(0);
  c.add("");         // serves any model
  c.add("llama-3");  // serves llama-3 only
  CacheAware ca(no_eviction());
  CHECK(c.pick(ca, {.text = "hi", .model = ""}) >= 0);
  CHECK(c.pick(ca, {.text = "hi", .model = "llama-3"}) >= 0);
  CHECK(c.pick(ca, {.text = "hi", .model = "unknown"}) == 0);
  REQUIRE(ca.tree("") != nullptr);
  REQUIRE(ca.tree("llama-3") != nullptr);
  REQUIRE(ca.tree("unknown") != nullptr);
  CHECK(ca.tree("llama-3") != ca.tree(""));
  // Removal reaches every tree.
  c.remove(0);
  ca.on_worker_removed(c.ids[0]);
  for (std::string_view m : {"", "llama-3", "unknown"}) {
    CHECK_FALSE(ca.tree(m)->has_tenant(c.ids[0].value));
  }
  CHECK(c.pick(ca, {.text = "hi", .model = "llama-3"}) == 1);
}

TEST_CASE("cache_aware: the match rate must exceed the threshold", "[cache_aware]") {
  Cluster c(2);
  CacheAware ca(no_eviction({.cache_threshold = 0.5}));
  const int owner = c.pick(ca, {.text = "abcde"});
  // "abcde" + 5 other characters: rate 5 / 10 = 0.5, not above 0.5.
  auto at = c.select(ca, {.text = "abcdeXXXXX"});
  CHECK(at.branch == Branch::kCacheMiss);
  // 5 / 9 > 0.5.
  auto above = c.select(ca, {.text = "abcdeYYYY"});
  CHECK(above.branch == Branch::kCacheHit);
  CHECK(c.index_of(above) == owner);
  // Empty text has rate 0.
  CHECK(c.select(ca, {.text = ""}).branch == Branch::kCacheMiss);
}

TEST_CASE("cache_aware: the match rate counts characters, not bytes", "[cache_aware]") {
  Cluster c(2);
  CacheAware ca(no_eviction({.cache_threshold = 0.5}));
  const int owner = c.pick(ca, {.text = "你好世界"});
  // 2 of 3 characters match (rate 0.67); in bytes it would be 6 of 9 too,
  // but with 4 ASCII characters after it, 2/6 = 0.33 < 0.5 < 6/13 bytes...
  auto d = c.select(ca, {.text = "你好呀"});
  CHECK(d.branch == Branch::kCacheHit);
  CHECK(c.index_of(d) == owner);
  CHECK(d.claimed == 2);
  CHECK(c.select(ca, {.text = "你好abcd"}).branch == Branch::kCacheMiss);  // 2/6
}

TEST_CASE("cache_aware: cold and low-match requests spread, never collapse on worker 0",
          "[cache_aware]") {
  // With all loads 0, tie-to-first sends every new prefix to W0 and the tree
  // then keeps it there (the gateway's min-load collapse).
  Cluster c(4);
  CacheAware ca(no_eviction());
  std::vector<int> n(4);
  for (int i = 0; i < 400; ++i) {
    const std::string text =
        std::to_string(kvroute::detail::splitmix64(static_cast<std::uint64_t>(i))) +
        " is a prompt no other request shares";
    auto d = c.select(ca, {.text = text});
    REQUIRE(d.branch == Branch::kCacheMiss);
    ++n[static_cast<std::size_t>(c.index_of(d))];
  }
  for (int x : n) CHECK((x > 60 && x < 140));
}

TEST_CASE("cache_aware: a shared system prompt does not take all traffic", "[cache_aware]") {
  // ai-dynamo/dynamo#737: all traffic to one of 8 instances. Requests held
  // in flight raise that worker's load until the pool is imbalanced.
  Cluster c(8);
  CacheAware ca(no_eviction());
  const std::string system(4000, 's');
  std::vector<kvroute::LoadGuard> guards;
  std::vector<int> n(8);
  for (int i = 0; i < 1200; ++i) {
    const std::string text = system + " question " + std::to_string(i);
    auto d = c.select(ca, {.text = text});
    REQUIRE(d);
    guards.push_back(c.load.dispatch(d.worker->id));
    ++n[static_cast<std::size_t>(c.index_of(d))];
  }
  // abs 64: no worker gets more than ~64 above the least loaded.
  const int mx = *std::max_element(n.begin(), n.end());
  const int mn = *std::min_element(n.begin(), n.end());
  CHECK(mx - mn <= 66);
}

TEST_CASE("cache_aware: an unhealthy matched worker is skipped and keeps its history",
          "[cache_aware]") {
  Cluster c(2);
  CacheAware ca(no_eviction());
  const std::string text = "a long conversation that belongs to one worker";
  const int owner = c.pick(ca, {.text = text});
  REQUIRE(owner >= 0);
  const auto owner_id = c.ids[static_cast<std::size_t>(owner)];
  const std::size_t size_before = ca.tree("")->tenant_size(owner_id.value);
  c.set_healthy(static_cast<std::size_t>(owner), false);
  auto during = c.select(ca, {.text = text});
  CHECK(c.index_of(during) == 1 - owner);
  CHECK(ca.tree("")->tenant_size(owner_id.value) == size_before);  // not erased
  c.set_healthy(static_cast<std::size_t>(owner), true);
  // Both hold the text now; the rule picks among them (least loaded, then
  // most recent): the other worker was used last.
  c.set_load(static_cast<std::size_t>(1 - owner), 1);
  CHECK(c.pick(ca, {.text = text}) == owner);
}

TEST_CASE("cache_aware: the tenant rule picks among the deepest node's tenants", "[cache_aware]") {
  const std::string text = "shared prefix held by several workers";
  SECTION("least loaded, then most recent") {
    Cluster c(3);
    CacheAware ca(exact_recency());
    // Put the text on all three workers (imbalanced routes to the idle one).
    for (std::size_t i = 0; i < 3; ++i) {
      auto* tree = ca.tree("");
      if (tree == nullptr) {
        c.pick(ca, {.text = "warm"});
        tree = ca.tree("");
      }
      REQUIRE(tree->insert(text, c.ids[i].value).ok());
    }
    c.set_load(0, 3);
    c.set_load(1, 1);
    c.set_load(2, 2);
    CHECK(c.pick(ca, {.text = text}) == 1);
    c.set_load(1, 3);
    c.set_load(2, 3);
    // Equal loads: the most recently used; worker 1 was just chosen.
    CHECK(c.pick(ca, {.text = text}) == 1);
  }
  SECTION("most recent") {
    Cluster c(3);
    CacheAware ca(exact_recency({.tenant_rule = CacheAware::TenantRule::kMostRecent}));
    c.pick(ca, {.text = "warm"});
    auto* tree = ca.tree("");
    for (std::size_t i : {2u, 0u, 1u}) REQUIRE(tree->insert(text, c.ids[i].value).ok());
    c.set_load(1, 5);  // load is ignored by this rule (but stays balanced)
    CHECK(c.pick(ca, {.text = text}) == 1);
  }
  SECTION("most recent, with the default recency steps") {
    // The price of steps: within one step of 64 stamps the three claims
    // tie, and a tie goes to the lowest id; a stamp in a later step wins.
    Cluster c(3);
    CacheAware ca(no_eviction({.tenant_rule = CacheAware::TenantRule::kMostRecent}));
    REQUIRE(CacheAware::Options{}.recency_shift == 6);
    c.pick(ca, {.text = "warm"});
    auto* tree = ca.tree("");
    for (std::size_t i : {2u, 0u, 1u}) REQUIRE(tree->insert(text, c.ids[i].value).ok());
    CHECK(c.pick(ca, {.text = text}) == 0);
    for (int i = 0; i < 64; ++i)
      REQUIRE(tree->insert("filler " + std::to_string(i), c.ids[0].value).ok());
    REQUIRE(tree->insert(text, c.ids[2].value).ok());
    CHECK(c.pick(ca, {.text = text}) == 2);
  }
}

TEST_CASE("cache_aware: a match that routes elsewhere does not refresh the matched worker",
          "[cache_aware]") {
  // The gateway's match refreshes the matched worker even when the request
  // then goes to the least loaded one; here only the worker sent the text
  // is stamped, so the tree's recency follows real placements.
  Cluster c(2);
  CacheAware ca(no_eviction());
  const std::string held = "abcdefghij";
  const kvroute::Decision first = c.select(ca, {.text = held});
  REQUIRE(first);
  const auto a = first.worker->id;
  kvroute::ApproxRadixTree* tree = ca.tree("");
  REQUIRE(tree != nullptr);
  const auto before = tree->peek_for_tenant(held, a.value).recency;
  // 10 of 40 characters match A's prefix: a rate of 0.25, under the
  // threshold, so the request goes to the least loaded worker, B (A is busy).
  kvroute::LoadGuard busy = c.load.dispatch(a, {});
  const kvroute::Decision d = c.select(ca, {.text = held + std::string(30, 'z')});
  REQUIRE(d);
  CHECK(d.branch == Branch::kCacheMiss);
  CHECK(d.worker->id != a);
  CHECK(d.claimed == 0);  // B held nothing of it
  CHECK(tree->peek_for_tenant(held, a.value).recency == before);
  CHECK(tree->peek_for_tenant(held, d.worker->id.value).matched == held.size());
}

TEST_CASE("cache_aware: eviction keeps each worker within max_tree_size", "[cache_aware]") {
  SECTION("reactive: never over budget") {
    Cluster c(2);
    CacheAware ca(no_eviction({.max_tree_size = 100}));
    for (int i = 0; i < 200; ++i) {
      const std::string text = "request number " + std::to_string(i) + std::string(30, 'z');
      c.pick(ca, {.text = text});
      for (std::size_t w = 0; w < 2; ++w) {
        REQUIRE(ca.tree("")->tenant_size(c.ids[w].value) <= 100);
      }
    }
  }
  SECTION("periodic: swept by the first selection after the interval") {
    kvroute::ManualClock clock;
    Cluster c(2);
    CacheAware ca({.eviction_interval = std::chrono::seconds(120),
                   .max_tree_size = 100,
                   .reactive_eviction = false,
                   .clock = &clock});
    for (int i = 0; i < 50; ++i) {
      c.pick(ca, {.text = "req " + std::to_string(i) + std::string(30, 'q')});
    }
    std::size_t total = 0;
    for (std::size_t w = 0; w < 2; ++w) total += ca.tree("")->tenant_size(c.ids[w].value);
    CHECK(total > 200);  // over budget until the sweep
    clock.advance(std::chrono::seconds(121));
    c.pick(ca, {.text = "x"});
    for (std::size_t w = 0; w < 2; ++w) {
      CHECK(ca.tree("")->tenant_size(c.ids[w].value) <= 100);
    }
  }
}

TEST_CASE("cache_aware: feedback drops claims the server no longer holds", "[cache_aware]") {
  // One worker, so every request goes to it; the tree is the only question.
  Cluster c(2);
  c.set_healthy(1, false);
  CacheAware ca(exact_recency());
  const std::string old_a = "conversation A: " + std::string(200, 'a');
  const std::string old_b = "conversation B: " + std::string(200, 'b');
  const std::string recent = "conversation C: " + std::string(200, 'c');
  c.pick(ca, {.text = old_a});
  c.pick(ca, {.text = old_b});
  c.pick(ca, {.text = recent});
  const auto w = c.ids[0];
  // Turn 2 of conversation B: the tree claims all of turn 1.
  const std::string b2 = old_b + " and a follow-up";
  auto d = c.select(ca, {.text = b2});
  REQUIRE(d.branch == Branch::kCacheHit);
  CHECK(d.claimed == old_b.size());
  // The server evicted it (reports 4 cached tokens, 16 characters at the
  // default 4 a token: the shared "conversation B: " block was still there).
  auto dropped = ca.report_cached({.text = b2}, d, 4);
  CHECK(dropped.claims > 0);
  // A (older than B) is stale too and no longer attracts traffic...
  c.set_healthy(1, true);
  auto* tree = ca.tree("");
  CHECK(tree->match_for_tenant(old_a, w.value).matched < old_a.size());
  // ...while C (more recent) and B's new turn (just sent) stay.
  CHECK(tree->match_for_tenant(recent, w.value).matched == recent.size());
  CHECK(tree->match_for_tenant(b2, w.value).matched == b2.size());
  // Only the prefix A shares with the kept texts is still claimed...
  CHECK(tree->match_for_tenant(old_a, w.value).matched <= 16);
  // ...so through a selection A's next turn is a miss, C's a hit on w.
  CHECK(c.select(ca, {.text = old_a + " and more"}).branch == Branch::kCacheMiss);
  auto next_c = c.select(ca, {.text = recent + " and more"});
  CHECK(next_c.branch == Branch::kCacheHit);
  CHECK(c.index_of(next_c) == 0);
}

TEST_CASE("cache_aware: feedback with the default recency steps drops the older steps",
          "[cache_aware]") {
  // Steps of 64 stamps (one stamp per routed request): A is stamp 1, in
  // step 0 (stamps 1-63) with the first 62 fillers; the last 6 fillers, B
  // (stamp 70), C (71) and B's turn 2 (72) are in step 1.
  // The server no longer holds B: every step before B's is stale (A goes),
  // B's own step is kept whole (C stays), and B's new turn stays.
  Cluster c(2);
  c.set_healthy(1, false);
  CacheAware ca(no_eviction());
  const std::string a = "conversation A: " + std::string(200, 'a');
  const std::string b = "conversation B: " + std::string(200, 'b');
  const std::string cc = "conversation C: " + std::string(200, 'c');
  c.pick(ca, {.text = a});
  for (int i = 0; i < 68; ++i) c.pick(ca, {.text = "filler " + std::to_string(i)});
  c.pick(ca, {.text = b});
  c.pick(ca, {.text = cc});
  const std::string b2 = b + " and a follow-up";
  const auto d = c.select(ca, {.text = b2});
  REQUIRE(d.branch == Branch::kCacheHit);
  CHECK(ca.report_cached({.text = b2}, d, 4).claims > 0);
  auto* tree = ca.tree("");
  const auto w = c.ids[0].value;
  CHECK(tree->peek_for_tenant(a, w).matched < a.size());
  CHECK(tree->peek_for_tenant("filler 3", w).matched < 8);
  CHECK(tree->peek_for_tenant(cc, w).matched == cc.size());
  CHECK(tree->peek_for_tenant(b2, w).matched == b2.size());
}

TEST_CASE("cache_aware: Options::recency_shift sets the trees' recency step", "[cache_aware]") {
  Cluster c(2);
  CacheAware::Options o = no_eviction();
  o.recency_shift = 3;  // 8 stamps a step
  CacheAware ca(o);
  for (int i = 0; i < 20; ++i) c.pick(ca, {.text = "agent trunk, branch " + std::to_string(i)});
  const auto* tree = ca.tree("");
  REQUIRE(tree != nullptr);
  // One stamp per routed request (match and insert are one descent).
  CHECK(tree->stats().stamps == 20);
  CHECK(tree->now() == 20 / 8);
  // The trunk's claims are written once per step, not by every request.
  CHECK(tree->stats().stamped_claims < 20 * 2);
}

TEST_CASE("cache_aware: feedback_slack_stamps spares claims only a little older", "[cache_aware]") {
  // One stamp per routed request: A is stamp 1, B 2, C 3, C's turn 2 4.
  for (const std::uint64_t slack : {0u, 2u}) {
    INFO("feedback_slack_stamps " << slack);
    Cluster c(2);
    c.set_healthy(1, false);
    CacheAware::Options o = exact_recency();
    o.feedback_slack_stamps = slack;
    CacheAware ca(o);
    const std::string a = "conversation A: " + std::string(200, 'a');
    const std::string b = "conversation B: " + std::string(200, 'b');
    const std::string cc = "conversation C: " + std::string(200, 'c');
    c.pick(ca, {.text = a});
    c.pick(ca, {.text = b});
    c.pick(ca, {.text = cc});
    const std::string c2 = cc + " and a follow-up";
    const auto d = c.select(ca, {.text = c2});
    REQUIRE(d.branch == Branch::kCacheHit);
    CHECK(ca.report_cached({.text = c2}, d, 4).claims > 0);
    auto* tree = ca.tree("");
    const auto w = c.ids[0].value;
    // A (two stamps older than C) goes either way; B (one older) goes only
    // with the exact cut.
    CHECK(tree->peek_for_tenant(a, w).matched < a.size());
    CHECK((tree->peek_for_tenant(b, w).matched == b.size()) == (slack == 2));
    CHECK(tree->peek_for_tenant(c2, w).matched == c2.size());
  }
}

TEST_CASE("cache_aware: with recency steps feedback keeps the missing entry's step",
          "[cache_aware]") {
  // Steps of 4 stamps: A, B, C are stamps 1-3 (step 0), E 4 and D 5 (step
  // 1), D's turn 2 is 6. The missing entry, D, was last used in step 1; E,
  // older than D but in its step, cannot be told apart from newer claims and
  // stays; step 0 goes.
  Cluster c(2);
  c.set_healthy(1, false);
  CacheAware::Options o = no_eviction();
  o.recency_shift = 2;
  CacheAware ca(o);
  std::vector<std::string> texts;
  for (char k : std::string("ABCED")) {
    texts.push_back(std::string("conversation ") + k + ": " + std::string(200, k));
    c.pick(ca, {.text = texts.back()});
  }
  const std::string d2 = texts[4] + " and a follow-up";
  const auto d = c.select(ca, {.text = d2});
  REQUIRE(d.branch == Branch::kCacheHit);
  CHECK(d.ticket == 1);
  CHECK(ca.report_cached({.text = d2}, d, 4).claims > 0);
  auto* tree = ca.tree("");
  const auto w = c.ids[0].value;
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(tree->peek_for_tenant(texts[i], w).matched < texts[i].size());
  }
  CHECK(tree->peek_for_tenant(texts[3], w).matched == texts[3].size());
  CHECK(tree->peek_for_tenant(d2, w).matched == d2.size());
}

TEST_CASE("cache_aware: feedback within the rounding slack changes nothing", "[cache_aware]") {
  Cluster c(1);
  CacheAware ca(exact_recency());
  const std::string other = "another conversation: " + std::string(300, 'o');
  const std::string t = "the conversation: " + std::string(1000, 't');
  c.pick(ca, {.text = other});
  c.pick(ca, {.text = t});
  auto d = c.select(ca, {.text = t + " next"});
  REQUIRE(d.claimed == t.size());
  // (tenant_size is read without touching recency; a match would refresh
  // the claims it reads.)
  const std::size_t size = ca.tree("")->tenant_size(c.ids[0].value);
  // The claim is 1018 characters, 254.5 tokens at the default 4 a token;
  // 5% of that is 12.7 < 16: a report up to 16 tokens short is rounding
  // (kvroute::FeedbackTolerance).
  CHECK(ca.report_cached({.text = t}, d, 239).claims == 0);
  CHECK(ca.tree("")->tenant_size(c.ids[0].value) == size);
  // 16.5 short is an eviction: the older conversation goes.
  CHECK(ca.report_cached({.text = t}, d, 238).claims > 0);
  CHECK(ca.tree("")->tenant_size(c.ids[0].value) < size);
  CHECK(ca.tree("")->match_for_tenant(other, c.ids[0].value).matched < other.size());
}

TEST_CASE("cache_aware: feedback that confirms the claim changes nothing", "[cache_aware]") {
  Cluster c(1);
  CacheAware ca(no_eviction());
  const std::string t = "some prompt text";
  c.pick(ca, {.text = t});
  auto d = c.select(ca, {.text = t + " more"});
  REQUIRE(d.claimed == t.size());
  const std::uint64_t claimed_tokens = d.claimed / 4;  // the default 4 characters a token
  CHECK(ca.report_cached({.text = t}, d, claimed_tokens).claims == 0);
  CHECK(ca.report_cached({.text = t}, d, claimed_tokens + 50).claims == 0);
  CHECK(ca.report_cached({.text = t}, kvroute::Decision{}, 0).claims == 0);
  CHECK(ca.tree("")->match_for_tenant(t, c.ids[0].value).matched == t.size());
}

TEST_CASE("cache_aware: concurrent selection, removal and maintenance",
          "[cache_aware][concurrency]") {
  kvroute::ManualClock clock;
  kvroute::WorkerSet ws;
  kvroute::LoadTracker load;
  std::vector<kvroute::WorkerId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(*ws.add({.url = "http://w" + std::to_string(i)}));
  CacheAware ca(
      {.eviction_interval = std::chrono::seconds(1), .max_tree_size = 2000, .clock = &clock});
  std::atomic<int> bad{0};
  std::vector<std::thread> th;
  for (int t = 0; t < 3; ++t) {
    th.emplace_back([&, t] {
      for (int i = 0; i < 600; ++i) {
        const std::string text = "system prompt " + std::to_string(i % 13) + " user " +
                                 std::to_string((i * 31 + t) % 97);
        auto snap = ws.snapshot();
        auto d = kvroute::select_worker(ca, {.text = text}, *snap, load);
        if (d && (snap->find(d.worker->id) == nullptr || !d.worker->healthy)) bad++;
        if (d) auto g = load.dispatch(d.worker->id);
        if (i % 50 == 0) clock.advance(std::chrono::milliseconds(500));
      }
    });
  }
  th.emplace_back([&] {
    for (int k = 0; k < 30; ++k) {
      ws.set_healthy(ids[static_cast<std::size_t>(k % 4)], k % 2 == 0).IgnoreError();
      if (k == 10) {
        REQUIRE(ws.remove(ids[3]).ok());
        ca.on_worker_removed(ids[3]);
      }
      ca.maintain();
      std::this_thread::yield();
    }
  });
  for (auto& x : th) x.join();
  CHECK(bad.load() == 0);
  ca.maintain();
  CHECK_FALSE(ca.tree("")->has_tenant(ids[3].value));
  for (std::size_t i = 0; i < 3; ++i) CHECK(ca.tree("")->tenant_size(ids[i].value) <= 2000);
}

// max_models: a client naming ever new models cannot grow the trees without
// bound; the least recently used model's tree goes.
TEST_CASE("cache_aware: max_models keeps the most recently used models' trees", "[cache_aware]") {
  Cluster c(2);
  CacheAware::Options o = no_eviction();
  o.max_models = 3;
  CacheAware ca(o);
  REQUIRE(c.pick(ca, {.text = "keep me around", .model = "m0"}) >= 0);
  for (int i = 1; i <= 9; ++i) {
    const std::string m = "m" + std::to_string(i);
    REQUIRE(c.pick(ca, {.text = "text of " + m, .model = m}) >= 0);
    // m0 is used between every two new models, so it is never the oldest.
    REQUIRE(c.pick(ca, {.text = "keep me around", .model = "m0"}) >= 0);
    CHECK(ca.models().size() <= 3);
  }
  const std::vector<std::string> models = ca.models();
  CHECK(std::set<std::string>(models.begin(), models.end()) ==
        std::set<std::string>{"m0", "m8", "m9"});
  CHECK(ca.dropped_models() == 7);
  CHECK(ca.tree("m1") == nullptr);
  // m0's history survived: its text is still a cache hit.
  CHECK(c.select(ca, {.text = "keep me around", .model = "m0"}).branch == Branch::kCacheHit);
  // A dropped model starts afresh.
  CHECK(c.select(ca, {.text = "text of m1", .model = "m1"}).branch != Branch::kCacheHit);
  CHECK(ca.tree("m1") != nullptr);
}

TEST_CASE("cache_aware: max_models 0 keeps every model", "[cache_aware]") {
  Cluster c(1);
  CacheAware ca(no_eviction());
  for (int i = 0; i < 50; ++i) c.pick(ca, {.text = "x", .model = "m" + std::to_string(i)});
  CHECK(ca.models().size() == 50);
  CHECK(ca.dropped_models() == 0);
}

TEST_CASE("cache_aware: a dropped tree stays valid for those still using it",
          "[cache_aware][concurrency]") {
  Cluster c(3);
  CacheAware::Options o = no_eviction();
  o.max_models = 2;
  CacheAware ca(o);
  auto snap = c.workers.snapshot();
  std::atomic<int> failures{0};  // Catch's assertions are not thread-safe
  std::vector<std::thread> ts;
  for (int t = 0; t < 3; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const std::string model = "model-" + std::to_string((t * 13 + i) % 7);
        const std::string text = "text " + std::to_string(i % 11);
        const kvroute::RequestView r{.text = text, .model = model};
        const kvroute::Decision d = kvroute::select_worker(ca, r, *snap, c.load);
        if (!d) ++failures;
        ca.report_cached(r, d, 0);
        if (auto tree = ca.shared_tree(model); tree && tree->stats().nodes < 1) ++failures;
      }
    });
  }
  ts.emplace_back([&] {
    for (int i = 0; i < 100; ++i) ca.maintain();
  });
  for (auto& th : ts) th.join();
  CHECK(failures.load() == 0);
  CHECK(ca.models().size() <= 2);
  CHECK(ca.dropped_models() > 0);
}
