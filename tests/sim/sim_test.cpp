// kvroute_sim's own logic on tiny traces built here (no ../shared needed).
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "sim/report.hpp"
#include "sim/server.hpp"
#include "sim/sim_requests.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"

using kvsim::SimRequest;
using kvsim::Trace;
using kvtest::block_request;
using kvtest::make_trace;

namespace {

// The simple server model (FIFO prefill at a fixed rate, open loop).
kvsim::SimConfig simple() {
  kvsim::SimConfig cfg;
  cfg.server_model = kvsim::ServerModel::kSimple;
  return cfg;
}

}  // namespace

TEST_CASE("sim: a hit counts only the prefix the cache really holds", "[sim]") {
  kvsim::PrefixCache cache(3 * kvsim::kBlockTokens);
  const SimRequest a = block_request(0, {1, 2, 3}, 3 * 512);
  const SimRequest b = block_request(0, {1, 2, 9}, 3 * 512);
  const SimRequest c = block_request(0, {5, 2, 3}, 3 * 512);
  const SimRequest partial = block_request(0, {1, 2, 3}, 2 * 512 + 100);
  CHECK(cache.acquire(a) == 0);
  CHECK(cache.peek(a) == 3 * 512);
  CHECK(cache.peek(b) == 2 * 512);  // diverges at block 3
  CHECK(cache.peek(c) == 0);        // same ids later, different prefix
  CHECK(cache.peek(partial) == 2 * 512 + 100);
  // Pinned blocks survive pressure; the cache may run over its capacity.
  const SimRequest d = block_request(0, {7, 8}, 2 * 512);
  CHECK(cache.acquire(d) == 0);
  CHECK(cache.peek(a) == 3 * 512);
  cache.release(a);
  cache.release(d);
  CHECK(cache.used() <= cache.capacity());
  // a was used before d: its deepest blocks went first, its prefix stays
  // consistent (never a later block without the earlier ones).
  CHECK(cache.peek(d) == 2 * 512);
  CHECK(cache.peek(a) == 512);
  CHECK(cache.holds(a.blocks[0]));
  CHECK_FALSE(cache.holds(a.blocks[2]));
}

TEST_CASE("sim: hits in a replay come from the server the request went to", "[sim]") {
  std::vector<SimRequest> rs;
  for (int i = 0; i < 12; ++i) rs.push_back(block_request(i * 1.0, {1, 2, 3, 4}, 2000));
  const Trace tr = make_trace(rs, false);
  kvsim::SimConfig cfg = simple();
  cfg.servers = 3;
  for (const char* p : {"round_robin", "random", "cache_aware"}) {
    const kvsim::PolicyResult res = kvsim::run_policy(tr, p, cfg);
    std::set<int> seen;
    for (std::size_t j = 0; j < rs.size(); ++j) {
      const bool warm = seen.count(res.server[j]) != 0;
      CHECK(res.cached[j] == (warm ? 2000 : 0));
      seen.insert(res.server[j]);
    }
  }
}

TEST_CASE("sim: every request completes exactly once under every policy", "[sim]") {
  Trace tr = kvsim::generate("chat", 300, 4.0);
  kvsim::infer_sessions(tr);
  kvsim::SimConfig cfg = simple();
  cfg.servers = 4;
  auto names = kvsim::all_policy_names();
  names.push_back("least_prefill_nofeedback");
  for (const std::string& p : names) {
    INFO(p);
    const kvsim::PolicyResult res = kvsim::run_policy(tr, p, cfg);
    REQUIRE(res.completions.size() == 300);
    for (std::size_t j = 0; j < 300; ++j) {
      CHECK(res.completions[j] == 1);
      CHECK(res.ttft[j] >= 0);
      CHECK(res.cached[j] <= tr.requests[j].input_tokens);
    }
    std::int64_t branches = 0;
    for (const auto& [k, c] : res.branches) branches += c;
    CHECK(branches == 300);
    CHECK(res.hit_rate >= 0);
    CHECK(res.hit_rate <= kvsim::ideal_hit_rate(tr) + 1e-12);
  }
}

