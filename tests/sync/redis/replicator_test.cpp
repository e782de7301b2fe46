// Router replicas sharing state through a real redis-server that each test
// starts on a unix socket of its own: placements reach the other replicas'
// trees, loads travel and expire, a replica started late restores from a
// snapshot plus the stream, and entries that are not batches are counted
// and skipped.
#include <string>
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

}  // namespace

TEST_CASE("redis replicas: a placement on one reaches the other's tree", "[redis]") {
  kvroute_test::TwoReplicas r;
  if (!r.start({kvroute_test::kWorkerUrls.rbegin(), kvroute_test::kWorkerUrls.rend()})) return;
  Node &a = *r.a, &b = *r.b;

  std::vector<std::pair<std::string, std::string>> sent;  // text, worker
  for (std::uint64_t i = 0; i < 8; ++i) {
    const std::string t = text_of(i);
    sent.emplace_back(t, a.route(t));
  }
  REQUIRE(eventually([&] { return b.stats().changes_applied >= sent.size(); }));
  for (const auto& [text, url] : sent) CHECK(b.hits(text, url));

  // And back: b's placements reach a.
  const std::string t = text_of(100);
  const std::string url = b.route(t);
  REQUIRE(eventually([&] { return a.stats().changes_applied >= 1; }));
  CHECK(a.hits(t, url));

  const auto sa = a.stats();
  CHECK(sa.connected);
  CHECK(sa.batches_sent >= 1);
  CHECK(sa.changes_sent >= sent.size());
  CHECK(sa.bytes_sent > 0);
  CHECK(sa.decode_errors == 0);
  CHECK(sa.models >= 1);
  CHECK(b.stats().lag_ms >= 0);
  CHECK(r.redis.command({"SISMEMBER", "kvroute:models", ""}) == "(integer) 1");
}

TEST_CASE("redis replicas: stop() sends what was emitted since the last flush", "[redis]") {
  RedisServer redis;
  KVROUTE_REQUIRE_REDIS(redis);
  auto o = fast_options("a", redis.url());
  o.flush_interval = std::chrono::minutes(10);  // after the first, only stop() flushes
  o.flush_bytes = 0;
  Node a(o);
  Node b(fast_options("b", redis.url()));
  a.start();
  b.start();
  const std::string t = text_of(7);
  const std::string url = a.route(t);
  std::this_thread::sleep_for(200ms);
  CHECK(b.stats().changes_applied == 0);  // nothing was flushed yet
  a.replicator.stop();
  CHECK(a.stats().batches_sent >= 1);
  REQUIRE(eventually([&] { return b.stats().changes_applied >= 1; }));
  CHECK(b.hits(t, url));
}

TEST_CASE("redis replicas: an outbox that holds flush_bytes is sent before the interval ends",
          "[redis]") {
  RedisServer redis;
  KVROUTE_REQUIRE_REDIS(redis);
  auto o = fast_options("a", redis.url());
  o.flush_interval = std::chrono::minutes(10);  // after the first, only the size flushes
  o.flush_bytes = 1;
  Node a(o);
  Node b(fast_options("b", redis.url()));
  a.start();
  b.start();
  REQUIRE(eventually([&] { return a.stats().connected; }));
  std::this_thread::sleep_for(200ms);  // past the flush that follows the connection
  CHECK(a.stats().batches_sent == 0);
  const std::string t = text_of(7);
  const std::string url = a.route(t);
  REQUIRE(eventually([&] { return b.stats().changes_applied >= 1; }));
  CHECK(a.stats().batches_sent >= 1);
  CHECK(b.hits(t, url));
}

