// kvroute_http_router: a reverse proxy in front of SGLang-style workers, built
// on cpp-httplib, showing kvroute in a real request path. kvroute itself has
// no networking; this program is where the sockets live.
//
//   kvroute_http_router --worker-urls http://127.0.0.1:30001 http://127.0.0.1:30002
//       --policy cache_aware --port 30000   (one command line)
//
// Per request (POST /generate, /v1/chat/completions, /v1/completions):
//   routing text from the body -> select (avoiding workers that failed this
//   request) -> circuit-breaker permit -> load guard held for the whole
//   response -> forward (streaming responses stream) -> breaker outcome ->
//   retry elsewhere on 408/429/5xx or a transport error -> the worker's
//   reported cached tokens fed back to cache_aware's tree.
// GET /metrics serves Prometheus text (on --prometheus-port when given).
//
// `--mock-worker` turns the program into a test worker instead: it keeps an
// exact prefix cache of every prompt it served and reports cached tokens in
// SGLang's and OpenAI's response fields (4 characters per token).
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "http_router/request_text.hpp"
#include "kvroute/kvroute.hpp"

namespace {

using nlohmann::json;

struct Flags {
  std::string host = "127.0.0.1";
  int port = 30000;  // 0: any free port (printed on stdout)
  std::vector<std::string> worker_urls;
  int prometheus_port = -1;  // -1: /metrics on the main port
  int request_timeout_secs = 1800;
  std::uint32_t max_attempts = 5;
  std::uint32_t cb_failure_threshold = 10;
  int cb_timeout_secs = 60;
  bool mock_worker = false;
  kvroute::PolicyConfig policy;
};

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "kvroute_http_router: %s\n", what.c_str());
  std::exit(2);
}

int to_int(const std::string& flag, const std::string& v, int lo, int hi) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo || x > hi) {
    usage_error(flag + ": '" + v + "' is not an integer in [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "]");
  }
  return static_cast<int>(x);
}

Flags parse_flags(int argc, char** argv) {
  Flags f;
  std::vector<std::string> rest;
  auto cfg = kvroute::parse_policy_flags(argc, argv, &rest);
  if (!cfg.ok()) usage_error(std::string(cfg.status().message()));
  f.policy = *cfg;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    std::string a = rest[i];
    std::string inline_value;
    bool has_inline = false;
    if (auto eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
      inline_value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_inline = true;
    }
    auto value = [&]() -> std::string {
      if (has_inline) return inline_value;
      if (i + 1 >= rest.size()) usage_error(a + ": missing value");
      return rest[++i];
    };
    if (a == "--host") {
      f.host = value();
    } else if (a == "--port") {
      f.port = to_int(a, value(), 0, 65535);
    } else if (a == "--worker-urls") {
      if (has_inline) f.worker_urls.push_back(inline_value);
      while (i + 1 < rest.size() && rest[i + 1].rfind("--", 0) != 0) {
        f.worker_urls.push_back(rest[++i]);
      }
    } else if (a == "--prometheus-port") {
      f.prometheus_port = to_int(a, value(), 0, 65535);
    } else if (a == "--request-timeout-secs") {
      f.request_timeout_secs = to_int(a, value(), 1, 86400);
    } else if (a == "--retry-max-retries") {
      f.max_attempts = static_cast<std::uint32_t>(to_int(a, value(), 1, 100));
    } else if (a == "--cb-failure-threshold") {
      f.cb_failure_threshold = static_cast<std::uint32_t>(to_int(a, value(), 1, 1000000));
    } else if (a == "--cb-timeout-duration-secs") {
      f.cb_timeout_secs = to_int(a, value(), 1, 86400);
    } else if (a == "--mock-worker") {
      f.mock_worker = true;
    } else {
      usage_error(a + ": unknown flag");
    }
  }
  if (!f.mock_worker && f.worker_urls.empty()) usage_error("--worker-urls: give at least one URL");
  return f;
}

// Listens on `port` (0: any) and prints the port, so tests can find it.
int bind_or_die(httplib::Server& svr, const std::string& host, int port, const char* what) {
  const int bound =
      port == 0 ? svr.bind_to_any_port(host) : (svr.bind_to_port(host, port) ? port : -1);
  if (bound < 0) usage_error(std::string("cannot listen on ") + host + ":" + std::to_string(port));
  std::printf("%s listening on %s:%d\n", what, host.c_str(), bound);
  std::fflush(stdout);
  return bound;
}

