// kvroute_sim: routers under test and the event-driven replay.
//
// Server model: N equal servers, each with a PrefixCache (server.hpp) of
// cache_tokens. A request waits in its server's FIFO queue; when it starts,
// the server matches its prefix (the cached tokens counted as hits), holds
// its blocks, and prefills the uncached tokens at prefill_rate tokens/s.
// Time to first token = queueing + prefill. Decode then takes
// output_tokens x tpot and overlaps other work; at its end the blocks are
// unpinned and the router's load guard is released. Time is simulated; the
// policies read it through a ManualClock.
#ifndef KVROUTE_EXAMPLES_SIM_SIMULATOR_HPP_
#define KVROUTE_EXAMPLES_SIM_SIMULATOR_HPP_

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "kvroute/kvroute.hpp"
#include "kvroute/policies/least_prefill.hpp"
#include "sim/server.hpp"
#include "sim/trace.hpp"

namespace kvsim {

struct SimConfig {
  int servers = 8;
  std::int64_t cache_tokens = 1'000'000;
  double prefill_rate = 20'000;  // tokens/s
  double tpot = 0.025;           // s per output token
  std::uint64_t seed = 1;
  bool progress = false;
  double lp_queue_weight = kvroute::LeastPrefill::Options{}.queue_weight;
  // LeastPrefill::Options::max_tree_size in multiples of a server's cache;
  // 0 keeps the policy's default.
  double lp_tree_scale = 0;
  // CacheAware::Options::recency_shift of the cache_aware policies.
  unsigned ca_recency_shift = kvroute::CacheAware::Options{}.recency_shift;
  // CacheAware::Options::feedback_slack_stamps of cache_aware_feedback.
  std::uint64_t ca_feedback_slack_stamps = 0;
  // CacheAware::Options::tenant_rule of the cache_aware policies.
  kvroute::CacheAware::TenantRule ca_tenant_rule = kvroute::CacheAware::Options{}.tenant_rule;
};

// The cluster state a router may look at (oracle and sticky do; kvroute
// policies see only their own LoadTracker).
struct ServerState {
  explicit ServerState(std::int64_t cap) : cache(cap) {}
  PrefixCache cache;
  std::deque<std::size_t> queue;  // jobs waiting to prefill
  bool busy = false;
  double prefill_end = 0;           // of the running prefill
  std::int64_t queued_est = 0;      // uncached tokens of queued jobs, as estimated on arrival
  std::int64_t in_flight = 0;       // jobs routed here and not completed
  std::int64_t prefill_tokens = 0;  // total uncached tokens prefilled
};

struct Routed {
  int server = -1;
  std::string_view branch;
  kvroute::Decision decision;
  kvroute::LoadGuard guard;
  // Wall-clock time of the routing decision (select_worker for kvroute
  // policies), microseconds; < 0: the host measures the whole route().
  double select_us = -1;
};

class SimRouter {
 public:
  virtual ~SimRouter() = default;
  virtual std::string_view name() const = 0;
  virtual Routed route(const SimRequest& r, std::string_view text, double now,
                       const std::vector<ServerState>& servers) = 0;
  // The server started r's prefill with `cached` tokens of it cached.
  virtual void on_prefill_start(Routed&, const SimRequest&, std::int64_t /*cached*/) {}
};

enum class Feedback { kNone, kCacheAware, kLeastPrefill, kLeastPrefillTree, kLeastPrefillQueue };

// A kvroute policy behind a WorkerSet and a LoadTracker, as a host runs it.
template <class P>
class KvRouter final : public SimRouter {
 public:
  KvRouter(std::unique_ptr<P> p, int servers, std::string name, Feedback fb, double cpt,
           kvroute::ManualClock& clock)
      : p_(std::move(p)), name_(std::move(name)), fb_(fb), cpt_(cpt), clock_(clock) {
    for (int i = 0; i < servers; ++i) {
      auto id = workers_.add({.url = "http://server-" + std::to_string(i) + ":30000"});
      load_.reserve(*id);
      snap_ = workers_.snapshot();
      kvroute::notify_worker_added(*p_, *snap_->find(*id));
    }
    snap_ = workers_.snapshot();
  }

