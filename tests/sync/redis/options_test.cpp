// RedisReplicator's configuration: URLs, names and intervals. Every bad
// value is an InvalidArgument that names the field (or the URL) and the
// value; start() refuses it before it starts anything.
#include <chrono>
#include <string>

#include <catch2/catch.hpp>

#include "kvroute/sync/outbox.hpp"
#include "kvroute/sync/redis/replicator.hpp"

namespace {

using kvroute::sync::parse_redis_url;
using kvroute::sync::RedisAddress;
using kvroute::sync::RedisReplicatorOptions;
using namespace std::chrono_literals;

std::string error_of(const RedisReplicatorOptions& o) {
  const absl::Status s = o.validate();
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  return std::string(s.message());
}

RedisReplicatorOptions good() { return {.url = "redis://127.0.0.1:6379", .replica = "a"}; }

}  // namespace

TEST_CASE("redis URLs: the TCP form", "[redis][options]") {
  auto a = parse_redis_url("redis://10.0.0.5:6380/3");
  REQUIRE(a.ok());
  CHECK(a->kind == RedisAddress::Kind::kTcp);
  CHECK(a->host == "10.0.0.5");
  CHECK(a->port == 6380);
  CHECK(a->db == 3);

  a = parse_redis_url("redis://cache.internal");
  REQUIRE(a.ok());
  CHECK(a->port == 6379);
  CHECK(a->db == 0);

  a = parse_redis_url("redis://[::1]:7000");
  REQUIRE(a.ok());
  CHECK(a->host == "::1");
  CHECK(a->port == 7000);

  a = parse_redis_url("redis://user:s3cret@h:1/");
  REQUIRE(a.ok());
  CHECK(a->user == "user");
  CHECK(a->password == "s3cret");
  CHECK(a->to_string().find("s3cret") == std::string::npos);
}

TEST_CASE("redis URLs: the unix socket forms", "[redis][options]") {
  for (const char* url : {"unix:///run/redis.sock", "redis+unix:///run/redis.sock"}) {
    auto a = parse_redis_url(url);
    REQUIRE(a.ok());
    CHECK(a->kind == RedisAddress::Kind::kUnix);
    CHECK(a->path == "/run/redis.sock");
  }
  auto a = parse_redis_url("unix:///tmp/r.sock?db=2");
  REQUIRE(a.ok());
  CHECK(a->db == 2);
  CHECK(a->to_string() == "unix:///tmp/r.sock?db=2");
  a = parse_redis_url("unix:///tmp/r.sock?password=p%w&db=1&user=me");
  REQUIRE(a.ok());
  CHECK(a->password == "p%w");
  CHECK(a->user == "me");
  CHECK(a->db == 1);
  CHECK(a->to_string().find("p%w") == std::string::npos);
}

TEST_CASE("redis URLs: each bad form is named", "[redis][options]") {
  const std::pair<const char*, const char*> cases[] = {
      {"", "is not a Redis URL"},
      {"127.0.0.1:6379", "is not a Redis URL"},
      {"http://h:1", "unknown scheme"},
      {"rediss://h:1", "TLS"},
      {"redis://", "has no host"},
      {"redis://:6379", "has no host"},
      {"redis://h:0", "bad port '0'"},
      {"redis://h:65536", "bad port '65536'"},
      {"redis://h:abc", "bad port 'abc'"},
      {"redis://h:", "bad port ''"},
      {"redis://h:1/x", "bad database number"},
      {"redis://::1:6379", "IPv6 host outside brackets"},
      {"redis://[::1:6379", "unclosed '['"},
      {"redis://user@h:1", "user info without a password"},
      {"unix://", "absolute socket path"},
      {"unix://relative.sock", "absolute socket path"},
      {"unix:///tmp/s?db=x", "bad database number in ?db="},
      {"unix:///tmp/s?db=", "bad database number in ?db="},
      {"unix:///tmp/s?timeout=1", "bad query item 'timeout=1'"},
      {"unix:///tmp/s?db", "bad query item 'db'"},
      {"unix:///tmp/s?user=me", "user without a password"},
  };
  for (const auto& [url, why] : cases) {
    INFO(url);
    const auto a = parse_redis_url(url);
    REQUIRE_FALSE(a.ok());
    CHECK(a.status().code() == absl::StatusCode::kInvalidArgument);
    const std::string m(a.status().message());
    CHECK_THAT(m, Catch::Contains("url: '"));
    CHECK_THAT(m, Catch::Contains(why));
  }
}

