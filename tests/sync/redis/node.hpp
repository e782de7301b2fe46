// A router replica for the Redis tests: a Router over CacheAware, its
// Outbox, a RedisReplicator wired to both, and FakeSnapshots, a stand-in
// for the policy's snapshots that saves the placements the replica holds
// (its own and those it applied) as a batch and restores them by applying
// them again.
#ifndef KVROUTE_TESTS_SYNC_REDIS_NODE_HPP_
#define KVROUTE_TESTS_SYNC_REDIS_NODE_HPP_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "kvroute/kvroute.hpp"
#include "kvroute/sync/outbox.hpp"
#include "kvroute/sync/redis/replicator.hpp"
#include "kvroute/sync/wire.hpp"
#include "sync/redis/redis_server.hpp"

namespace kvroute_test {

using namespace std::chrono_literals;
using RedisRouter = kvroute::Router<kvroute::CacheAware>;

inline const std::vector<std::string> kWorkerUrls = {"http://w0:8000", "http://w1:8000",
                                                     "http://w2:8000", "http://w3:8000"};

// Intervals short enough for tests to see things happen within a second.
inline kvroute::sync::RedisReplicatorOptions fast_options(std::string replica, std::string url) {
  kvroute::sync::RedisReplicatorOptions o;
  o.url = std::move(url);
  o.replica = std::move(replica);
  o.flush_interval = 20ms;
  o.load_interval = 100ms;
  o.load_ttl = 1000ms;
  o.snapshot_interval = 0ms;
  o.read_block = 50ms;
  o.command_timeout = 1000ms;
  o.connect_timeout = 500ms;
  o.backoff_min = 20ms;
  o.backoff_max = 200ms;
  return o;
}

class FakeSnapshots final : public kvroute::sync::StateSink {
 public:
  explicit FakeSnapshots(kvroute::sync::StateSink& next) : next_(next) {}

  void placed(std::string_view model, std::string_view worker, std::uint32_t first,
              std::span<const std::uint64_t> keys) noexcept override {
    record({std::string(model), std::string(worker), first, {keys.begin(), keys.end()}});
    next_.placed(model, worker, first, keys);
  }
  void forgot(std::string_view model, std::string_view worker, std::uint32_t first,
              std::span<const std::uint64_t> keys) noexcept override {
    next_.forgot(model, worker, first, keys);
  }
  void worker_gone(std::string_view worker) noexcept override { next_.worker_gone(worker); }
  void pinned(std::string_view model, std::string_view key, std::string_view worker,
              std::int64_t stamp, bool reset) noexcept override {
    next_.pinned(model, key, worker, stamp, reset);
  }

  void record(kvroute::sync::Placement p) {
    std::lock_guard<std::mutex> lock(mu_);
    held_[p.model].push_back(std::move(p));
  }

  absl::StatusOr<std::string> save(std::string_view model) {
    kvroute::sync::Batch b{.source = "fake-snapshot"};
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& p : held_[std::string(model)]) b.changes.emplace_back(p);
    return kvroute::sync::encode(b);
  }

  template <class Apply>
  absl::Status restore(std::string_view bytes, Apply&& apply) {
    absl::StatusOr<kvroute::sync::Batch> b = kvroute::sync::decode(bytes);
    if (!b.ok()) return b.status();
    for (const kvroute::sync::Change& c : b->changes) {
      apply(c);
      record(std::get<kvroute::sync::Placement>(c));
    }
    restored_.fetch_add(b->changes.size());
    return absl::OkStatus();
  }

  // Placements restored from snapshots.
  std::size_t restored() const { return restored_.load(); }

 private:
  kvroute::sync::StateSink& next_;
  std::mutex mu_;
  std::map<std::string, std::vector<kvroute::sync::Placement>> held_;
  std::atomic<std::size_t> restored_{0};
};

struct Node {
  // `policy_snaps`: the policy's own snapshots (its trees), as a
  // router saves them, instead of FakeSnapshots.
  Node(kvroute::sync::RedisReplicatorOptions o, std::vector<std::string> urls = kWorkerUrls,
       kvroute::sync::Outbox::Options box = {}, bool policy_snaps = false)
      : outbox(box),
        snapshots(outbox),
        policy_snapshots(policy_snaps),
        replicator(std::move(o), hooks()) {
    for (const std::string& u : urls) REQUIRE(router.add_worker({.url = u}).ok());
    router.policy().set_state_sink(&snapshots);
  }

  kvroute::sync::RedisReplicatorHooks hooks() {
    kvroute::sync::RedisReplicatorHooks h = kvroute::sync::router_hooks(router, outbox);
    auto apply = h.apply;
    h.apply = [this, apply](const kvroute::sync::Change& c) {
      while (hold.load()) std::this_thread::sleep_for(5ms);
      if (const auto* p = std::get_if<kvroute::sync::Placement>(&c)) snapshots.record(*p);
      return apply(c);
    };
    if (policy_snapshots) return h;  // the policy's own, as kvroute_http_router wires them
    h.save = [this](std::string_view model) { return snapshots.save(model); };
    h.restore = [this, apply](std::string_view, std::string_view bytes) {
      return snapshots.restore(bytes, apply);
    };
    return h;
  }

  // Starts the replicator and waits until it read what Redis held.
  void start() {
    REQUIRE(replicator.start().ok());
    REQUIRE(replicator.wait_until_caught_up(std::chrono::seconds(5)));
  }

  std::string route(const std::string& text) {
    kvroute::Selection s = router.select({.text = text});
    REQUIRE(s);
    return s.worker().url;
  }

  // Whether the next turn of `text` is a cache hit on `url`.
  bool hits(const std::string& text, const std::string& url) {
    kvroute::Selection s = router.select({.text = text + " next turn"});
    return s && s.worker().url == url && s.decision.branch == kvroute::Branch::kCacheHit;
  }

  kvroute::sync::RedisReplicator::Stats stats() const { return replicator.stats(); }

  RedisRouter router;
  kvroute::sync::Outbox outbox;
  FakeSnapshots snapshots;
  std::atomic<bool> hold{false};  // while set, applying waits (a stalled reader)
  const bool policy_snapshots;
  kvroute::sync::RedisReplicator replicator;
};

// A redis-server of the test's own and two replicas on it, "a" and "b".
struct TwoReplicas {
  // Starts all three; false (saying why) when redis-server is absent.
  bool start(std::vector<std::string> b_urls = kWorkerUrls,
             kvroute::sync::Outbox::Options a_outbox = {}) {
    if (!redis.available()) {
      WARN("redis-server not found (PATH, /usr/bin): skipped; apt-get install redis-server");
      return false;
    }
    a.emplace(fast_options("a", redis.url()), kWorkerUrls, a_outbox);
    b.emplace(fast_options("b", redis.url()), std::move(b_urls));
    a->start();
    b->start();
    return true;
  }

  RedisServer redis;
  std::optional<Node> a;  // destroyed before the server
  std::optional<Node> b;
};

// A text of `n` bytes that shares nothing with another seed's beyond chance.
inline std::string text_of(std::uint64_t seed, std::size_t n = 1500) {
  std::string s(n, ' ');
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (char& c : s) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>('a' + x % 26);
  }
  return s;
}

}  // namespace kvroute_test

#endif  // KVROUTE_TESTS_SYNC_REDIS_NODE_HPP_