  std::string_view name() const override { return name_; }

  Routed route(const SimRequest& r, std::string_view text, double now,
               const std::vector<ServerState>&) override {
    clock_.set(std::chrono::nanoseconds(static_cast<std::int64_t>(now * 1e9)));
    const kvroute::Header headers[] = {{kvroute::kRoutingKeyHeader, r.session}};
    const kvroute::RequestView req{.text = text,
                                   .headers = r.session.empty()
                                                  ? std::span<const kvroute::Header>{}
                                                  : std::span<const kvroute::Header>(headers)};
    Routed out;
    const auto t0 = std::chrono::steady_clock::now();
    out.decision = kvroute::select_worker(*p_, req, *snap_, load_);
    const auto t1 = std::chrono::steady_clock::now();
    out.select_us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    out.server = static_cast<int>(out.decision.worker->id.value);
    out.branch = kvroute::to_string(out.decision.branch);
    // The predicted uncached work: the prompt minus what the tree claims.
    const std::int64_t claimed_tokens =
        static_cast<std::int64_t>(static_cast<double>(out.decision.claimed) / cpt_);
    const std::int64_t tokens = std::max<std::int64_t>(r.input_tokens - claimed_tokens, 0);
    out.guard =
        load_.dispatch(out.decision.worker->id, {.tokens = tokens, .routing_key = r.session});
    return out;
  }

  void on_prefill_start(Routed& x, const SimRequest& r, std::int64_t cached) override {
    if (fb_ == Feedback::kNone) return;
    // The server caches whole blocks while the tree matches characters: a
    // shortfall of less than one block is granularity, not an eviction.
    const double claimed = static_cast<double>(x.decision.claimed) / cpt_;
    double reported = static_cast<double>(cached);
    if (claimed > reported && claimed - reported < static_cast<double>(kBlockTokens)) {
      reported = claimed;
    }
    const auto tokens = static_cast<std::uint64_t>(std::ceil(reported));
    if constexpr (std::is_same_v<P, kvroute::CacheAware>) {
      p_->report_cached(kvroute::RequestView{}, x.decision, tokens);
    }
    if constexpr (std::is_same_v<P, kvroute::LeastPrefill>) {
      if (fb_ != Feedback::kLeastPrefillQueue) {
        p_->report_cached(kvroute::RequestView{}, x.decision, tokens);
      }
      if (fb_ != Feedback::kLeastPrefillTree) {
        x.guard.set_tokens(r.input_tokens - cached);  // the real uncached work
      }
    }
  }

  P& policy() { return *p_; }

 private:
  kvroute::WorkerSet workers_;
  kvroute::LoadTracker load_;
  std::unique_ptr<P> p_;
  std::shared_ptr<const kvroute::WorkerSnapshot> snap_;
  std::string name_;
  Feedback fb_;
  double cpt_;
  kvroute::ManualClock& clock_;
};

// Reference: sees the real caches and queues, sends each request where
// (queued prefill work + its uncached tokens there) is least.
class OracleRouter final : public SimRouter {
 public:
  OracleRouter(std::uint64_t seed, double rate) : rng_(seed), rate_(rate) {}
  std::string_view name() const override { return "oracle"; }
  Routed route(const SimRequest& r, std::string_view, double now,
               const std::vector<ServerState>& s) override {
    Routed out;
    double best = 0;
    std::uint64_t ties = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
      const double running = s[i].busy ? std::max(0.0, s[i].prefill_end - now) * rate_ : 0.0;
      const double work = running + static_cast<double>(s[i].queued_est) +
                          static_cast<double>(r.input_tokens - s[i].cache.peek(r));
      if (out.server < 0 || work < best) {
        best = work;
        out.server = static_cast<int>(i);
        ties = 1;
      } else if (work == best && rng_.below(++ties) == 0) {
        out.server = static_cast<int>(i);
      }
    }
    out.branch = "oracle";
    return out;
  }

