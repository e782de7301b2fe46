// kvroute_sim: replays a request trace against simulated inference servers,
// once per routing policy, and compares hit rate and time to first token.
// See examples/sim/README.md.
//
//   kvroute_sim [TRACE] [-n N] [--speed S] [--json FILE] [--svg FILE] [flags]
#include <fmt/core.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sim/replica_compare.hpp"
#include "sim/report.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"

namespace {

constexpr const char* kUsage = R"(usage: kvroute_sim [TRACE] [options]

TRACE is a file (Mooncake JSONL with hash_ids, or JSONL of text requests
{"t": s, "text": ..., "session"?, "output_length"?}; .gz accepted) or a built-in
generator: chat (default), agent, batch.

  -n N                  keep the first N requests (generators: make N; default 2000)
  --speed S             divide arrival times by S (default 1; closed loop: the
                        sessions' start times only)
  --servers N           servers (default 8)
  --cache-tokens T      per server: KV pool (sglang) or prefix cache (simple),
                        tokens (default 1000000)
  --server-model M      sglang (default): SGLang's scheduler, closed-loop
                        sessions; simple: FIFO prefill at a fixed rate, open loop
  --open-loop           sglang: send every request at its trace time
  --chunked-prefill-size N  sglang: new tokens per prefill step (default 8192)
  --prefill-step-ms X, --prefill-token-us X, --prefill-pair-ns X,
  --decode-step-ms X, --decode-seq-us X, --decode-ctx-ns X
                        sglang: step time constants (defaults: Llama-2-70B on
                        8 x H100, see README)
  --prefill-rate R      simple: prefill tokens per second (default 20000)
  --tpot S              simple: seconds per output token (default 0.025)
  --chars-per-token C   characters of routing text per token (default 4)
  --seed N              seed of every policy (default 1)
  --lp-queue-weight W   least_prefill's queue_weight
  --lp-tree-scale X     least_prefill's max_tree_size in server caches
                        (default: the policy's, 2^26 characters)
  --ca-recency-shift S  cache_aware's recency_shift, 0 to 16 (default 6:
                        steps of 2^S stamps; 0: exact recency)
  --ca-feedback-slack-stamps K
                        cache_aware's feedback_slack_stamps (default 0)
  --ca-tenant-rule R    cache_aware's choice among the deepest matched
                        node's tenants: least_loaded (default) or most_recent
  --replicas R          R replicas of each kvroute policy, each with its own
                        state, behind a round-robin front (default 1; oracle
                        and sticky stay one router)
  --sync MODE           with --replicas: on (default: the state changes of
                        cache_aware, least_prefill and manual, and every
                        policy's load), off, trees (state changes only),
                        loads (load only)
  --sync-delay-ms D     with --replicas: a replica's changes and loads reach
                        the others D ms later (default 100)
  --load-sync-ms L      with --replicas: each replica publishes its load every
                        L ms (default 100; 0: whenever it changes)
  --sync-text-share X   with --replicas: placements carry their new text while
                        the requests that extend known text add at most X of
                        their bytes, keys otherwise (cache_aware and
                        least_prefill's sync_text_share; default 0.25; 0:
                        keys only)
  --compare-replicas    per policy (default: cache_aware, least_prefill): one
                        router, --replicas synced (with --sync on: also
                        with state changes only), and unsynced, with targets
  --policies a,b,...    run these (default: all but the extra ones)
  --json FILE           write results as JSON
  --svg FILE            write a chart (hit rate and p99 TTFT per policy)
  -q                    no progress on stderr

policies: )";

struct Args {
  std::string trace = "chat";
  std::size_t n = 0;
  double speed = 1;
  double cpt = 4;
  std::string json, svg;
  std::vector<std::string> policies;
  kvsim::SimConfig cfg;
  bool quiet = false;
  bool compare = false;
  std::vector<std::string> sync_flags;  // replica flags given, checked after parsing
};

[[noreturn]] void die(const std::string& msg) {
  fmt::print(stderr, "kvroute_sim: {}\n", msg);
  std::exit(2);
}

double positive(const std::string& flag, const char* v) {
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(d > 0)) die(flag + ": '" + v + "' is not a positive number");
  return d;
}

double non_negative(const std::string& flag, const char* v) {
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(d >= 0) || d > 1e12) {
    die(flag + ": '" + v + "' is not a number >= 0");
  }
  return d;
}

// A whole number from `lo` up.
std::int64_t integer(const std::string& flag, const char* v, std::int64_t lo = 1) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || errno != 0 || x < lo) {
    die(flag + ": '" + v + "' is not an integer" +
        (lo == 1 ? " >= 1" : " >= " + std::to_string(lo)));
  }
  return x;
}

std::vector<std::string> policy_list(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t p = 0; p <= s.size();) {
    std::size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    if (q > p) out.push_back(s.substr(p, q - p));
    p = q + 1;
  }
  for (const std::string& p : out) {
    if (!kvsim::is_policy_name(p)) {
      die("unknown policy '" + p + "' (policies: " + kvsim::policy_names_text() + ")");
    }
  }
  return out;
}

