// End to end on 127.0.0.1: routing through kvroute_http_router. Mock workers
// (an exact prefix cache that reports cached tokens) and the router run as
// real processes on free ports.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "http_router/e2e/e2e_support.hpp"

using kve2e::HttpClient;
using kve2e::mock;
using kve2e::Process;
using kve2e::router;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// A multi-turn chat: turn k's messages are turn k-1's plus a reply and a new
// user message.
json chat_turn(int chat, int turn, bool stream = false) {
  json messages = json::array();
  messages.push_back({{"role", "system"}, {"content", "You are a helpful assistant."}});
  for (int t = 0; t <= turn; ++t) {
    messages.push_back(
        {{"role", "user"},
         {"content", "Chat " + std::to_string(chat) + " asks question " + std::to_string(t) + ": " +
                         std::string(120, static_cast<char>('a' + chat))}});
    if (t < turn) messages.push_back({{"role", "assistant"}, {"content", "ok"}});
  }
  return {{"model", "test-model"}, {"messages", messages}, {"stream", stream}};
}

struct ScriptResult {
  std::map<int, std::vector<std::string>> workers_by_chat;  // X-Mock-Worker per turn
  long long cached = 0, prompt = 0;
  int failures = 0;
};

ScriptResult run_chats(int port, int chats, int turns) {
  ScriptResult r;
  HttpClient cli(port);
  for (int turn = 0; turn < turns; ++turn) {
    for (int chat = 0; chat < chats; ++chat) {
      const kve2e::Reply res = cli.post("/v1/chat/completions", chat_turn(chat, turn).dump());
      if (res.status != 200) {
        ++r.failures;
        continue;
      }
      r.workers_by_chat[chat].push_back(res.header("x-mock-worker"));
      const json j = json::parse(res.body);
      r.cached += j["usage"]["prompt_tokens_details"]["cached_tokens"].get<long long>();
      r.prompt += j["usage"]["prompt_tokens"].get<long long>();
    }
  }
  return r;
}

double hit_rate(const ScriptResult& r) {
  return r.prompt == 0 ? 0.0 : static_cast<double>(r.cached) / static_cast<double>(r.prompt);
}

std::string get_metrics(int port) {
  HttpClient cli(port);
  const kve2e::Reply res = cli.get("/metrics");
  REQUIRE(res.status == 200);
  return res.body;
}

}  // namespace

TEST_CASE("http_router: later turns reach the worker that served the earlier ones",
          "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(mock());
  auto cache_aware = router(workers, {"--policy", "cache_aware"});
  const ScriptResult ca = run_chats(cache_aware->port(), 5, 4);
  CHECK(ca.failures == 0);
  std::set<std::string> used;
  for (const auto& [chat, ws] : ca.workers_by_chat) {
    REQUIRE(ws.size() == 4);
    for (const auto& w : ws) CHECK(w == ws.front());
    used.insert(ws.front());
  }
  CHECK(used.size() >= 2);  // the chats spread over the workers

  // The same script through round_robin on fresh workers (5 chats over 3
  // workers, so that round robin does not happen to keep chats in place).
  cache_aware->stop();
  std::vector<std::unique_ptr<Process>> fresh;
  for (int i = 0; i < 3; ++i) fresh.push_back(mock());
  auto rr = router(fresh, {"--policy", "round_robin"});
  const ScriptResult plain = run_chats(rr->port(), 5, 4);
  CHECK(plain.failures == 0);
  INFO("cache_aware hit rate " << hit_rate(ca) << ", round_robin " << hit_rate(plain));
  CHECK(hit_rate(ca) > hit_rate(plain) + 0.2);
}

TEST_CASE("http_router: least_prefill keeps chats on their worker when queues are empty",
          "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(mock());
  auto r = router(workers, {"--policy", "least_prefill"});
  const ScriptResult lp = run_chats(r->port(), 5, 4);
  CHECK(lp.failures == 0);
  for (const auto& [chat, ws] : lp.workers_by_chat) {
    REQUIRE(ws.size() == 4);
    for (const auto& w : ws) CHECK(w == ws.front());
  }
  CHECK(hit_rate(lp) > 0.5);
  CHECK_THAT(get_metrics(r->port()), Catch::Contains("kvroute_tree_nodes{model=\"test-model\"}"));
}

