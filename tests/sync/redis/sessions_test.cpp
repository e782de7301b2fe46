// Three router replicas behind a round-robin front, sharing state through
// a real redis-server: multi-turn sessions keep their cache affinity about
// as well as with one router, and much better than unsynced replicas. Each
// turn waits until the replicas are in sync (as turns of a chat are seconds
// apart); the figures are printed.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "sync/redis/node.hpp"
#include "sync/redis/redis_server.hpp"

namespace {

using kvroute_test::eventually;
using kvroute_test::Node;
using kvroute_test::text_of;

constexpr int kSessions = 13;  // not a multiple of 3: turns move between replicas
constexpr int kTurns = 6;

// Turn `k` of session `s`: a prompt of its own, then one reply per turn.
std::string turn_text(int s, int k) {
  std::string t = text_of(static_cast<std::uint64_t>(s), 800);
  for (int i = 1; i <= k; ++i) t += text_of(static_cast<std::uint64_t>(1000 * s + i), 300);
  return t;
}

// Of the turns after the first, the share routed as a cache hit to the
// worker of the session's previous turn. `route(turn index, text)` returns
// the selection.
template <class Route>
double affinity(Route&& route) {
  std::vector<std::string> last(static_cast<std::size_t>(kSessions));
  int hits = 0, later = 0;
  for (int k = 0; k < kTurns; ++k) {
    for (int s = 0; s < kSessions; ++s) {
      const kvroute::Selection sel = route(k * kSessions + s, turn_text(s, k));
      REQUIRE(sel);
      std::string& prev = last[static_cast<std::size_t>(s)];
      if (k > 0) {
        ++later;
        hits += sel.worker().url == prev && sel.decision.branch == kvroute::Branch::kCacheHit;
      }
      prev = sel.worker().url;
    }
  }
  return static_cast<double>(hits) / later;
}

// Every change emitted was sent, and every replica applied (or ignored)
// every other replica's.
bool in_sync(const std::vector<std::unique_ptr<Node>>& nodes) {
  std::uint64_t sent = 0;
  for (const auto& n : nodes) {
    const auto st = n->stats();
    if (n->outbox.accepted() != st.changes_sent) return false;
    sent += st.changes_sent;
  }
  for (const auto& n : nodes) {
    const auto st = n->stats();
    if (st.changes_applied + st.changes_ignored != sent - st.changes_sent) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("redis sessions: three synced replicas keep one router's affinity", "[redis]") {
  kvroute_test::RedisServer redis;
  KVROUTE_REQUIRE_REDIS(redis);

  kvroute_test::RedisRouter single;
  for (const std::string& u : kvroute_test::kWorkerUrls)
    REQUIRE(single.add_worker({.url = u}).ok());
  const double one =
      affinity([&](int, const std::string& t) { return single.select({.text = t}); });

  auto replicas = [&](bool synced) {
    std::vector<std::unique_ptr<Node>> nodes;
    for (int i = 0; i < 3; ++i) {
      std::vector<std::string> urls = kvroute_test::kWorkerUrls;
      std::rotate(urls.begin(), urls.begin() + i, urls.end());  // other ids on each
      auto o = kvroute_test::fast_options("r" + std::to_string(i), redis.url());
      o.key_prefix = synced ? "synced" : "alone";
      nodes.push_back(std::make_unique<Node>(o, urls));
      if (synced) nodes.back()->start();
    }
    return affinity([&](int i, const std::string& t) {
      if (synced) REQUIRE(eventually([&] { return in_sync(nodes); }));
      return nodes[static_cast<std::size_t>(i % 3)]->router.select({.text = t});
    });
  };
  const double synced = replicas(true);
  const double alone = replicas(false);
  std::printf("redis sessions: affinity one router %.3f, 3 replicas synced %.3f, unsynced %.3f\n",
              one, synced, alone);
  CHECK(one > 0.9);
  CHECK(synced >= 0.95 * one);
  CHECK(alone < 0.6);
}
