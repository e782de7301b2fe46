// kvroute_sim's sglang server model on tiny traces built here: the pieces
// of SGLang's scheduler the model claims (examples/sim/README.md).
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "sim/server.hpp"
#include "sim/sglang_server.hpp"
#include "sim/sim_requests.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"

using kvsim::SimRequest;
using kvsim::Trace;
using kvtest::block_request;

namespace {

std::vector<std::uint64_t> range(std::uint64_t from, std::uint64_t n) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t i = 0; i < n; ++i) v.push_back(from + i);
  return v;
}

// A trace of `rs`, its sessions (if any) linked.
Trace trace_of(std::vector<SimRequest> rs) {
  bool sessions = false;
  for (const SimRequest& r : rs) sessions |= !r.session.empty();
  return kvtest::make_trace(std::move(rs), sessions);
}

// A model with round numbers: 1 ms per prefill token, no step overhead or
// attention cost, 10 ms per decode step whatever the batch.
kvsim::SglangModel round_model() {
  kvsim::SglangModel m;
  m.prefill_step_s = 0;
  m.prefill_token_s = 1e-3;
  m.prefill_pair_s = 0;
  m.decode_step_s = 0.01;
  m.decode_seq_s = 0;
  m.decode_ctx_s = 0;
  m.chunked_prefill_size = 1000;
  return m;
}

kvsim::SimConfig one_server(std::int64_t pool = 1'000'000) {
  kvsim::SimConfig cfg;
  cfg.servers = 1;
  cfg.cache_tokens = pool;
  cfg.sglang = round_model();
  return cfg;
}

// Runs the server by hand: arrivals at their times, steps at theirs.
struct Bench {
  explicit Bench(const Trace& t, std::int64_t pool = 1'000'000)
      : tr(t), server(t, round_model(), pool) {}
  // Runs every step that ends by `until`.
  void run_until(double until) {
    while (server.next_event() <= until) {
      kvsim::SglangServer::Done d;
      const double t = server.next_event();
      server.step_end(t, d);
      for (std::size_t j : d.first_token) first[j] = t;
      for (std::size_t j : d.finished) end[j] = t;
    }
  }
  const Trace& tr;
  kvsim::SglangServer server;
  std::map<std::size_t, double> first, end;
};

}  // namespace

TEST_CASE("sglang: pinned blocks survive eviction, unpinned go least recent first", "[sim]") {
  kvsim::PrefixCache c(4 * 512);
  const SimRequest a = block_request(0, {1, 2, 3}, 3 * 512, {}, 1);
  const SimRequest b = block_request(0, {7, 8}, 2 * 512, {}, 1);
  c.hold(a, 0);
  CHECK(c.pinned() == 3 * 512);
  c.hold(b, 0);
  c.evict_to(4 * 512);  // everything pinned: nothing can go
  CHECK(c.used() == 5 * 512);
  c.unpin(a, 3);
  c.evict_to(4 * 512);
  CHECK(c.used() == 4 * 512);
  CHECK(c.match(a).blocks == 2);  // a's deepest block went first
  c.put(99, 300);                 // most recent
  c.unpin(b, 2);                  // b, then 99, then a
  c.evict_to(c.used() - 512);
  CHECK(c.holds(99));
  CHECK_FALSE(c.holds(a.blocks[1]));
  CHECK(c.match(a).blocks == 1);
}

TEST_CASE("sglang: a prefill is cut into chunks, and a queued request waits for them", "[sim]") {
  // 2500 uncached tokens at 1 ms each, chunks of 1000. The request behind
  // it, arriving at 0.1 s, waits while the chunked one continues first,
  // then fills the last step's remaining 500 tokens with its 400: both
  // first tokens come at the end of that step, 2.9 s.
  const Trace tr = trace_of(
      {block_request(0, range(0, 5), 2500, {}, 3), block_request(0.1, range(100, 1), 400, {}, 2)});
  Bench b(tr);
  CHECK(b.server.arrive(0, 0));
  CHECK(b.server.next_event() == Approx(1.0));
  b.server.arrive(1, 0.1);
  b.run_until(100);
  CHECK(b.first[0] == Approx(2.9));
  CHECK(b.first[1] == Approx(2.9));
  // Request 0 then decodes 2 tokens (10 ms each), request 1 one token, in
  // one batch: both runs end together after 1 step, 0 one step later.
  CHECK(b.end[1] == Approx(2.91));
  CHECK(b.end[0] == Approx(2.92));
}