TEST_CASE("redis replicas: loads travel, and a silent replica's expire", "[redis]") {
  kvroute_test::TwoReplicas r;
  if (!r.start()) return;
  Node &a = *r.a, &b = *r.b;

  kvroute::Selection s = a.router.select({.text = text_of(1)});
  REQUIRE(s);
  std::vector<kvroute::LoadGuard> guards;
  for (int i = 0; i < 3; ++i) guards.push_back(a.router.dispatch(s));
  const std::string url = s.worker().url;
  const kvroute::WorkerId at_b = b.router.workers().snapshot()->find_url(url)->id;

  REQUIRE(eventually([&] { return b.router.load().in_flight(at_b) == 3; }));
  CHECK(b.router.load().local_in_flight(at_b) == 0);
  CHECK(b.stats().sources == 1);
  CHECK(b.stats().load_reports_applied >= 1);

  guards.pop_back();
  REQUIRE(eventually([&] { return b.router.load().in_flight(at_b) == 2; }));

  // a falls silent: after load_ttl its load no longer counts at b.
  a.replicator.stop();
  REQUIRE(eventually([&] { return b.router.load().in_flight(at_b) == 0; }));
  CHECK(b.stats().sources == 0);
}

TEST_CASE("redis replicas: a replica started late restores snapshot and stream", "[redis]") {
  RedisServer redis;
  KVROUTE_REQUIRE_REDIS(redis);
  auto o = fast_options("a", redis.url());
  o.snapshot_interval = 100ms;
  Node a(o);
  a.start();

  // Before the snapshot...
  std::vector<std::pair<std::string, std::string>> before, after;
  for (std::uint64_t i = 0; i < 6; ++i) before.emplace_back(text_of(i), a.route(text_of(i)));
  REQUIRE(eventually([&] { return a.stats().snapshots_written >= 1; }));
  a.replicator.stop();  // no snapshot after this one: what follows is in the stream only
  {
    // ... and after it, from a's next run under the same name.
    Node a2(fast_options("a", redis.url()));
    a2.start();
    for (std::uint64_t i = 10; i < 14; ++i) after.emplace_back(text_of(i), a2.route(text_of(i)));
    REQUIRE(eventually(
        [&] { return a2.stats().batches_sent >= 1 && a2.stats().pending_batches == 0; }));
  }

  Node c(fast_options("c", redis.url()),
         {kvroute_test::kWorkerUrls.rbegin(), kvroute_test::kWorkerUrls.rend()});
  c.start();
  const auto st = c.stats();
  CHECK(st.snapshots_restored == 1);
  CHECK(st.snapshot_restored_age_ms >= 0);
  CHECK(c.snapshots.restored() >= before.size());
  for (const auto& [text, url] : before) CHECK(c.hits(text, url));
  for (const auto& [text, url] : after) CHECK(c.hits(text, url));
}

// A replica holds what others placed as chunk keys until a request brings
// the text (sync/remote_index.hpp), and its snapshot saves its trees only:
// a replica that restores that snapshot still reads the stream from its
// start, so the placements the writer knew by key alone reach it too.
TEST_CASE("redis replicas: a restore also has what the snapshot's writer knew by key only",
          "[redis]") {
  RedisServer redis;
  KVROUTE_REQUIRE_REDIS(redis);
  auto ob = fast_options("b", redis.url());
  ob.snapshot_interval = 100ms;  // only b writes snapshots
  Node a(fast_options("a", redis.url()), kvroute_test::kWorkerUrls, {}, true);
  Node b(ob, kvroute_test::kWorkerUrls, {}, true);
  a.start();
  b.start();

  std::vector<std::pair<std::string, std::string>> sent;
  for (std::uint64_t i = 0; i < 6; ++i) sent.emplace_back(text_of(i), a.route(text_of(i)));
  // b's snapshot covers a's last entry; b's tree has none of a's texts.
  REQUIRE(eventually([&] {
    const std::string last = redis.last_entry_id("kvroute:stream:");
    return !last.empty() && redis.command({"HGET", "kvroute:snapshot:", "id"}) == last;
  }));
  CHECK(b.router.policy().remote_keys() > 0);

  Node c(fast_options("c", redis.url()),
         {kvroute_test::kWorkerUrls.rbegin(), kvroute_test::kWorkerUrls.rend()}, {}, true);
  c.start();
  CHECK(c.stats().snapshots_restored == 1);
  for (const auto& [text, url] : sent) CHECK(c.hits(text, url));
}

