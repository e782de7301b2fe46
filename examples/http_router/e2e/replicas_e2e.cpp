// End to end on 127.0.0.1: router replicas sharing routing state through a
// redis-server the test starts itself (on a unix socket, persistence off).
// Mock workers (an exact prefix cache that reports cached tokens) and the
// routers run as real processes; a client sends multi-turn chats to the
// replicas in turn. The workers' reported hit rates are printed (run the
// binary with -s to see them) and checked against the targets of
// docs/replicas.md.
#include <csignal>

#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "http_router/e2e/e2e_support.hpp"
#include "redis_server.hpp"

using kve2e::HttpClient;
using kve2e::mock;
using kve2e::Process;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

using Procs = std::vector<std::unique_ptr<Process>>;

// Turn `turn` of chat `chat`: the earlier turns, their replies, and a new
// question. Every chat's text is its own from the first character (chunks of
// one chat never repeat another's at the same offset).
json chat_turn(int chat, int turn) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(chat) * 7919 + 17);
  auto words = [&rng](int n) {
    static const char* kWords[] = {"cache", "token", "server", "route",  "prefix", "model",
                                   "query", "reply", "tree",   "worker", "load",   "batch"};
    std::string s;
    for (int i = 0; i < n; ++i) {
      s += kWords[rng() % 12];
      s += ' ';
    }
    return s;
  };
  json messages = json::array();
  messages.push_back(
      {{"role", "system"}, {"content", "Session " + std::to_string(chat) + ". " + words(60)}});
  for (int t = 0; t <= turn; ++t) {
    messages.push_back({{"role", "user"}, {"content", words(80)}});
    if (t < turn) messages.push_back({{"role", "assistant"}, {"content", words(40)}});
  }
  return {{"model", "mock-model"}, {"messages", messages}};
}

struct Tally {
  long long cached = 0, prompt = 0;
  int failures = 0;
  double hit_rate() const {
    return prompt == 0 ? 0.0 : static_cast<double>(cached) / static_cast<double>(prompt);
  }
};

using Routers = std::vector<const Process*>;

Routers all(const Procs& p) {
  Routers out;
  for (const auto& r : p) out.push_back(r.get());
  return out;
}

// Sends turn `turn` of chats [first, last) to the routers in turn.
void send_turn(const Routers& routers, int first, int last, int turn, Tally& t) {
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (const auto& r : routers) clients.push_back(std::make_unique<HttpClient>(r->port()));
  for (int chat = first; chat < last; ++chat) {
    const std::size_t at = static_cast<std::size_t>(chat + turn) % routers.size();
    const kve2e::Reply res =
        clients[at]->post("/v1/chat/completions", chat_turn(chat, turn).dump());
    if (res.status != 200) {
      ++t.failures;
      continue;
    }
    const json j = json::parse(res.body);
    t.cached += j["usage"]["prompt_tokens_details"]["cached_tokens"].get<long long>();
    t.prompt += j["usage"]["prompt_tokens"].get<long long>();
  }
}

Procs mocks(int n) {
  Procs out;
  for (int i = 0; i < n; ++i) out.push_back(mock({"--mock-cache-chars", "16777216"}));
  return out;
}

std::vector<std::string> replica_flags(const kvroute_test::RedisServer& redis,
                                       const std::string& name) {
  return {"--redis-url",           redis.url(), "--replica-name",         name,
          "--sync-flush-ms",       "10",        "--snapshot-interval-ms", "300",
          "--disable-health-check"};
}

Procs replicas(const Procs& workers, const kvroute_test::RedisServer* redis, int n) {
  Procs out;
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> extra = {"--disable-health-check"};
    if (redis != nullptr) extra = replica_flags(*redis, "replica-" + std::to_string(i));
    out.push_back(kve2e::router(workers, extra));
  }
  return out;
}

double sync_metric(const Process& p, const std::string& series) {
  return kve2e::metric(kve2e::metrics_of(p), series).value_or(-1.0);
}