TEST_CASE("sglang: a request is admitted only when its tokens fit the pool", "[sim]") {
  // Pool of 10,000 tokens. Request 0 reserves 6000 + 3000; request 1 needs
  // 3000 + 100, more than is left, so it waits until 0 has finished.
  const Trace tr = trace_of({block_request(0, range(0, 12), 6000, {}, 3000),
                             block_request(0.1, range(100, 6), 3000, {}, 100)});
  Bench b(tr, 10'000);
  b.server.arrive(0, 0);
  b.server.arrive(1, 0.1);
  b.run_until(1000);
  CHECK(b.first[0] == Approx(6.0));
  CHECK(b.end[0] == Approx(6.0 + 2999 * 0.01));
  CHECK(b.first[1] >= b.end[0]);
  CHECK(b.first[1] == Approx(b.end[0] + 3.0));
}

TEST_CASE("sglang: decode steps cost more with a bigger batch and a longer context", "[sim]") {
  const kvsim::SglangModel m;  // the Llama-2-70B defaults
  CHECK(m.decode_step(32, 32 * 1000) > m.decode_step(1, 1000));
  CHECK(m.decode_step(1, 200'000) > m.decode_step(1, 1000));
  // Long cached prefixes are not free: the new tokens attend to them.
  CHECK(m.prefill_alone(1000, 100'000) > 1.5 * m.prefill_alone(1000, 0));
  // One chunk per step: 20,000 new tokens take three steps' overhead.
  CHECK(m.prefill_alone(20'000, 0) >
        3 * m.prefill_step_s + 20'000 * m.prefill_token_s + m.prefill_pair_s * 2e8 - 1e-9);
}

TEST_CASE("sglang: generated tokens enter the cache for the session's next turn", "[sim]") {
  // Turn 1: 4 blocks of prompt (2048 tokens), 700 generated. Turn 2 is turn
  // 1's prompt, the answer, then a new message: the answer's blocks are new
  // ids in turn 2. With the answer cached, turn 2 hits 2048 + 700 tokens.
  std::vector<std::uint64_t> ids2 = range(0, 4);
  for (std::uint64_t b : range(50, 4)) ids2.push_back(b);
  const Trace tr = trace_of(
      {block_request(0, range(0, 4), 2048, "s", 700), block_request(100, ids2, 4000, "s", 5)});
  kvsim::SimConfig cfg = one_server();
  const auto res = kvsim::run_policy(tr, "round_robin", cfg);
  CHECK(res.cached[0] == 0);
  CHECK(res.cached[1] == 2048 + 700);
}

TEST_CASE("sglang: the cached-token count reaches the router with the response", "[sim]") {
  struct Recorder final : kvsim::SimRouter {
    std::vector<std::pair<std::size_t, std::int64_t>> responses;
    int prefill_starts = 0;
    std::string_view name() const override { return "recorder"; }
    kvsim::Routed route(const SimRequest& r, std::string_view, double,
                        const kvsim::ServerView&) override {
      last = &r;
      kvsim::Routed x;
      x.server = 0;
      x.branch = "r";
      return x;
    }
    void on_prefill_start(kvsim::Routed&, const SimRequest&, std::int64_t) override {
      ++prefill_starts;
    }
    void on_response(kvsim::Routed&, const SimRequest& r, std::int64_t cached) override {
      responses.emplace_back(static_cast<std::size_t>(r.input_tokens), cached);
    }
    const SimRequest* last = nullptr;
  };
  const Trace tr = trace_of({block_request(0, range(0, 4), 2048, "s", 50),
                             block_request(10, range(0, 6), 3000, "s", 50)});
  Recorder rec;
  kvsim::SimConfig cfg = one_server();
  cfg.closed_loop = false;
  kvsim::TextExpander texts(4.0);
  const auto res = kvsim::simulate_sglang(tr, rec, cfg, texts);
  CHECK(rec.prefill_starts == 0);
  REQUIRE(rec.responses.size() == 2);
  // Turn 1's prompt and its 50 generated tokens.
  CHECK(rec.responses[1].second == 2048 + 50);
  CHECK(res.cached[1] == 2048 + 50);
}

TEST_CASE("sglang: closed-loop sessions wait for the previous response and the think time",
          "[sim]") {
  // Turn 2 is at 1 s in the trace, before turn 1 can have finished; with a
  // think time of 2 s it is sent 2 s after turn 1's response.
  SimRequest a = block_request(0, range(0, 2), 1000, "s", 100);
  SimRequest b = block_request(1, range(0, 3), 1500, "s", 10);
  b.think = 2;
  const Trace tr = trace_of({a, b});
  kvsim::SimConfig cfg = one_server();
  const auto closed = kvsim::run_policy(tr, "round_robin", cfg);
  const double end0 = 1.0 + 99 * 0.01;  // prefill, then 99 decode steps
  CHECK(closed.sent[1] == Approx(end0 + 2));
  cfg.closed_loop = false;
  const auto open = kvsim::run_policy(tr, "round_robin", cfg);
  CHECK(open.sent[1] == Approx(1.0));
  // Without a think_time field: the trace's gap less the previous request's
  // time on an idle server (here longer than the gap: no think time).
  b.think = -1;
  const auto implied = kvsim::run_policy(trace_of({a, b}), "round_robin", one_server());
  CHECK(implied.sent[1] == Approx(end0));
}

TEST_CASE("sglang: the oracle sees prefixes still queued on a server", "[sim]") {
  // Two servers. Request 0 (10,240 tokens) prefills on one until 10.24 s;
  // request 1 continues it at 9 s. Waiting there for 0's last chunks costs
  // 1.24 s, then its own new tokens; the idle server would take 10.7 s.
  const Trace tr = trace_of({block_request(0, range(0, 20), 10'240, "s", 5),
                             block_request(9, range(0, 21), 10'700, "s", 5)});
  kvsim::SimConfig cfg = one_server();
  cfg.servers = 2;
  cfg.closed_loop = false;
  const auto res = kvsim::run_policy(tr, "oracle", cfg);
  CHECK(res.server[1] == res.server[0]);
  // Admitted at 10 s, when 0 had computed (and cached) 19 whole blocks.
  CHECK(res.cached[1] == 19 * 512);
}

TEST_CASE("sglang: the oracle does not push out a prefix a later request will use", "[sim]") {
  // Pools of 4,000 tokens on two idle servers. Session x's first turn
  // (3,000 tokens) leaves its prefix on one server; request 1 shares its
  // first block. There its prefill is 512 tokens shorter, but it would
  // evict the last two blocks of x's prefix (957 tokens), which x's second
  // turn will use: the oracle sends it to the empty server instead.
  const Trace tr = trace_of({block_request(0, range(0, 6), 3000, "x", 5),
                             block_request(10, {0, 200, 201, 202}, 2000, "y", 10),
                             block_request(20, range(0, 8), 3800, "x", 5)});
  kvsim::SimConfig cfg = one_server(4000);
  cfg.servers = 2;
  cfg.closed_loop = false;
  const auto res = kvsim::run_policy(tr, "oracle", cfg);
  CHECK(res.server[1] != res.server[0]);
  CHECK(res.server[2] == res.server[0]);
  // x's whole first turn and its answer.
  CHECK(res.cached[2] == 3005);
}

TEST_CASE("sglang: a request larger than the pool is rejected, the rest runs", "[sim]") {
  const Trace tr = trace_of({block_request(0, range(0, 30), 15'000, {}, 10),
                             block_request(1, range(100, 2), 900, {}, 10)});
  const auto res = kvsim::run_policy(tr, "round_robin", one_server(10'000));
  CHECK(res.rejected == 1);
  CHECK(res.ttft[0] < 0);
  CHECK(res.ttft[1] > 0);
  CHECK(res.completions[0] == 1);
  CHECK(res.completions[1] == 1);
}

TEST_CASE("sglang: every request completes once under every policy, closed loop", "[sim]") {
  Trace tr = kvsim::generate("agent", 400, 4.0);
  kvsim::infer_sessions(tr);
  kvsim::link_sessions(tr);
  kvsim::SimConfig cfg;
  cfg.servers = 4;
  cfg.cache_tokens = 200'000;
  auto names = kvsim::all_policy_names();
  for (const std::string& p : kvsim::extra_policy_names()) names.push_back(p);
  for (const std::string& p : names) {
    INFO(p);
    const auto res = kvsim::run_policy(tr, p, cfg);
    for (std::size_t j = 0; j < tr.requests.size(); ++j) {
      CHECK(res.completions[j] == 1);
      CHECK(res.ttft[j] > 0);
      CHECK(res.cached[j] < tr.requests[j].input_tokens);
      // A session's request goes out after the previous one's first token.
      const std::size_t prev = tr.prev_in_session[j];
      if (prev != kvsim::kNoRequest) CHECK(res.sent[j] > res.sent[prev] + res.ttft[prev]);
    }
  }
}