// ----------------------------------------------------------------------------
// The mock worker.

int run_mock_worker(const Flags& f) {
  std::mutex mu;
  std::vector<std::string> served;  // every prompt, for the exact prefix cache
  httplib::Server svr;
  int port = 0;
  auto handle = [&](const httplib::Request& req, httplib::Response& res) {
    json body = json::parse(req.body, nullptr, false);
    const std::string text = kvexample::routing_text(req.path, body);
    std::size_t lcp = 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (const std::string& s : served) {
        std::size_t k = 0;
        while (k < s.size() && k < text.size() && s[k] == text[k]) ++k;
        lcp = std::max(lcp, k);
      }
      served.push_back(text);
    }
    const long long prompt_tokens = static_cast<long long>((text.size() + 3) / 4);
    const long long cached_tokens = static_cast<long long>(lcp / 4);
    json usage = {{"prompt_tokens", prompt_tokens},
                  {"completion_tokens", 1},
                  {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
    res.set_header("X-Mock-Worker", std::to_string(port));
    if (body.is_object() && body.value("stream", false)) {
      json chunk = {{"choices", {{{"index", 0}, {"delta", {{"content", "ok"}}}}}}};
      json last = {{"choices", json::array()}, {"usage", usage}};
      std::string sse =
          "data: " + chunk.dump() + "\n\ndata: " + last.dump() + "\n\ndata: [DONE]\n\n";
      res.set_content(sse, "text/event-stream");
      return;
    }
    json out;
    if (req.path == "/generate") {
      out = {{"text", "ok"},
             {"meta_info", {{"prompt_tokens", prompt_tokens}, {"cached_tokens", cached_tokens}}}};
    } else {
      out = {{"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", "ok"}}}}}},
             {"usage", usage}};
    }
    res.set_content(out.dump(), "application/json");
  };
  for (const char* p : {"/generate", "/v1/chat/completions", "/v1/completions"})
    svr.Post(p, handle);
  svr.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });
  port = bind_or_die(svr, f.host, f.port, "mock worker");
  return svr.listen_after_bind() ? 0 : 1;
}

// ----------------------------------------------------------------------------
// The router.

class Proxy {
 public:
  explicit Proxy(const Flags& f, kvroute::AnyPolicy policy)
      : flags_(f),
        router_(std::move(policy)),
        breakers_(router_.circuits(), {.failure_threshold = f.cb_failure_threshold,
                                       .open_timeout = std::chrono::seconds(f.cb_timeout_secs)}),
        metrics_(registry_, router_.policy().name()),
        retry_({.max_attempts = f.max_attempts}) {
    for (const std::string& url : f.worker_urls) {
      if (auto id = router_.add_worker({.url = url}); !id.ok()) {
        usage_error("--worker-urls: " + std::string(id.status().message()));
      }
    }
  }

