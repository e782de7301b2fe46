// End to end on 127.0.0.1: kvroute_http_router against what the internet
// sends and what failing workers do: slow clients, clients that hang up,
// oversized and malformed requests, workers that error, die mid-stream,
// hang, or answer with malformed usage.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "http_router/e2e/e2e_support.hpp"

using kve2e::chat_body;
using kve2e::count_lines;
using kve2e::eventually;
using kve2e::HttpClient;
using kve2e::metric;
using kve2e::metrics_of;
using kve2e::mock;
using kve2e::Process;
using kve2e::raw_connect;
using kve2e::raw_read_all;
using kve2e::raw_send;
using kve2e::router;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

json mock_stats(const Process& p) { return json::parse(kve2e::mock_stats_text(p)); }

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("http_router: 500 clients sending a byte a second delay no one else",
          "[http_router][e2e][slow]") {
  std::vector<std::unique_ptr<Process>> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(mock());
  auto r = router(workers, {"--header-timeout-secs", "2"});
  kve2e::raise_open_file_limit();
  std::vector<int> slow;
  for (int i = 0; i < 500; ++i) {
    const int fd = raw_connect(r->port());
    REQUIRE(fd >= 0);
    slow.push_back(fd);
  }
  // Each slow client sends the start of a request, one byte a second.
  const std::string head = "POST /v1/chat/completions HTTP/1.1\r\n";
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    for (std::size_t k = 0; k < 4 && !stop; ++k) {
      for (int fd : slow) raw_send(fd, head.substr(k, 1));
      for (int t = 0; t < 50 && !stop; ++t) std::this_thread::sleep_for(20ms);
    }
  });
  HttpClient health(r->port()), chat(r->port());
  double worst_health = 0, worst_chat = 0;
  int ok = 0;
  const auto t_end = std::chrono::steady_clock::now() + 2500ms;
  for (int i = 0; std::chrono::steady_clock::now() < t_end; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    ok += health.get("/health").status == 200 ? 1 : 0;
    worst_health = std::max(worst_health, ms_since(t0));
    t0 = std::chrono::steady_clock::now();
    ok += chat.post("/v1/chat/completions", chat_body("m", "hello " + std::to_string(i))).status ==
                  200
              ? 1
              : 0;
    worst_chat = std::max(worst_chat, ms_since(t0));
    std::this_thread::sleep_for(20ms);
  }
  stop = true;
  trickle.join();
  INFO("worst /health " << worst_health << " ms, worst chat " << worst_chat << " ms over " << ok
                        << " replies");
  CHECK(ok > 40);
  CHECK(worst_health < 100);
  CHECK(worst_chat < 100);
  // The slow clients' heads took longer than --header-timeout-secs: 408.
  std::this_thread::sleep_for(1s);
  int refused = 0;
  for (int i = 0; i < 20; ++i) {
    refused += raw_read_all(slow[static_cast<std::size_t>(i)], 2s).rfind("HTTP/1.1 408", 0) == 0;
  }
  for (int fd : slow) ::close(fd);
  CHECK(refused == 20);
  CHECK(metric(metrics_of(*r), "kvroute_router_rejected_requests_total{reason=\"header_timeout\"}")
            .value_or(0) >= 20);
}

TEST_CASE("http_router: a client hanging up mid-stream is not a worker failure",
          "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(mock({"--mock-chunks", "50", "--mock-chunk-delay-ms", "100"}));
  }
  auto r = router(workers, {"--cb-failure-threshold", "1", "--cb-timeout-duration-secs", "600"});
  for (int i = 0; i < 12; ++i) {
    HttpClient c(r->port());
    const kve2e::Reply first =
        c.start_stream("/v1/chat/completions", chat_body("m", "story " + std::to_string(i), true));
    REQUIRE(first.status == 200);
    REQUIRE_THAT(first.body, Catch::Contains("data: "));
    c.close();  // hang up after the first chunk
  }
  // Every upstream request was cancelled: the workers saw their connections close.
  CHECK(eventually([&] {
    return mock_stats(*workers[0])["cancelled"].get<int>() +
               mock_stats(*workers[1])["cancelled"].get<int>() ==
           12;
  }));
  const std::string text = metrics_of(*r);
  for (const auto& w : workers) {
    CHECK(metric(text, "smg_worker_cb_state{worker=\"" + w->url() + "\"}") == 0.0);
    CHECK(metric(text, "smg_worker_requests_active{worker=\"" + w->url() + "\"}") == 0.0);
    CHECK(metric(text, "kvroute_worker_failures_total{worker=\"" + w->url() + "\"}") == 0.0);
  }
  CHECK(metric(text, "kvroute_router_client_disconnects_total") == 12.0);
  // Everyone else is still served.
  HttpClient c(r->port());
  CHECK(c.post("/v1/chat/completions", chat_body("m", "still there?")).status == 200);
}

