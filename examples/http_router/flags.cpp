// kvroute_http_router's command line (see flags.hpp): one table gives each
// flag its parser, its default and its --help line.
#include "http_router/flags.hpp"

#include <fmt/core.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "kvroute/sync/redis/options.hpp"

namespace kvexample {
namespace {

enum class Kind : std::uint8_t { kValue, kList, kSwitch };

struct Spec {
  std::string_view name;  // without "--"
  Kind kind;
  std::string_view shown_default;
  std::string_view help;
  std::function<absl::Status(Flags&, std::string_view)> apply;
};

absl::Status bad(std::string_view flag, std::string_view v, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", absl::string_view(flag.data(), flag.size()), ": '",
                   absl::CHexEscape(absl::string_view(v.data(), v.size())), "' ",
                   absl::string_view(why.data(), why.size())));
}

template <class T>
std::function<absl::Status(Flags&, std::string_view)> integer(std::string_view flag, T Flags::*f,
                                                              std::int64_t lo, std::int64_t hi) {
  return [=](Flags& fl, std::string_view v) {
    std::int64_t x = 0;
    if (!absl::SimpleAtoi(absl::string_view(v.data(), v.size()), &x) || x < lo || x > hi) {
      return bad(flag, v, absl::StrCat("is not an integer in [", lo, ", ", hi, "]"));
    }
    fl.*f = static_cast<T>(x);
    return absl::OkStatus();
  };
}

std::function<absl::Status(Flags&, std::string_view)> real(std::string_view flag, double Flags::*f,
                                                           double lo, double hi) {
  return [=](Flags& fl, std::string_view v) {
    double x = 0;
    if (!absl::SimpleAtod(absl::string_view(v.data(), v.size()), &x) || !(x >= lo && x <= hi)) {
      return bad(flag, v, absl::StrCat("is not a number in [", lo, ", ", hi, "]"));
    }
    fl.*f = x;
    return absl::OkStatus();
  };
}

std::function<absl::Status(Flags&, std::string_view)> mock_int(std::string_view flag,
                                                               int MockFlags::*f, int lo, int hi) {
  return [=](Flags& fl, std::string_view v) {
    int x = 0;
    if (!absl::SimpleAtoi(absl::string_view(v.data(), v.size()), &x) || x < lo || x > hi) {
      return bad(flag, v, absl::StrCat("is not an integer in [", lo, ", ", hi, "]"));
    }
    fl.mock.*f = x;
    return absl::OkStatus();
  };
}

std::function<absl::Status(Flags&, std::string_view)> on(bool Flags::*f) {
  return [=](Flags& fl, std::string_view) {
    fl.*f = true;
    return absl::OkStatus();
  };
}

absl::Status mock_mode(Flags& f, std::string_view v);

constexpr std::int64_t kDay = 86400;
constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();

// Listening and threads.
std::vector<Spec> server_specs() {
  return {
      {"worker-urls", Kind::kList, "(required)", "worker URLs, http://host:port ...",
       [](Flags& f, std::string_view v) -> absl::Status {
         auto a = parse_worker_url(v);
         if (!a.ok()) {
           return absl::InvalidArgumentError(absl::StrCat("--worker-urls: ", a.status().message()));
         }
         f.workers.push_back(*std::move(a));
         return absl::OkStatus();
       }},
      {"host", Kind::kValue, "127.0.0.1", "address to listen on",
       [](Flags& f, std::string_view v) {
         f.host = std::string(v);
         return absl::OkStatus();
       }},
      {"port", Kind::kValue, "30000", "port to listen on (0: any free port, printed on stdout)",
       integer("port", &Flags::port, 0, 65535)},
      {"prometheus-port", Kind::kValue, "the main port", "serve /metrics on this port instead",
       integer("prometheus-port", &Flags::prometheus_port, 0, 65535)},
      {"prometheus-host", Kind::kValue, "--host", "address of the /metrics listener",
       [](Flags& f, std::string_view v) {
         f.prometheus_host = std::string(v);
         return absl::OkStatus();
       }},
      {"threads", Kind::kValue, "one per core", "I/O threads",
       integer("threads", &Flags::threads, 1, 256)},
  };
}

