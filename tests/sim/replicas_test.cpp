// kvroute_sim's router replicas (examples/sim/replicas.hpp) on traces built
// here: when changes and loads reach the other replicas, what is counted,
// and what syncing buys on a chat workload.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/report.hpp"
#include "sim/sim_requests.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"

using kvsim::SimRequest;
using kvsim::SyncMode;
using kvtest::block_request;
using kvtest::make_trace;

namespace {

// `count` replicas on the simple server model (open loop: requests arrive
// at their trace times), synced as `mode` says after `delay_s`.
kvsim::SimConfig replicated(int count, SyncMode mode, double delay_s = 0.1) {
  kvsim::SimConfig cfg;
  cfg.server_model = kvsim::ServerModel::kSimple;
  cfg.servers = 4;
  cfg.replicas.count = count;
  cfg.replicas.sync = mode;
  cfg.replicas.delay_s = delay_s;
  return cfg;
}

// Request 0 (three blocks) goes to replica 0, request 1 (the same three and
// one more) `gap` seconds later to replica 1.
kvsim::Trace follow_up(double gap) {
  return make_trace(
      {block_request(0, {1, 2, 3}, 3 * 512), block_request(gap, {1, 2, 3, 4}, 4 * 512)}, false);
}

// `n` requests of a built-in generator, prepared as kvroute_sim does.
kvsim::Trace generated(const char* gen, std::size_t n) {
  kvsim::Trace tr = kvsim::generate(gen, n, 4.0);
  kvsim::shape(tr, n, 1);
  kvsim::infer_sessions(tr);
  kvsim::link_sessions(tr);
  return tr;
}

}  // namespace

TEST_CASE("sim replicas: a placement reaches the other replicas after the delay", "[sim]") {
  for (const char* p : {"cache_aware", "least_prefill"}) {
    INFO(p);
    // Heard: the follow-up goes where its prefix is.
    const auto heard = kvsim::run_policy(follow_up(0.5), p, replicated(2, SyncMode::kOn, 0.1));
    REQUIRE(heard.server.size() == 2);
    CHECK(heard.branch[1] == "cache_hit");
    CHECK(heard.server[1] == heard.server[0]);
    CHECK(heard.cached[1] == 3 * 512);
    // Still in flight at the follow-up's time, or never sent: replica 1
    // has not heard of the prefix.
    for (const auto& cfg : {replicated(2, SyncMode::kOn, 1.0), replicated(2, SyncMode::kOff),
                            replicated(2, SyncMode::kLoads)}) {
      const auto deaf = kvsim::run_policy(follow_up(0.5), p, cfg);
      REQUIRE(deaf.server.size() == 2);
      CHECK(deaf.branch[1] != "cache_hit");
      CHECK(deaf.claimed[1] == 0);
    }
  }
}

TEST_CASE("sim replicas: another replica's load arrives after the delay", "[sim]") {
  // Two servers; request 0 (replica 0) is still decoding when request 1
  // (replica 1) comes. power_of_two compares both servers: once replica 1
  // has heard replica 0's load it always avoids request 0's server; before,
  // both are idle to it and it picks either (over eight seeds, both).
  auto trace = [] {
    return make_trace({block_request(0, {1}, 512, {}, 4000), block_request(1.0, {2}, 512)}, false);
  };
  int same_heard = 0, same_deaf = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    kvsim::SimConfig heard = replicated(2, SyncMode::kLoads, 0.1);
    heard.servers = 2;
    heard.seed = seed;
    kvsim::SimConfig late = heard;
    late.replicas.delay_s = 2.0;
    const auto a = kvsim::run_policy(trace(), "power_of_two", heard);
    const auto b = kvsim::run_policy(trace(), "power_of_two", late);
    same_heard += a.server[1] == a.server[0] ? 1 : 0;
    same_deaf += b.server[1] == b.server[0] ? 1 : 0;
  }
  CHECK(same_heard == 0);
  CHECK(same_deaf > 0);
  CHECK(same_deaf < 8);
}

