// -----------------------------------------------------------------------------
// File: kvroute/sync/redis/replicator.hpp
// -----------------------------------------------------------------------------
//
// `RedisReplicator`: shares a router's policy state and load with the other
// replicas of a fleet through Redis Streams. It is the transport the core
// library leaves to the host (sync/change.hpp): it takes what the policy
// emitted from an Outbox, sends it, reads what the other replicas sent and
// hands it to the policy (Hooks::apply), and keeps the other replicas'
// load in the router's LoadTracker (SharedLoad). This header and its
// target, kvroute::redis (hiredis), are opt-in: kvroute/kvroute.hpp never
// includes them.
//
// What goes where (every key starts with Options::key_prefix, "kvroute"):
//
//   <prefix>:stream:<model>    one stream per model: placements, forgets and
//                              pins of that model (XADD MAXLEN ~ stream_max_len)
//   <prefix>:fleet             worker removals (every model) and load reports
//                              (XADD MAXLEN ~ fleet_max_len)
//   <prefix>:models            a set of the models published to (SADD), so
//                              that a replica follows models none of its
//                              own workers serve
//   <prefix>:snapshot:<model>  a hash: the last snapshot of a model (`data`,
//                              Hooks::save) and the ids of the entries it
//                              covers (`id` in the model's stream, `fleet`),
//                              its writer (`source`) and when (`time`, Unix ms)
//
// Each stream entry has one field, `b`: a sync::Batch (wire.hpp) with this
// replica's name as its source. Entries of other sources are applied; so
// are this replica's own entries written before it started (a replica
// restarted under its name gets its own earlier state back).
//
// One thread, started by start() and joined by stop(), does everything, on
// two connections (one waits for reads, so that writes never wait behind
// it), in a loop:
//
//   * every flush_interval, and sooner once the Outbox holds flush_bytes:
//     drains the Outbox and XADDs one batch per model (the fleet's for
//     worker removals). A batch that could not be sent stays pending and
//     goes first after the connection is back; while Redis is down the
//     Outbox fills and drops (and counts): the policy never waits for
//     Redis.
//   * every load_interval: XADDs this replica's load (local_loads), applies
//     the other replicas' (expired after load_ttl) and reads the set of
//     models.
//   * every snapshot_interval: writes the snapshot of every model it
//     follows whose stream moved since its last write.
//   * in between: waits for the reply of an XREAD BLOCK over every stream
//     it follows (polling its socket until the next flush is due, looking
//     at the Outbox's size every tenth of flush_interval), and
//     applies what it reads. Before the next read, when it may have fallen
//     behind (after a reconnection, a stall, or a read that found a stream
//     far ahead), it checks that no stream was trimmed past what it read
//     (XINFO STREAM: the first entry left is past the last one read). If
//     one was, it restores the model's snapshot when that is newer, and
//     reads every entry left.
//
// On start, and for each model it begins to follow, it restores that
// model's snapshot (Hooks::restore) and reads the model's stream from its
// start all the same: a policy's snapshot holds its trees, and what its
// writer knew of other replicas' placements only by chunk key is in the
// stream alone (docs/replicas.md).
// wait_until_caught_up() tells the host when it has read everything that
// was there.
//
// When Redis is down, slow or hung, a command fails after command_timeout;
// the connection is dropped and opened again after an exponential backoff
// with jitter (backoff_min .. backoff_max), and reading goes on from the
// last ids read (at-least-once: applying twice is harmless).
//
// Thread safety: start(), stop() and the destructor from one thread;
// stats() and wait_until_caught_up() from any. The hooks are called on the
// replicator's thread only.
//
// Example (a host wiring it to a Router; docs/replicas.md):
//
//   kvroute::sync::Outbox outbox;
//   router.policy().set_state_sink(&outbox);
//   kvroute::sync::RedisReplicator replicator(
//       {.url = "redis://10.0.0.5:6379", .replica = "router-a"},
//       kvroute::sync::router_hooks(router, outbox));
//   if (absl::Status s = replicator.start(); !s.ok()) return s;  // bad options
//   replicator.wait_until_caught_up(std::chrono::seconds(5));   // warm start
//   ...
//   kvroute::sync::RedisReplicator::Stats st = replicator.stats();  // /metrics