// A chat's next turn comes this long after the last reply of the turn
// before at the earliest (in a fleet, seconds: the generation and the
// user); more than the replicas' flush interval and Redis's round trips.
constexpr auto kThinkTime = 200ms;

// Turns 0..turns-1 of `chats` chats, turn by turn; the tally of the turns
// after the first (the first turn of a chat cannot hit).
Tally run_chats(const Procs& routers, int chats, int turns) {
  Tally first, rest;
  for (int turn = 0; turn < turns; ++turn) {
    send_turn(all(routers), 0, chats, turn, turn == 0 ? first : rest);
    std::this_thread::sleep_for(kThinkTime);
  }
  rest.failures += first.failures;
  return rest;
}

constexpr int kChats = 60;
constexpr int kTurns = 4;

}  // namespace

TEST_CASE("replicas: three routers synced through Redis hit the cache like one",
          "[http_router][e2e][replicas]") {
  kvroute_test::RedisServer redis;
  if (!redis.available()) {
    WARN("redis-server not found: skipped (sh cmake/install-deps.sh installs it)");
    return;
  }
  const Procs w1 = mocks(4);
  const Tally one = run_chats(replicas(w1, nullptr, 1), kChats, kTurns);
  const Procs w2 = mocks(4);
  const Procs synced = replicas(w2, &redis, 3);
  const Tally shared = run_chats(synced, kChats, kTurns);
  const Procs w3 = mocks(4);
  const Tally apart = run_chats(replicas(w3, nullptr, 3), kChats, kTurns);
  std::printf(
      "replicas e2e: hit rate of turns 2-%d, %d chats, 4 workers: one router %.3f, "
      "3 replicas synced %.3f (%.3f of one), 3 replicas unsynced %.3f\n",
      kTurns, kChats, one.hit_rate(), shared.hit_rate(), shared.hit_rate() / one.hit_rate(),
      apart.hit_rate());
  CHECK(one.failures + shared.failures + apart.failures == 0);
  CHECK(one.hit_rate() > 0.5);
  CHECK(shared.hit_rate() >= 0.95 * one.hit_rate());
  CHECK(apart.hit_rate() < shared.hit_rate());
  for (const auto& r : synced) {
    CHECK(sync_metric(*r, "kvroute_sync_connected") == 1.0);
    CHECK(sync_metric(*r, "kvroute_sync_changes_sent_total") > 0);
    CHECK(sync_metric(*r, "kvroute_sync_changes_applied_total") > 0);
    CHECK(sync_metric(*r, "kvroute_sync_peers") == 2.0);
    // Chats add little per turn: their placements carry text (the default
    // sync_text_share), and the turns before were here to extend.
    CHECK(sync_metric(*r, "kvroute_sync_texts_applied_total") > 0);
  }
}

TEST_CASE("replicas: a restarted replica routes warm from its first request",
          "[http_router][e2e][replicas]") {
  kvroute_test::RedisServer redis;
  if (!redis.available()) {
    WARN("redis-server not found: skipped (sh cmake/install-deps.sh installs it)");
    return;
  }
  // Turns 0-2 of 2 x kMany chats go to the three replicas in turn. Then
  // replica 0 restarts, and turn 3 of the first kMany chats (its first
  // requests) is measured against turn 3 of the others on the replicas
  // that stayed: the same turn, so the same share of each prompt cached.
  constexpr int kMany = 100;
  const Procs workers = mocks(4);
  Procs routers = replicas(workers, &redis, 3);
  Tally warmup;
  for (int turn = 0; turn < 3; ++turn) {
    send_turn(all(routers), 0, 2 * kMany, turn, warmup);
    std::this_thread::sleep_for(kThinkTime);
  }
  REQUIRE(kve2e::eventually(
      [&] { return sync_metric(*routers[1], "kvroute_sync_snapshots_written_total") >= 1; }, 10s));

  // Replica 0 dies without a word and comes back under its name.
  routers[0]->signal(SIGKILL);
  REQUIRE(routers[0]->wait_exit(10s).has_value());
  routers[0] = kve2e::router(workers, replica_flags(redis, "replica-0"));
  Tally restarted, steady;
  send_turn({routers[0].get()}, 0, kMany, 3, restarted);
  send_turn({routers[1].get(), routers[2].get()}, kMany, 2 * kMany, 3, steady);
  std::printf(
      "replicas e2e: steady hit rate %.3f; a restarted replica's first %d requests %.3f "
      "(%.3f of steady)\n",
      steady.hit_rate(), kMany, restarted.hit_rate(), restarted.hit_rate() / steady.hit_rate());
  CHECK(warmup.failures + steady.failures + restarted.failures == 0);
  CHECK(restarted.hit_rate() >= 0.9 * steady.hit_rate());
  CHECK(sync_metric(*routers[0], "kvroute_sync_snapshots_restored_total") >= 1);
  CHECK(sync_metric(*routers[0], "kvroute_sync_caught_up") == 1.0);
}

