// -----------------------------------------------------------------------------
// File: http_router/flags.hpp
// -----------------------------------------------------------------------------
//
// kvroute_http_router's command line. The gateway's flag names and defaults
// (launch_router's) wherever it has the flag; kvroute's own flags where it
// has none (docs/router.md has the table). The policy flags are parsed by
// kvroute::parse_policy_flags; every flag may carry the `--router-` prefix,
// and takes its value as `--flag value` or `--flag=value`.
//
// Thread safety: values and pure functions.
//
// Example:
//
//   absl::StatusOr<Flags> f = parse_flags(argc, argv);
//   if (!f.ok()) { /* print f.status().message(), exit 2 */ }

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_FLAGS_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_FLAGS_HPP_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "http_router/log.hpp"
#include "http_router/worker_url.hpp"
#include "kvroute/policy_config.hpp"

namespace kvexample {

// The mock worker's behaviour (--mock-mode, or POST /mock/mode).
enum class MockMode : std::uint8_t {
  kOk,         // answers normally
  kError,      // 500 to every generation request
  kReset,      // closes the connection without answering
  kCut,        // sends the first chunk of a reply, then drops the connection
  kMalformed,  // usage and meta_info counts as strings
  kUnhealthy,  // GET /health answers 503; requests are served
  kHang,       // never answers a generation request
};

// "ok", "error", "reset", "cut", "malformed", "unhealthy" or "hang".
std::optional<MockMode> parse_mock_mode(std::string_view name);

struct MockFlags {
  // Characters the prefix cache keeps (least recently used evicted beyond).
  std::uint64_t cache_chars = std::uint64_t{1} << 20;
  MockMode mode = MockMode::kOk;
  int chunks = 1;          // content chunks in a streamed reply
  int chunk_delay_ms = 0;  // pause before each streamed chunk
  int service_ms = 0;      // time before a whole (not streamed) reply, on a timer
  std::string model = "mock-model";
};

struct Flags {
  std::string host = "127.0.0.1";
  int port = 30000;  // 0: any free port (printed on stdout)
  std::vector<WorkerAddress> workers;
  int prometheus_port = -1;     // -1: /metrics on the main port
  std::string prometheus_host;  // empty: --host
  unsigned threads = 0;         // 0: one per core

  // Limits on what clients send.
  std::uint64_t max_payload_size = std::uint64_t{512} << 20;
  std::uint32_t max_header_bytes = 16384;
  std::uint32_t max_header_count = 100;
  int header_timeout_secs = 10;
  int body_timeout_secs = 60;
  int keep_alive_timeout_secs = 60;
  int write_timeout_secs = 60;
  int request_timeout_secs = 1800;

  // Retries and circuit breakers (the gateway's defaults).
  std::uint32_t retry_max_retries = 5;
  int retry_initial_backoff_ms = 50;
  int retry_max_backoff_ms = 30000;
  double retry_backoff_multiplier = 1.5;
  double retry_jitter_factor = 0.2;
  bool disable_retries = false;
  std::uint32_t cb_failure_threshold = 10;
  std::uint32_t cb_success_threshold = 3;
  int cb_timeout_duration_secs = 60;
  int cb_window_duration_secs = 120;
  bool disable_circuit_breaker = false;

  // Active health checks (the gateway's defaults).
  std::uint32_t health_failure_threshold = 3;
  std::uint32_t health_success_threshold = 2;
  int health_check_timeout_secs = 5;
  int health_check_interval_secs = 60;
  std::string health_check_endpoint = "/health";
  bool disable_health_check = false;

  // Operations.
  std::string api_key;  // empty: /workers is open
  LogLevel log_level = LogLevel::kInfo;
  std::vector<std::string> request_id_headers = {"x-request-id", "x-correlation-id", "x-trace-id",
                                                 "request-id"};
  int shutdown_grace_secs = 30;

  // Replicas (docs/replicas.md). Empty URL: this router keeps its state to
  // itself.
  std::string redis_url;     // redis://HOST:PORT[/DB] or unix:///PATH
  std::string replica_name;  // empty: the host name and --port
  std::string redis_key_prefix = "kvroute";
  int sync_flush_ms = 50;                 // how often changes are sent
  std::int64_t sync_flush_bytes = 32768;  // and as soon as this many bytes wait
  int snapshot_interval_ms = 30000;       // how often a snapshot per model is written
  int redis_catch_up_ms = 5000;           // at start, the longest wait for the fleet's state

  bool mock_worker = false;
  MockFlags mock;
  // Tests only: each /metrics render sleeps this long (on the render
  // thread), to show that rendering never holds up routing.
  int test_metrics_delay_ms = 0;

  kvroute::PolicyConfig policy;
};

// The router's own default for --max-models (the library's is 0, no cap): a
// router facing clients bounds the trees that client-chosen names create.
inline constexpr std::uint64_t kDefaultMaxModels = 256;

// Parses argv (argv[0] skipped). --help is reported as a Status with code
// kCancelled whose message is the help text.
absl::StatusOr<Flags> parse_flags(int argc, const char* const* argv);

// The --help text.
std::string help_text();

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_FLAGS_HPP_
