// End to end on 127.0.0.1: what an operator of kvroute_http_router uses:
// --help and flag errors, logs, request ids, active health checks, the probe
// endpoints, /workers at runtime (behind --api-key), /v1/models, connection
// reuse to workers, bounded model trees and metrics series, graceful
// shutdown, and the mock worker's cache budget.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "http_router/e2e/e2e_support.hpp"

extern char** environ;

using kve2e::chat_body;
using kve2e::eventually;
using kve2e::HttpClient;
using kve2e::metric;
using kve2e::metrics_of;
using kve2e::mock;
using kve2e::Process;
using kve2e::router;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

json mock_stats(const Process& p) { return json::parse(kve2e::mock_stats_text(p)); }

// Runs the program with `args` to completion; returns its exit status and
// what it printed (stdout and stderr together).
std::pair<int, std::string> run_to_exit(std::vector<std::string> args) {
  char path[] = "/tmp/kvroute_e2e_out_XXXXXX";
  const int fd = mkstemp(path);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, fd, STDERR_FILENO);
  args.insert(args.begin(), kve2e::router_binary());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  REQUIRE(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  waitpid(pid, &status, 0);
  close(fd);
  std::string out;
  if (FILE* f = std::fopen(path, "r")) {
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
    std::fclose(f);
  }
  unlink(path);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace

TEST_CASE("http_router: --help, and flag errors that name the flag", "[http_router][e2e]") {
  auto [help_rc, help] = run_to_exit({"--help"});
  CHECK(help_rc == 0);
  for (const char* flag :
       {"--worker-urls", "--max-payload-size", "--request-timeout-secs",
        "--health-check-interval-secs", "--api-key", "--log-level", "--request-id-headers",
        "--shutdown-grace-secs", "--max-models", "--redis-url", "--replica-name", "--sync-flush-ms",
        "--sync-flush-bytes"}) {
    CHECK_THAT(help, Catch::Contains(flag));
  }
  auto [bad_rc, bad] = run_to_exit({"--worker-urls", "http://127.0.0.1:1", "--no-such-flag"});
  CHECK(bad_rc == 2);
  CHECK_THAT(bad, Catch::Contains("--no-such-flag"));
  auto [url_rc, url] = run_to_exit({"--worker-urls", "127.0.0.1:30001"});
  CHECK(url_rc == 2);
  CHECK_THAT(url, Catch::Contains("127.0.0.1:30001") && Catch::Contains("http://"));
  auto [num_rc, num] = run_to_exit({"--worker-urls", "http://a:1", "--request-timeout-secs", "x"});
  CHECK(num_rc == 2);
  CHECK_THAT(num, Catch::Contains("--request-timeout-secs"));
  // Replica flags: checked before anything starts.
  for (const auto& [flag, value, says] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"--redis-url", "http://127.0.0.1:6379", "redis://"},
           {"--redis-url", "redis://127.0.0.1:99999", "99999"},
           {"--redis-url", "unix://", "unix://"},
           {"--replica-name", "", "--replica-name"},
           {"--sync-flush-ms", "0", "--sync-flush-ms"},
           {"--sync-flush-bytes", "-1", "--sync-flush-bytes"},
           {"--redis-catch-up-ms", "-1", "--redis-catch-up-ms"}}) {
    auto [rc, out] = run_to_exit({"--worker-urls", "http://a:1", flag, value});
    INFO(flag << " " << value << ": " << out);
    CHECK(rc == 2);
    CHECK_THAT(out, Catch::Contains(flag) && Catch::Contains(says));
  }
  auto [none_rc, none] = run_to_exit({});
  CHECK(none_rc == 2);
  CHECK_THAT(none, Catch::Contains("--worker-urls"));
}

TEST_CASE("http_router: request ids go to the worker and come back", "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock());
  auto r = router(workers);
  HttpClient c(r->port());
  const kve2e::Reply given =
      c.post("/v1/chat/completions", chat_body("m", "hi"), {{"x-request-id", "client-id-1"}});
  CHECK(given.header("x-request-id") == "client-id-1");
  CHECK(given.header("x-mock-saw-request-id") == "client-id-1");
  const kve2e::Reply trace = c.post("/generate", R"({"text": "hi"})", {{"x-trace-id", "trace-7"}});
  CHECK(trace.header("x-request-id") == "trace-7");
  CHECK(mock_stats(*workers[0])["last_request_id"] == "trace-7");
  const kve2e::Reply made = c.post("/v1/chat/completions", chat_body("m", "hi"));
  CHECK(made.header("x-request-id").rfind("chatcmpl-", 0) == 0);
  CHECK(made.header("x-request-id") == made.header("x-mock-saw-request-id"));
  // --request-id-headers replaces the list.
  auto custom = router(workers, {"--request-id-headers", "x-my-id"});
  const kve2e::Reply mine =
      HttpClient(custom->port()).post("/generate", R"({"text": "hi"})", {{"x-my-id", "abc"}});
  CHECK(mine.header("x-request-id") == "abc");
  CHECK(mock_stats(*workers[0])["last_request_id"] == "abc");
}

