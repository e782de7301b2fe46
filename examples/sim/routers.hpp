// kvroute_sim: the routers under test.
//
// Every kvroute policy runs behind a real WorkerSet + LoadTracker +
// select_worker (KvRouter), as a host runs it; two references no gateway
// could implement give the scale: the oracle sees the servers' real state
// (and on `sglang` which cached blocks later requests will use) and sends
// each request where the server model predicts it costs least, and sticky
// keeps a session on its first server. The routers read the servers
// through ServerView, which each server model implements. KvRouter can also
// run as one of several replicas (ReplicaPort, replicas.hpp).
#ifndef KVROUTE_EXAMPLES_SIM_ROUTERS_HPP_
#define KVROUTE_EXAMPLES_SIM_ROUTERS_HPP_

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "kvroute/kvroute.hpp"
#include "kvroute/policies/least_prefill.hpp"
#include "kvroute/sync/change.hpp"
#include "kvroute/sync/shared_load.hpp"
#include "kvroute/sync/wire.hpp"
#include "sim/config.hpp"
#include "sim/result.hpp"
#include "sim/trace.hpp"

namespace kvsim {

// What the references may look at.
class ServerView {
 public:
  virtual ~ServerView() = default;
  virtual std::size_t size() const = 0;
  // Requests routed to server s and not completed.
  virtual std::int64_t in_flight(std::size_t s) const = 0;
  // The oracle's cost of sending r to server s now (lower is better): the
  // server model's predicted time to first token, in any fixed unit, and
  // on `sglang` what the placement costs the requests behind it.
  virtual double oracle_cost(std::size_t s, const SimRequest& r, double now) const = 0;
};

struct Routed {
  int server = -1;
  std::string_view branch;
  kvroute::Decision decision;
  kvroute::LoadGuard guard;
  // Wall-clock time of the routing decision (select_worker for kvroute
  // policies), microseconds; < 0: the host measures the whole route().
  double select_us = -1;
  // The replica that routed the request (replicas.hpp), which its feedback
  // goes back to.
  int replica = 0;
  // The request's text, kept until its feedback only when the policy emits
  // state changes: a feedback correction names the chunks the server no
  // longer had.
  std::string text;
};

class SimRouter {
 public:
  virtual ~SimRouter() = default;
  virtual std::string_view name() const = 0;
  virtual Routed route(const SimRequest& r, std::string_view text, double now,
                       const ServerView& servers) = 0;
  // simple model: the server started r's prefill with `cached` tokens of it
  // cached.
  virtual void on_prefill_start(Routed&, const SimRequest&, std::int64_t /*cached*/) {}
  // sglang model: r's response ended; the server had `cached` tokens of it
  // cached (SGLang's cached_tokens, which arrives with the response).
  virtual void on_response(Routed&, const SimRequest&, std::int64_t /*cached*/) {}
  // Simulated time has reached `now`; called before each event the server
  // model handles (an arrival, a step, a response), so that what is due by
  // then (another replica's changes) comes first.
  virtual void advance(double /*now*/) {}
  // Adds what the router counted over the run to `res` (replicas.hpp).
  virtual void add_totals(PolicyResult& /*res*/) const {}
  // True for a reference that may know which cached blocks requests not yet
  // sent will use (the oracle on `sglang`): the model then keeps that count.
  virtual bool sees_future() const { return false; }
};

// What a router needs to run as one of several replicas (replicas.hpp):
// its policy's state changes go to a sink and come from the other replicas,
// and its own load is read and the others' merged in.
class ReplicaPort {
 public:
  virtual ~ReplicaPort() = default;
  // Whether the policy emits and applies state changes (cache_aware,
  // least_prefill, manual); the others only share load.
  virtual bool shares_state() const = 0;
  virtual void set_state_sink(kvroute::sync::StateSink* sink) = 0;
  virtual kvroute::sync::Applied apply_change(const kvroute::sync::Change& change) = 0;
  // What the transport drained from the sink (the policy's note_sent).
  virtual void note_sent(std::span<const kvroute::sync::Change> changes) = 0;
  virtual std::vector<kvroute::sync::LoadEntry> local_loads() const = 0;
  // Sets the other replicas' load, as `shared` holds it, in this router's
  // LoadTracker.
  virtual void merge_loads(kvroute::sync::SharedLoad& shared) = 0;
};

enum class Feedback { kNone, kCacheAware, kLeastPrefill, kLeastPrefillTree, kLeastPrefillQueue };

// A kvroute policy behind a WorkerSet and a LoadTracker, as a host runs it.
template <class P>
class KvRouter final : public SimRouter, public ReplicaPort {
  static constexpr bool kShares = requires(P & p, kvroute::sync::StateSink* s) {
    p.set_state_sink(s);
  };

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

