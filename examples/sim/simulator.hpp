// kvroute_sim: the replay of a trace through one router, per server model.
//
// Two server models. `sglang` (the default, sglang_sim.hpp): each server
// runs SGLang's scheduler - continuous batching, chunked prefill, one KV
// pool shared by the radix cache and the running requests - and sessions
// run closed-loop. `simple` (this file, kept so that results stay
// comparable with older figures): each server prefills one request at a
// time in FIFO order at a fixed rate, decode overlaps everything, and
// requests arrive at their trace times. Time is simulated; the policies
// read it through a ManualClock.
#ifndef KVROUTE_EXAMPLES_SIM_SIMULATOR_HPP_
#define KVROUTE_EXAMPLES_SIM_SIMULATOR_HPP_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config.hpp"
#include "sim/replicas.hpp"
#include "sim/result.hpp"
#include "sim/routers.hpp"
#include "sim/server.hpp"
#include "sim/sglang_sim.hpp"
#include "sim/trace.hpp"

namespace kvsim {

// One server of the simple model: a PrefixCache of cache_tokens, a FIFO
// queue, one prefill at a time at prefill_rate. A request matches its
// prefix and pins its blocks when its prefill starts; time to first token =
// queueing + prefill; decode then takes output tokens x tpot and overlaps
// everything, and its end unpins the blocks.
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

// The simple model's servers as the references see them. The oracle's cost
// is the prefill work ahead plus the request's own uncached tokens there:
// the running prefill's remaining work and the queued requests' uncached
// tokens as estimated on arrival.
class SimpleView final : public ServerView {
 public:
  SimpleView(const std::vector<ServerState>& s, double rate) : s_(s), rate_(rate) {}
  std::size_t size() const override { return s_.size(); }
  std::int64_t in_flight(std::size_t i) const override { return s_[i].in_flight; }
  double oracle_cost(std::size_t i, const SimRequest& r, double now) const override {
    const double running = s_[i].busy ? std::max(0.0, s_[i].prefill_end - now) * rate_ : 0.0;
    return running + static_cast<double>(s_[i].queued_est) +
           static_cast<double>(r.input_tokens - s_[i].cache.peek(r));
  }

 private:
  const std::vector<ServerState>& s_;
  double rate_;
};

// Replays `tr` through `router` on the simple model (open loop: every
// request is sent at its trace time).
inline PolicyResult simulate_simple(const Trace& tr, SimRouter& router, const SimConfig& cfg,
                                    TextExpander& texts) {
  const std::size_t n = tr.requests.size();
  std::vector<ServerState> servers;
  servers.reserve(static_cast<std::size_t>(cfg.servers));
  for (int i = 0; i < cfg.servers; ++i) servers.emplace_back(cfg.cache_tokens);
  const SimpleView view(servers, cfg.prefill_rate);

  PolicyResult res;
  reset(res, router.name(), n);
  std::vector<Routed> jobs(n);
  std::vector<std::int64_t> est(n, 0);

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
  const Progress progress(cfg.progress, res.name, n);
  while (next < n || !events.empty()) {
    if (next < n && (events.empty() || tr.requests[next].t < events.top().t)) {
      const std::size_t j = next++;
      const SimRequest& r = tr.requests[j];
      const double now = r.t;
      router.advance(now);
      jobs[j] = route_one(router, tr, j, texts.text(r, buf), now, view, res);
      const auto s = static_cast<std::size_t>(jobs[j].server);
      ServerState& sv = servers[s];
      est[j] = r.input_tokens - sv.cache.peek(r);
      sv.queued_est += est[j];
      ++sv.in_flight;
      sv.queue.push_back(j);
      start_next(s, now);
      progress.tick(j + 1);
      continue;
    }
    const Event e = events.top();
    events.pop();
    router.advance(e.t);
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
  for (const ServerState& sv : servers) res.prefill_tokens.push_back(sv.prefill_tokens);
  summarize(tr, res);
  return res;
}

// The router named `name`: with cfg.replicas.count > 1, that many replicas
// of it behind a round-robin front, except the references, which stay one
// router. Null for an unknown name. Replica i's seed is cfg.seed + i x
// kReplicaSeedStride: kvroute's generator counts up from its seed, so seeds
// 1, 2, 3 would give the replicas one stream shifted by a draw, and with
// requests dealt in turn they would make the same random picks together.
inline constexpr std::uint64_t kReplicaSeedStride = 0x9e3779b97f4a7c15ull;
inline std::unique_ptr<SimRouter> make_routers(const std::string& name, const SimConfig& cfg,
                                               double cpt, kvroute::ManualClock& clock) {
  if (cfg.replicas.count <= 1 || is_reference(name)) return make_router(name, cfg, cpt, clock);
  std::vector<std::unique_ptr<SimRouter>> copies;
  for (int i = 0; i < cfg.replicas.count; ++i) {
    SimConfig one = cfg;
    one.seed = cfg.seed + static_cast<std::uint64_t>(i) * kReplicaSeedStride;
    copies.push_back(make_router(name, one, cpt, clock));
    if (copies.back() == nullptr) return nullptr;
  }
  return std::make_unique<ReplicatedRouter>(std::move(copies), cfg.replicas, clock);
}

// Runs one named policy on `tr` under cfg.server_model.
inline PolicyResult run_policy(const Trace& tr, const std::string& name, const SimConfig& cfg) {
  kvroute::ManualClock clock;
  TextExpander texts(tr.chars_per_token);
  std::unique_ptr<SimRouter> router = make_routers(name, cfg, tr.chars_per_token, clock);
  if (router == nullptr) {
    throw std::invalid_argument("unknown policy '" + name + "' (policies: " + policy_names_text() +
                                ")");
  }
  PolicyResult res = cfg.server_model == ServerModel::kSimple
                         ? simulate_simple(tr, *router, cfg, texts)
                         : simulate_sglang(tr, *router, cfg, texts);
  router->add_totals(res);
  return res;
}

}  // namespace kvsim

#endif  // KVROUTE_EXAMPLES_SIM_SIMULATOR_HPP_