TEST_CASE("http_router: worker failures before the first byte are retried elsewhere",
          "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock({"--mock-mode", "error"}));  // 500
  workers.push_back(mock({"--mock-mode", "reset"}));  // closes without a reply
  workers.push_back(mock({"--mock-mode", "cut"}));    // a reply cut after its first chunk
  workers.push_back(mock());
  const std::string good = std::to_string(workers[3]->port());
  auto r = router(workers, {"--policy", "round_robin", "--retry-initial-backoff-ms", "1",
                            "--retry-max-backoff-ms", "5", "--cb-failure-threshold", "1000"});
  HttpClient c(r->port());
  for (int i = 0; i < 12; ++i) {
    const kve2e::Reply res =
        c.post("/v1/chat/completions", chat_body("m", "q" + std::to_string(i)));
    CHECK(res.status == 200);
    CHECK(res.header("x-mock-worker") == good);
  }
  // Streamed: the cut worker's first chunk would reach the client, so it
  // leaves the pool; the others fail before any byte of body.
  REQUIRE(HttpClient(r->port())
              .request(kve2e::http::verb::delete_, "/workers?url=" + workers[2]->url(), "", {}, 5s)
              .status == 200);
  for (int i = 0; i < 12; ++i) {
    const kve2e::Reply res =
        c.post("/v1/chat/completions", chat_body("m", "s" + std::to_string(i), true));
    CHECK(res.status == 200);
    CHECK(res.header("x-mock-worker") == good);
    CHECK_THAT(res.body, Catch::Contains("data: [DONE]"));
    CHECK_THAT(res.body, !Catch::Contains("\"error\""));
  }
  const std::string text = metrics_of(*r);
  CHECK(metric(text, "smg_worker_retries_total{policy=\"round_robin\"}").value_or(0) >= 6);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(metric(text, "kvroute_worker_failures_total{worker=\"" + workers[i]->url() + "\"}")
              .value_or(0) >= 2);
  }
  CHECK(metric(text, "kvroute_router_truncated_streams_total") == 0.0);
}

TEST_CASE("http_router: a stream that breaks off ends with an error event, never [DONE]",
          "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock({"--mock-mode", "cut", "--mock-chunks", "5"}));
  auto r = router(workers, {"--retry-initial-backoff-ms", "1", "--retry-max-backoff-ms", "5"});
  HttpClient c(r->port());
  const kve2e::Reply s = c.post("/v1/chat/completions", chat_body("m", "tell me more", true));
  CHECK(s.status == 200);  // the head left with the first chunk
  CHECK_THAT(s.body, Catch::Contains("\"delta\""));
  CHECK_THAT(s.body, Catch::Contains("data: {\"error\""));
  CHECK_THAT(s.body, !Catch::Contains("[DONE]"));
  // Not streamed: nothing reached the client yet, so no 200 around the failure.
  const kve2e::Reply b = HttpClient(r->port()).post("/generate", R"({"text": "x"})");
  CHECK(b.status == 502);
  CHECK_THAT(b.body, Catch::Contains("\"error\""));
  // Every worker answering 500: the client gets the 500, not a 200.
  auto failing = mock({"--mock-mode", "error"});
  std::vector<std::unique_ptr<Process>> only_failing;
  only_failing.push_back(std::move(failing));
  auto r2 =
      router(only_failing, {"--retry-initial-backoff-ms", "1", "--retry-max-backoff-ms", "5"});
  CHECK(HttpClient(r2->port()).post("/generate", R"({"text": "x"})").status == 500);
  CHECK(metric(metrics_of(*r), "kvroute_router_truncated_streams_total") == 1.0);
  CHECK(metric(metrics_of(*r2), "smg_worker_retries_exhausted_total{policy=\"cache_aware\"}") ==
        1.0);
}