 private:
  kvroute::detail::SharedRng rng_;
  double rate_;
};

// Reference: a session stays on its first request's server (placed on the
// server with the fewest requests in flight).
class StickyRouter final : public SimRouter {
 public:
  explicit StickyRouter(std::uint64_t seed) : rng_(seed) {}
  std::string_view name() const override { return "sticky"; }
  Routed route(const SimRequest& r, std::string_view, double,
               const std::vector<ServerState>& s) override {
    Routed out;
    if (!r.session.empty()) {
      if (auto it = home_.find(r.session); it != home_.end()) {
        out.server = it->second;
        out.branch = "sticky_hit";
        return out;
      }
    }
    std::uint64_t ties = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (out.server < 0 || s[i].in_flight < s[static_cast<std::size_t>(out.server)].in_flight) {
        out.server = static_cast<int>(i);
        ties = 1;
      } else if (s[i].in_flight == s[static_cast<std::size_t>(out.server)].in_flight &&
                 rng_.below(++ties) == 0) {
        out.server = static_cast<int>(i);
      }
    }
    if (!r.session.empty()) home_[r.session] = out.server;
    out.branch = "sticky_new";
    return out;
  }

 private:
  kvroute::detail::SharedRng rng_;
  std::unordered_map<std::string, int> home_;
};

// Policy names in the order they are reported.
inline const std::vector<std::string>& all_policy_names() {
  static const std::vector<std::string> names = {
      "round_robin",          "random",        "power_of_two", "consistent_hashing",
      "prefix_hash",          "manual",        "bucket",       "cache_aware",
      "cache_aware_feedback", "least_prefill", "oracle",       "sticky"};
  return names;
}
// Also accepted by make_router, not run by default.
inline const std::vector<std::string>& extra_policy_names() {
  static const std::vector<std::string> names = {
      "least_prefill_nofeedback", "least_prefill_tree_feedback", "least_prefill_queue_feedback"};
  return names;
}

inline std::unique_ptr<SimRouter> make_router(const std::string& name, const SimConfig& cfg,
                                              double cpt, kvroute::ManualClock& clock) {
  using namespace kvroute;
  const std::uint64_t seed = cfg.seed;
  auto kv = [&](auto p, Feedback fb = Feedback::kNone) -> std::unique_ptr<SimRouter> {
    using P = typename decltype(p)::element_type;
    return std::make_unique<KvRouter<P>>(std::move(p), cfg.servers, name, fb, cpt, clock);
  };
  if (name == "round_robin") return kv(std::make_unique<RoundRobin>());
  if (name == "random") return kv(std::make_unique<Random>(Random::Options{.seed = seed}));
  if (name == "power_of_two") {
    return kv(std::make_unique<PowerOfTwo>(PowerOfTwo::Options{.seed = seed}));
  }
  if (name == "consistent_hashing") {
    return kv(std::make_unique<ConsistentHashing>(ConsistentHashing::Options{.seed = seed}));
  }
  if (name == "prefix_hash") {
    return kv(std::make_unique<PrefixHash>(PrefixHash::Options{.seed = seed}));
  }
  if (name == "manual") {
    return kv(std::make_unique<Manual>(Manual::Options{.clock = &clock, .seed = seed}));
  }
  if (name == "bucket") {
    return kv(std::make_unique<Bucket>(Bucket::Options{.clock = &clock, .seed = seed}));
  }
  if (name == "cache_aware" || name == "cache_aware_feedback") {
    return kv(std::make_unique<CacheAware>(
                  CacheAware::Options{.tenant_rule = cfg.ca_tenant_rule,
                                      .chars_per_token = cpt,
                                      .feedback_slack_stamps = cfg.ca_feedback_slack_stamps,
                                      .recency_shift = cfg.ca_recency_shift,
                                      .clock = &clock,
                                      .seed = seed}),
              name == "cache_aware" ? Feedback::kNone : Feedback::kCacheAware);
  }
  if (name.rfind("least_prefill", 0) == 0) {
    const Feedback fb = name == "least_prefill"                  ? Feedback::kLeastPrefill
                        : name == "least_prefill_tree_feedback"  ? Feedback::kLeastPrefillTree
                        : name == "least_prefill_queue_feedback" ? Feedback::kLeastPrefillQueue
                        : name == "least_prefill_nofeedback"     ? Feedback::kNone
                                                                 : Feedback::kCacheAware;
    if (fb == Feedback::kCacheAware) return nullptr;
    return kv(std::make_unique<LeastPrefill>(LeastPrefill::Options{
                  .chars_per_token = cpt,
                  .queue_weight = cfg.lp_queue_weight,
                  .max_tree_size =
                      cfg.lp_tree_scale > 0
                          ? static_cast<std::uint64_t>(static_cast<double>(cfg.cache_tokens) * cpt *
                                                       cfg.lp_tree_scale)
                          : LeastPrefill::Options{}.max_tree_size,
                  .clock = &clock,
                  .seed = seed}),
              fb);
  }
  if (name == "oracle") return std::make_unique<OracleRouter>(seed, cfg.prefill_rate);
  if (name == "sticky") return std::make_unique<StickyRouter>(seed);
  return nullptr;
}

