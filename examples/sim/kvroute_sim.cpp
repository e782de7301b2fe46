// kvroute_sim: replays a request trace against simulated inference servers
// with exact prefix KV caches, once per routing policy, and compares hit
// rate and time to first token. See examples/sim/README.md.
//
//   kvroute_sim [TRACE] [-n N] [--speed S] [--json FILE] [--svg FILE] [flags]
#include <fmt/core.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "sim/report.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"

namespace {

constexpr const char* kUsage = R"(usage: kvroute_sim [TRACE] [options]

TRACE is a file (Mooncake JSONL with hash_ids, or JSONL of text requests
{"t": s, "text": ..., "session"?, "output_length"?}; .gz accepted) or a built-in
generator: chat (default), agent, batch.

  -n N                  keep the first N requests (generators: make N; default 2000)
  --speed S             divide arrival times by S (default 1)
  --servers N           servers (default 8)
  --cache-tokens T      KV cache per server, tokens (default 1000000)
  --prefill-rate R      prefill tokens per second (default 20000)
  --tpot S              seconds per output token (default 0.025)
  --chars-per-token C   characters of routing text per token (default 4)
  --seed N              seed of every policy (default 1)
  --lp-queue-weight W   least_prefill's queue_weight (default 0.4)
  --lp-tree-scale X     least_prefill's max_tree_size in server caches
                        (default: the policy's, 2^26 characters)
  --ca-recency-shift S  cache_aware's recency_shift, 0 to 16 (default 6:
                        steps of 2^S stamps; 0: exact recency)
  --ca-feedback-slack-stamps K
                        cache_aware's feedback_slack_stamps (default 0)
  --ca-tenant-rule R    cache_aware's choice among the deepest matched
                        node's tenants: least_loaded (default) or most_recent
  --policies a,b,...    run these (default: all; extra: least_prefill_nofeedback)
  --json FILE           write results as JSON
  --svg FILE            write a chart (hit rate and p99 TTFT per policy)
  -q                    no progress on stderr
)";

struct Args {
  std::string trace = "chat";
  std::size_t n = 0;
  double speed = 1;
  double cpt = 4;
  std::string json, svg;
  std::vector<std::string> policies;
  kvsim::SimConfig cfg;
  bool quiet = false;
};

[[noreturn]] void die(const std::string& msg) {
  fmt::print(stderr, "kvroute_sim: {}\n", msg);
  std::exit(2);
}

double num(const std::string& flag, const char* v) {
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(d > 0)) die(flag + ": '" + v + "' is not a positive number");
  return d;
}

Args parse(int argc, char** argv) {
  Args a;
  bool have_trace = false;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) die(f + ": missing value");
      return argv[++i];
    };
    if (f == "-h" || f == "--help") {
      fmt::print("{}", kUsage);
      std::exit(0);
    } else if (f == "-n") {
      a.n = static_cast<std::size_t>(num(f, val()));
    } else if (f == "--speed") {
      a.speed = num(f, val());
    } else if (f == "--servers") {
      a.cfg.servers = static_cast<int>(num(f, val()));
    } else if (f == "--cache-tokens") {
      a.cfg.cache_tokens = static_cast<std::int64_t>(num(f, val()));
    } else if (f == "--prefill-rate") {
      a.cfg.prefill_rate = num(f, val());
    } else if (f == "--tpot") {
      a.cfg.tpot = num(f, val());
    } else if (f == "--chars-per-token") {
      a.cpt = num(f, val());
    } else if (f == "--lp-queue-weight") {
      a.cfg.lp_queue_weight = num(f, val());
    } else if (f == "--lp-tree-scale") {
      a.cfg.lp_tree_scale = num(f, val());
    } else if (f == "--ca-recency-shift") {
      const char* v = val();
      char* end = nullptr;
      const unsigned long s = std::strtoul(v, &end, 10);
      if (end == v || *end != '\0' || s > kvroute::ApproxRadixTree::kMaxRecencyShift) {
        die(f + ": '" + v + "' is not an integer from 0 to 16");
      }
      a.cfg.ca_recency_shift = static_cast<unsigned>(s);
    } else if (f == "--ca-tenant-rule") {
      const std::string v = val();
      if (v == "least_loaded") {
        a.cfg.ca_tenant_rule = kvroute::CacheAware::TenantRule::kLeastLoaded;
      } else if (v == "most_recent") {
        a.cfg.ca_tenant_rule = kvroute::CacheAware::TenantRule::kMostRecent;
      } else {
        die(f + ": '" + v + "' is not least_loaded or most_recent");
      }
    } else if (f == "--ca-feedback-slack-stamps") {
      const char* v = val();
      char* end = nullptr;
      const unsigned long long k = std::strtoull(v, &end, 10);
      if (end == v || *end != '\0' || v[0] == '-') {
        die(f + ": '" + v + "' is not a non-negative integer");
      }
      a.cfg.ca_feedback_slack_stamps = k;
    } else if (f == "--seed") {
      a.cfg.seed = static_cast<std::uint64_t>(num(f, val()));
    } else if (f == "--policies") {
      std::string s = val();
      for (std::size_t p = 0; p <= s.size();) {
        std::size_t q = s.find(',', p);
        if (q == std::string::npos) q = s.size();
        if (q > p) a.policies.push_back(s.substr(p, q - p));
        p = q + 1;
      }
    } else if (f == "--json") {
      a.json = val();
    } else if (f == "--svg") {
      a.svg = val();
    } else if (f == "-q") {
      a.quiet = true;
    } else if (!f.empty() && f[0] == '-') {
      die("unknown flag " + f + " (see --help)");
    } else if (!have_trace) {
      a.trace = f;
      have_trace = true;
    } else {
      die("more than one TRACE: " + f);
    }
  }
  if (a.policies.empty()) a.policies = kvsim::all_policy_names();
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  a.cfg.progress = !a.quiet;
  kvsim::Trace tr;
  try {
    tr = kvsim::load_trace(a.trace, a.n, a.cpt);
  } catch (const std::exception& e) {
    die(e.what());
  }
  kvsim::shape(tr, a.n, a.speed);
  kvsim::infer_sessions(tr);
  if (a.speed != 1) tr.name += fmt::format(" (speed {})", a.speed);

  kvsim::Report rep;
  rep.trace = tr.name;
  rep.servers = a.cfg.servers;
  rep.requests = tr.requests.size();
  rep.ideal_hit_rate = kvsim::ideal_hit_rate(tr);
  for (const std::string& p : a.policies) {
    try {
      rep.policies.push_back(kvsim::run_policy(tr, p, a.cfg));
    } catch (const std::exception& e) {
      die(e.what());
    }
    if (!a.quiet) fmt::print(stderr, "  {:<24} done\n", p);
  }
  fmt::print("{}", kvsim::table(rep));
  if (!a.json.empty()) {
    std::ofstream f(a.json);
    f << kvsim::to_json(rep).dump(2) << "\n";
    if (!f) die(a.json + ": cannot write");
  }
  if (!a.svg.empty()) {
    std::ofstream f(a.svg);
    f << kvsim::svg(rep);
    if (!f) die(a.svg + ": cannot write");
  }
  return 0;
}
