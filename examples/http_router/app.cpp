// The router and the mock worker, wired (see app.hpp).
#include "http_router/app.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http_router/health_checker.hpp"
#include "http_router/http_server.hpp"
#include "http_router/io_threads.hpp"
#include "http_router/log.hpp"
#include "http_router/metrics_page.hpp"
#include "http_router/mock_worker.hpp"
#include "http_router/replication.hpp"
#include "http_router/router_handler.hpp"
#include "http_router/shutdown.hpp"

namespace kvexample {
namespace {

unsigned lanes(const Flags& f) {
  return f.threads > 0 ? f.threads : std::max(1u, std::thread::hardware_concurrency());
}

ServerLimits limits(const Flags& f) {
  return {.max_body = f.max_payload_size,
          .max_header_bytes = f.max_header_bytes,
          .max_header_count = f.max_header_count,
          .header_timeout = std::chrono::seconds(f.header_timeout_secs),
          .body_timeout = std::chrono::seconds(f.body_timeout_secs),
          .keep_alive = std::chrono::seconds(f.keep_alive_timeout_secs),
          .write_timeout = std::chrono::seconds(f.write_timeout_secs)};
}

kvroute::CircuitBreaker::Options breaker_options(const Flags& f) {
  return {.failure_threshold = f.disable_circuit_breaker ? std::numeric_limits<std::uint32_t>::max()
                                                         : f.cb_failure_threshold,
          .success_threshold = f.cb_success_threshold,
          .open_timeout = std::chrono::seconds(f.cb_timeout_duration_secs),
          .window = std::chrono::seconds(f.cb_window_duration_secs)};
}

kvroute::RetryOptions retry_options(const Flags& f) {
  return {.max_attempts = f.disable_retries ? 1u : f.retry_max_retries,
          .initial_backoff = std::chrono::milliseconds(f.retry_initial_backoff_ms),
          .multiplier = f.retry_backoff_multiplier,
          .max_backoff = std::chrono::milliseconds(f.retry_max_backoff_ms),
          .jitter = f.retry_jitter_factor};
}

[[noreturn]] void exit_now(int code) {
  std::fflush(nullptr);
  std::_Exit(code);
}

[[noreturn]] void fail_start(const std::string& what) {
  std::fprintf(stderr, "kvroute_http_router: %s\n", what.c_str());
  exit_now(2);
}

// The replica's default name: the host's name and the router's port, the
// same across restarts of one replica. With --port 0 the port is not known
// yet and would name every such replica on the host alike (each would take
// the others' changes for its own and skip them): the process id stands in.
std::string replica_name(const Flags& f) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  const std::string base(host[0] != '\0' ? host : "router");
  if (f.port == 0) return base + ":pid-" + std::to_string(getpid());
  return base + ":" + std::to_string(f.port);
}

void announce(const char* what, const std::string& host, std::uint16_t port) {
  std::printf("%s listening on %s:%u\n", what, host.c_str(), static_cast<unsigned>(port));
  std::fflush(stdout);
}

// Every second: open circuits whose timeout passed go half-open, and breaker
// transitions are logged.
void upkeep(net::steady_timer& timer, Fleet& fleet) {
  timer.expires_after(std::chrono::seconds(1));
  timer.async_wait([&timer, &fleet](error_code ec) {
    if (ec) return;
    fleet.refresh_breakers();
    upkeep(timer, fleet);
  });
}

// The policy's configuration. Replicas sharing state must not make the
// same random choices at the same moments (ties, random fallbacks), which
// one default seed would make them do: unless --seed names one, each
// replica's seed comes from its name (FNV-1a, the same at every restart).
kvroute::PolicyConfig policy_config(const Flags& f) {
  kvroute::PolicyConfig c = f.policy;
  if (!f.redis_url.empty() && c.seed == kvroute::PolicyConfig{}.seed) {
    const std::string name = f.replica_name.empty() ? replica_name(f) : f.replica_name;
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (const char ch : name) h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
    c.seed = h;
  }
  return c;
}

}  // namespace