// Limits on what clients send, and timeouts.
std::vector<Spec> limit_specs() {
  return {
      {"max-payload-size", Kind::kValue, "536870912", "largest request body in bytes (413 beyond)",
       integer("max-payload-size", &Flags::max_payload_size, 1,
               std::numeric_limits<std::int64_t>::max())},
      {"max-header-bytes", Kind::kValue, "16384", "largest request head in bytes (431 beyond)",
       integer("max-header-bytes", &Flags::max_header_bytes, 256, 1 << 20)},
      {"max-header-count", Kind::kValue, "100", "most header fields in a request (431 beyond)",
       integer("max-header-count", &Flags::max_header_count, 1, 10000)},
      {"header-timeout-secs", Kind::kValue, "10",
       "a request head must arrive within this, from its first byte (408)",
       integer("header-timeout-secs", &Flags::header_timeout_secs, 1, kDay)},
      {"body-timeout-secs", Kind::kValue, "60", "a request body must arrive within this (408)",
       integer("body-timeout-secs", &Flags::body_timeout_secs, 1, kDay)},
      {"keep-alive-timeout-secs", Kind::kValue, "60",
       "idle keep-alive connections close after this",
       integer("keep-alive-timeout-secs", &Flags::keep_alive_timeout_secs, 1, kDay)},
      {"write-timeout-secs", Kind::kValue, "60",
       "a client must take each write of a reply within this, or is dropped",
       integer("write-timeout-secs", &Flags::write_timeout_secs, 1, kDay)},
      {"request-timeout-secs", Kind::kValue, "1800", "a request's whole time at the workers (504)",
       integer("request-timeout-secs", &Flags::request_timeout_secs, 1, kDay)},
  };
}

// Retries and circuit breakers (the gateway's).
std::vector<Spec> retry_specs() {
  return {
      {"retry-max-retries", Kind::kValue, "5", "attempts in total, the first included",
       integer("retry-max-retries", &Flags::retry_max_retries, 1, 100)},
      {"retry-initial-backoff-ms", Kind::kValue, "50", "delay before the second attempt",
       integer("retry-initial-backoff-ms", &Flags::retry_initial_backoff_ms, 0, kIntMax)},
      {"retry-max-backoff-ms", Kind::kValue, "30000", "longest delay between attempts",
       integer("retry-max-backoff-ms", &Flags::retry_max_backoff_ms, 0, kIntMax)},
      {"retry-backoff-multiplier", Kind::kValue, "1.5", "delay growth per attempt",
       real("retry-backoff-multiplier", &Flags::retry_backoff_multiplier, 1.0, 1000.0)},
      {"retry-jitter-factor", Kind::kValue, "0.2", "random share of each delay, +/-",
       real("retry-jitter-factor", &Flags::retry_jitter_factor, 0.0, 0.99)},
      {"disable-retries", Kind::kSwitch, "off", "one attempt per request",
       on(&Flags::disable_retries)},
      {"cb-failure-threshold", Kind::kValue, "10", "failures that open a worker's circuit",
       integer("cb-failure-threshold", &Flags::cb_failure_threshold, 1, 0xFFFFFFFFLL)},
      {"cb-success-threshold", Kind::kValue, "3", "half-open successes that close it",
       integer("cb-success-threshold", &Flags::cb_success_threshold, 1, 0xFFFFFFFFLL)},
      {"cb-timeout-duration-secs", Kind::kValue, "60", "time a circuit stays open",
       integer("cb-timeout-duration-secs", &Flags::cb_timeout_duration_secs, 1, kDay)},
      {"cb-window-duration-secs", Kind::kValue, "120", "window the failures must fall in",
       integer("cb-window-duration-secs", &Flags::cb_window_duration_secs, 1, kDay)},
      {"disable-circuit-breaker", Kind::kSwitch, "off", "never open a circuit",
       on(&Flags::disable_circuit_breaker)},
  };
}