TEST_CASE("http_router: body, header and time limits have their own status", "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock());
  auto r = router(workers, {"--max-payload-size", "1000", "--max-header-count", "20",
                            "--max-header-bytes", "2048", "--body-timeout-secs", "1"});
  HttpClient c(r->port());
  const kve2e::Reply big = c.post("/generate", std::string(2000, ' '));
  CHECK(big.status == 413);
  CHECK_THAT(big.body, Catch::Contains("--max-payload-size"));
  // A chunked body that grows past the limit.
  int fd = raw_connect(r->port());
  raw_send(fd, "POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  for (int i = 0; i < 3; ++i) raw_send(fd, "200\r\n" + std::string(512, 'a') + "\r\n");
  CHECK(raw_read_all(fd, 3s).rfind("HTTP/1.1 413", 0) == 0);
  ::close(fd);
  kve2e::Headers many;
  for (int i = 0; i < 30; ++i) many.emplace_back("x-h" + std::to_string(i), "v");
  CHECK(HttpClient(r->port()).get("/health", many).status == 431);
  CHECK(HttpClient(r->port()).get("/health", {{"x-big", std::string(3000, 'b')}}).status == 431);
  // A body that stops arriving.
  fd = raw_connect(r->port());
  raw_send(fd, "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"text\"");
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(raw_read_all(fd, 5s).rfind("HTTP/1.1 408", 0) == 0);
  CHECK(ms_since(t0) < 3000);
  ::close(fd);
  const std::string text = metrics_of(*r);
  CHECK(metric(text, "kvroute_router_rejected_requests_total{reason=\"payload_too_large\"}") ==
        2.0);
  CHECK(metric(text, "kvroute_router_rejected_requests_total{reason=\"too_many_headers\"}") == 1.0);
  CHECK(metric(text, "kvroute_router_rejected_requests_total{reason=\"header_too_large\"}") == 1.0);
  CHECK(metric(text, "kvroute_router_rejected_requests_total{reason=\"body_timeout\"}") == 1.0);
  CHECK(mock_stats(*workers[0])["requests"] == 0);  // none reached the worker
}

TEST_CASE("http_router: --request-timeout-secs answers 504 and cancels the worker's request",
          "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock({"--mock-mode", "hang"}));
  auto r = router(workers, {"--request-timeout-secs", "1"});
  const auto t0 = std::chrono::steady_clock::now();
  const kve2e::Reply res = HttpClient(r->port()).post("/generate", R"({"text": "x"})");
  CHECK(res.status == 504);
  CHECK_THAT(res.body, Catch::Contains("--request-timeout-secs"));
  CHECK(ms_since(t0) < 2500);
  CHECK(eventually([&] { return mock_stats(*workers[0])["cancelled"] == 1; }));
  // A client that hangs up on a whole (not streamed) request cancels it too.
  const std::string body = R"({"text": "y"})";
  const int fd = raw_connect(r->port());
  raw_send(fd, "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n" + body);
  std::this_thread::sleep_for(300ms);
  ::close(fd);
  CHECK(eventually([&] { return mock_stats(*workers[0])["cancelled"] == 2; }, 700ms));
  const std::string text = metrics_of(*r);
  CHECK(metric(text, "kvroute_router_client_disconnects_total") == 1.0);
  CHECK(metric(text, "kvroute_router_request_timeouts_total") == 1.0);
  CHECK(metric(text, "smg_worker_cb_state{worker=\"" + workers[0]->url() + "\"}") == 0.0);
}

TEST_CASE("http_router: wrong JSON types are a 400 naming the field", "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock());
  auto r = router(workers);
  HttpClient c(r->port());
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"/v1/chat/completions", R"({"model": 5, "messages": []})", "model"},
      {"/v1/chat/completions", R"({"messages": "hi"})", "messages"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": 5}]})",
       "messages[0].content"},
      {"/v1/chat/completions", R"({"messages": [{"content": [{"type": 1}]}]})",
       "messages[0].content[0].type"},
      {"/v1/chat/completions", R"({"messages": [], "stream": "yes"})", "stream"},
      {"/v1/completions", R"({"prompt": {"a": 1}})", "prompt"},
      {"/generate", R"({"input_ids": ["a"]})", "input_ids"},
      {"/generate", R"({"text": [1, 2]})", "text[0]"},
      {"/generate", R"([1, 2, 3])", "body"},
      {"/generate", R"({"text": "unterminated)", "not valid JSON"},
  };
  for (const auto& [path, body, field] : cases) {
    const kve2e::Reply res = c.post(path, body);
    INFO(path << " " << body);
    CHECK(res.status == 400);
    CHECK_THAT(res.body, Catch::Contains(field));
    CHECK(json::parse(res.body)["error"]["type"] == "invalid_request_error");
    for (const auto& [name, value] : res.headers) {
      CHECK(value.find("exception") == std::string::npos);
    }
  }
  CHECK(mock_stats(*workers[0])["requests"] == 0);
  CHECK(c.post("/generate", R"({"text": "fine"})").status == 200);  // still serving
}