TEST_CASE("http_router: active health checks take workers out and back, with logs",
          "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock({"--mock-mode", "unhealthy"}));
  workers.push_back(mock());
  auto r = router(workers, {"--health-check-interval-secs", "1", "--health-failure-threshold", "2",
                            "--health-success-threshold", "2", "--health-check-timeout-secs", "1"});
  const std::string sick = "smg_worker_health{worker=\"" + workers[0]->url() + "\"}";
  CHECK(eventually([&] { return metric(metrics_of(*r), sick) == 0.0; }, 5s));
  CHECK_THAT(r->log(), Catch::Contains("worker " + workers[0]->url() + " is unhealthy"));
  HttpClient c(r->port());
  for (int i = 0; i < 6; ++i) {
    CHECK(
        c.post("/generate", "{\"text\": \"t" + std::to_string(i) + "\"}").header("x-mock-worker") ==
        std::to_string(workers[1]->port()));
  }
  REQUIRE(HttpClient(workers[0]->port())
              .post("/mock/mode", "ok", {{"content-type", "text/plain"}})
              .status == 200);
  CHECK(eventually([&] { return metric(metrics_of(*r), sick) == 1.0; }, 5s));
  CHECK_THAT(r->log(), Catch::Contains("worker " + workers[0]->url() + " is healthy again"));
  // --health-check-endpoint: a path the worker does not serve fails every check.
  auto wrong = router(workers, {"--health-check-interval-secs", "1", "--health-failure-threshold",
                                "1", "--health-check-endpoint", "/not-here"});
  CHECK(eventually([&] { return HttpClient(wrong->port()).get("/readiness").status == 503; }, 4s));
}

TEST_CASE("http_router: /health, /liveness and /readiness", "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock());
  auto r =
      router(workers, {"--health-check-interval-secs", "1", "--health-failure-threshold", "1"});
  HttpClient c(r->port());
  CHECK(c.get("/health").status == 200);
  CHECK(c.get("/liveness").status == 200);
  CHECK(c.get("/readiness").status == 200);
  CHECK(c.post("/health", "").status == 405);
  CHECK(c.get("/nowhere").status == 404);
  workers[0]->stop();  // no worker left: not ready, still alive
  CHECK(eventually([&] { return c.get("/readiness").status == 503; }, 4s));
  CHECK(c.get("/liveness").status == 200);
}

