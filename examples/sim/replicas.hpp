// kvroute_sim: router replicas behind a round-robin front.
//
// ReplicatedRouter runs R copies of one kvroute policy, each a KvRouter
// with its own policy state (tree, tables), WorkerSet and LoadTracker, and
// sends request i to copy i mod R, as an L4 balancer in front of R router
// processes would. What the copies share is Replicas::sync:
//
//   * state changes (cache_aware, least_prefill, manual): each copy's policy emits
//     into its own kvroute::sync::Outbox, which is drained after every
//     routing decision and every feedback report into one Batch; the batch
//     is encoded (kvroute::sync::encode, whose size is the bytes synced),
//     decoded, and applied to every other copy (apply_change) delay_s of
//     simulated time later;
//   * load: every load_period_s (0: at every event) each copy publishes
//     its own requests and tokens in flight per worker
//     (kvroute::sync::local_loads) when they changed since its last report,
//     and every kKeepalivePeriods periods even when not; delay_s later the others merge them
//     through their kvroute::sync::SharedLoad, whose ttl is several keepalives, so a replica that
//     keeps reporting never expires. The other policies (round_robin, power_of_two, bucket, ...)
//     share only this.
//
// Deliveries are events of the simulated clock: advance(now), which the
// server models call before every event, applies what is due by `now`
// first, so a request at or after a delivery's time sees it. Feedback
// goes to the copy that routed the request.
//
// Thread safety: none; the simulation is single-threaded.
#ifndef KVROUTE_EXAMPLES_SIM_REPLICAS_HPP_
#define KVROUTE_EXAMPLES_SIM_REPLICAS_HPP_

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <queue>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvroute/kvroute.hpp"
#include "kvroute/sync/outbox.hpp"
#include "kvroute/sync/shared_load.hpp"
#include "kvroute/sync/wire.hpp"
#include "sim/config.hpp"
#include "sim/result.hpp"
#include "sim/routers.hpp"

namespace kvsim {

class ReplicatedRouter final : public SimRouter {
 public:
  // An unchanged load is published again after this many periods (with
  // load_period_s 0, after kContinuousKeepaliveS).
  static constexpr int kKeepalivePeriods = 10;
  static constexpr double kContinuousKeepaliveS = 1.0;

  // `copies` are KvRouters (ReplicaPort) of one policy, all reading `clock`.
  ReplicatedRouter(std::vector<std::unique_ptr<SimRouter>> copies, const Replicas& cfg,
                   kvroute::ManualClock& clock)
      : copies_(std::move(copies)),
        cfg_(cfg),
        clock_(clock),
        keepalive_s_(cfg.load_period_s > 0 ? kKeepalivePeriods * cfg.load_period_s
                                           : kContinuousKeepaliveS) {
    const auto ttl =
        std::chrono::nanoseconds(static_cast<std::int64_t>((cfg.delay_s + 4 * keepalive_s_) * 1e9));
    for (std::size_t i = 0; i < copies_.size(); ++i) {
      auto* port = dynamic_cast<ReplicaPort*>(copies_[i].get());
      if (port == nullptr) throw std::invalid_argument("a replica must be a kvroute policy");
      Copy c;
      c.name = "replica-" + std::to_string(i);
      c.port = port;
      c.outbox = std::make_unique<kvroute::sync::Outbox>();
      c.shared = std::make_unique<kvroute::sync::SharedLoad>(
          kvroute::sync::SharedLoad::Options{.ttl = ttl, .clock = &clock_});
      if (cfg_.trees() && port->shares_state()) port->set_state_sink(c.outbox.get());
      state_.push_back(std::move(c));
    }
  }
  ~ReplicatedRouter() override {
    for (Copy& c : state_) c.port->set_state_sink(nullptr);
  }
  ReplicatedRouter(const ReplicatedRouter&) = delete;
  ReplicatedRouter& operator=(const ReplicatedRouter&) = delete;

  std::string_view name() const override { return copies_.front()->name(); }

  void advance(double now) override {
    now_ = now;
    clock_.set(std::chrono::nanoseconds(static_cast<std::int64_t>(now * 1e9)));
    if (cfg_.loads()) publish_loads(now);
    deliver_due(now);
  }

  Routed route(const SimRequest& r, std::string_view text, double now,
               const ServerView& view) override {
    const std::size_t i = next_;
    next_ = (next_ + 1) % copies_.size();
    Routed x = copies_[i]->route(r, text, now, view);
    x.replica = static_cast<int>(i);
    text_bytes_ += static_cast<std::int64_t>(text.size());
    send_changes(i, now);
    return x;
  }

  void on_prefill_start(Routed& x, const SimRequest& r, std::int64_t cached) override {
    const auto i = static_cast<std::size_t>(x.replica);
    copies_[i]->on_prefill_start(x, r, cached);
    send_changes(i, now_);
  }
  void on_response(Routed& x, const SimRequest& r, std::int64_t cached) override {
    const auto i = static_cast<std::size_t>(x.replica);
    copies_[i]->on_response(x, r, cached);
    send_changes(i, now_);
  }

  void add_totals(PolicyResult& res) const override {
    res.replicas = static_cast<int>(copies_.size());
    res.text_bytes = text_bytes_;
    res.change_bytes = change_bytes_;
    res.load_bytes = load_bytes_;
    res.changes = changes_;
    res.not_applied = not_applied_;
    res.dropped = 0;
    for (const Copy& c : state_) res.dropped += c.outbox->dropped();
  }