TEST_CASE("http_router: header values with CR, LF or NUL are refused, never forwarded",
          "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock());
  auto r = router(workers);
  const std::string body = R"({"text": "hi"})";
  for (const std::string& bad :
       {std::string("a\0b", 3), std::string("a\rb"), std::string("a\nb")}) {
    const int fd = raw_connect(r->port());
    raw_send(fd, "POST /generate HTTP/1.1\r\nHost: x\r\nX-Bad: " + bad +
                     "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    const std::string reply = raw_read_all(fd, 3s);
    ::close(fd);
    CHECK(reply.rfind("HTTP/1.1 400", 0) == 0);
  }
  CHECK(mock_stats(*workers[0])["requests"] == 0);
}

TEST_CASE("http_router: a malformed worker response never takes the router down",
          "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock({"--mock-mode", "malformed"}));
  for (const char* policy : {"cache_aware", "least_prefill"}) {
    auto r = router(workers, {"--policy", policy});
    HttpClient c(r->port());
    for (int i = 0; i < 3; ++i) {
      CHECK(c.post("/v1/chat/completions", chat_body("m", "same prompt")).status == 200);
      const kve2e::Reply s = c.post("/v1/chat/completions", chat_body("m", "same prompt", true));
      CHECK(s.status == 200);
      CHECK_THAT(s.body, Catch::Contains("[DONE]"));
      CHECK(c.post("/generate", R"({"text": "same prompt"})").status == 200);
    }
    CHECK(metric(metrics_of(*r), "kvroute_router_malformed_responses_total") == 9.0);
    CHECK(r->stop() == 0);  // alive until asked to stop
  }
}

TEST_CASE("http_router: a slow /metrics render never holds up routing", "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock());
  auto r = router(workers, {"--test-metrics-delay-ms", "1500"});
  std::atomic<int> metrics_status{0};
  std::thread scrape([&] { metrics_status = HttpClient(r->port()).get("/metrics").status; });
  std::this_thread::sleep_for(100ms);  // the render is under way
  HttpClient c(r->port());
  double worst = 0;
  for (int i = 0; i < 20; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(c.post("/generate", "{\"text\": \"q" + std::to_string(i) + "\"}").status == 200);
    worst = std::max(worst, ms_since(t0));
  }
  CHECK(metrics_status == 0);  // still rendering
  scrape.join();
  CHECK(metrics_status == 200);
  CHECK(worst < 100);
}

TEST_CASE("http_router: --write-timeout-secs times the client's reads, not the worker's pauses",
          "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock({"--mock-chunks", "2", "--mock-chunk-delay-ms", "1300"}));
  auto r = router(workers, {"--write-timeout-secs", "1"});
  const kve2e::Reply s =
      HttpClient(r->port()).post("/v1/chat/completions", chat_body("m", "take your time", true));
  CHECK(s.status == 200);
  CHECK_THAT(s.body, Catch::Contains("data: [DONE]"));
  CHECK(count_lines(s.body, "data: {\"choices\":[{") == 2);
}