int run_router(const Flags& f) {
  absl::StatusOr<kvroute::AnyPolicy> policy = kvroute::make_policy(policy_config(f));
  if (!policy.ok()) fail_start(std::string(policy.status().message()));
  const std::string policy_name(policy->name());
  Fleet fleet(*std::move(policy), breaker_options(f));
  for (const WorkerAddress& w : f.workers) {
    if (auto added = fleet.add(w); !added.ok()) {
      fail_start("--worker-urls: " + std::string(added.status().message()));
    }
  }
  absl::StatusOr<std::unique_ptr<Replication>> replication =
      Replication::start(f, fleet, replica_name(f));
  if (!replication.ok()) fail_start(std::string(replication.status().message()));
  IoThreads io(lanes(f));
  std::vector<std::unique_ptr<UpstreamPool>> pools;
  for (unsigned i = 0; i < io.size(); ++i)
    pools.push_back(std::make_unique<UpstreamPool>(io.context(i)));
  fleet.on_removed([&io, &pools](const std::string& url) {
    for (unsigned i = 0; i < io.size(); ++i) {
      net::post(io.context(i), [pool = pools[i].get(), url] { pool->forget(url); });
    }
  });
  kvroute::MetricsRegistry registry;
  RouterStats stats(registry, policy_name);
  RouterContext ctx{f, fleet, stats, pools, retry_options(f)};
  RouterHandler handler(ctx, nullptr);
  HttpServer server(io, handler, limits(f));
  MetricsPage page(fleet, registry, server.counters(), f.test_metrics_delay_ms);
  if (Replication* r = replication->get()) {
    page.add_section([r](kvroute::MetricsRegistry& live) { r->render(live); });
  }
  MetricsHandler metrics_handler(page);
  std::unique_ptr<HttpServer> metrics_server;
  std::vector<HttpServer*> servers = {&server};
  if (f.prometheus_port >= 0) {
    metrics_server = std::make_unique<HttpServer>(io, metrics_handler, limits(f));
    const std::string host = f.prometheus_host.empty() ? f.host : f.prometheus_host;
    auto port = metrics_server->listen(host, f.prometheus_port);
    if (!port.ok()) fail_start(std::string(port.status().message()));
    announce("metrics", host, *port);
    servers.push_back(metrics_server.get());
  } else {
    handler.set_metrics(&page);
  }
  auto port = server.listen(f.host, f.port);
  if (!port.ok()) fail_start(std::string(port.status().message()));

  HealthChecker checker(io.context(0), fleet, f);
  net::steady_timer upkeep_timer(io.context(0));
  Shutdown shutdown(io, servers, std::chrono::seconds(f.shutdown_grace_secs), [&] {
    ctx.draining = true;
    checker.stop();
    upkeep_timer.cancel();
    if (Replication* r = replication->get()) r->stop();
  });
  shutdown.arm();
  if (!f.disable_health_check) checker.start();
  net::post(io.context(0), [&] { upkeep(upkeep_timer, fleet); });
  announce("router", f.host, *port);
  log_info("routing to {} workers with {} on {} I/O threads", f.workers.size(), policy_name,
           io.size());
  io.start();
  shutdown.wait();
  exit_now(0);
}

int run_mock_worker(const Flags& f) {
  IoThreads io(lanes(f));
  MockWorker mock(f.mock);
  HttpServer server(io, mock, limits(f));
  auto port = server.listen(f.host, f.port);
  if (!port.ok()) fail_start(std::string(port.status().message()));
  mock.set_port(*port);
  mock.set_counters(&server.counters());
  // A mock worker stops at once (a worker that dies), requests in flight
  // and all.
  Shutdown shutdown(io, {&server}, std::chrono::seconds(0), nullptr);
  shutdown.arm();
  announce("mock worker", f.host, *port);
  io.start();
  shutdown.wait();
  exit_now(0);
}

}  // namespace kvexample