// Active health checks (the gateway's).
std::vector<Spec> health_specs() {
  return {
      {"health-failure-threshold", Kind::kValue, "3", "failed checks that mark a worker unhealthy",
       integer("health-failure-threshold", &Flags::health_failure_threshold, 1, 1000000)},
      {"health-success-threshold", Kind::kValue, "2", "passed checks that mark it healthy again",
       integer("health-success-threshold", &Flags::health_success_threshold, 1, 1000000)},
      {"health-check-timeout-secs", Kind::kValue, "5", "a check's time limit",
       integer("health-check-timeout-secs", &Flags::health_check_timeout_secs, 1, kDay)},
      {"health-check-interval-secs", Kind::kValue, "60", "time between checks of a worker",
       integer("health-check-interval-secs", &Flags::health_check_interval_secs, 1, kDay)},
      {"health-check-endpoint", Kind::kValue, "/health", "path the checks GET",
       [](Flags& f, std::string_view v) -> absl::Status {
         if (v.empty() || v.front() != '/' ||
             v.find_first_of(" \t\r\n") != std::string_view::npos) {
           return bad("health-check-endpoint", v, "is not a path starting with '/'");
         }
         f.health_check_endpoint = std::string(v);
         return absl::OkStatus();
       }},
      {"disable-health-check", Kind::kSwitch, "off", "no active health checks",
       on(&Flags::disable_health_check)},
  };
}

// Operations.
std::vector<Spec> operation_specs() {
  return {
      {"api-key", Kind::kValue, "none", "required as 'Authorization: Bearer KEY' on /workers",
       [](Flags& f, std::string_view v) {
         f.api_key = std::string(v);
         return absl::OkStatus();
       }},
      {"log-level", Kind::kValue, "info", "debug, info, warning, error or critical",
       [](Flags& f, std::string_view v) -> absl::Status {
         auto l = parse_log_level(v);
         if (!l) return bad("log-level", v, "is not debug, info, warning, error or critical");
         f.log_level = *l;
         return absl::OkStatus();
       }},
      {"request-id-headers", Kind::kList, "x-request-id x-correlation-id x-trace-id request-id",
       "headers a request id is taken from, first found wins",
       [](Flags& f, std::string_view v) {
         f.request_id_headers.emplace_back(v);
         return absl::OkStatus();
       }},
      {"shutdown-grace-secs", Kind::kValue, "30",
       "after SIGTERM, time in-flight requests get to finish",
       integer("shutdown-grace-secs", &Flags::shutdown_grace_secs, 0, kDay)},
  };
}

// Replicas sharing state through Redis.
std::vector<Spec> replica_specs() {
  return {
      {"redis-url", Kind::kValue, "none",
       "share routing state with other replicas: redis://HOST:PORT[/DB] or unix:///PATH",
       [](Flags& f, std::string_view v) -> absl::Status {
         if (auto a = kvroute::sync::parse_redis_url(v); !a.ok()) {
           return absl::InvalidArgumentError(absl::StrCat("--redis-url: ", a.status().message()));
         }
         f.redis_url = std::string(v);
         return absl::OkStatus();
       }},
      {"replica-name", Kind::kValue, "HOSTNAME:PORT",
       "this replica's name, unique in the fleet and kept across restarts (with --port 0: "
       "HOSTNAME:pid-PID)",
       [](Flags& f, std::string_view v) -> absl::Status {
         if (v.empty() || v.size() > 256) return bad("replica-name", v, "must be 1-256 bytes");
         f.replica_name = std::string(v);
         return absl::OkStatus();
       }},
      {"redis-key-prefix", Kind::kValue, "kvroute", "prefix of every Redis key (one per fleet)",
       [](Flags& f, std::string_view v) -> absl::Status {
         if (v.empty() || v.size() > 256) return bad("redis-key-prefix", v, "must be 1-256 bytes");
         f.redis_key_prefix = std::string(v);
         return absl::OkStatus();
       }},
      {"sync-flush-ms", Kind::kValue, "50", "how often changes go to the other replicas",
       integer("sync-flush-ms", &Flags::sync_flush_ms, 1, 60000)},
      {"sync-flush-bytes", Kind::kValue, "32768",
       "changes go out sooner once this many bytes wait (0: only every --sync-flush-ms)",
       integer("sync-flush-bytes", &Flags::sync_flush_bytes, 0, std::int64_t{1} << 30)},
      {"snapshot-interval-ms", Kind::kValue, "30000",
       "how often a snapshot of each model's state is written (0: never)",
       integer("snapshot-interval-ms", &Flags::snapshot_interval_ms, 0, kDay * 1000)},
      {"redis-catch-up-ms", Kind::kValue, "5000",
       "at start, the longest wait for the fleet's state before serving",
       integer("redis-catch-up-ms", &Flags::redis_catch_up_ms, 0, 600000)},
  };
}