  void handle(const httplib::Request& req, httplib::Response& res) {
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      res.status = 400;
      res.set_content(R"({"error":"request body is not a JSON object"})", "application/json");
      return;
    }
    auto ctx = std::make_shared<Call>();
    ctx->path = req.path;
    ctx->text = kvexample::routing_text(req.path, body);
    ctx->model = body.value("model", "");
    ctx->body = req.body;
    ctx->content_type =
        req.has_header("Content-Type") ? req.get_header_value("Content-Type") : "application/json";
    for (const auto& [k, v] : req.headers) {
      if (kvroute::detail::ascii_iequals(k, "x-smg-routing-key") ||
          kvroute::detail::ascii_iequals(k, "x-smg-target-worker") ||
          kvroute::detail::ascii_iequals(k, "authorization") ||
          kvroute::detail::ascii_iequals(k, "cookie") ||
          kvroute::detail::ascii_iequals(k, "x-forwarded-for")) {
        ctx->headers.emplace_back(k, v);
      }
    }
    if (body.value("stream", false)) {
      // The guard and the retries live in the content provider, which runs
      // while the response streams; an upstream failure after the first byte
      // cannot be retried and ends the stream.
      res.set_chunked_content_provider("text/event-stream",
                                       [this, ctx](std::size_t, httplib::DataSink& sink) {
                                         forward_streaming(*ctx, sink);
                                         sink.done();
                                         return true;
                                       });
      return;
    }
    forward(*ctx, res);
  }

  std::string render_metrics() {
    metrics_.observe_workers(*router_.workers().snapshot(), router_.load(), &breakers_);
    std::lock_guard<std::mutex> lock(models_mu_);
    for (const std::string& m : models_) {
      const kvroute::ApproxRadixTree* t = nullptr;
      if (auto* ca = router_.policy().get<kvroute::CacheAware>()) t = ca->tree(m);
      if (auto* lp = router_.policy().get<kvroute::LeastPrefill>()) t = lp->tree(m);
      if (t != nullptr) metrics_.observe_tree(m, *t);
    }
    return registry_.render();
  }

 private:
  struct Call {
    std::string path, text, model, body, content_type;
    std::vector<std::pair<std::string, std::string>> headers;
  };

  // Selects a worker for `c`, avoiding `attempts.excluded()`; null when none.
  std::optional<std::pair<kvroute::Selection, kvroute::CircuitBreaker::Permit>> pick(
      const Call& c, kvroute::Attempts& attempts) {
    breakers_.refresh();
    std::vector<kvroute::Header> hv;
    for (const auto& [k, v] : c.headers) hv.push_back({k, v});
    const kvroute::RequestView view{.text = c.text, .headers = hv, .model = c.model};
    std::vector<kvroute::WorkerId> avoid(attempts.excluded().begin(), attempts.excluded().end());
    for (int tries = 0; tries < 8; ++tries) {
      const auto t0 = std::chrono::steady_clock::now();
      kvroute::Selection s = router_.select(view, avoid);
      if (!s && !avoid.empty()) s = router_.select(view);  // every worker failed once
      metrics_.record(s.decision, std::chrono::steady_clock::now() - t0);
      if (!s) return std::nullopt;
      kvroute::CircuitBreaker::Permit p = breakers_.acquire(s.worker().id);
      if (p) {
        {
          std::lock_guard<std::mutex> lock(models_mu_);
          models_.insert(c.model);
        }
        return std::make_pair(std::move(s), p);
      }
      avoid.push_back(s.worker().id);  // half-open and saturated: another one
    }
    return std::nullopt;
  }

  std::unique_ptr<httplib::Client> client(const std::string& url) const {
    auto cli = std::make_unique<httplib::Client>(url);
    cli->set_connection_timeout(2, 0);
    cli->set_read_timeout(flags_.request_timeout_secs, 0);
    cli->set_write_timeout(flags_.request_timeout_secs, 0);
    return cli;
  }

  httplib::Headers upstream_headers(const Call& c) const {
    httplib::Headers h;
    for (const auto& [k, v] : c.headers) h.emplace(k, v);
    return h;
  }

  // Tokens to dispatch with: least_prefill's predicted uncached work (its
  // queue estimate), 0 for the other policies.
  std::int64_t predicted_tokens(const Call& c, const kvroute::Selection& s) {
    return router_.policy().predicted_tokens({.text = c.text, .model = c.model}, s.decision);
  }

  // Feeds the worker's reported cache back into the policy: cache_aware's
  // tree, or least_prefill's tree and queue estimate (through the guard).
  void feedback(const Call& c, const kvroute::Selection& s, const json& body,
                kvroute::LoadGuard* guard) {
    long long cached = 0, prompt = 0;
    if (!kvexample::reported_cache(body, &cached, &prompt) || prompt <= 0 || cached < 0) return;
    router_.policy().report_cached({.text = c.text, .model = c.model}, s.decision,
                                   static_cast<std::uint64_t>(cached), prompt, guard);
  }

  void forward(const Call& c, httplib::Response& res) {
    kvroute::Attempts attempts(retry_);
    for (;;) {
      auto chosen = pick(c, attempts);
      if (!chosen) {
        res.status = 503;
        res.set_content(R"({"error":"no available worker"})", "application/json");
        return;
      }
      auto& [s, permit] = *chosen;
      // Held until the response is back; its tokens are the queued prefill.
      kvroute::LoadGuard guard = router_.dispatch(s, {.tokens = predicted_tokens(c, s)});
      auto cli = client(s.worker().url);
      auto up = cli->Post(c.path, upstream_headers(c), c.body, c.content_type);
      const int status = up ? up->status : 0;
      breakers_.record(s.worker().id, permit, up && status < 500);
      if (up && status < 400) {
        feedback(c, s, json::parse(up->body, nullptr, false), &guard);
        guard.release_tokens();  // the prefill is long done
        res.status = status;
        for (const auto& [k, v] : up->headers) {
          if (k == "X-Mock-Worker" || k == "x-mock-worker") res.set_header(k, v);
        }
        res.set_header("X-Kvroute-Worker", s.worker().url);
        res.set_content(up->body, up->has_header("Content-Type")
                                      ? up->get_header_value("Content-Type")
                                      : std::string("application/json"));
        return;
      }
      std::chrono::nanoseconds delay{};
      if (!attempts.failed(s.worker().id, status, &delay)) {
        metrics_.record_retries_exhausted();
        res.status = up ? status : 502;
        res.set_content(up ? up->body : R"({"error":"upstream unreachable"})", "application/json");
        return;
      }
      metrics_.record_retry();
      guard.release();
      std::this_thread::sleep_for(delay);
    }
  }

  void forward_streaming(const Call& c, httplib::DataSink& sink) {
    kvroute::Attempts attempts(retry_);
    for (;;) {
      auto chosen = pick(c, attempts);
      if (!chosen) {
        const std::string err = "data: {\"error\":\"no available worker\"}\n\n";
        sink.write(err.data(), err.size());
        return;
      }
      auto& [s, permit] = *chosen;
      kvroute::LoadGuard guard = router_.dispatch(s, {.tokens = predicted_tokens(c, s)});
      auto cli = client(s.worker().url);
      httplib::Request up;
      up.method = "POST";
      up.path = c.path;
      up.headers = upstream_headers(c);
      up.body = c.body;
      up.set_header("Content-Type", c.content_type);
      bool started = false;
      std::string tail;  // the stream's last lines, for the usage chunk
      up.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
        if (!started) guard.release_tokens();  // first bytes: prefill is over
        started = true;
        tail.append(data, n);
        if (tail.size() > 65536) tail.erase(0, tail.size() - 65536);
        return sink.write(data, n);
      };
      auto r = cli->send(up);
      const int status = r ? r->status : 0;
      breakers_.record(s.worker().id, permit, r && status < 500);
      if (r && status < 400) {
        // The usage object, when the worker sent one, is in the last data line.
        for (std::size_t pos = tail.rfind("data: {"); pos != std::string::npos;
             pos = pos == 0 ? std::string::npos : tail.rfind("data: {", pos - 1)) {
          json j =
              json::parse(tail.substr(pos + 6, tail.find('\n', pos) - pos - 6), nullptr, false);
          if (!j.is_discarded() && j.contains("usage")) {
            feedback(c, s, j, nullptr);
            break;
          }
        }
        return;
      }
      std::chrono::nanoseconds delay{};
      if (started || !attempts.failed(s.worker().id, status, &delay)) return;
      metrics_.record_retry();
      guard.release();
      std::this_thread::sleep_for(delay);
    }
  }

  const Flags& flags_;
  kvroute::Router<kvroute::AnyPolicy> router_;
  kvroute::Breakers breakers_;
  kvroute::MetricsRegistry registry_;
  kvroute::RouterMetrics metrics_;
  kvroute::RetryOptions retry_;
  std::mutex models_mu_;
  std::set<std::string> models_;  // models seen, for the tree gauges
};

