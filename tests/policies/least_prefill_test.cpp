// least_prefill: least predicted prefill work from the tree's per-worker
// match and the router's queued uncached tokens, with feedback.
#include "kvroute/policies/least_prefill.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kvroute/sync/change.hpp"
#include "support/cluster.hpp"

using kvroute::ApproxRadixTree;
using kvroute::Branch;
using kvroute::LeastPrefill;
using kvroute::LoadGuard;
using kvtest::Cluster;

namespace {
LeastPrefill::Options opts(double queue_weight = 1.0) {
  return {.chars_per_token = 1.0,
          .queue_weight = queue_weight,
          .eviction_interval = std::chrono::nanoseconds(0)};
}

// The feedback tests' start: an older conversation, then `req` routed twice;
// the second decision, which claims all of `req`'s text.
constexpr std::string_view kOldText = "an older conversation";
kvroute::Decision route_older_then_twice(Cluster& c, LeastPrefill& lp,
                                         const kvroute::RequestView& req) {
  c.select(lp, {.text = kOldText});
  c.select(lp, req);
  return c.select(lp, req);
}
}  // namespace

static_assert(kvroute::Policy<LeastPrefill>);

TEST_CASE("least_prefill: a prefix goes back to the worker that holds it", "[least_prefill]") {
  Cluster c(4);
  LeastPrefill lp(opts());
  const std::string text(1000, 'a');
  const kvroute::Decision first = c.select(lp, {.text = text});
  REQUIRE(first);
  CHECK(first.branch == Branch::kCacheMiss);
  CHECK(first.claimed == 0);
  for (int i = 0; i < 5; ++i) {
    const kvroute::Decision d = c.select(lp, {.text = text + "b" + std::to_string(i)});
    CHECK(d.worker->id == first.worker->id);
    CHECK(d.branch == Branch::kCacheHit);
    CHECK(d.claimed >= 1000);
  }
  CHECK(lp.name() == "least_prefill");
}

TEST_CASE("least_prefill: queued work outweighs a short match", "[least_prefill]") {
  Cluster c(2);
  LeastPrefill lp(opts());
  const std::string text(100, 'x');
  const kvroute::Decision first = c.select(lp, {.text = text});
  const int home = c.index_of(first);
  // 1000 queued tokens at home vs 100 uncached elsewhere: move.
  LoadGuard g = c.load.dispatch(first.worker->id, {.tokens = 1000});
  const kvroute::Decision d = c.select(lp, {.text = text});
  CHECK(c.index_of(d) == 1 - home);
  CHECK(d.branch == Branch::kLeastPrefill);
  // 50 queued tokens at home vs 100 uncached elsewhere: stay.
  g.set_tokens(50);
  LeastPrefill lp2(opts());
  const kvroute::Decision f2 = c.select(lp2, {.text = text});
  LoadGuard g2 = c.load.dispatch(f2.worker->id, {.tokens = 50});
  g.release();
  const kvroute::Decision d2 = c.select(lp2, {.text = text});
  CHECK(d2.worker->id == f2.worker->id);
}

TEST_CASE("least_prefill: branches name why the worker was chosen", "[least_prefill]") {
  Cluster c(2);
  LeastPrefill lp(opts());
  const std::string text(100, 'x');
  const kvroute::Decision first = c.select(lp, {.text = text});
  LoadGuard g = c.load.dispatch(first.worker->id, {.tokens = 1000});
  const kvroute::Decision moved = c.select(lp, {.text = text + "y"});
  CHECK(moved.worker->id != first.worker->id);
  CHECK(moved.branch == Branch::kLeastPrefill);  // a longer match lost on queued work
  CHECK(moved.claimed == 0);
}

TEST_CASE("least_prefill: queue_weight discounts queued work", "[least_prefill]") {
  Cluster c(2);
  LeastPrefill lp(opts(0.05));
  const std::string text(100, 'x');
  const kvroute::Decision first = c.select(lp, {.text = text});
  LoadGuard g = c.load.dispatch(first.worker->id, {.tokens = 1000});  // 0.05 x 1000 = 50 < 100
  CHECK(c.select(lp, {.text = text}).worker->id == first.worker->id);
}

TEST_CASE("least_prefill: ties spread over the workers", "[least_prefill]") {
  Cluster c(4);
  LeastPrefill lp(opts());
  std::set<int> seen;
  // Distinct first characters: no worker matches anything, all tie.
  for (char ch = 'A'; ch <= 'Z'; ++ch)
    seen.insert(c.pick(lp, {.text = std::string(1, ch) + "-text"}));
  CHECK(seen.size() == 4);
}