TEST_CASE("sim: equal seeds give equal results", "[sim]") {
  Trace tr = kvsim::generate("agent", 200, 4.0);
  kvsim::infer_sessions(tr);
  kvsim::link_sessions(tr);
  for (const kvsim::SimConfig& cfg : {kvsim::SimConfig{}, simple()}) {
    for (const char* p :
         {"random", "power_of_two", "cache_aware_feedback", "least_prefill", "oracle", "sticky"}) {
      INFO(p);
      const auto a = kvsim::run_policy(tr, p, cfg);
      const auto b = kvsim::run_policy(tr, p, cfg);
      CHECK(a.server == b.server);
      CHECK(a.ttft == b.ttft);
      CHECK(a.cached == b.cached);
      CHECK(a.branches == b.branches);
    }
  }
}

TEST_CASE("sim: cache_aware with recency steps takes the same branches", "[sim]") {
  // Without feedback, steps only change how ties between equally loaded
  // candidates fall: each request takes the same branch (hit or miss).
  Trace tr = kvsim::generate("agent", 300, 4.0);
  kvsim::SimConfig exact = simple();
  exact.ca_recency_shift = 0;
  kvsim::SimConfig stepped = simple();
  stepped.ca_recency_shift = 6;
  const auto a = kvsim::run_policy(tr, "cache_aware", exact);
  const auto b = kvsim::run_policy(tr, "cache_aware", stepped);
  CHECK(a.branches == b.branches);
  REQUIRE(b.completions.size() == 300);
  for (std::size_t j = 0; j < 300; ++j) CHECK(b.completions[j] == 1);
}

TEST_CASE("sim: cache_aware's tenant rule reaches the policy", "[sim]") {
  // A burst of 120 requests sharing a 3-block prefix, each with a block of
  // its own, all in flight at once: the first 65 pile onto one server until
  // the balance test trips, the next spread over the idle ones (each
  // inserted there), and from then on the prefix has several holders. The
  // least loaded holder and the most recent one then differ, so the two
  // rules place the burst differently.
  std::vector<SimRequest> rs;
  for (std::uint64_t i = 0; i < 120; ++i) {
    rs.push_back(
        block_request(static_cast<double>(i) * 1e-4, {1, 2, 3, 100 + i}, 4 * 512, {}, 2000));
  }
  const Trace tr = make_trace(rs, false);
  kvsim::SimConfig loaded = simple();
  loaded.ca_tenant_rule = kvroute::CacheAware::TenantRule::kLeastLoaded;
  kvsim::SimConfig recent = simple();
  recent.ca_tenant_rule = kvroute::CacheAware::TenantRule::kMostRecent;
  const auto a = kvsim::run_policy(tr, "cache_aware", loaded);
  const auto b = kvsim::run_policy(tr, "cache_aware", recent);
  REQUIRE(a.server.size() == rs.size());
  REQUIRE(b.server.size() == rs.size());
  CHECK(std::set<int>(a.server.begin(), a.server.end()).size() > 1);
  CHECK(a.server != b.server);
  // The same rule twice places it the same way.
  CHECK(kvsim::run_policy(tr, "cache_aware", recent).server == b.server);
}

TEST_CASE("sim: oracle and sticky find the server that holds the session", "[sim]") {
  // Four sessions with distinct long prefixes, one turn every 10 s: no
  // queueing, so the best server for a follow-up is the one holding it.
  std::vector<SimRequest> rs;
  for (int turn = 0; turn < 4; ++turn) {
    for (std::uint64_t s = 0; s < 4; ++s) {
      std::vector<std::uint64_t> ids;
      for (int b = 0; b < 8 + turn; ++b) ids.push_back(s * 1000 + static_cast<std::uint64_t>(b));
      rs.push_back(block_request(turn * 10.0 + static_cast<double>(s), ids, (8 + turn) * 512,
                                 "s" + std::to_string(s)));
    }
  }
  const Trace tr = make_trace(rs, true);
  kvsim::SimConfig cfg = simple();
  cfg.servers = 4;
  for (const char* p : {"oracle", "sticky", "least_prefill"}) {
    INFO(p);
    const auto res = kvsim::run_policy(tr, p, cfg);
    for (std::size_t j = 4; j < rs.size(); ++j) {
      CHECK(res.server[j] == res.server[j % 4]);
      CHECK(res.cached[j] == static_cast<std::int64_t>((7 + j / 4) * 512));
    }
  }
}