  Routed route(const SimRequest& r, std::string_view text, double now, const ServerView&) override {
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
    if (sink_ != nullptr && reports()) out.text.assign(text);
    return out;
  }

  void on_prefill_start(Routed& x, const SimRequest& r, std::int64_t cached) override {
    if (fb_ == Feedback::kNone) return;
    if (reports()) report(x, cached);
    if constexpr (std::is_same_v<P, kvroute::LeastPrefill>) {
      if (fb_ != Feedback::kLeastPrefillTree) {
        x.guard.set_tokens(r.input_tokens - cached);  // the real uncached work
      }
    }
  }

  // The response ends after the first token has released the guard's
  // tokens, so only the tree learns from it.
  void on_response(Routed& x, const SimRequest&, std::int64_t cached) override {
    if (reports()) report(x, cached);
  }

  P& policy() { return *p_; }

  bool shares_state() const override { return kShares; }
  void set_state_sink(kvroute::sync::StateSink* sink) override {
    if constexpr (kShares) {
      p_->set_state_sink(sink);
      sink_ = sink;
    }
  }
  kvroute::sync::Applied apply_change(const kvroute::sync::Change& change) override {
    if constexpr (kShares) return p_->apply_change(change, *snap_);
    return kvroute::sync::Applied::kNotShared;
  }
  void note_sent(std::span<const kvroute::sync::Change> changes) override {
    if constexpr (requires { p_->note_sent(changes); }) p_->note_sent(changes);
  }
  std::vector<kvroute::sync::LoadEntry> local_loads() const override {
    return kvroute::sync::local_loads(*snap_, load_);
  }
  void merge_loads(kvroute::sync::SharedLoad& shared) override { shared.apply(*snap_, load_); }

 private:
  // The server caches whole blocks while the tree matches characters, so a
  // shortfall of less than one block is granularity, not an eviction, and
  // is not reported as one.
  // Whether the tree hears the servers' cached-token counts.
  bool reports() const { return fb_ != Feedback::kNone && fb_ != Feedback::kLeastPrefillQueue; }

  void report(Routed& x, std::int64_t cached) {
    const kvroute::Decision& d = x.decision;
    const double claimed = static_cast<double>(d.claimed) / cpt_;
    double reported = static_cast<double>(cached);
    if (claimed > reported && claimed - reported < static_cast<double>(kBlockTokens)) {
      reported = claimed;
    }
    const auto tokens = static_cast<std::uint64_t>(std::ceil(reported));
    if constexpr (std::is_same_v<P, kvroute::CacheAware> ||
                  std::is_same_v<P, kvroute::LeastPrefill>) {
      p_->report_cached(kvroute::RequestView{.text = x.text}, d, tokens);
    }
    std::string().swap(x.text);
  }

  kvroute::WorkerSet workers_;
  kvroute::LoadTracker load_;
  std::unique_ptr<P> p_;
  std::shared_ptr<const kvroute::WorkerSnapshot> snap_;
  std::string name_;
  Feedback fb_;
  double cpt_;
  kvroute::ManualClock& clock_;
  kvroute::sync::StateSink* sink_ = nullptr;
};

// Reference: sees the servers' real state and sends each request where the
// server model's cost (ServerView::oracle_cost) is least, ties at random.
class OracleRouter final : public SimRouter {
 public:
  explicit OracleRouter(std::uint64_t seed) : rng_(seed) {}
  std::string_view name() const override { return "oracle"; }
  bool sees_future() const override { return true; }
  Routed route(const SimRequest& r, std::string_view, double now, const ServerView& s) override {
    Routed out;
    double best = 0;
    std::uint64_t ties = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
      const double cost = s.oracle_cost(i, r, now);
      if (out.server < 0 || cost < best) {
        best = cost;
        out.server = static_cast<int>(i);
        ties = 1;
      } else if (cost == best && rng_.below(++ties) == 0) {
        out.server = static_cast<int>(i);
      }
    }
    out.branch = "oracle";
    return out;
  }

 private:
  kvroute::detail::SharedRng rng_;
};