TEST_CASE("http_router: /workers lists, adds and removes workers behind --api-key",
          "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock());
  auto r = router(workers, {"--api-key", "s3cret"});
  HttpClient c(r->port());
  const kve2e::Headers auth = {{"authorization", "Bearer s3cret"}};
  CHECK(c.get("/workers").status == 401);
  CHECK(c.get("/workers", {{"authorization", "Bearer wrong!"}}).status == 401);
  const kve2e::Reply list = c.get("/workers", auth);
  REQUIRE(list.status == 200);
  CHECK(json::parse(list.body)["workers"][0]["url"] == workers[0]->url());
  auto added = mock();
  CHECK(c.post("/workers", "{\"url\": \"" + added->url() + "\"}", auth).status == 201);
  CHECK(c.post("/workers", "{\"url\": \"" + added->url() + "\"}", auth).status == 409);
  CHECK(c.post("/workers", R"({"url": "ftp://x"})", auth).status == 400);
  CHECK(json::parse(c.get("/workers", auth).body)["workers"].size() == 2);
  // The new worker takes traffic.
  workers[0]->stop();
  CHECK(c.post("/generate", R"({"text": "to the new one"})").header("x-mock-worker") ==
        std::to_string(added->port()));
  CHECK_THAT(metrics_of(*r), Catch::Contains("worker=\"" + workers[0]->url() + "\""));
  // Removing a worker removes its series from /metrics.
  CHECK(c.request(kve2e::http::verb::delete_, "/workers?url=" + workers[0]->url(), "", auth, 5s)
            .status == 200);
  CHECK(c.request(kve2e::http::verb::delete_, "/workers?url=" + workers[0]->url(), "", auth, 5s)
            .status == 404);
  const std::string text = metrics_of(*r);
  CHECK_THAT(text, !Catch::Contains("worker=\"" + workers[0]->url() + "\""));
  CHECK_THAT(text, Catch::Contains("worker=\"" + added->url() + "\""));
  CHECK_THAT(r->log(), Catch::Contains("worker " + added->url() + " added") &&
                           Catch::Contains("worker " + workers[0]->url() + " removed"));
}

TEST_CASE("http_router: /v1/models comes from a worker", "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock({"--mock-model", "llama-test"}));
  auto r = router(workers);
  const kve2e::Reply res = HttpClient(r->port()).get("/v1/models");
  CHECK(res.status == 200);
  CHECK(json::parse(res.body)["data"][0]["id"] == "llama-test");
}

TEST_CASE("http_router: keep-alive connections to the workers are reused, without Nagle stalls",
          "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock());
  auto r = router(workers, {"--threads", "1"});
  HttpClient c(r->port());
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i) {
    REQUIRE(c.post("/generate", "{\"text\": \"n" + std::to_string(i) + "\"}").status == 200);
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  INFO("200 sequential requests in " << ms << " ms");
  CHECK(ms < 4000);  // a Nagle/delayed-ACK stall costs ~40 ms per request (8 s here)
  CHECK(mock_stats(*workers[0])["connections"].get<int>() <= 3);  // with a health check's
}

TEST_CASE("http_router: --max-models bounds the trees and their metrics series",
          "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock());
  auto r = router(workers, {"--max-models", "4"});
  HttpClient c(r->port());
  for (int i = 0; i < 40; ++i) {
    CHECK(c.post("/v1/chat/completions", chat_body("invented-" + std::to_string(i), "hello"))
              .status == 200);
  }
  const std::string text = metrics_of(*r);
  CHECK(kve2e::count_lines(text, "kvroute_tree_nodes{") == 4);
  CHECK(metric(text, "kvroute_router_models") == 4.0);
  // 37: the tree of requests without a model, made when the worker
  // registered, went first.
  CHECK(metric(text, "kvroute_router_models_dropped_total") == 37.0);
  CHECK_THAT(text, Catch::Contains("model=\"invented-39\""));
  CHECK_THAT(text, !Catch::Contains("model=\"invented-0\""));
}

TEST_CASE("http_router: logs are events at info, requests only at debug", "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock());
  auto info = router(workers);
  auto debug = router(workers, {"--log-level", "debug"});
  for (const auto* r : {info.get(), debug.get()}) {
    HttpClient c(r->port());
    for (int i = 0; i < 10; ++i) c.post("/generate", R"({"text": "x"})");
  }
  CHECK(kve2e::count_lines(info->log(), "") <= 4);  // start-up lines only
  CHECK_THAT(info->log(), Catch::Contains("INFO worker " + workers[0]->url() + " added"));
  CHECK_THAT(debug->log(), Catch::Contains("DEBUG request gnt-"));
}

TEST_CASE("http_router: SIGTERM drains in-flight requests, then exits 0", "[http_router][e2e]") {
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock({"--mock-chunks", "10", "--mock-chunk-delay-ms", "100"}));
  auto r = router(workers, {"--shutdown-grace-secs", "10"});
  HttpClient c(r->port());
  const kve2e::Reply first = c.start_stream("/v1/chat/completions", chat_body("m", "a", true));
  REQUIRE(first.status == 200);
  HttpClient idle(r->port());
  REQUIRE(idle.get("/health").status == 200);  // an idle keep-alive connection
  r->signal(SIGTERM);
  // No new connections; the stream in flight completes.
  CHECK(eventually([&] { return kve2e::raw_connect(r->port(), 200ms) < 0; }, 2s));
  std::string body = first.body;
  bool done = false;
  while (!done) body += c.read_more(5s, &done);
  CHECK_THAT(body, Catch::Contains("data: [DONE]"));
  CHECK(r->wait_exit(5s) == 0);
  CHECK_THAT(r->log(), Catch::Contains("shutting down") && Catch::Contains("shut down"));
  // With a short grace, a longer request is cut at the deadline; still exit 0.
  auto slow = mock({"--mock-chunks", "100", "--mock-chunk-delay-ms", "100"});
  std::vector<std::unique_ptr<Process>> slow_workers;
  slow_workers.push_back(std::move(slow));
  auto r2 = router(slow_workers, {"--shutdown-grace-secs", "1"});
  HttpClient c2(r2->port());
  REQUIRE(c2.start_stream("/v1/chat/completions", chat_body("m", "b", true)).status == 200);
  const auto t0 = std::chrono::steady_clock::now();
  r2->signal(SIGTERM);
  CHECK(r2->wait_exit(5s) == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);
  CHECK_THAT(r2->log(), Catch::Contains("grace period over"));
}

TEST_CASE("mock worker: the prefix cache keeps to its budget", "[http_router][e2e]") {
  auto w = mock({"--mock-cache-chars", "1000"});
  HttpClient c(w->port());
  auto cached = [&](int i) {
    const std::string text = std::to_string(i) + std::string(399, 'a' + static_cast<char>(i % 26));
    return json::parse(c.post("/generate", "{\"text\": \"" + text + "\"}")
                           .body)["meta_info"]["cached_tokens"]
        .get<int>();
  };
  for (int i = 0; i < 10; ++i) CHECK(cached(i) == 0);  // distinct prompts
  CHECK(mock_stats(*w)["cache_chars"].get<int>() <= 1000);
  CHECK(cached(9) == 100);  // the most recent prompt is still cached
  CHECK(cached(0) == 0);    // the oldest was evicted
}