TEST_CASE("sim replicas: syncing recovers the hit rate replicas lose", "[sim]") {
  // A chat workload, several turns per session: unsynced, a turn mostly
  // lands on a replica that never saw the session's earlier turns.
  const kvsim::Trace tr = generated("chat", 1200);
  kvsim::SimConfig on;
  on.replicas.count = 3;
  kvsim::SimConfig off = on;
  off.replicas.sync = SyncMode::kOff;
  for (const char* p : {"cache_aware", "least_prefill", "manual"}) {
    INFO(p);
    const auto a = kvsim::run_policy(tr, p, on);
    const auto b = kvsim::run_policy(tr, p, off);
    CHECK(a.replicas == 3);
    CHECK(b.replicas == 3);
    CHECK(a.hit_rate > b.hit_rate + 0.01);
    // What was counted: every routed text, and bytes only when synced.
    CHECK(a.text_bytes == b.text_bytes);
    CHECK(a.text_bytes > 0);
    CHECK(a.change_bytes > 0);
    CHECK(a.changes > 0);
    CHECK(a.load_bytes > 0);
    CHECK(a.dropped == 0);
    CHECK(b.change_bytes + b.load_bytes == 0);
  }
}

TEST_CASE("sim replicas: the references stay one router and runs repeat exactly", "[sim]") {
  const kvsim::Trace tr = generated("agent", 200);
  kvsim::SimConfig one;
  kvsim::SimConfig three;
  three.replicas.count = 3;
  for (const char* p : {"oracle", "sticky"}) {
    INFO(p);
    const auto a = kvsim::run_policy(tr, p, three);
    CHECK(a.replicas == 1);
    CHECK(a.server == kvsim::run_policy(tr, p, one).server);
  }
  for (const char* p : {"power_of_two", "cache_aware_feedback", "least_prefill"}) {
    INFO(p);
    const auto a = kvsim::run_policy(tr, p, three);
    const auto b = kvsim::run_policy(tr, p, three);
    CHECK(a.server == b.server);
    CHECK(a.ttft == b.ttft);
    CHECK(a.change_bytes == b.change_bytes);
    CHECK(a.load_bytes == b.load_bytes);
  }
}

TEST_CASE("sim replicas: replicas draw independent random streams", "[sim]") {
  // With loads shared at once, power_of_two on three replicas is one
  // power_of_two: unless the replicas' generators run in step and send the
  // same turn's requests to the same pair of servers.
  const kvsim::Trace tr = generated("chat", 2000);
  kvsim::SimConfig one;
  kvsim::SimConfig three;
  three.replicas.count = 3;
  three.replicas.sync = SyncMode::kLoads;
  three.replicas.delay_s = 0;
  three.replicas.load_period_s = 0;  // at every change
  const auto a = kvsim::run_policy(tr, "power_of_two", one);
  const auto b = kvsim::run_policy(tr, "power_of_two", three);
  CHECK(b.ttft_mean < 1.1 * a.ttft_mean);
}

TEST_CASE("sim replicas: the report names the replicas and their bytes", "[sim]") {
  const kvsim::Trace tr = generated("chat", 200);
  kvsim::SimConfig cfg;
  cfg.replicas.count = 2;
  kvsim::Report rep = kvsim::make_report(tr, cfg);
  rep.policies.push_back(kvsim::run_policy(tr, "cache_aware", cfg));
  rep.policies.push_back(kvsim::run_policy(tr, "oracle", cfg));
  CHECK(rep.replicas.find("2 replicas of each kvroute policy") == 0);
  CHECK(rep.replicas.find("oracle and sticky: one router") != std::string::npos);
  const nlohmann::ordered_json j = kvsim::to_json(rep);
  CHECK(j["replicas"] == rep.replicas);
  const auto& sync = j["policies"][0]["sync"];
  CHECK(sync["replicas"] == 2);
  CHECK(sync["bytes_per_request"].get<double>() > 0);
  CHECK(sync["bytes_per_text_byte"].get<double>() > 0);
  CHECK(sync["change_bytes"].get<std::int64_t>() + sync["load_bytes"].get<std::int64_t>() ==
        static_cast<std::int64_t>(std::llround(sync["bytes_per_request"].get<double>() * 200)));
  CHECK_FALSE(j["policies"][1].contains("sync"));  // the reference ran alone
  // The table has the two columns, "-" for the reference, and their legend.
  const std::string text = kvsim::table(rep);
  CHECK(text.find("sync_B/req sync/text") != std::string::npos);
  CHECK(text.find("sync_B/req: ") != std::string::npos);
  CHECK(text.find("sync/text: ") != std::string::npos);
  // One router: neither.
  kvsim::Report single = kvsim::make_report(tr, {});
  single.policies.push_back(kvsim::run_policy(tr, "cache_aware", {}));
  CHECK(kvsim::table(single).find("sync_B/req") == std::string::npos);
  CHECK_FALSE(kvsim::to_json(single).contains("replicas"));
}
