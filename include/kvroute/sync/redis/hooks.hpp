// -----------------------------------------------------------------------------
// File: kvroute/sync/redis/hooks.hpp
// -----------------------------------------------------------------------------
//
// What RedisReplicator (replicator.hpp) takes from its host, the hooks to
// the router's policy and load, and what it reports, its stats.
// router_hooks() (replicator.hpp) fills the hooks for a kvroute::Router.
//
// Thread safety: values. The hooks are called on the replicator's thread.

#ifndef KVROUTE_SYNC_REDIS_HOOKS_HPP_
#define KVROUTE_SYNC_REDIS_HOOKS_HPP_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kvroute/config.hpp"
#include "kvroute/load_tracker.hpp"
#include "kvroute/sync/change.hpp"
#include "kvroute/sync/outbox.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {

// What the replicator needs from the host. `outbox` and `apply` are
// required; the rest is optional.
struct RedisReplicatorHooks {
  // Where the policy emits its changes (policy.set_state_sink(outbox)).
  // Must outlive the replicator.
  Outbox* outbox = nullptr;
  // Applies a change another replica made (policy.apply_change).
  std::function<Applied(const Change&)> apply{};
  // What was drained from the outbox, before it is written
  // (policy.note_sent: the policy keeps the texts that travelled on this
  // thread instead of on the selection's).
  std::function<void(std::span<const Change>)> sent{};
  // The router's workers now: their models are followed, and their load
  // is reported and receives the other replicas' (with `load`).
  std::function<std::shared_ptr<const WorkerSnapshot>()> workers{};
  // The router's load (router.load()); must outlive the replicator. Without
  // it (or `workers`) no load travels either way.
  LoadTracker* load = nullptr;
  // Snapshots of one model's policy state, opaque bytes. Without `save` no
  // snapshot is written; without `restore` none is read (a replica then
  // learns only what the streams still hold). restore() must add to the
  // state there is, not replace it: it may come after changes were applied.
  std::function<absl::StatusOr<std::string>(std::string_view model)> save{};
  std::function<absl::Status(std::string_view model, std::string_view bytes)> restore{};
};

// Counters for metrics. Totals since start() unless said otherwise.
struct RedisReplicatorStats {
  bool connected = false;   // the connection is open now
  bool caught_up = false;   // read everything that was there at start
  std::size_t models = 0;   // model streams followed
  std::size_t sources = 0;  // other replicas whose load counts now

  std::uint64_t batches_sent = 0;  // stream entries written (changes)
  std::uint64_t changes_sent = 0;
  std::uint64_t load_reports_sent = 0;  // fleet entries with this replica's load
  std::uint64_t bytes_sent = 0;         // encoded batch bytes, both kinds
  std::uint64_t pending_batches = 0;    // drained, not yet written (now)
  std::uint64_t outbox_dropped = 0;     // changes the Outbox had no room for

  std::uint64_t batches_applied = 0;  // entries of others read and decoded
  std::uint64_t changes_applied = 0;  // Applied::kApplied
  std::uint64_t changes_ignored = 0;  // any other Applied value
  std::uint64_t load_reports_applied = 0;
  std::uint64_t decode_errors = 0;  // entries without a readable batch: skipped

  std::uint64_t reconnects = 0;  // connections opened after the first
  std::uint64_t connect_failures = 0;
  std::uint64_t command_errors = 0;  // failed commands (lost connection or error reply)

  std::uint64_t snapshots_written = 0;
  std::uint64_t snapshots_restored = 0;
  std::uint64_t snapshot_errors = 0;  // save/restore hooks that failed, bad hashes
  std::uint64_t catch_ups = 0;        // trimmed past what was read: restored a snapshot
  std::uint64_t gaps = 0;             // trimmed past what was read, no newer snapshot

  // How long the newest batch applied took from its sender to here: when
  // it was applied less when it was sent (wall clocks, so across hosts
  // only as good as their clock sync). Load reports count, so it stays
  // fresh while replicas are up. -1: none yet.
  std::int64_t lag_ms = -1;
  // Age of the last snapshot this replica wrote, and of the last one it
  // restored (since its writer wrote it); -1: none.
  std::int64_t snapshot_written_age_ms = -1;
  std::int64_t snapshot_restored_age_ms = -1;

  std::string last_error{};  // the last failure, for logs; empty: none
};

}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_REDIS_HOOKS_HPP_