TEST_CASE("redis replicator options: each bad field is named with its value", "[redis][options]") {
  CHECK(good().validate().ok());

  RedisReplicatorOptions o = good();
  o.url = "redis://h:99999";
  CHECK_THAT(error_of(o), Catch::Contains("redis replicator url: 'redis://h:99999'"));

  o = good();
  o.replica = "";
  CHECK_THAT(error_of(o), Catch::Contains("replica: '' must name this replica"));

  o = good();
  o.replica = std::string(5000, 'r');
  CHECK_THAT(error_of(o), Catch::Contains("replica: 5000 bytes"));

  o = good();
  o.key_prefix = "";
  CHECK_THAT(error_of(o), Catch::Contains("key_prefix"));

  o = good();
  o.flush_interval = 0ms;
  CHECK_THAT(error_of(o), Catch::Contains("flush_interval: 0 ms must be > 0"));

  o = good();
  o.load_interval = -5ms;
  CHECK_THAT(error_of(o), Catch::Contains("load_interval: -5 ms must be > 0"));

  o = good();
  o.read_block = 0ms;
  CHECK_THAT(error_of(o), Catch::Contains("read_block: 0 ms"));

  o = good();
  o.connect_timeout = 0ms;
  CHECK_THAT(error_of(o), Catch::Contains("connect_timeout: 0 ms"));

  o = good();
  o.backoff_min = 0ms;
  CHECK_THAT(error_of(o), Catch::Contains("backoff_min: 0 ms"));

  o = good();
  o.load_ttl = o.load_interval;
  CHECK_THAT(error_of(o), Catch::Contains("load_ttl: 250 ms must be longer than load_interval"));

  o = good();
  o.snapshot_interval = -1ms;
  CHECK_THAT(error_of(o), Catch::Contains("snapshot_interval: -1 ms"));

  o = good();
  o.command_timeout = o.read_block;
  CHECK_THAT(error_of(o),
             Catch::Contains("command_timeout: 100 ms must be longer than read_block"));

  o = good();
  o.backoff_max = 50ms;
  CHECK_THAT(error_of(o), Catch::Contains("backoff_max: 50 ms must be >= backoff_min (100 ms)"));

  o = good();
  o.read_count = 0;
  CHECK_THAT(error_of(o), Catch::Contains("read_count: 0"));

  o = good();
  o.stream_max_len = 0;
  CHECK_THAT(error_of(o), Catch::Contains("stream_max_len: 0"));

  o = good();
  o.fleet_max_len = 0;
  CHECK_THAT(error_of(o), Catch::Contains("fleet_max_len: 0"));
}

TEST_CASE("redis replicator: start() refuses bad options and missing hooks", "[redis][options]") {
  kvroute::sync::Outbox outbox;
  RedisReplicatorOptions bad = good();
  bad.replica = "";
  kvroute::sync::RedisReplicator r1(bad,
                                    {.outbox = &outbox, .apply = [](const kvroute::sync::Change&) {
                                       return kvroute::sync::Applied::kApplied;
                                     }});
  CHECK_THAT(std::string(r1.start().message()), Catch::Contains("replica"));
  CHECK_FALSE(r1.stats().connected);

  kvroute::sync::RedisReplicator r2(good(), {});
  const absl::Status s2 = r2.start();
  CHECK(s2.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s2.message()), Catch::Contains("hooks.outbox"));

  kvroute::sync::RedisReplicator r3(good(), {.outbox = &outbox});
  CHECK_THAT(std::string(r3.start().message()), Catch::Contains("hooks.apply"));
}
