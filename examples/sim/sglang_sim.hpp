// kvroute_sim: the replay on the `sglang` server model.
//
// Servers are SglangServer (sglang_server.hpp). Sessions run closed-loop by
// default: a session's first request is sent at its trace time (divided by
// --speed, so that speed sets how fast users arrive), and each later one
// when the previous response has ended plus the think time the trace
// implies: its `think_time` field, or else the gap between the two requests
// in the trace less the previous request's response time on an idle server
// that holds the session's earlier turns. Open loop sends every request at
// its trace time.
//
// The router learns what a host learns: the first token releases the
// request's queued tokens (LoadGuard::release_tokens), and the response,
// with the server's cached-token count, ends it (SimRouter::on_response,
// then LoadGuard::release).
#ifndef KVROUTE_EXAMPLES_SIM_SGLANG_SIM_HPP_
#define KVROUTE_EXAMPLES_SIM_SGLANG_SIM_HPP_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <vector>

#include "sim/config.hpp"
#include "sim/result.hpp"
#include "sim/routers.hpp"
#include "sim/sglang_server.hpp"
#include "sim/trace.hpp"

namespace kvsim {

class SglangView final : public ServerView {
 public:
  // `future`: the blocks requests not yet sent will use, or null.
  SglangView(const std::vector<SglangServer>& s, const BlockUses* future)
      : s_(s), future_(future) {}
  std::size_t size() const override { return s_.size(); }
  std::int64_t in_flight(std::size_t i) const override { return s_[i].in_flight(); }
  double oracle_cost(std::size_t i, const SimRequest& r, double now) const override {
    return s_[i].oracle_cost(r, now, future_);
  }

 private:
  const std::vector<SglangServer>& s_;
  const BlockUses* future_;
};

// Every request's blocks, counted once per request: the future before the
// first request is sent.
inline BlockUses block_uses(const Trace& tr) {
  BlockUses uses;
  for (const SimRequest& r : tr.requests) {
    for (std::uint64_t b : r.blocks) ++uses[b];
  }
  return uses;
}

// Request r is sent: its blocks have one use fewer ahead.
inline void forget_uses(BlockUses& uses, const SimRequest& r) {
  for (std::uint64_t b : r.blocks) {
    auto it = uses.find(b);
    if (it != uses.end() && --it->second == 0) uses.erase(it);
  }
}

// Tokens of b's prompt that a's prompt shares as whole leading blocks (at
// most all but b's last token).
inline std::int64_t shared_prefix(const SimRequest& a, const SimRequest& b) {
  std::int64_t t = 0;
  for (std::size_t k = 0; k < std::min(a.blocks.size(), b.blocks.size()); ++k) {
    if (a.blocks[k] != b.blocks[k] || a.block_tokens(k) != b.block_tokens(k)) break;
    t += b.block_tokens(k);
  }
  return std::max<std::int64_t>(0, std::min(t, b.input_tokens - 1));
}

// The think time before request j, a session's later request.
inline double think_time(const Trace& tr, std::size_t j, const SglangModel& m) {
  const SimRequest& r = tr.requests[j];
  if (r.think >= 0) return r.think;
  const std::size_t p = tr.prev_in_session[j];
  const SimRequest& q = tr.requests[p];
  const std::size_t pp = tr.prev_in_session[p];
  const std::int64_t cached = pp == kNoRequest ? 0 : shared_prefix(tr.requests[pp], q);
  const double service = m.prefill_alone(q.input_tokens - cached, cached) +
                         static_cast<double>(std::max<std::int64_t>(q.output_tokens - 1, 0)) *
                             m.decode_step(1, q.input_tokens + q.output_tokens / 2);
  return std::max(0.0, r.t_trace - q.t_trace - service);
}

// Replays `tr` through `router` on the sglang model.
inline PolicyResult simulate_sglang(const Trace& tr, SimRouter& router, const SimConfig& cfg,
                                    TextExpander& texts) {
  const std::size_t n = tr.requests.size();
  const bool closed = cfg.closed_loop && tr.prev_in_session.size() == n;
  std::vector<SglangServer> servers;
  servers.reserve(static_cast<std::size_t>(cfg.servers));
  for (int i = 0; i < cfg.servers; ++i) servers.emplace_back(tr, cfg.sglang, cfg.cache_tokens);
  const bool sees_future = router.sees_future();
  BlockUses future;
  if (sees_future) future = block_uses(tr);
  const SglangView view(servers, sees_future ? &future : nullptr);

  PolicyResult res;
  reset(res, router.name(), n);
  std::vector<Routed> jobs(n);

  enum Kind : int { kRelease = 0, kStep = 1 };
  struct Event {
    double t;
    std::uint64_t seq;
    int kind;
    std::size_t index;  // request (kRelease) or server (kStep)
    std::uint64_t gen;  // kStep: the server's generation when scheduled
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  std::uint64_t seq = 0;
  auto schedule = [&](std::size_t s) {
    const double t = servers[s].next_event();
    if (t < SglangServer::kIdle) events.push({t, seq++, kStep, s, servers[s].generation()});
  };
  auto follow = [&](std::size_t j, double now) {
    if (!closed || tr.next_in_session[j] == kNoRequest) return;
    const std::size_t k = tr.next_in_session[j];
    events.push({now + think_time(tr, k, cfg.sglang), seq++, kRelease, k, 0});
  };

  std::string buf;
  std::size_t released = 0;
  const Progress progress(cfg.progress, res.name, n);
  auto release = [&](std::size_t j, double now) {
    const SimRequest& r = tr.requests[j];
    if (sees_future) forget_uses(future, r);
    jobs[j] = route_one(router, tr, j, texts.text(r, buf), now, view, res);
    progress.tick(++released);
    const auto s = static_cast<std::size_t>(jobs[j].server);
    if (!servers[s].fits(j)) {  // SGLang rejects a prompt longer than its pool
      ++res.completions[j];
      jobs[j].guard.release();
      follow(j, now);
      return;
    }
    if (servers[s].arrive(j, now)) schedule(s);
  };
  auto step = [&](std::size_t s, double now) {
    SglangServer::Done done;
    servers[s].step_end(now, done);
    schedule(s);
    for (std::size_t j : done.first_token) {
      res.ttft[j] = now - res.sent[j];
      jobs[j].guard.release_tokens();
    }
    for (std::size_t j : done.finished) {
      res.cached[j] = servers[s].cached(j);
      router.on_response(jobs[j], tr.requests[j], res.cached[j]);
      jobs[j].guard.release();
      ++res.completions[j];
      follow(j, now);
    }
  };

  std::size_t next = 0;  // the next request sent at its trace time
  auto skip_followers = [&] {
    while (closed && next < n && tr.prev_in_session[next] != kNoRequest) ++next;
  };
  skip_followers();
  while (next < n || !events.empty()) {
    if (next < n && (events.empty() || tr.requests[next].t < events.top().t)) {
      router.advance(tr.requests[next].t);
      release(next, tr.requests[next].t);
      ++next;
      skip_followers();
      continue;
    }
    const Event e = events.top();
    events.pop();
    router.advance(e.t);
    if (e.kind == kRelease) {
      release(e.index, e.t);
    } else if (e.gen == servers[e.index].generation()) {
      step(e.index, e.t);
    }
  }
  for (const SglangServer& sv : servers) res.prefill_tokens.push_back(sv.prefilled());
  summarize(tr, res);
  return res;
}

}  // namespace kvsim

#endif  // KVROUTE_EXAMPLES_SIM_SGLANG_SIM_HPP_