using Handler = std::function<void(const char*)>;

// Flags that take a value, by name.
std::map<std::string, Handler> value_flags(Args& a) {
  kvsim::SimConfig& c = a.cfg;
  kvsim::SglangModel& m = c.sglang;
  auto ms = [](double& x, double scale, const char* f) {
    return [&x, scale, f](const char* v) { x = positive(f, v) * scale; };
  };
  return {
      {"-n", [&](const char* v) { a.n = static_cast<std::size_t>(integer("-n", v)); }},
      {"--speed", [&](const char* v) { a.speed = positive("--speed", v); }},
      {"--servers", [&](const char* v) { c.servers = static_cast<int>(integer("--servers", v)); }},
      {"--cache-tokens", [&](const char* v) { c.cache_tokens = integer("--cache-tokens", v); }},
      {"--server-model",
       [&](const char* v) {
         const std::string s = v;
         if (s != "sglang" && s != "simple")
           die("--server-model: '" + s + "' is not sglang or simple");
         c.server_model = s == "sglang" ? kvsim::ServerModel::kSglang : kvsim::ServerModel::kSimple;
       }},
      {"--chunked-prefill-size",
       [&](const char* v) { m.chunked_prefill_size = integer("--chunked-prefill-size", v); }},
      {"--prefill-step-ms", ms(m.prefill_step_s, 1e-3, "--prefill-step-ms")},
      {"--prefill-token-us", ms(m.prefill_token_s, 1e-6, "--prefill-token-us")},
      {"--prefill-pair-ns", ms(m.prefill_pair_s, 1e-9, "--prefill-pair-ns")},
      {"--decode-step-ms", ms(m.decode_step_s, 1e-3, "--decode-step-ms")},
      {"--decode-seq-us", ms(m.decode_seq_s, 1e-6, "--decode-seq-us")},
      {"--decode-ctx-ns", ms(m.decode_ctx_s, 1e-9, "--decode-ctx-ns")},
      {"--prefill-rate", ms(c.prefill_rate, 1, "--prefill-rate")},
      {"--tpot", ms(c.tpot, 1, "--tpot")},
      {"--chars-per-token", ms(a.cpt, 1, "--chars-per-token")},
      {"--lp-queue-weight", ms(c.lp_queue_weight, 1, "--lp-queue-weight")},
      {"--lp-tree-scale", ms(c.lp_tree_scale, 1, "--lp-tree-scale")},
      {"--seed",
       [&](const char* v) { c.seed = static_cast<std::uint64_t>(integer("--seed", v, 0)); }},
      {"--ca-recency-shift",
       [&](const char* v) {
         const std::int64_t s = integer("--ca-recency-shift", v, 0);
         if (s > kvroute::ApproxRadixTree::kMaxRecencyShift) {
           die(std::string("--ca-recency-shift: '") + v + "' is not an integer from 0 to 16");
         }
         c.ca_recency_shift = static_cast<unsigned>(s);
       }},
      {"--ca-tenant-rule",
       [&](const char* v) {
         const std::string s = v;
         if (s != "least_loaded" && s != "most_recent") {
           die("--ca-tenant-rule: '" + s + "' is not least_loaded or most_recent");
         }
         c.ca_tenant_rule = s == "least_loaded" ? kvroute::CacheAware::TenantRule::kLeastLoaded
                                                : kvroute::CacheAware::TenantRule::kMostRecent;
       }},
      {"--ca-feedback-slack-stamps",
       [&](const char* v) {
         c.ca_feedback_slack_stamps =
             static_cast<std::uint64_t>(integer("--ca-feedback-slack-stamps", v, 0));
       }},
      {"--replicas",
       [&](const char* v) {
         const std::int64_t r = integer("--replicas", v);
         if (r > 64) die(std::string("--replicas: '") + v + "' is more than 64");
         c.replicas.count = static_cast<int>(r);
       }},
      {"--sync",
       [&](const char* v) {
         const std::string s = v;
         if (s != "on" && s != "off" && s != "trees" && s != "loads") {
           die("--sync: '" + s + "' is not on, off, trees or loads");
         }
         c.replicas.sync = s == "on"      ? kvsim::SyncMode::kOn
                           : s == "off"   ? kvsim::SyncMode::kOff
                           : s == "trees" ? kvsim::SyncMode::kTrees
                                          : kvsim::SyncMode::kLoads;
         a.sync_flags.push_back("--sync");
       }},
      {"--sync-delay-ms",
       [&](const char* v) {
         c.replicas.delay_s = non_negative("--sync-delay-ms", v) * 1e-3;
         a.sync_flags.push_back("--sync-delay-ms");
       }},
      {"--load-sync-ms",
       [&](const char* v) {
         c.replicas.load_period_s = non_negative("--load-sync-ms", v) * 1e-3;
         a.sync_flags.push_back("--load-sync-ms");
       }},
      {"--sync-text-share",
       [&](const char* v) {
         c.replicas.text_share = non_negative("--sync-text-share", v);
         if (c.replicas.text_share > 1) {
           die(std::string("--sync-text-share: '") + v + "' is more than 1");
         }
         a.sync_flags.push_back("--sync-text-share");
       }},
      {"--policies", [&](const char* v) { a.policies = policy_list(v); }},
      {"--json", [&](const char* v) { a.json = v; }},
      {"--svg", [&](const char* v) { a.svg = v; }},
  };
}