TEST_CASE("redis replicas: entries that are not batches are counted and skipped", "[redis]") {
  kvroute_test::TwoReplicas r;
  if (!r.start()) return;
  Node &a = *r.a, &b = *r.b;

  CHECK(r.redis.command({"XADD", "kvroute:stream:", "*", "b", "not a batch"}).find('-') !=
        std::string::npos);
  CHECK(r.redis.command({"XADD", "kvroute:stream:", "*", "other", "field"}).find('-') !=
        std::string::npos);
  CHECK(r.redis.command({"XADD", "kvroute:fleet", "*", "b", "KVRS\x01garbage"}).find('-') !=
        std::string::npos);
  const std::string t = text_of(7);
  const std::string url = a.route(t);
  REQUIRE(eventually([&] { return b.stats().changes_applied >= 1; }));
  CHECK(b.hits(t, url));
  REQUIRE(eventually([&] { return b.stats().decode_errors == 3; }));
  REQUIRE(eventually([&] { return a.stats().decode_errors == 3; }));
  CHECK_THAT(b.stats().last_error, Catch::Contains("kvroute:"));
}

TEST_CASE("redis replicas: a snapshot that does not restore is counted, the stream still read",
          "[redis]") {
  RedisServer redis;
  KVROUTE_REQUIRE_REDIS(redis);
  Node a(fast_options("a", redis.url()));
  a.start();
  const std::string t = text_of(3);
  const std::string url = a.route(t);
  REQUIRE(eventually([&] { return a.stats().batches_sent >= 1; }));
  // A snapshot whose bytes the hook refuses, and one without its fields.
  CHECK(redis.command({"HSET", "kvroute:snapshot:", "id", "1-0", "data", "not a snapshot"}) ==
        "(integer) 2");
  CHECK(redis.command({"HSET", "kvroute:snapshot:m2", "nothing", "here"}) == "(integer) 1");
  CHECK(redis.command({"SADD", "kvroute:models", "m2"}) == "(integer) 1");

  Node b(fast_options("b", redis.url()));
  b.start();
  const auto st = b.stats();
  CHECK(st.snapshots_restored == 0);
  CHECK(st.snapshot_errors == 2);
  CHECK(st.models == 2);
  CHECK(b.hits(t, url));  // from the stream
}

TEST_CASE("redis replicas: a worker removed on one is forgotten on the other (fleet stream)",
          "[redis]") {
  kvroute_test::TwoReplicas r;
  if (!r.start()) return;
  Node &a = *r.a, &b = *r.b;
  const std::string t = text_of(5);
  const std::string url = a.route(t);
  REQUIRE(eventually([&] { return b.stats().changes_applied >= 1; }));
  REQUIRE(b.hits(t, url));
  const std::uint64_t applied = b.stats().changes_applied;

  const kvroute::WorkerId id = a.router.workers().snapshot()->find_url(url)->id;
  REQUIRE(a.router.remove_worker(id).ok());
  // b still routes to that worker, but no longer credits it with the text.
  REQUIRE(eventually([&] { return b.stats().changes_applied > applied; }));
  CHECK_FALSE(b.hits(t, url));
  CHECK(r.redis.command({"XLEN", "kvroute:fleet"}) != "(integer) 0");
}

TEST_CASE("redis replicas: the URL's database and password are used", "[redis]") {
  RedisServer redis({"--requirepass", "s3cret"}, "s3cret");
  KVROUTE_REQUIRE_REDIS(redis);
  const std::string url = redis.url() + "?db=3&password=s3cret";
  Node a(fast_options("a", url));
  Node b(fast_options("b", url));
  a.start();
  b.start();
  const std::string t = text_of(9);
  const std::string to = a.route(t);
  REQUIRE(eventually([&] { return b.stats().changes_applied >= 1; }));
  CHECK(b.hits(t, to));
  CHECK(redis.command({"EXISTS", "kvroute:stream:"}) == "(integer) 0");  // not in db 0

  // A wrong password: named, retried, and routing does not care.
  Node c(fast_options("c", redis.url() + "?password=wrong"));
  REQUIRE(c.replicator.start().ok());
  REQUIRE(eventually([&] { return c.stats().connect_failures >= 2; }));
  CHECK_FALSE(c.stats().connected);
  CHECK_THAT(c.stats().last_error, Catch::Contains("AUTH"));
  c.route(t);
}