 private:
  struct Copy {
    std::string name;
    ReplicaPort* port = nullptr;
    std::unique_ptr<kvroute::sync::Outbox> outbox;
    std::unique_ptr<kvroute::sync::SharedLoad> shared;  // the others' load, as heard here
    std::uint64_t seq = 0;
    std::vector<kvroute::sync::LoadEntry> reported;  // the last load published
    double reported_at = -1;                         // when
  };
  struct Delivery {
    double due;
    std::uint64_t order;
    std::size_t from;
    std::shared_ptr<const kvroute::sync::Batch> batch;
    bool operator>(const Delivery& o) const { return due != o.due ? due > o.due : order > o.order; }
  };

  // Encodes `b` from copy `from`, counts its bytes, and schedules what the
  // others decode of it for now + delay.
  std::int64_t send(std::size_t from, kvroute::sync::Batch b, double now) {
    b.source = state_[from].name;
    b.seq = ++state_[from].seq;
    b.sent_ns = static_cast<std::int64_t>(now * 1e9);
    const std::string bytes = kvroute::sync::encode(b);
    auto back = kvroute::sync::decode(bytes);
    if (!back.ok()) throw std::logic_error(std::string(back.status().message()));
    pending_.push({now + cfg_.delay_s, order_++, from,
                   std::make_shared<const kvroute::sync::Batch>(*std::move(back))});
    return static_cast<std::int64_t>(bytes.size());
  }

  // What copy `i`'s policy emitted since the last call, as one batch.
  void send_changes(std::size_t i, double now) {
    kvroute::sync::Batch b;
    if (state_[i].outbox->drain(b.changes) == 0) return;
    state_[i].port->note_sent(b.changes);
    changes_ += static_cast<std::int64_t>(b.changes.size());
    change_bytes_ += send(i, std::move(b), now);
  }

  // Publishes the loads of the period boundaries passed since the previous
  // event (with load_period_s 0: at this event). Loads change only at
  // events, so a copy whose load changed publishes it at the first of those
  // boundaries (where it did), and one whose load did not, a keepalive at
  // the last if one is due.
  void publish_loads(double now) {
    const double period = cfg_.load_period_s;
    double first = now, last = now;
    if (period > 0) {
      const auto k = static_cast<std::int64_t>(std::floor(now / period));
      if (k <= last_period_) return;
      first = static_cast<double>(last_period_ < 0 ? k : last_period_ + 1) * period;
      last = static_cast<double>(k) * period;
      last_period_ = k;
    }
    for (std::size_t i = 0; i < state_.size(); ++i) {
      Copy& c = state_[i];
      std::vector<kvroute::sync::LoadEntry> loads = c.port->local_loads();
      double at = first;
      if (same_loads(loads, c.reported)) {
        if (c.reported_at >= 0 && last - c.reported_at < keepalive_s_) continue;
        at = last;
      }
      c.reported = loads;
      c.reported_at = at;
      kvroute::sync::Batch b;
      b.loads = std::move(loads);
      load_bytes_ += send(i, std::move(b), at);
    }
  }

  static bool same_loads(const std::vector<kvroute::sync::LoadEntry>& a,
                         const std::vector<kvroute::sync::LoadEntry>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t k = 0; k < a.size(); ++k) {
      if (a[k].worker != b[k].worker || a[k].in_flight != b[k].in_flight ||
          a[k].tokens != b[k].tokens) {
        return false;
      }
    }
    return true;
  }

  // Applies every batch due by `now` to every copy but its sender, in the
  // order sent.
  void deliver_due(double now) {
    while (!pending_.empty() && pending_.top().due <= now) {
      const Delivery d = pending_.top();
      pending_.pop();
      for (std::size_t to = 0; to < state_.size(); ++to) {
        if (to == d.from) continue;
        Copy& c = state_[to];
        for (const kvroute::sync::Change& ch : d.batch->changes) {
          if (c.port->apply_change(ch) != kvroute::sync::Applied::kApplied) ++not_applied_;
        }
        if (!d.batch->loads.empty()) {
          c.shared->update(d.batch->source, d.batch->loads);
          c.port->merge_loads(*c.shared);
        }
      }
    }
  }

  std::vector<std::unique_ptr<SimRouter>> copies_;
  std::vector<Copy> state_;
  Replicas cfg_;
  kvroute::ManualClock& clock_;
  std::size_t next_ = 0;  // the front's next copy
  double now_ = 0;
  double keepalive_s_;
  std::int64_t last_period_ = -1;  // the last period boundary published
  std::priority_queue<Delivery, std::vector<Delivery>, std::greater<Delivery>> pending_;
  std::uint64_t order_ = 0;
  std::int64_t text_bytes_ = 0, change_bytes_ = 0, load_bytes_ = 0, changes_ = 0;
  std::int64_t not_applied_ = 0;
};

// The references (oracle, sticky) see every request: they stay one router.
inline bool is_reference(std::string_view name) { return name == "oracle" || name == "sticky"; }

}  // namespace kvsim

#endif  // KVROUTE_EXAMPLES_SIM_REPLICAS_HPP_