TEST_CASE("least_prefill: never chooses an unhealthy worker", "[least_prefill]") {
  Cluster c(3);
  LeastPrefill lp(opts());
  const std::string text(200, 'q');
  const kvroute::Decision first = c.select(lp, {.text = text});
  c.set_healthy(static_cast<std::size_t>(c.index_of(first)), false);
  for (int i = 0; i < 20; ++i) {
    const kvroute::Decision d = c.select(lp, {.text = text});
    REQUIRE(d);
    CHECK(d.worker->healthy);
    CHECK(d.worker->id != first.worker->id);
  }
  c.set_healthy(0, false);
  c.set_healthy(1, false);
  c.set_healthy(2, false);
  CHECK(c.select(lp, {.text = text}).branch == Branch::kNoHealthyWorkers);
}

TEST_CASE("least_prefill: equal seeds give equal choices", "[least_prefill]") {
  Cluster c(5);
  LeastPrefill a({.seed = 7}), b({.seed = 7});
  for (int i = 0; i < 50; ++i) {
    const std::string t =
        "req-" + std::to_string(i % 13) + std::string(static_cast<std::size_t>(i), 'z');
    CHECK(c.pick(a, {.text = t}) == c.pick(b, {.text = t}));
  }
}

TEST_CASE("least_prefill: feedback corrects the tree and the queued work", "[least_prefill]") {
  Cluster c(1);
  LeastPrefill lp(opts());
  const std::string text(400, 'k');
  const kvroute::RequestView req{.text = text};
  const kvroute::Decision d = route_older_then_twice(c, lp, req);
  REQUIRE(d.claimed == 400);
  CHECK(lp.predicted_tokens(req, d) == 0);
  CHECK(lp.predicted_tokens(req, d, 450) == 50);
  LoadGuard g = c.load.dispatch(d.worker->id, {.tokens = lp.predicted_tokens(req, d)});
  // The server had evicted it: nothing cached. Every claim of the worker
  // older than the one used is stale (this request's own text was just
  // placed again, so it stays).
  const kvroute::EvictResult dropped = lp.report_cached(req, d, 0, -1, &g);
  CHECK(dropped.claims > 0);
  CHECK(g.tokens() == 400);
  CHECK(c.load.in_flight_tokens(d.worker->id) == 400);
  CHECK(lp.tree("")->match_for_tenant(kOldText, d.worker->id.value).matched == 0);
  CHECK(lp.tree("")->match_for_tenant(text, d.worker->id.value).matched == 400);
  // A report of as much as claimed drops nothing but still sets the queue.
  const kvroute::Decision again = c.select(lp, req);
  CHECK(lp.report_cached(req, again, again.claimed, 500, &g).claims == 0);
  CHECK(g.tokens() == 100);
  // A decision without a worker is ignored.
  CHECK(lp.report_cached(req, kvroute::Decision::none(Branch::kNoWorkers), 0).claims == 0);
}

TEST_CASE("least_prefill: among replicas, feedback corrects the queued work only",
          "[least_prefill][sync]") {
  Cluster c(1);
  LeastPrefill lp(opts());
  // Another replica's placement arrives: this tree no longer sees every
  // request its worker gets, so its recency is not the server's LRU order.
  const kvroute::sync::Applied applied =
      lp.apply_change(kvroute::sync::Placement{"", c.url(0), 0, {1, 2, 3}}, *c.workers.snapshot());
  REQUIRE(applied == kvroute::sync::Applied::kApplied);
  const std::string text(400, 'k');
  const kvroute::RequestView req{.text = text};
  const kvroute::Decision d = route_older_then_twice(c, lp, req);
  REQUIRE(d.claimed == 400);
  LoadGuard g = c.load.dispatch(d.worker->id, {.tokens = lp.predicted_tokens(req, d)});
  // The same report as above: the queue learns it, the tree is left as it was.
  CHECK(lp.report_cached(req, d, 0, -1, &g).claims == 0);
  CHECK(g.tokens() == 400);
  CHECK(lp.tree("")->match_for_tenant(kOldText, d.worker->id.value).matched == kOldText.size());
}

