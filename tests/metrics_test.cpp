#include "kvroute/metrics.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/metrics_fixture.hpp"

TEST_CASE("metrics: counters, gauges and histograms render as text exposition", "[metrics]") {
  kvroute::MetricsRegistry r;
  r.counter("jobs_total", "Jobs done.", {{"kind", "a"}}).inc(3);
  r.counter("jobs_total", "Jobs done.", {{"kind", "b"}}).inc();
  r.counter("jobs_total", "Jobs done.", {{"kind", "a"}}).inc();  // same series
  r.gauge("temperature", "Degrees.\nSecond line.").set(21.5);
  auto& h = r.histogram("latency_seconds", "Latency.", {0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(7);
  const std::string text = r.render();
  CHECK_THAT(text, Catch::Contains("# HELP jobs_total Jobs done.\n# TYPE jobs_total counter\n"
                                   "jobs_total{kind=\"a\"} 4\njobs_total{kind=\"b\"} 1\n"));
  CHECK_THAT(text, Catch::Contains("# HELP temperature Degrees.\\nSecond line.\n"));
  CHECK_THAT(text, Catch::Contains("temperature 21.5\n"));
  CHECK_THAT(text, Catch::Contains("latency_seconds_bucket{le=\"0.1\"} 1\n"
                                   "latency_seconds_bucket{le=\"1\"} 2\n"
                                   "latency_seconds_bucket{le=\"+Inf\"} 3\n"
                                   "latency_seconds_sum 7.55\nlatency_seconds_count 3\n"));
}

TEST_CASE("metrics: label values are escaped", "[metrics]") {
  kvroute::MetricsRegistry r;
  r.gauge("g", "h", {{"url", "a\"b\\c\nd"}}).set(1);
  CHECK_THAT(r.render(), Catch::Contains("g{url=\"a\\\"b\\\\c\\nd\"} 1"));
}

TEST_CASE("metrics: the router set covers decisions, load, circuits and trees", "[metrics]") {
  const std::string text = kvtest::render_sample_metrics();
  CHECK_THAT(text, Catch::Contains(
                       "kvroute_policy_branch_total{policy=\"cache_aware\",branch=\"cache_hit\"}"));
  CHECK_THAT(text, Catch::Contains(
                       "kvroute_select_worker_duration_seconds_count{policy=\"cache_aware\"} 20"));
  CHECK_THAT(text, Catch::Contains("smg_worker_requests_active{worker=\"http://10.0.0.1:30000\"}"));
  CHECK_THAT(text, Catch::Contains("smg_worker_cb_state{worker=\"http://10.0.0.2:30000\"} 1"));
  CHECK_THAT(text, Catch::Contains("smg_worker_retries_total{policy=\"cache_aware\"} 1"));
  CHECK_THAT(text, Catch::Contains("kvroute_tree_nodes{model=\"\"}"));
  CHECK_THAT(text, Catch::Contains("kvroute_tree_evicted_chars_total{model=\"\"}"));
  // Every decision was counted under exactly one branch.
  std::size_t pos = 0;
  std::uint64_t total = 0;
  const std::string family = "kvroute_policy_branch_total{";
  while ((pos = text.find(family, pos)) != std::string::npos) {
    const std::size_t sp = text.find("} ", pos);
    const std::size_t nl = text.find('\n', sp);
    total += std::stoull(text.substr(sp + 2, nl - sp - 2));
    pos = nl;
  }
  CHECK(total == 20);
}

TEST_CASE("metrics: concurrent updates are not lost", "[metrics][concurrency]") {
  kvroute::MetricsRegistry r;
  auto& c = r.counter("n_total", "n");
  auto& h = r.histogram("x", "x", {1, 2});
  std::vector<std::thread> th;
  for (int t = 0; t < 4; ++t) {
    th.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) {
        c.inc();
        h.observe(1.5);
        r.gauge("g", "g", {{"t", "shared"}}).add(1);
      }
    });
  }
  for (auto& x : th) x.join();
  CHECK(c.value() == 20000);
  CHECK(h.count() == 20000);
  CHECK(r.gauge("g", "g", {{"t", "shared"}}).value() == 20000.0);
}

TEST_CASE("metrics: a custom policy's branches are counted under their own names", "[metrics]") {
  kvroute::MetricsRegistry r;
  kvroute::RouterMetrics m(r, "mine");
  kvroute::Worker w{kvroute::WorkerId{0}, "http://a", "", true};
  for (int i = 0; i < 3; ++i) {
    m.record(kvroute::Decision::custom(&w, "least_loaded"), std::chrono::microseconds(1));
  }
  m.record(kvroute::Decision::custom(nullptr, "drained"), std::chrono::microseconds(1));
  m.record(kvroute::Decision::pick(&w, kvroute::Branch::kRandom), std::chrono::microseconds(1));
  const std::string text = r.render();
  CHECK_THAT(text, Catch::Contains(
                       "kvroute_policy_branch_total{policy=\"mine\",branch=\"least_loaded\"} 3"));
  CHECK_THAT(text,
             Catch::Contains("kvroute_policy_branch_total{policy=\"mine\",branch=\"drained\"} 1"));
  CHECK_THAT(text,
             Catch::Contains("kvroute_policy_branch_total{policy=\"mine\",branch=\"random\"} 1"));
  // No series named for the placeholder itself.
  CHECK_THAT(text, !Catch::Contains("branch=\"custom\""));
}