TEST_CASE("sim: oracle avoids a busy server that holds a short prefix", "[sim]") {
  // Request 0 loads server A with 200k tokens (10 s of prefill); request 1
  // shares only its first block: waiting on A is worse than prefilling on B.
  std::vector<std::uint64_t> big;
  for (std::uint64_t b = 0; b < 390; ++b) big.push_back(b);
  std::vector<SimRequest> rs = {block_request(0, big, 390 * 512),
                                block_request(0.1, {0, 5000, 5001}, 3 * 512)};
  const Trace tr = make_trace(rs, false);
  kvsim::SimConfig cfg = simple();
  cfg.servers = 2;
  const auto res = kvsim::run_policy(tr, "oracle", cfg);
  CHECK(res.server[1] != res.server[0]);
  CHECK(res.ttft[1] < 0.2);
}

TEST_CASE("sim: sessions are inferred from continuations", "[sim]") {
  std::vector<SimRequest> rs = {
      block_request(0, {1, 2, 3}, 3 * 512),       // s0
      block_request(1, {1, 2, 4, 5}, 4 * 512),    // continues 0 (1,2 + new last)
      block_request(2, {1, 9, 10}, 3 * 512),      // shares only block 1: new
      block_request(3, {1, 2, 4, 6, 7}, 5 * 512)  // continues 1
  };
  Trace tr = make_trace(rs, false);
  kvsim::infer_sessions(tr);
  CHECK(tr.requests[1].session == tr.requests[0].session);
  CHECK(tr.requests[2].session != tr.requests[0].session);
  CHECK(tr.requests[3].session == tr.requests[0].session);
}

TEST_CASE("sim: trace lines are parsed, and bad ones named by line", "[sim]") {
  const std::string mooncake =
      "{\"timestamp\": 1000, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]}\n"
      "\n"
      "{\"timestamp\": 2000, \"input_length\": 700, \"output_length\": 5, \"hash_ids\": [1, 3],"
      " \"session\": \"a\"}\n";
  Trace tr = kvsim::parse_jsonl(mooncake, "m.jsonl", 4.0);
  REQUIRE(tr.requests.size() == 2);
  CHECK(tr.requests[1].t == Approx(2.0));
  CHECK(tr.requests[0].blocks[0] == tr.requests[1].blocks[0]);
  CHECK(tr.requests[0].blocks[1] != tr.requests[1].blocks[1]);
  CHECK(tr.has_sessions);

  const std::string text = "{\"t\": 0.5, \"text\": \"" + std::string(3000, 'x') +
                           "\", \"session\": \"u\"}\n"
                           "{\"t\": 0.7, \"text\": \"" +
                           std::string(2048, 'x') + "yy\", \"output_length\": 9}\n";
  Trace tt = kvsim::parse_jsonl(text, "t.jsonl", 4.0);
  REQUIRE(tt.requests.size() == 2);
  CHECK(tt.requests[0].input_tokens == 750);
  CHECK(tt.requests[0].blocks[0] == tt.requests[1].blocks[0]);  // first 2048 chars equal
  CHECK(tt.requests[1].output_tokens == 9);

  auto error_of = [](const std::string& s) -> std::string {
    try {
      kvsim::parse_jsonl(s, "bad.jsonl", 4.0);
    } catch (const kvsim::TraceError& e) {
      return e.what();
    }
    return "";
  };
  const std::string good =
      "{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [1]}\n";
  CHECK(error_of(good + "{oops\n") == "bad.jsonl:2: not valid JSON");
  CHECK(error_of(good + "\n{\"timestamp\": 1, \"output_length\": 1, \"hash_ids\": [1]}\n") ==
        "bad.jsonl:3: missing field \"input_length\"");
  CHECK(error_of(good + "{\"timestamp\": \"x\", \"input_length\": 5, \"output_length\": 1, "
                        "\"hash_ids\": [1]}\n") ==
        "bad.jsonl:2: field \"timestamp\" is not a number");
  CHECK(error_of("{\"foo\": 1}\n").find("bad.jsonl:1:") == 0);
  // Requests must come in time order.
  CHECK(error_of(good + "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1, "
                        "\"hash_ids\": [1]}\n") ==
        "bad.jsonl:2: timestamp 0.000 s is earlier than the previous request's 0.001 s "
        "(requests must be in time order)");
}