TEST_CASE("http_router: a worker stopped mid-run loses no request and opens its circuit",
          "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(mock());
  auto r = router(workers, {"--policy", "cache_aware", "--cb-failure-threshold", "1",
                            "--cb-timeout-duration-secs", "600", "--prometheus-port", "0"});
  const ScriptResult before = run_chats(r->port(), 6, 2);
  REQUIRE(before.failures == 0);
  // Stop the worker that serves chat 0.
  std::size_t victim = 0;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    if (std::to_string(workers[i]->port()) == before.workers_by_chat.at(0).front()) victim = i;
  }
  const std::string victim_url = workers[victim]->url();
  const std::string victim_port = std::to_string(workers[victim]->port());
  workers[victim]->stop();
  const ScriptResult after = run_chats(r->port(), 6, 4);
  CHECK(after.failures == 0);  // each request retried elsewhere
  for (const auto& [chat, ws] : after.workers_by_chat) {
    for (const auto& w : ws) CHECK(w != victim_port);
  }
  const std::string text = get_metrics(r->metrics_port());
  CHECK(kve2e::metric(text, "smg_worker_cb_state{worker=\"" + victim_url + "\"}") == 1.0);
  CHECK_THAT(r->log(), Catch::Contains("circuit closed -> open"));
}

TEST_CASE("http_router: /metrics, streaming and /generate", "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(mock());
  auto r = router(workers, {"--policy", "cache_aware", "--cb-failure-threshold", "1",
                            "--cb-timeout-duration-secs", "600"});
  HttpClient cli(r->port());
  // Streaming: the worker's SSE chunks arrive through the router.
  const auto s = cli.post("/v1/chat/completions", chat_turn(0, 0, true).dump());
  CHECK(s.status == 200);
  CHECK(s.header("content-type") == "text/event-stream");
  CHECK_THAT(s.body, Catch::Contains("data: [DONE]"));
  // /generate with SGLang's meta_info.
  const auto g = cli.post("/generate", R"({"text": "hello there, general kenobi"})");
  CHECK(g.status == 200);
  CHECK(json::parse(g.body)["meta_info"].contains("cached_tokens"));
  // An HTTP/1.0 client gets the stream without chunked encoding, ended by
  // the connection's close.
  const std::string sb = chat_turn(1, 0, true).dump();
  const int fd = kve2e::raw_connect(r->port());
  REQUIRE(fd >= 0);
  kve2e::raw_send(fd,
                  "POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                  "Content-Length: " +
                      std::to_string(sb.size()) + "\r\n\r\n" + sb);
  const std::string raw10 = kve2e::raw_read_all(fd, 5s);
  close(fd);
  CHECK(raw10.rfind("HTTP/1.0 200", 0) == 0);
  CHECK_THAT(raw10, !Catch::Contains("chunked"));
  CHECK_THAT(raw10, Catch::EndsWith("data: [DONE]\n\n"));
  // A bad body is a 400, not a crash.
  const auto bad = cli.post("/generate", "not json");
  CHECK(bad.status == 400);
  // Stop one worker: its circuit opens, visible in /metrics.
  const std::string dead = workers[0]->url();
  workers[0]->stop();
  for (int i = 0; i < 6; ++i) {
    const auto x = cli.post("/generate", "{\"text\": \"request " + std::to_string(i) + "\"}");
    CHECK(x.status == 200);
  }
  const std::string text = get_metrics(r->port());
  CHECK(kve2e::metric(text, "smg_worker_cb_state{worker=\"" + dead + "\"}") == 1.0);
  CHECK_THAT(text, Catch::Contains("kvroute_policy_branch_total{policy=\"cache_aware\""));
  CHECK_THAT(text, Catch::Contains("smg_worker_retries_total"));
  // promtool, when installed, accepts the exposition.
  const char* promtool = std::getenv("KVROUTE_PROMTOOL");
  if (promtool != nullptr && *promtool != '\0' &&
      std::string(promtool).find("NOTFOUND") == std::string::npos) {
    char path[] = "/tmp/kvroute_metrics_XXXXXX";
    const int tmp_fd = mkstemp(path);
    REQUIRE(tmp_fd >= 0);
    REQUIRE(write(tmp_fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    close(tmp_fd);
    const std::string cmd = std::string(promtool) + " check metrics < " + path;
    CHECK(std::system(cmd.c_str()) == 0);
    unlink(path);
  }
}