#ifndef KVROUTE_SYNC_REDIS_REPLICATOR_HPP_
#define KVROUTE_SYNC_REDIS_REPLICATOR_HPP_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kvroute/config.hpp"
#include "kvroute/load_tracker.hpp"
#include "kvroute/sync/change.hpp"
#include "kvroute/sync/outbox.hpp"
#include "kvroute/sync/redis/detail/engine.hpp"
#include "kvroute/sync/redis/hooks.hpp"
#include "kvroute/sync/redis/options.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {

class RedisReplicator {
 public:
  using Options = RedisReplicatorOptions;
  using Hooks = RedisReplicatorHooks;
  using Stats = RedisReplicatorStats;

  RedisReplicator(Options options, Hooks hooks);
  RedisReplicator(const RedisReplicator&) = delete;
  RedisReplicator& operator=(const RedisReplicator&) = delete;
  // Stops (joins the thread).
  ~RedisReplicator();

  // Checks the options and hooks (InvalidArgument naming the field and
  // value) and starts the thread. Never waits for Redis: an unreachable
  // Redis is retried in the background. FailedPrecondition when called
  // twice.
  absl::Status start();

  // Sends what the policy emitted since the last flush (when connected),
  // then stops the thread and closes the connection; returns within about
  // connect_timeout even when Redis hangs. Idempotent. What could not be
  // sent stays in the Outbox.
  void stop();

  Stats stats() const;

  // Waits until the first read of everything that was in the streams at
  // start (after the snapshots) is done. False on timeout or before start().
  bool wait_until_caught_up(std::chrono::milliseconds timeout) const;

  const Options& options() const noexcept { return options_; }

 private:
  Options options_;
  Hooks hooks_;
  std::unique_ptr<redis_detail::Engine> engine_;
};

// Hooks for a Router (router.hpp) whose policy emits to `outbox`: apply,
// workers, load and, where the policy has them, sent (note_sent) and
// snapshots of its state (save_state, restore_state).
template <class RouterT>
RedisReplicatorHooks router_hooks(RouterT& router, Outbox& outbox) {
  RedisReplicatorHooks h;
  h.outbox = &outbox;
  h.apply = [&router](const Change& c) {
    return router.policy().apply_change(c, *router.workers().snapshot());
  };
  h.workers = [&router] { return router.workers().snapshot(); };
  h.load = &router.load();
  using Policy = std::remove_reference_t<decltype(router.policy())>;
  if constexpr (requires(Policy & p, std::span<const Change> c) { p.note_sent(c); }) {
    h.sent = [&router](std::span<const Change> changes) { router.policy().note_sent(changes); };
  }
  if constexpr (requires(Policy & p, const WorkerSnapshot& w) { p.restore_state("", w); }) {
    h.save = [&router](std::string_view model) {
      return router.policy().save_state(model, *router.workers().snapshot());
    };
    h.restore = [&router](std::string_view, std::string_view bytes) -> absl::Status {
      return router.policy().restore_state(bytes, *router.workers().snapshot()).status();
    };
  }
  return h;
}

inline RedisReplicator::RedisReplicator(Options options, Hooks hooks)
    : options_(std::move(options)), hooks_(std::move(hooks)) {}

inline RedisReplicator::~RedisReplicator() { stop(); }

inline absl::Status RedisReplicator::start() {
  if (engine_ != nullptr) {
    return absl::FailedPreconditionError("redis replicator: start() was already called");
  }
  if (absl::Status s = options_.validate(); !s.ok()) return s;
  if (hooks_.outbox == nullptr) {
    return absl::InvalidArgumentError("redis replicator hooks.outbox: null (required)");
  }
  if (!hooks_.apply) {
    return absl::InvalidArgumentError("redis replicator hooks.apply: empty (required)");
  }
  absl::StatusOr<RedisAddress> address = parse_redis_url(options_.url);
  if (!address.ok()) return address.status();
  engine_ = std::make_unique<redis_detail::Engine>(options_, hooks_, *std::move(address));
  engine_->start();
  return absl::OkStatus();
}

inline void RedisReplicator::stop() {
  if (engine_ != nullptr) engine_->stop();
}

inline RedisReplicator::Stats RedisReplicator::stats() const {
  return engine_ != nullptr ? engine_->stats() : Stats{};
}

inline bool RedisReplicator::wait_until_caught_up(std::chrono::milliseconds timeout) const {
  return engine_ != nullptr && engine_->wait_until_caught_up(timeout);
}

}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_REDIS_REPLICATOR_HPP_