// The mock worker, and test hooks.
std::vector<Spec> mock_specs() {
  return {
      {"mock-worker", Kind::kSwitch, "off", "run as a mock worker instead of a router",
       on(&Flags::mock_worker)},
      {"mock-cache-chars", Kind::kValue, "1048576", "mock worker: prefix cache budget (characters)",
       [](Flags& f, std::string_view v) -> absl::Status {
         std::uint64_t x = 0;
         if (!absl::SimpleAtoi(absl::string_view(v.data(), v.size()), &x) || x == 0) {
           return bad("mock-cache-chars", v, "is not a positive integer");
         }
         f.mock.cache_chars = x;
         return absl::OkStatus();
       }},
      {"mock-mode", Kind::kValue, "ok",
       "mock worker: ok, error, reset, cut, malformed, unhealthy or hang", mock_mode},
      {"mock-chunks", Kind::kValue, "1", "mock worker: content chunks per streamed reply",
       mock_int("mock-chunks", &MockFlags::chunks, 1, 100000)},
      {"mock-chunk-delay-ms", Kind::kValue, "0", "mock worker: pause before each streamed chunk",
       mock_int("mock-chunk-delay-ms", &MockFlags::chunk_delay_ms, 0, 600000)},
      {"mock-service-ms", Kind::kValue, "0",
       "mock worker: time before each whole reply (a timer, not CPU)",
       mock_int("mock-service-ms", &MockFlags::service_ms, 0, 600000)},
      {"mock-model", Kind::kValue, "mock-model", "mock worker: the model /v1/models lists",
       [](Flags& f, std::string_view v) {
         f.mock.model = std::string(v);
         return absl::OkStatus();
       }},
      {"test-metrics-delay-ms", Kind::kValue, "0", "tests only: each /metrics render sleeps this",
       integer("test-metrics-delay-ms", &Flags::test_metrics_delay_ms, 0, 600000)},
  };
}

const std::vector<Spec>& specs() {
  static const std::vector<Spec> table = [] {
    std::vector<Spec> all;
    for (auto group : {server_specs, limit_specs, retry_specs, health_specs, operation_specs,
                       replica_specs, mock_specs}) {
      for (Spec& s : group()) all.push_back(std::move(s));
    }
    return all;
  }();
  return table;
}

absl::Status mock_mode(Flags& f, std::string_view v) {
  const std::optional<MockMode> mode = parse_mock_mode(v);
  if (!mode) {
    return bad("mock-mode", v, "is not ok, error, reset, cut, malformed, unhealthy or hang");
  }
  f.mock.mode = *mode;
  return absl::OkStatus();
}

