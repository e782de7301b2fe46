// -----------------------------------------------------------------------------
// File: http_router/replication.hpp
// -----------------------------------------------------------------------------
//
// Several routers, one routing state (docs/replicas.md): with --redis-url,
// the router's policy emits its changes to an Outbox and a
// kvroute::sync::RedisReplicator shares them, and the router's load, with
// the other replicas, writes snapshots of the policy's state, and restores
// them (and what the streams hold after them) on start. /metrics shows how
// it goes (kvroute_sync_*). Without --redis-url nothing of this runs.
//
// The Redis transport needs hiredis; a router built without it refuses
// --redis-url at start with a message that says so.
//
// Thread safety: start() and stop() from main; render() from any thread.

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_REPLICATION_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_REPLICATION_HPP_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "http_router/flags.hpp"
#include "kvroute/metrics.hpp"

namespace kvexample {

class Fleet;

class Replication {
 public:
  virtual ~Replication() = default;

  // Starts sharing when --redis-url is set (null otherwise), and waits up
  // to --redis-catch-up-ms for the state the fleet already has, so that a
  // restarted replica routes warm from its first request. `name` is the
  // replica's name when --replica-name is not given. Errors: bad flags, or
  // a build without Redis support.
  static absl::StatusOr<std::unique_ptr<Replication>> start(const Flags& flags, Fleet& fleet,
                                                            const std::string& name);

  // The kvroute_sync_* series, from the replicator's counters now.
  virtual void render(kvroute::MetricsRegistry& live) const = 0;
  // Stops sharing (joins the replicator's thread).
  virtual void stop() = 0;
};

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_REPLICATION_HPP_