struct PolicyResult {
  std::string name;
  double hit_rate = 0;
  double ttft_mean = 0, ttft_p50 = 0, ttft_p99 = 0;
  double imbalance = 0;
  double select_us_mean = 0, select_us_p99 = 0;
  std::map<std::string, std::int64_t> branches;
  // Per request, in trace order (for tests and deeper analysis).
  std::vector<double> ttft;
  std::vector<int> server;
  std::vector<std::int64_t> cached;
  std::vector<std::int64_t> claimed;         // tokens the router's tree claimed (kvroute policies)
  std::vector<std::string_view> branch;      // decision branch
  std::vector<int> completions;              // times each request completed
  std::vector<std::int64_t> prefill_tokens;  // per server
};

inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
}

// Replays `tr` through `router`.
inline PolicyResult simulate(const Trace& tr, SimRouter& router, const SimConfig& cfg,
                             TextExpander& texts) {
  const std::size_t n = tr.requests.size();
  std::vector<ServerState> servers;
  servers.reserve(static_cast<std::size_t>(cfg.servers));
  for (int i = 0; i < cfg.servers; ++i) servers.emplace_back(cfg.cache_tokens);

  PolicyResult res;
  res.name = std::string(router.name());
  res.ttft.assign(n, 0);
  res.server.assign(n, -1);
  res.cached.assign(n, 0);
  res.claimed.assign(n, 0);
  res.branch.assign(n, {});
  res.completions.assign(n, 0);
  std::vector<Routed> jobs(n);
  std::vector<std::int64_t> est(n, 0);
  std::vector<double> select_us;
  select_us.reserve(n);

  enum Kind : int { kPrefillEnd = 0, kComplete = 1 };
  struct Event {
    double t;
    std::uint64_t seq;
    int kind;
    std::size_t job;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  std::uint64_t seq = 0;

  auto start_next = [&](std::size_t s, double now) {
    ServerState& sv = servers[s];
    if (sv.busy || sv.queue.empty()) return;
    const std::size_t j = sv.queue.front();
    sv.queue.pop_front();
    sv.queued_est -= est[j];
    const SimRequest& r = tr.requests[j];
    const std::int64_t cached = sv.cache.acquire(r);
    res.cached[j] = cached;
    const std::int64_t uncached = r.input_tokens - cached;
    sv.prefill_tokens += uncached;
    router.on_prefill_start(jobs[j], r, cached);
    sv.busy = true;
    sv.prefill_end = now + static_cast<double>(uncached) / cfg.prefill_rate;
    events.push({sv.prefill_end, seq++, kPrefillEnd, j});
  };

  std::string buf;
  std::size_t next = 0;
  while (next < n || !events.empty()) {
    if (next < n && (events.empty() || tr.requests[next].t < events.top().t)) {
      const std::size_t j = next++;
      const SimRequest& r = tr.requests[j];
      const double now = r.t;
      const std::string_view text = texts.text(r, buf);
      const auto t0 = std::chrono::steady_clock::now();
      jobs[j] = router.route(r, text, now, servers);
      const auto t1 = std::chrono::steady_clock::now();
      select_us.push_back(jobs[j].select_us >= 0
                              ? jobs[j].select_us
                              : std::chrono::duration<double, std::micro>(t1 - t0).count());
      const auto s = static_cast<std::size_t>(jobs[j].server);
      res.server[j] = jobs[j].server;
      res.branch[j] = jobs[j].branch;
      res.claimed[j] = static_cast<std::int64_t>(static_cast<double>(jobs[j].decision.claimed) /
                                                 tr.chars_per_token);
      ++res.branches[std::string(jobs[j].branch)];
      ServerState& sv = servers[s];
      est[j] = r.input_tokens - sv.cache.peek(r);
      sv.queued_est += est[j];
      ++sv.in_flight;
      sv.queue.push_back(j);
      start_next(s, now);
      if (cfg.progress && (j + 1) % 1000 == 0) {
        std::fprintf(stderr, "\r  %-24s %zu/%zu", res.name.c_str(), j + 1, n);
      }
      continue;
    }
    const Event e = events.top();
    events.pop();
    const SimRequest& r = tr.requests[e.job];
    const auto s = static_cast<std::size_t>(jobs[e.job].server);
    ServerState& sv = servers[s];
    if (e.kind == kPrefillEnd) {
      res.ttft[e.job] = e.t - r.t;
      jobs[e.job].guard.release_tokens();
      sv.busy = false;
      events.push({e.t + static_cast<double>(r.output_tokens) * cfg.tpot, seq++, kComplete, e.job});
      start_next(s, e.t);
    } else {
      sv.cache.release(r);
      --sv.in_flight;
      ++res.completions[e.job];
      jobs[e.job].guard.release();
    }
  }
  if (cfg.progress) std::fprintf(stderr, "\r%60s\r", "");

  std::int64_t hit = 0, total = 0;
  for (std::size_t j = 0; j < n; ++j) {
    hit += res.cached[j];
    total += tr.requests[j].input_tokens;
  }
  res.hit_rate = total == 0 ? 0 : static_cast<double>(hit) / static_cast<double>(total);
  double sum = 0;
  for (double x : res.ttft) sum += x;
  res.ttft_mean = n == 0 ? 0 : sum / static_cast<double>(n);
  res.ttft_p50 = quantile(res.ttft, 0.50);
  res.ttft_p99 = quantile(res.ttft, 0.99);
  std::int64_t mx = 0, tot = 0;
  for (const ServerState& sv : servers) {
    res.prefill_tokens.push_back(sv.prefill_tokens);
    mx = std::max(mx, sv.prefill_tokens);
    tot += sv.prefill_tokens;
  }
  res.imbalance = tot == 0 ? 1.0
                           : static_cast<double>(mx) /
                                 (static_cast<double>(tot) / static_cast<double>(servers.size()));
  double us = 0;
  for (double x : select_us) us += x;
  res.select_us_mean = select_us.empty() ? 0 : us / static_cast<double>(select_us.size());
  res.select_us_p99 = quantile(select_us, 0.99);
  return res;
}

// Runs one named policy on `tr`.
inline PolicyResult run_policy(const Trace& tr, const std::string& name, const SimConfig& cfg) {
  kvroute::ManualClock clock;
  TextExpander texts(tr.chars_per_token);
  std::unique_ptr<SimRouter> router = make_router(name, cfg, tr.chars_per_token, clock);
  if (router == nullptr) throw std::invalid_argument("unknown policy: " + name);
  return simulate(tr, *router, cfg, texts);
}

}  // namespace kvsim

#endif  // KVROUTE_EXAMPLES_SIM_SIMULATOR_HPP_