TEST_CASE("sim: think_time is read when a line has it", "[sim]") {
  const std::string m =
      "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2], "
      "\"session\": \"a\"}\n"
      "{\"timestamp\": 9000, \"input_length\": 700, \"output_length\": 5, \"hash_ids\": [1, 3], "
      "\"session\": \"a\", \"think_time\": 2.5}\n";
  Trace tr = kvsim::parse_jsonl(m, "m.jsonl", 4.0);
  CHECK(tr.requests[0].think < 0);
  CHECK(tr.requests[1].think == Approx(2.5));
  kvsim::shape(tr, 0, 3.0);
  CHECK(tr.requests[1].t_trace == Approx(9.0));
  CHECK(tr.requests[1].t == Approx(3.0));
  kvsim::link_sessions(tr);
  CHECK(tr.prev_in_session[1] == 0);
  CHECK(tr.next_in_session[0] == 1);
  CHECK(tr.next_in_session[1] == kvsim::kNoRequest);
}

TEST_CASE("sim: equal hash ids expand to equal text prefixes", "[sim]") {
  kvsim::TextExpander ex(4.0);
  const SimRequest a = block_request(0, {1, 2, 3}, 1200);
  const SimRequest b = block_request(0, {1, 2, 4}, 1500);
  std::string ba, bb;
  const std::string ta(ex.text(a, ba));
  const std::string tb(ex.text(b, bb));
  CHECK(ta.size() == 4800);
  CHECK(tb.size() == 6000);
  CHECK(ta.substr(0, 4096) == tb.substr(0, 4096));
  CHECK(ta.substr(4096, 8) != tb.substr(4096, 8));
}

TEST_CASE("sim: the JSON report has the documented fields", "[sim]") {
  Trace tr = kvsim::generate("batch", 50, 4.0);
  kvsim::Report rep = kvsim::make_report(tr, {});
  rep.policies.push_back(kvsim::run_policy(tr, "round_robin", {}));
  const nlohmann::ordered_json j = kvsim::to_json(rep);
  CHECK(j.begin().key() == "trace");
  CHECK(j["trace"] == "batch");
  CHECK(j["servers"] == 8);
  CHECK(j["model"].get<std::string>().find("sglang servers") == 0);
  const auto& p = j["policies"][0];
  for (const char* k : {"name", "hit_rate", "ttft_mean_s", "ttft_p50_s", "ttft_p99_s", "imbalance",
                        "select_us_mean", "select_us_p99", "rejected", "branches"}) {
    CHECK(p.contains(k));
  }
  CHECK(p["branches"]["round_robin"] == 50);
  const std::string chart = kvsim::svg(rep);
  CHECK(chart.find("<svg") == 0);
  // The legend names every colour class and the ideal line.
  const auto legend = chart.find("<g class=\"legend\">");
  REQUIRE(legend != std::string::npos);
  for (const char* label :
       {"least_prefill", "cache_aware", "other kvroute policies", "references", "ideal hit rate"}) {
    CHECK(chart.find(label, legend) != std::string::npos);
  }
  // The table's legend explains every column.
  const std::string text = kvsim::table(rep);
  for (const char* column :
       {"hit:", "ttft_*:", "imbal:", "sel_us, sel_p99:", "rej:", "branches:"}) {
    CHECK(text.find(column) != std::string::npos);
  }
}