int run_router(const Flags& f) {
  auto policy = kvroute::make_policy(f.policy);
  if (!policy.ok()) usage_error(std::string(policy.status().message()));
  Proxy proxy(f, *std::move(policy));
  httplib::Server svr;
  for (const char* p : {"/generate", "/v1/chat/completions", "/v1/completions"}) {
    svr.Post(p, [&proxy](const httplib::Request& req, httplib::Response& res) {
      proxy.handle(req, res);
    });
  }
  auto metrics = [&proxy](const httplib::Request&, httplib::Response& res) {
    res.set_content(proxy.render_metrics(), "text/plain; version=0.0.4");
  };
  std::unique_ptr<httplib::Server> prom;
  std::thread prom_thread;
  if (f.prometheus_port >= 0) {
    prom = std::make_unique<httplib::Server>();
    prom->Get("/metrics", metrics);
    bind_or_die(*prom, f.host, f.prometheus_port, "metrics");
    prom_thread = std::thread([&] { prom->listen_after_bind(); });
  } else {
    svr.Get("/metrics", metrics);
  }
  svr.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });
  bind_or_die(svr, f.host, f.port, "router");
  const bool ok = svr.listen_after_bind();
  if (prom) {
    prom->stop();
    prom_thread.join();
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse_flags(argc, argv);
  return flags.mock_worker ? run_mock_worker(flags) : run_router(flags);
}