// The replica flags make sense only together.
void check_replica_flags(const Args& a) {
  const kvsim::Replicas& r = a.cfg.replicas;
  if (r.count == 1 && !a.sync_flags.empty()) {
    die(a.sync_flags.front() + ": needs --replicas 2 or more");
  }
  if (a.compare && r.count == 1) die("--compare-replicas: needs --replicas 2 or more");
  if (a.compare && r.sync == kvsim::SyncMode::kOff) {
    die("--compare-replicas: compares synced replicas with unsynced ones; not with --sync off");
  }
  for (const std::string& f : a.sync_flags) {
    if (r.sync == kvsim::SyncMode::kOff && f != "--sync") {
      die(f + ": nothing is synced with --sync off");
    }
    if (r.sync == kvsim::SyncMode::kLoads && f == "--sync-text-share") {
      die("--sync-text-share: state changes are not synced with --sync loads");
    }
    if (r.sync == kvsim::SyncMode::kTrees && f == "--load-sync-ms") {
      die("--load-sync-ms: loads are not synced with --sync trees");
    }
  }
}

Args parse(int argc, char** argv) {
  Args a;
  const std::map<std::string, Handler> flags = value_flags(a);
  bool have_trace = false;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "-h" || f == "--help") {
      fmt::print("{}{}\n", kUsage, kvsim::policy_names_text());
      std::exit(0);
    } else if (f == "-q") {
      a.quiet = true;
    } else if (f == "--open-loop") {
      a.cfg.closed_loop = false;
    } else if (f == "--compare-replicas") {
      a.compare = true;
    } else if (auto it = flags.find(f); it != flags.end()) {
      if (i + 1 >= argc) die(f + ": missing value");
      it->second(argv[++i]);
    } else if (!f.empty() && f[0] == '-') {
      die("unknown flag " + f + " (see --help)");
    } else if (!have_trace) {
      a.trace = f;
      have_trace = true;
    } else {
      die("more than one TRACE: " + f);
    }
  }
  check_replica_flags(a);
  if (a.policies.empty()) {
    a.policies = a.compare ? std::vector<std::string>{"cache_aware", "least_prefill"}
                           : kvsim::all_policy_names();
  }
  return a;
}

// Fails now, before any simulation, when `path` cannot be written. Leaves
// an existing file as it was and no new one behind.
void check_writable(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  std::FILE* probe = std::fopen(path.c_str(), "r");
  const bool existed = probe != nullptr;
  if (probe != nullptr) std::fclose(probe);
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) die(flag + " " + path + ": cannot write (" + std::strerror(errno) + ")");
  std::fclose(f);
  if (!existed) std::remove(path.c_str());
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream f(path);
  f << content;
  if (!f) die(path + ": cannot write");
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  check_writable("--json", a.json);
  check_writable("--svg", a.svg);
  a.cfg.progress = !a.quiet;
  kvsim::Trace tr;
  try {
    tr = kvsim::load_trace(a.trace, a.n, a.cpt);
  } catch (const std::exception& e) {
    die(e.what());
  }
  kvsim::shape(tr, a.n, a.speed);
  kvsim::infer_sessions(tr);
  kvsim::link_sessions(tr);
  if (a.speed != 1) tr.name += fmt::format(" (speed {})", a.speed);

  kvsim::Report rep = kvsim::make_report(tr, a.cfg);
  std::vector<kvsim::ReplicaRows> compared;
  for (const std::string& p : a.policies) {
    try {
      if (a.compare && !kvsim::is_reference(p)) {
        compared.push_back(kvsim::compare_replicas(tr, p, a.cfg));
        const kvsim::ReplicaRows& rows = compared.back();
        rep.policies.insert(rep.policies.end(), {rows.one, rows.synced});
        if (rows.trees) rep.policies.push_back(*rows.trees);
        rep.policies.push_back(rows.unsynced);
      } else {
        rep.policies.push_back(kvsim::run_policy(tr, p, a.cfg));
      }
    } catch (const std::exception& e) {
      die(e.what());
    }
    if (!a.quiet) fmt::print(stderr, "  {:<24} done\n", p);
  }
  if (a.compare) {
    rep.replicas =
        fmt::format("one router against {} replicas behind a round-robin front, {}{}, and unsynced",
                    a.cfg.replicas.count, kvsim::sync_text(a.cfg.replicas),
                    a.cfg.replicas.sync == kvsim::SyncMode::kOn ? ", with state changes only" : "");
  }
  fmt::print("{}", kvsim::table(rep));
  if (a.compare) fmt::print("\n{}", kvsim::replica_targets(compared, a.cfg.replicas));
  if (!a.json.empty()) write_file(a.json, kvsim::to_json(rep).dump(2) + "\n");
  if (!a.svg.empty()) write_file(a.svg, kvsim::svg(rep));
  return 0;
}