const Spec* find_spec(std::string_view name) {
  for (const Spec& s : specs()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// Applies one flag of `rest` at index *i (advancing *i past its values).
absl::Status apply_one(Flags& f, const std::vector<std::string>& rest, std::size_t* i,
                       bool* ids_given) {
  std::string_view arg = rest[*i];
  if (arg.size() < 3 || arg.substr(0, 2) != "--") {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", absl::CHexEscape(absl::string_view(arg.data(), arg.size())), "' is not a --flag"));
  }
  std::string_view name = arg.substr(2);
  std::optional<std::string_view> inline_value;
  if (auto eq = name.find('='); eq != std::string_view::npos) {
    inline_value = name.substr(eq + 1);
    name = name.substr(0, eq);
  }
  if (name.substr(0, 7) == "router-") name.remove_prefix(7);
  if (name == "shutdown-grace-period-secs") name = "shutdown-grace-secs";  // smg's spelling
  const Spec* spec = find_spec(name);
  if (spec == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", absl::string_view(name.data(), name.size()), ": unknown flag (see --help)"));
  }
  if (spec->kind == Kind::kSwitch) return spec->apply(f, "");
  if (spec->kind == Kind::kList) {
    if (name == "request-id-headers" && !*ids_given) {
      f.request_id_headers.clear();
      *ids_given = true;
    }
    if (inline_value) return spec->apply(f, *inline_value);
    while (*i + 1 < rest.size() && rest[*i + 1].rfind("--", 0) != 0) {
      if (absl::Status s = spec->apply(f, rest[++*i]); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (inline_value) return spec->apply(f, *inline_value);
  if (*i + 1 >= rest.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", absl::string_view(name.data(), name.size()), ": missing value"));
  }
  return spec->apply(f, rest[++*i]);
}

}  // namespace

std::optional<MockMode> parse_mock_mode(std::string_view name) {
  static constexpr std::pair<std::string_view, MockMode> kModes[] = {
      {"ok", MockMode::kOk},
      {"error", MockMode::kError},
      {"reset", MockMode::kReset},
      {"cut", MockMode::kCut},
      {"malformed", MockMode::kMalformed},
      {"unhealthy", MockMode::kUnhealthy},
      {"hang", MockMode::kHang}};
  for (const auto& [n, mode] : kModes) {
    if (name == n) return mode;
  }
  return std::nullopt;
}

absl::StatusOr<Flags> parse_flags(int argc, const char* const* argv) {
  std::vector<std::string_view> args;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") return absl::CancelledError(help_text());
  }
  // The router's --max-models default first: a later --max-models wins.
  const std::string default_models = std::to_string(kDefaultMaxModels);
  args.push_back("--max-models");
  args.push_back(default_models);
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  std::vector<std::string> rest;
  absl::StatusOr<kvroute::PolicyConfig> policy = kvroute::parse_policy_flags(args, &rest);
  if (!policy.ok()) return policy.status();
  Flags f;
  f.policy = *policy;
  bool ids_given = false;
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (absl::Status s = apply_one(f, rest, &i, &ids_given); !s.ok()) return s;
  }
  if (!f.mock_worker && f.workers.empty()) {
    return absl::InvalidArgumentError("--worker-urls: give at least one worker URL");
  }
  for (const std::string& h : f.request_id_headers) {
    if (h.empty() || h.find_first_of(" \t\r\n:") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--request-id-headers: '", absl::CHexEscape(h), "' is not a header name"));
    }
  }
  if (f.retry_max_backoff_ms < f.retry_initial_backoff_ms) {
    return absl::InvalidArgumentError(
        "--retry-max-backoff-ms: must be >= --retry-initial-backoff-ms");
  }
  return f;
}

std::string help_text() {
  std::string out =
      "usage: kvroute_http_router --worker-urls URL [URL ...] [flags]\n"
      "       kvroute_http_router --mock-worker [--port N] [--mock-* flags]\n\n"
      "A cache-aware reverse proxy in front of SGLang-style workers, built on kvroute.\n"
      "Flags take '--flag value' or '--flag=value' and may carry the --router- prefix.\n\n"
      "Routing policy (kvroute::parse_policy_flags):\n"
      "  --policy                      cache_aware  cache_aware, round_robin, random,\n"
      "                                             power_of_two, prefix_hash, manual, bucket,\n"
      "                                             consistent_hashing, least_prefill\n"
      "  --cache-threshold             0.3\n"
      "  --balance-abs-threshold       64\n"
      "  --balance-rel-threshold       1.5\n"
      "  --eviction-interval           120          (also --eviction-interval-secs)\n"
      "  --max-tree-size               67108864     characters per worker per model\n"
      "  --max-models                  256          model trees kept (least recently used\n"
      "                                             dropped beyond; 0: no cap)\n"
      "  --max-idle-secs, --assignment-mode, --prefix-token-count,\n"
      "  --prefix-hash-load-factor, --bucket-adjust-interval-secs, --bounded-load-factor,\n"
      "  --queue-weight, --chars-per-token, --sync-text-share, --seed: see docs/router.md\n\n"
      "Router:\n";
  for (const Spec& s : specs()) {
    std::string left = absl::StrCat("  --", absl::string_view(s.name.data(), s.name.size()));
    if (s.kind == Kind::kValue) absl::StrAppend(&left, " V");
    if (s.kind == Kind::kList) absl::StrAppend(&left, " V...");
    out += fmt::format("{:<36} {} (default: {})\n", left, s.help, s.shown_default);
  }
  out += "  --help                               this text\n";
  return out;
}

}  // namespace kvexample