TEST_CASE("least_prefill: predicted tokens saturate instead of overflowing", "[least_prefill]") {
  // A tiny chars_per_token (valid: > 0) makes any text more tokens than an
  // int64 holds; the prediction used to convert that double unchecked
  // (undefined behaviour; INT64_MIN on x86, a negative queue).
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  Cluster c(1);
  LeastPrefill lp({.chars_per_token = std::numeric_limits<double>::denorm_min()});
  const std::string text = "abc";
  const kvroute::RequestView req{.text = text};
  const kvroute::Decision first = c.select(lp, req);
  REQUIRE(first.claimed == 0);
  CHECK(lp.predicted_tokens(req, first) == kMax);
  // Both quotients overflow; what the claim leaves does not.
  const kvroute::Decision held = c.select(lp, req);
  REQUIRE(held.claimed == 3);
  CHECK(lp.predicted_tokens(req, held) == 0);
  kvroute::Decision part = held;
  part.claimed = 2;
  CHECK(lp.predicted_tokens(req, part) == kMax);
  part.claimed = std::numeric_limits<std::uint64_t>::max();  // more than the text
  CHECK(lp.predicted_tokens(req, part) == 0);
  // A reported prompt size at the int64 limit rounds to 2^63 as a double.
  LeastPrefill plain(opts());
  CHECK(plain.predicted_tokens(req, first, kMax) == kMax);
  CHECK(plain.predicted_tokens(req, held, kMax) == kMax);
  // report_cached's guard update goes through the same conversion.
  LoadGuard g = c.load.dispatch(first.worker->id, {.tokens = 1});
  lp.report_cached(req, first, 0, -1, &g);
  CHECK(g.tokens() == kMax);
}

TEST_CASE("least_prefill: looking at a worker does not refresh its claims", "[least_prefill]") {
  // Worker A holds an old prefix; B holds the current one. Every request
  // matches A's old prefix partly (A is looked at) but goes to B. A's claim
  // on the old prefix must stay A's least recent: a drop at A's newer entry
  // takes it, as A's server (LRU, never asked for it again) has.
  Cluster c(2);
  LeastPrefill lp(opts(0.0));
  const std::string old_text = std::string(300, 'o') + std::string(100, 'p');
  const kvroute::Decision da = c.select(lp, {.text = old_text});
  const kvroute::WorkerId a = da.worker->id;
  const kvroute::WorkerId b = c.ids[c.index_of(da) == 0 ? 1 : 0];
  ApproxRadixTree* tree = lp.tree("");
  REQUIRE(tree != nullptr);
  const std::string newer = "a newer entry of A";
  tree->insert(newer, a.value);
  tree->insert(std::string(300, 'o') + std::string(200, 'q'), b.value);
  for (int i = 0; i < 10; ++i) {
    const kvroute::Decision d =
        c.select(lp, {.text = std::string(300, 'o') + std::string(200, 'q') + std::to_string(i)});
    CHECK(d.worker->id == b);
  }
  const kvroute::TenantMatch at_newer = tree->peek_for_tenant(newer, a.value);
  tree->drop_older_than(a.value, at_newer.recency);
  CHECK(tree->peek_for_tenant(old_text, a.value).matched == 0);
  CHECK(tree->peek_for_tenant(newer, a.value).matched == newer.size());
}

TEST_CASE("least_prefill: removed workers are forgotten", "[least_prefill]") {
  Cluster c(2);
  LeastPrefill lp(opts());
  const kvroute::Decision first = c.select(lp, {.text = "hello world"});
  const kvroute::WorkerId gone = first.worker->id;
  c.remove(static_cast<std::size_t>(c.index_of(first)));
  lp.on_worker_removed(gone);
  CHECK_FALSE(lp.tree("")->has_tenant(gone.value));
  const kvroute::Decision d = c.select(lp, {.text = "hello world"});
  REQUIRE(d);
  CHECK(d.worker->id != gone);
  lp.maintain();
}

TEST_CASE("least_prefill: concurrent selections stay consistent", "[least_prefill][concurrency]") {
  Cluster c(4);
  LeastPrefill lp(opts());
  auto snap = c.workers.snapshot();
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::string text = "session-" + std::to_string((t * 7 + i) % 10) +
                                 std::string(static_cast<std::size_t>(i % 50), 'm');
        const kvroute::Decision d = kvroute::select_worker(lp, {.text = text}, *snap, c.load);
        LoadGuard g =
            c.load.dispatch(d.worker->id, {.tokens = lp.predicted_tokens({.text = text}, d)});
        lp.report_cached({.text = text}, d, d.claimed / 2, -1, &g);
      }
    });
  }
  for (auto& th : ts) th.join();
  for (auto id : c.ids) CHECK(c.load.in_flight_tokens(id) == 0);
}