// Reference: a session stays on its first request's server (placed on the
// server with the fewest requests in flight).
class StickyRouter final : public SimRouter {
 public:
  explicit StickyRouter(std::uint64_t seed) : rng_(seed) {}
  std::string_view name() const override { return "sticky"; }
  Routed route(const SimRequest& r, std::string_view, double, const ServerView& s) override {
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
      const std::int64_t best =
          out.server < 0 ? 0 : s.in_flight(static_cast<std::size_t>(out.server));
      if (out.server < 0 || s.in_flight(i) < best) {
        out.server = static_cast<int>(i);
        ties = 1;
      } else if (s.in_flight(i) == best && rng_.below(++ties) == 0) {
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

// Routes request j at `now` through `router` and records the decision in
// `res` (server, branch, claim, selection time).
inline Routed route_one(SimRouter& router, const Trace& tr, std::size_t j, std::string_view text,
                        double now, const ServerView& view, PolicyResult& res) {
  const auto t0 = std::chrono::steady_clock::now();
  Routed x = router.route(tr.requests[j], text, now, view);
  const auto t1 = std::chrono::steady_clock::now();
  res.select_us.push_back(
      x.select_us >= 0 ? x.select_us : std::chrono::duration<double, std::micro>(t1 - t0).count());
  res.sent[j] = now;
  res.server[j] = x.server;
  res.branch[j] = x.branch;
  res.claimed[j] =
      static_cast<std::int64_t>(static_cast<double>(x.decision.claimed) / tr.chars_per_token);
  ++res.branches[std::string(x.branch)];
  return x;
}

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
  static const std::vector<std::string> names = {"least_prefill_fixed", "least_prefill_nofeedback",
                                                 "least_prefill_tree_feedback",
                                                 "least_prefill_queue_feedback"};
  return names;
}
// Every accepted name, comma-separated (for --help and errors).
inline std::string policy_names_text() {
  std::string out;
  for (const auto* list : {&all_policy_names(), &extra_policy_names()}) {
    for (const std::string& n : *list) out += (out.empty() ? "" : ", ") + n;
  }
  return out;
}
inline bool is_policy_name(std::string_view n) {
  for (const auto* list : {&all_policy_names(), &extra_policy_names()}) {
    for (const std::string& x : *list) {
      if (x == n) return true;
    }
  }
  return false;
}

inline std::unique_ptr<SimRouter> make_least_prefill(const std::string& name, const SimConfig& cfg,
                                                     double cpt, kvroute::ManualClock& clock) {
  using kvroute::LeastPrefill;
  const Feedback fb = name == "least_prefill" || name == "least_prefill_fixed"
                          ? Feedback::kLeastPrefill
                      : name == "least_prefill_tree_feedback"  ? Feedback::kLeastPrefillTree
                      : name == "least_prefill_queue_feedback" ? Feedback::kLeastPrefillQueue
                      : name == "least_prefill_nofeedback"     ? Feedback::kNone
                                                               : Feedback::kCacheAware;
  if (fb == Feedback::kCacheAware) return nullptr;
  const std::uint64_t tree =
      cfg.lp_tree_scale > 0 ? static_cast<std::uint64_t>(static_cast<double>(cfg.cache_tokens) *
                                                         cpt * cfg.lp_tree_scale)
                            : LeastPrefill::Options{}.max_tree_size;
  // least_prefill_fixed: the fixed weight of 0.4 the adaptive rule replaced,
  // for comparison. The others know the servers' pool, as a host can ask it.
  const bool fixed = name == "least_prefill_fixed";
  return std::make_unique<KvRouter<LeastPrefill>>(
      std::make_unique<LeastPrefill>(
          LeastPrefill::Options{.chars_per_token = cpt,
                                .queue_weight = fixed ? 0.4 : cfg.lp_queue_weight,
                                .max_tree_size = tree,
                                .kv_capacity_tokens = fixed ? 0 : cfg.cache_tokens,
                                .sync_text_share = cfg.replicas.text_share,
                                .clock = &clock,
                                .seed = cfg.seed}),
      cfg.servers, name, fb, cpt, clock);
}

// The router named `name`, or null for an unknown name.
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
                                      .sync_text_share = cfg.replicas.text_share,
                                      .clock = &clock,
                                      .seed = seed}),
              name == "cache_aware" ? Feedback::kNone : Feedback::kCacheAware);
  }
  if (name.rfind("least_prefill", 0) == 0) return make_least_prefill(name, cfg, cpt, clock);
  if (name == "oracle") return std::make_unique<OracleRouter>(seed);
  if (name == "sticky") return std::make_unique<StickyRouter>(seed);
  return nullptr;
}

}  // namespace kvsim

#endif  // KVROUTE_EXAMPLES_SIM_ROUTERS_HPP_
