#include "kvroute/retry.hpp"

#include <catch2/catch.hpp>
#include <set>

#include "kvroute/policies/round_robin.hpp"
#include "kvroute/router.hpp"

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

TEST_CASE("retry: the gateway's backoff: 50 ms x 1.5^k, capped at 30 s", "[retry]") {
  kvroute::RetryOptions o;
  CHECK(o.max_attempts == 5);
  CHECK(kvroute::backoff(o, 0, 0) == milliseconds(50));
  CHECK(kvroute::backoff(o, 1, 0) == milliseconds(75));
  CHECK(kvroute::backoff(o, 2, 0) == nanoseconds(112500000));
  CHECK(kvroute::backoff(o, 3, 0) == nanoseconds(168750000));
  CHECK(kvroute::backoff(o, 40, 0) == std::chrono::seconds(30));
  // +-20% jitter at the extremes.
  CHECK(kvroute::backoff(o, 0, 1.0) == milliseconds(60));
  CHECK(kvroute::backoff(o, 0, -1.0) == milliseconds(40));
}

TEST_CASE("retry: retryable statuses", "[retry]") {
  for (int s : {0, 408, 429, 500, 502, 503, 504}) CHECK(kvroute::retryable_status(s));
  for (int s : {200, 400, 401, 404, 409, 422, 501, 505}) CHECK_FALSE(kvroute::retryable_status(s));
}

TEST_CASE("retry: max_attempts counts attempts, the first included", "[retry]") {
  kvroute::Attempts a({.max_attempts = 3});
  nanoseconds d{};
  CHECK(a.failed(kvroute::WorkerId{0}, 503, &d));  // attempt 1 failed, try 2
  CHECK(d > nanoseconds(0));
  CHECK(a.failed(kvroute::WorkerId{1}, 503, &d));        // attempt 2 failed, try 3
  CHECK_FALSE(a.failed(kvroute::WorkerId{2}, 503, &d));  // 3 attempts made
  CHECK(a.failures() == 3);
  kvroute::Attempts once({.max_attempts = 1});
  CHECK_FALSE(once.failed(kvroute::WorkerId{0}, 503, &d));
}

TEST_CASE("retry: a non-retryable status ends the attempts", "[retry]") {
  kvroute::Attempts a;
  nanoseconds d{};
  CHECK_FALSE(a.failed(kvroute::WorkerId{0}, 400, &d));
}

TEST_CASE("retry: jitter differs between requests", "[retry]") {
  std::set<std::int64_t> delays;
  for (int i = 0; i < 20; ++i) {
    kvroute::Attempts a;
    nanoseconds d{};
    REQUIRE(a.failed(kvroute::WorkerId{0}, 502, &d));
    CHECK(d >= milliseconds(40));
    CHECK(d <= milliseconds(60));
    delays.insert(d.count());
  }
  CHECK(delays.size() > 10);
}

TEST_CASE("retry: each attempt selects afresh, avoiding the workers that failed", "[retry]") {
  kvroute::Router<kvroute::RoundRobin> router;
  for (const char* u : {"http://a", "http://b", "http://c"}) {
    REQUIRE(router.add_worker({.url = u}).ok());
  }
  kvroute::Attempts attempts;
  std::set<std::uint32_t> tried;
  nanoseconds d{};
  for (int i = 0; i < 3; ++i) {
    auto s = router.select({}, attempts.excluded());
    REQUIRE(s);
    CHECK(tried.insert(s.worker().id.value).second);  // never the same twice
    attempts.failed(s.worker().id, 502, &d);
  }
  // Every worker failed once: no eligible worker is left.
  CHECK_FALSE(router.select({}, attempts.excluded()));
}

TEST_CASE("retry: bad options name the field", "[retry]") {
  kvroute::RetryOptions o;
  o.max_attempts = 0;
  CHECK_THAT(std::string(o.validate().message()), Catch::Contains("max_attempts"));
  o = {};
  o.multiplier = 0.5;
  CHECK_THAT(std::string(o.validate().message()), Catch::Contains("multiplier"));
  o = {};
  o.jitter = 1.5;
  CHECK_THAT(std::string(o.validate().message()), Catch::Contains("jitter"));
  o = {};
  o.max_backoff = milliseconds(1);
  CHECK_THAT(std::string(o.validate().message()), Catch::Contains("max_backoff"));
}