TEST_CASE("least_prefill: by default the queue weight adapts", "[least_prefill]") {
  CHECK(LeastPrefill::Options{}.queue_weight < 0);
  CHECK(LeastPrefill::Options{}.kv_capacity_tokens == 0);
}

TEST_CASE("least_prefill: behind long queues the adaptive rule keeps the cache hit",
          "[least_prefill]") {
  // A holds the first 50 characters of the request; B holds nothing. With
  // both queues long, moving to B adds 50 more tokens of prefill ahead of
  // every request that will queue there: the adaptive rule stays on A where
  // a fixed weight of 1 (10 more tokens queued on A) moves. With short
  // queues it moves like the fixed weight.
  const std::string text = std::string(50, 'h') + std::string(50, 'n');
  for (const std::int64_t base : {std::int64_t{10'000}, std::int64_t{0}}) {
    INFO("queued on B: " << base);
    Cluster c(2);
    LeastPrefill adaptive({.chars_per_token = 1.0});
    LeastPrefill fixed(opts(1.0));
    for (LeastPrefill* lp : {&adaptive, &fixed}) {
      c.select(*lp, {.text = "warm-up"});  // creates the tree
      lp->tree("")->insert(std::string(50, 'h'), c.ids[0].value);
    }
    LoadGuard qa = c.load.dispatch(c.ids[0], {.tokens = base + 60});
    LoadGuard qb = c.load.dispatch(c.ids[1], {.tokens = base});
    const int fixed_pick = c.index_of(c.select(fixed, {.text = text}));
    const int adaptive_pick = c.index_of(c.select(adaptive, {.text = text}));
    CHECK(fixed_pick == 1);
    CHECK(adaptive_pick == (base > 0 ? 0 : 1));
  }
}

TEST_CASE("least_prefill: a full cache that is reused makes a miss cost more", "[least_prefill]") {
  // Ten requests for the same 400 characters on A make the observed hit
  // rate high. B holds 1000 other characters. With 500 tokens queued on A,
  // a miss on B is cheaper unless B's cache is full (pool of 400 tokens):
  // then the 410 tokens placed there evict as many that requests reuse.
  const std::string x(400, 'x');
  int picks[2] = {-1, -1};
  for (const std::int64_t pool : {std::int64_t{400}, std::int64_t{1'000'000'000}}) {
    Cluster c(2);
    LeastPrefill lp({.chars_per_token = 1.0, .kv_capacity_tokens = pool});
    const kvroute::Decision first = c.select(lp, {.text = x});
    const int a = c.index_of(first);
    for (int i = 0; i < 9; ++i) REQUIRE(c.index_of(c.select(lp, {.text = x})) == a);
    lp.tree("")->insert(std::string(1000, 'o'), c.ids[static_cast<std::size_t>(1 - a)].value);
    LoadGuard g = c.load.dispatch(first.worker->id, {.tokens = 500});
    const int pick = c.index_of(c.select(lp, {.text = x + std::string(10, 'y')}));
    picks[pool == 400 ? 0 : 1] = pick == a ? 0 : 1;  // 0: stayed on A
  }
  CHECK(picks[0] == 0);  // full caches: stay
  CHECK(picks[1] == 1);  // room everywhere: move
}

TEST_CASE("least_prefill: the reuse ages give the share at an age or older", "[least_prefill]") {
  kvroute::detail::AgeHistogram h;
  CHECK(h.share_from(0) == 0);  // nothing recorded
  h.add(0, 1);
  h.add(3, 1);    // bucket [2, 4)
  h.add(100, 2);  // bucket [64, 128)
  h.add(5, 0);    // no weight: ignored
  CHECK(h.share_from(0) == 1);
  CHECK(h.share_from(1) == Approx(0.75));
  CHECK(h.share_from(2) == Approx(0.75));  // all of [2, 4)
  CHECK(h.share_from(4) == Approx(0.5));
  CHECK(h.share_from(64) == Approx(0.5));
  CHECK(h.share_from(90) == Approx(0.5 * (1 - std::log2(90.0 / 64))));  // part of [64, 128)
  CHECK(h.share_from(128) == 0);
  CHECK(h.share_from(std::numeric_limits<std::uint64_t>::max()) == 0);
  // Every 1024 adds halve what came before: the recent ages dominate.
  for (int i = 0; i < 4096; ++i) h.add(1000, 1);
  CHECK(h.share_from(512) > 0.999);
}

TEST_CASE("least_prefill: a miss goes where the evicted prefixes are no longer reused",
          "[least_prefill]") {
  // Every worker's cache is full (pools of 100 tokens, 200 characters
  // each). Then one text is reused over and over on one worker while a
  // second gets fresh text in between: the traffic reuses prefixes at age 1
  // (in the tree's stamps). The third's pool holds only what was placed
  // before. A new text costs the same everywhere but for what its placement
  // evicts: prefixes as young as the reuse (live) on the first two,
  // prefixes older than any reuse (dead) on the third, which gets it,
  // whatever the seed.
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    INFO("seed " << seed);
    Cluster c(3);
    LeastPrefill lp({.chars_per_token = 1.0, .kv_capacity_tokens = 100, .seed = seed});
    c.select(lp, {.text = "warm-up"});  // creates the tree
    ApproxRadixTree* tree = lp.tree("");
    for (const kvroute::WorkerId id : c.ids) tree->insert(std::string(200, 'o'), id.value);
    const std::string x(150, 'x');
    const int reused = c.index_of(c.select(lp, {.text = x}));
    const auto fresh = static_cast<std::size_t>((reused + 1) % 3);
    const int old = (reused + 2) % 3;
    for (int i = 0; i < 20; ++i) {
      tree->insert(std::string(200, 'y') + std::to_string(i), c.ids[fresh].value);
      REQUIRE(c.index_of(c.select(lp, {.text = x})) == reused);
    }
    CHECK(c.index_of(c.select(lp, {.text = std::string(50, 'z')})) == old);
  }
}

TEST_CASE("least_prefill: among equal costs the fewest requests in flight win", "[least_prefill]") {
  // Nothing cached, nothing queued: every worker costs the same. Requests
  // in flight (decoding, holding KV) break the tie; a fixed weight ties at
  // random.
  Cluster c(3);
  c.set_load(0, 5);
  c.set_load(1, 0);
  c.set_load(2, 3);
  LeastPrefill adaptive(LeastPrefill::Options{.chars_per_token = 1.0});
  LeastPrefill fixed(opts(1.0));
  std::set<int> adaptive_picks, fixed_picks;
  for (char ch = 'A'; ch <= 'Z'; ++ch) {
    const std::string t = std::string(1, ch) + "-fresh";
    adaptive_picks.insert(c.pick(adaptive, {.text = t}));
    fixed_picks.insert(c.pick(fixed, {.text = t}));
  }
  CHECK(adaptive_picks == std::set<int>{1});
  CHECK(fixed_picks.size() > 1);
}

TEST_CASE("least_prefill: max_models drops the least recently used model's tree",
          "[least_prefill]") {
  Cluster c(2);
  LeastPrefill::Options o = opts();
  o.max_models = 2;
  LeastPrefill lp(o);
  for (int i = 0; i < 6; ++i) {
    const std::string m = "m" + std::to_string(i);
    REQUIRE(c.select(lp, {.text = "hello " + m, .model = m}));
    REQUIRE(c.select(lp, {.text = "hello again", .model = "hot"}));
    CHECK(lp.models().size() <= 2);
  }
  const std::vector<std::string> models = lp.models();
  CHECK(std::set<std::string>(models.begin(), models.end()) == std::set<std::string>{"hot", "m5"});
  CHECK(lp.dropped_models() == 5);
  CHECK(lp.tree("m0") == nullptr);
  CHECK(c.select(lp, {.text = "hello again", .model = "hot"}).branch == Branch::kCacheHit);
  // Feedback for a decision whose model was dropped since is ignored.
  const kvroute::RequestView r{.text = "hello m0", .model = "m0"};
  REQUIRE(c.select(lp, r));                     // m0 again: drops m5
  const kvroute::Decision d = c.select(lp, r);  // claims what the first placed
  REQUIRE(d.claimed > 0);
  REQUIRE(c.select(lp, {.text = "x", .model = "m9"}));   // drops hot
  REQUIRE(c.select(lp, {.text = "y", .model = "m10"}));  // drops m0
  CHECK(lp.tree("m0") == nullptr);
  CHECK(lp.report_cached(r, d, 0).units == 0);
}
