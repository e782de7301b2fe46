// The Redis transport when things go wrong: Redis killed and restarted
// (routing goes on, the replicas reconnect and deliver what was emitted
// meanwhile, or count what the Outbox had no room for), a reader that fell
// so far behind that its stream was trimmed (it catches up from the
// snapshot), and a hung Redis (stop() still returns promptly).
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "sync/redis/node.hpp"
#include "sync/redis/redis_server.hpp"

namespace {

using kvroute_test::eventually;
using kvroute_test::fast_options;
using kvroute_test::Node;
using kvroute_test::RedisServer;
using kvroute_test::text_of;
using namespace std::chrono_literals;

using Sent = std::vector<std::pair<std::string, std::string>>;  // text, worker

Sent route_all(Node& n, std::uint64_t from, std::uint64_t to) {
  Sent sent;
  for (std::uint64_t i = from; i < to; ++i) sent.emplace_back(text_of(i), n.route(text_of(i)));
  return sent;
}

}  // namespace

TEST_CASE("redis down: routing goes on, and what was emitted arrives after", "[redis]") {
  kvroute_test::TwoReplicas r;
  if (!r.start()) return;
  Node &a = *r.a, &b = *r.b;
  const Sent up = route_all(a, 0, 3);
  REQUIRE(eventually([&] { return b.stats().changes_applied >= up.size(); }));

  r.redis.kill();
  REQUIRE(eventually([&] { return !a.stats().connected && !b.stats().connected; }));
  const Sent down = route_all(a, 10, 20);  // never waits for Redis
  CHECK(a.stats().connect_failures + a.stats().command_errors >= 1);
  CHECK_FALSE(a.stats().last_error.empty());

  r.redis.start();  // the same socket, empty
  REQUIRE(eventually([&] { return a.stats().reconnects >= 1 && b.stats().reconnects >= 1; }));
  REQUIRE(eventually([&] { return b.stats().changes_applied >= up.size() + down.size(); }));
  for (const auto& [text, url] : down) CHECK(b.hits(text, url));
  CHECK(a.stats().outbox_dropped == 0);
  CHECK(a.stats().connected);
}

TEST_CASE("redis down: what the Outbox had no room for is counted as dropped", "[redis]") {
  kvroute_test::TwoReplicas r;
  // Room for a few placements of a 1500-byte text (about 170 bytes each).
  if (!r.start(kvroute_test::kWorkerUrls, {.max_bytes = 1000})) return;
  Node &a = *r.a, &b = *r.b;

  r.redis.kill();
  REQUIRE(eventually([&] { return !a.stats().connected; }));
  const Sent down = route_all(a, 0, 20);
  CHECK(a.stats().outbox_dropped >= 10);
  CHECK(a.stats().outbox_dropped == a.outbox.dropped());

  r.redis.start();
  const std::uint64_t kept = down.size() - a.stats().outbox_dropped;
  REQUIRE(eventually([&] { return b.stats().changes_applied >= kept; }));
  // What was kept arrived, the first changes emitted; the rest did not.
  for (std::size_t i = 0; i < kept; ++i) CHECK(b.hits(down[i].first, down[i].second));
  CHECK_FALSE(b.hits(down.back().first, down.back().second));
}

TEST_CASE("redis trimmed: a reader that missed entries catches up from the snapshot", "[redis]") {
  // Small stream nodes, so that MAXLEN ~ trims a short stream.
  RedisServer redis({"--stream-node-max-entries", "4"});
  KVROUTE_REQUIRE_REDIS(redis);
  auto oa = fast_options("a", redis.url());
  oa.stream_max_len = 5;
  oa.snapshot_interval = 100ms;
  auto ob = fast_options("b", redis.url());
  ob.read_count = 1;
  Node a(oa);
  Node b(ob);
  a.start();
  b.start();

  b.hold = true;  // b stalls on the first change it applies
  Sent sent;
  for (std::uint64_t i = 0; i < 24; ++i) {  // one entry each
    const std::uint64_t n = a.stats().batches_sent;
    sent.emplace_back(text_of(i), a.route(text_of(i)));
    REQUIRE(eventually([&] { return a.stats().batches_sent > n; }));
  }
  // a's snapshot covers its last entry.
  REQUIRE(eventually([&] {
    const std::string last = redis.last_entry_id("kvroute:stream:");
    return !last.empty() && redis.command({"HGET", "kvroute:snapshot:", "id"}) == last;
  }));
  const std::string xlen = redis.command({"XLEN", "kvroute:stream:"});
  INFO("XLEN " << xlen);
  CHECK(xlen.size() == std::string("(integer) 5").size());  // trimmed to fewer than 10
  CHECK(b.stats().changes_applied == 0);

  b.hold = false;
  REQUIRE(eventually([&] { return b.stats().catch_ups == 1; }));
  CHECK(b.stats().gaps == 0);
  CHECK(b.snapshots.restored() >= sent.size());
  for (const auto& [text, url] : sent) CHECK(b.hits(text, url));
}

TEST_CASE("redis hung: stop() returns promptly during DEBUG SLEEP", "[redis]") {
  RedisServer redis;
  KVROUTE_REQUIRE_REDIS(redis);
  auto o = fast_options("a", redis.url());
  o.command_timeout = 60s;  // only stop() can end the wait
  Node a(o);
  a.start();

  std::thread sleeper([&] { redis.command({"DEBUG", "SLEEP", "10"}); });
  std::this_thread::sleep_for(300ms);  // a's next command now waits on a server that sleeps
  const std::string t = text_of(1);
  a.route(t);  // routing does not wait either

  const auto t0 = std::chrono::steady_clock::now();
  a.replicator.stop();
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took < 5s);  // the server sleeps 10 s
  CHECK_FALSE(a.stats().connected);
  redis.kill();
  sleeper.join();
}

TEST_CASE("redis replaced: entries of a new server are read whatever their ids", "[redis]") {
  kvroute_test::TwoReplicas r;
  if (!r.start()) return;
  Node &a = *r.a, &b = *r.b;
  a.route(text_of(76));  // b has read up to an id of the old server's clock
  REQUIRE(eventually([&] { return b.stats().changes_applied == 1; }));
  // A batch from elsewhere, to plant in the new server under a small id
  // (its clock far behind the old one's).
  Node x(fast_options("x", r.redis.url()));
  const std::string t = text_of(77);
  const std::string to = x.route(t);
  kvroute::sync::Batch batch{.source = "x", .seq = 1};
  x.outbox.drain(batch.changes);
  REQUIRE(batch.changes.size() == 1);

  r.redis.kill();
  r.redis.start();
  REQUIRE(eventually([&] { return b.stats().reconnects >= 1; }));
  CHECK(r.redis.command({"XADD", "kvroute:stream:", "5-0", "b", kvroute::sync::encode(batch)}) ==
        "5-0");
  REQUIRE(eventually([&] { return b.stats().changes_applied == 2; }));
  CHECK(b.hits(t, to));
}