TEST_CASE("replicas: Redis killed under load fails no request, and the replicas catch up",
          "[http_router][e2e][replicas]") {
  kvroute_test::RedisServer redis;
  if (!redis.available()) {
    WARN("redis-server not found: skipped (sh cmake/install-deps.sh installs it)");
    return;
  }
  const Procs workers = mocks(4);
  const Procs routers = replicas(workers, &redis, 3);
  Tally before, during, after;
  send_turn(all(routers), 0, 30, 0, before);
  std::this_thread::sleep_for(kThinkTime);

  redis.kill();
  REQUIRE(kve2e::eventually(
      [&] { return sync_metric(*routers[0], "kvroute_sync_connected") == 0.0; }, 10s));
  // Chats 30-59 start while Redis is down, all on replica 0 (turn 0 of chat
  // c goes to replica c % 3: send them one by one to replica 0).
  for (int chat = 30; chat < 60; ++chat) send_turn({routers[0].get()}, chat, chat + 1, 0, during);
  send_turn(all(routers), 0, 30, 1, during);  // and the others keep routing
  const double applied_down = sync_metric(*routers[1], "kvroute_sync_changes_applied_total");

  redis.start();  // the same socket, empty: no persistence
  for (const auto& r : routers) {
    CHECK(kve2e::eventually([&] { return sync_metric(*r, "kvroute_sync_connected") == 1.0; }, 20s));
    CHECK(sync_metric(*r, "kvroute_sync_reconnects_total") >= 1);
  }
  // What replica 0 routed while Redis was down reaches the others.
  CHECK(kve2e::eventually(
      [&] {
        return sync_metric(*routers[1], "kvroute_sync_changes_applied_total") >= applied_down + 30;
      },
      20s));
  // Turn 1 of chats 30-59 on replicas 1 and 2 finds where replica 0 sent turn 0.
  send_turn({routers[1].get(), routers[2].get()}, 30, 60, 1, after);
  std::printf(
      "replicas e2e: after Redis came back, turn 2 of the chats started while it was "
      "down hit %.3f on the other replicas\n",
      after.hit_rate());
  CHECK(before.failures + during.failures + after.failures == 0);
  CHECK(after.hit_rate() > 0.5);
}

TEST_CASE("replicas: two replicas on --port 0 with default names see each other",
          "[http_router][e2e][replicas]") {
  kvroute_test::RedisServer redis;
  if (!redis.available()) {
    WARN("redis-server not found: skipped (sh cmake/install-deps.sh installs it)");
    return;
  }
  const Procs workers = mocks(2);
  Procs routers;
  for (int i = 0; i < 2; ++i) {
    routers.push_back(kve2e::router(
        workers, {"--redis-url", redis.url(), "--sync-flush-ms", "10", "--disable-health-check"}));
  }
  // One replica's load reaches the other only if their names differ (a
  // replica skips what carries its own name).
  for (const auto& r : routers) {
    CHECK(kve2e::eventually([&] { return sync_metric(*r, "kvroute_sync_peers") == 1.0; }, 10s));
  }
}
