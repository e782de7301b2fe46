// The router's replicas through Redis (see replication.hpp).
#include "http_router/replication.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "http_router/fleet.hpp"
#include "http_router/log.hpp"

#if KVROUTE_HTTP_ROUTER_REDIS
#include "kvroute/sync/outbox.hpp"
#include "kvroute/sync/redis/replicator.hpp"
#endif

namespace kvexample {

#if KVROUTE_HTTP_ROUTER_REDIS
namespace {

class RedisReplication final : public Replication {
 public:
  RedisReplication(const Flags& f, Fleet& fleet, const std::string& name)
      : fleet_(fleet),
        replicator_(options(f, name), kvroute::sync::router_hooks(fleet.router(), outbox_)) {}

  absl::Status start(const Flags& f) {
    if (absl::Status s = replicator_.start(); !s.ok()) return s;
    fleet_.router().policy().set_state_sink(&outbox_);
    const auto wait = std::chrono::milliseconds(f.redis_catch_up_ms);
    if (wait.count() > 0 && !replicator_.wait_until_caught_up(wait)) {
      log_warning("replicas: not caught up with {} after {} ms; routing on what is known",
                  f.redis_url, f.redis_catch_up_ms);
    }
    const auto st = replicator_.stats();
    log_info("replicas: '{}' on {} ({} models, {} snapshots restored, {} changes applied)",
             replicator_.options().replica, f.redis_url, st.models, st.snapshots_restored,
             st.changes_applied);
    return absl::OkStatus();
  }

  void render(kvroute::MetricsRegistry& live) const override;

  void stop() override {
    fleet_.router().policy().set_state_sink(nullptr);
    replicator_.stop();
  }

 private:
  static kvroute::sync::RedisReplicator::Options options(const Flags& f, const std::string& name) {
    kvroute::sync::RedisReplicator::Options o;
    o.url = f.redis_url;
    o.replica = f.replica_name.empty() ? name : f.replica_name;
    o.key_prefix = f.redis_key_prefix;
    o.flush_interval = std::chrono::milliseconds(f.sync_flush_ms);
    o.flush_bytes = static_cast<std::size_t>(f.sync_flush_bytes);
    o.snapshot_interval = std::chrono::milliseconds(f.snapshot_interval_ms);
    return o;
  }

  struct TextCounts {
    std::uint64_t applied = 0, unanchored = 0;
  };
  // The policies that send texts count what they received (AnyPolicy
  // holds one of them, or a policy without texts: zeros).
  TextCounts text_counts() const {
    auto& policy = fleet_.router().policy();
    if (const auto* p = policy.get<kvroute::CacheAware>()) {
      return {p->texts_applied(), p->texts_unanchored()};
    }
    if (const auto* p = policy.get<kvroute::LeastPrefill>()) {
      return {p->texts_applied(), p->texts_unanchored()};
    }
    return {};
  }

  Fleet& fleet_;
  kvroute::sync::Outbox outbox_;
  kvroute::sync::RedisReplicator replicator_;
};

void RedisReplication::render(kvroute::MetricsRegistry& live) const {
  const kvroute::sync::RedisReplicator::Stats st = replicator_.stats();
  auto gauge = [&live](std::string_view name, std::string_view help, double v) {
    live.gauge(name, help).set(v);
  };
  auto counter = [&live](std::string_view name, std::string_view help, std::uint64_t v) {
    live.counter(name, help).advance_to(v);
  };
  gauge("kvroute_sync_connected", "1 while the connection to Redis is open.",
        st.connected ? 1.0 : 0.0);
  gauge("kvroute_sync_caught_up", "1 once the state the fleet had at start was read.",
        st.caught_up ? 1.0 : 0.0);
  gauge("kvroute_sync_lag_seconds",
        "Age of the newest change applied from another replica when it was applied (-1: none).",
        st.lag_ms < 0 ? -1.0 : static_cast<double>(st.lag_ms) / 1000.0);
  gauge("kvroute_sync_peers", "Other replicas whose load counts now.",
        static_cast<double>(st.sources));
  counter("kvroute_sync_changes_sent_total", "Changes sent to the other replicas.",
          st.changes_sent);
  counter("kvroute_sync_bytes_sent_total", "Bytes of encoded batches sent.", st.bytes_sent);
  counter("kvroute_sync_changes_applied_total", "Changes from other replicas applied.",
          st.changes_applied);
  counter("kvroute_sync_changes_ignored_total",
          "Changes from other replicas not applied (unknown worker or key scheme).",
          st.changes_ignored);
  counter("kvroute_sync_changes_dropped_total",
          "Changes dropped because the outbox was full (Redis down or slow).", st.outbox_dropped);
  const TextCounts texts = text_counts();
  counter("kvroute_sync_texts_applied_total",
          "Placements with text from other replicas inserted whole into the tree.", texts.applied);
  counter("kvroute_sync_texts_unanchored_total",
          "Placements with text applied as keys: the text they extend was not kept here.",
          texts.unanchored);
  gauge("kvroute_sync_batches_pending", "Batches waiting for Redis.",
        static_cast<double>(st.pending_batches));
  counter("kvroute_sync_decode_errors_total", "Stream entries that were not a readable batch.",
          st.decode_errors);
  counter("kvroute_sync_reconnects_total", "Connections to Redis opened after the first.",
          st.reconnects);
  counter("kvroute_sync_catch_ups_total",
          "Times the streams were trimmed past what was read and a snapshot restored.",
          st.catch_ups + st.gaps);
  counter("kvroute_sync_snapshots_written_total", "Snapshots written.", st.snapshots_written);
  counter("kvroute_sync_snapshots_restored_total", "Snapshots restored.", st.snapshots_restored);
  gauge("kvroute_sync_snapshot_age_seconds",
        "Age of the last snapshot written here (-1: none yet).",
        st.snapshot_written_age_ms < 0 ? -1.0
                                       : static_cast<double>(st.snapshot_written_age_ms) / 1000.0);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Replication>> Replication::start(const Flags& f, Fleet& fleet,
                                                                const std::string& name) {
  if (f.redis_url.empty()) return std::unique_ptr<Replication>();
  auto r = std::make_unique<RedisReplication>(f, fleet, name);
  if (absl::Status s = r->start(f); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--redis-url: ", s.message()));
  }
  return std::unique_ptr<Replication>(std::move(r));
}

#else  // built without hiredis

absl::StatusOr<std::unique_ptr<Replication>> Replication::start(const Flags& f, Fleet&,
                                                                const std::string&) {
  if (f.redis_url.empty()) return std::unique_ptr<Replication>();
  return absl::FailedPreconditionError(
      "--redis-url: this kvroute_http_router was built without Redis support (install "
      "libhiredis-dev, e.g. with sh cmake/install-deps.sh, and rebuild)");
}

#endif

}  // namespace kvexample
