// -----------------------------------------------------------------------------
// File: kvroute/sync/redis/detail/engine.hpp
// -----------------------------------------------------------------------------
//
// Not API. `Engine`: RedisReplicator's thread and all it keeps: the
// connection, the streams it follows and the last id read in each, the
// entries drained but not yet written, the other replicas' load. The loop
// (run) and the work on each turn (step) are described in replicator.hpp;
// this file is how.
//
// Every command that fails because the connection went (Unavailable) ends
// the turn: the loop backs off and reconnects, and the next turn starts
// again from the state kept here (the ids read, the pending entries). An
// error reply (FailedPrecondition: a key of another type, say) costs only
// what it concerned, and is counted.
//
// Thread safety: start()/stop() from one thread; stats() and
// wait_until_caught_up() from any; everything else on the engine's thread.

#ifndef KVROUTE_SYNC_REDIS_DETAIL_ENGINE_HPP_
#define KVROUTE_SYNC_REDIS_DETAIL_ENGINE_HPP_

#include <poll.h>
#include <algorithm>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kvroute/config.hpp"
#include "kvroute/sync/redis/detail/backoff.hpp"
#include "kvroute/sync/redis/detail/connection.hpp"
#include "kvroute/sync/redis/detail/counters.hpp"
#include "kvroute/sync/redis/detail/keys.hpp"
#include "kvroute/sync/redis/detail/outgoing.hpp"
#include "kvroute/sync/redis/detail/reply.hpp"
#include "kvroute/sync/redis/hooks.hpp"
#include "kvroute/sync/redis/options.hpp"
#include "kvroute/sync/shared_load.hpp"
#include "kvroute/sync/wire.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {
namespace redis_detail {

using SteadyClock = std::chrono::steady_clock;

// A stream the engine reads.
struct Followed {
  bool fleet = false;
  std::string model{};
  std::string key{};
  StreamId last{};                        // the last entry read (0-0: none)
  std::optional<StreamId> snapshot_at{};  // the id of the last snapshot written or restored here
  bool check_trim = true;                 // it may have been trimmed past `last`: look
};

class Engine {
 public:
  Engine(RedisReplicatorOptions o, RedisReplicatorHooks h, RedisAddress address)
      : o_(std::move(o)),
        h_(std::move(h)),
        address_(std::move(address)),
        keys_{o_.key_prefix},
        shared_(SharedLoad::Options{.ttl = o_.load_ttl}),
        backoff_(o_.backoff_min, o_.backoff_max,
                 std::random_device{}() ^ std::hash<std::string>{}(o_.replica)) {
    streams_.push_back({.fleet = true, .key = keys_.fleet()});
    by_key_.emplace(streams_[0].key, 0);
  }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine() { stop(); }

  void start() {
    thread_ = std::thread([this] {
      run();
      finished_.store(true);
    });
  }

  void stop() {
    stopping_.store(true);
    { std::lock_guard<std::mutex> lock(wait_mu_); }
    wait_cv_.notify_all();
    if (!thread_.joinable()) return;
    // A command waiting on a hung server returns as soon as its socket is
    // shut down; a connection opened after one interrupt needs another. The
    // writer is left alone until connect_timeout has passed: run() sends
    // what was emitted since the last flush before it ends.
    const SteadyClock::time_point cut_writer = SteadyClock::now() + o_.connect_timeout;
    while (!finished_.load()) {
      if (SteadyClock::now() >= cut_writer) writer_.interrupt();
      reader_.interrupt();
      std::unique_lock<std::mutex> lock(wait_mu_);
      wait_cv_.wait_for(lock, std::chrono::milliseconds(5), [this] { return finished_.load(); });
    }
    thread_.join();
  }

  bool wait_until_caught_up(std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(caught_mu_);
    return caught_cv_.wait_for(lock, timeout, [this] { return c_.caught_up.load(); });
  }

  RedisReplicatorStats stats() const;

 private:
  void run();
  bool turn();
  bool connect();
  absl::Status on_connected();
  absl::Status step();
  absl::Status flush();
  // The outbox holds flush_bytes or more: flush before the interval ends.
  bool outbox_full() const {
    return o_.flush_bytes > 0 && h_.outbox->held_bytes() >= o_.flush_bytes;
  }
  // How long a turn waits for a read at most: until the outbox is looked
  // at again (outbox_full).
  std::chrono::milliseconds look_interval() const {
    if (o_.flush_bytes == 0) return o_.flush_interval;
    return std::max(std::chrono::milliseconds(1), o_.flush_interval / 10);
  }
  absl::Status publish_loads();
  void apply_loads();
  absl::Status refresh_models();
  absl::Status follow(const std::string& model);
  absl::Status check_trims();
  absl::Status catch_up(Followed& s, const TrimMarks& marks);
  absl::Status write_snapshots();
  absl::Status read_turn();
  absl::Status send_read();
  void take_read(const redisReply* reply);
  bool handle(const Entry& e, const Followed& f);
  absl::StatusOr<std::optional<SnapshotRecord>> fetch_snapshot(const std::string& model);
  absl::Status xadd(const std::string& key, std::size_t max_len, std::string_view bytes);
  void wait(std::chrono::milliseconds d);
  void mark_caught_up();

  // An error reply concerns one thing and is counted; a lost connection
  // ends the turn (returned).
  absl::Status soft(absl::Status s) {
    if (s.ok() || absl::IsUnavailable(s)) return s;
    bump(c_.command_errors);
    c_.set_error(s.message());
    return absl::OkStatus();
  }
  bool followed(std::string_view model) const { return by_key_.contains(keys_.stream(model)); }

  const RedisReplicatorOptions o_;
  const RedisReplicatorHooks h_;
  const RedisAddress address_;
  const Keys keys_;
  // Two connections, so that a read waiting on the server (XREAD BLOCK,
  // sent on reader_) never holds up a flush (on writer_): the thread polls
  // reader_ until the next flush is due.
  Connection writer_;
  Connection reader_;
  bool read_pending_ = false;  // an XREAD was sent on reader_, its reply not taken
  SteadyClock::time_point read_sent_{};
  Counters c_;
  SharedLoad shared_;
  Backoff backoff_;

  std::vector<Followed> streams_;  // [0]: the fleet's
  absl::flat_hash_map<std::string, std::size_t> by_key_;
  absl::flat_hash_set<std::string> announced_;  // models SADDed on this connection
  std::deque<Outgoing> pending_;
  std::uint64_t seq_ = 0;
  bool ever_connected_ = false;
  bool fleet_placed_ = false;                 // the fleet stream's first id is chosen
  std::optional<StreamId> restored_fleet_{};  // the least fleet id of the snapshots restored
  // Redis's clock at the first connection: own entries after it are skipped.
  std::int64_t start_ms_ = 0;
  std::int64_t offset_ms_ = 0;  // Redis's clock less this host's
  SteadyClock::time_point next_flush_{}, next_load_{}, next_snapshot_{};

  std::atomic<bool> stopping_{false};
  std::atomic<bool> finished_{false};
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
  mutable std::mutex caught_mu_;
  mutable std::condition_variable caught_cv_;
  std::thread thread_;
};

inline RedisReplicatorStats Engine::stats() const {
  RedisReplicatorStats s;
  s.connected = c_.connected.load();
  s.caught_up = c_.caught_up.load();
  s.models = static_cast<std::size_t>(c_.models.load());
  s.sources = static_cast<std::size_t>(c_.sources.load());
  s.batches_sent = value(c_.batches_sent);
  s.changes_sent = value(c_.changes_sent);
  s.load_reports_sent = value(c_.load_reports_sent);
  s.bytes_sent = value(c_.bytes_sent);
  s.pending_batches = value(c_.pending_batches);
  s.outbox_dropped = h_.outbox->dropped();
  s.batches_applied = value(c_.batches_applied);
  s.changes_applied = value(c_.changes_applied);
  s.changes_ignored = value(c_.changes_ignored);
  s.load_reports_applied = value(c_.load_reports_applied);
  s.decode_errors = value(c_.decode_errors);
  s.reconnects = value(c_.reconnects);
  s.connect_failures = value(c_.connect_failures);
  s.command_errors = value(c_.command_errors);
  s.snapshots_written = value(c_.snapshots_written);
  s.snapshots_restored = value(c_.snapshots_restored);
  s.snapshot_errors = value(c_.snapshot_errors);
  s.catch_ups = value(c_.catch_ups);
  s.gaps = value(c_.gaps);
  const std::int64_t lag = c_.lag_ns.load();
  s.lag_ms = lag < 0 ? -1 : lag / 1'000'000;
  const std::int64_t now = unix_ms();
  const std::int64_t written = c_.snapshot_written_ms.load();
  const std::int64_t restored = c_.snapshot_restored_ms.load();
  s.snapshot_written_age_ms = written == 0 ? -1 : std::max<std::int64_t>(0, now - written);
  s.snapshot_restored_age_ms = restored == 0 ? -1 : std::max<std::int64_t>(0, now - restored);
  s.last_error = c_.last_error();
  return s;
}

inline void Engine::run() {
  block_sigpipe();
  while (!stopping_.load()) {
    bool ok = false;
    try {
      ok = turn();
    } catch (const std::exception& e) {  // a hook that threw, or out of memory
      bump(c_.command_errors);
      c_.set_error(absl::StrCat("redis replicator: ", e.what()));
      writer_.close();  // start again from a fresh connection
      reader_.close();
    }
    if (ok) {
      backoff_.reset();
      continue;
    }
    if (!writer_.is_open() || !reader_.is_open()) c_.connected.store(false);
    if (!stopping_.load()) wait(backoff_.next());
  }
  // A graceful stop: what the policy emitted since the last flush goes out
  // while the writer's connection is up (stop() cuts it at connect_timeout).
  if (writer_.is_open()) {
    try {
      (void)flush();
    } catch (const std::exception&) {  // out of memory: what is left stays in the Outbox
    }
  }
  writer_.close();
  reader_.close();
  c_.connected.store(false);
}

// Connects when not connected, then one step. False when either failed
// (counted).
inline bool Engine::turn() {
  if (!writer_.is_open() || !reader_.is_open()) {
    c_.connected.store(false);
    if (!connect()) return false;
  }
  const absl::Status s = step();
  if (s.ok()) return true;
  bump(c_.command_errors);
  c_.set_error(s.message());
  return false;
}

inline bool Engine::connect() {
  writer_.close();
  reader_.close();
  read_pending_ = false;
  absl::Status s = writer_.open(address_, o_.connect_timeout, o_.command_timeout);
  if (s.ok()) s = reader_.open(address_, o_.connect_timeout, o_.command_timeout);
  if (!s.ok()) {
    writer_.close();
    bump(c_.connect_failures);
    c_.set_error(s.message());
    return false;
  }
  if (stopping_.load()) {
    writer_.close();
    reader_.close();
    return false;
  }
  if (s = on_connected(); !s.ok()) {
    bump(c_.command_errors);
    c_.set_error(s.message());
    writer_.close();
    reader_.close();
    return false;
  }
  if (ever_connected_) bump(c_.reconnects);
  ever_connected_ = true;
  c_.connected.store(true);
  return true;
}

// Redis's clock (own entries, ages of load reports), the models and their
// snapshots, and whether anything was trimmed while away.
inline absl::Status Engine::on_connected() {
  absl::StatusOr<Reply> t = writer_.command({"TIME"});
  if (!t.ok()) return t.status();
  std::int64_t sec = 0, usec = 0;
  const redisReply* r = t->get();
  if (!is_array(r, 2) || !absl::SimpleAtoi(av(text(r->element[0])), &sec) ||
      !absl::SimpleAtoi(av(text(r->element[1])), &usec)) {
    return absl::FailedPreconditionError("TIME: an unexpected reply");
  }
  const std::int64_t redis_ms = sec * 1000 + usec / 1000;
  offset_ms_ = redis_ms - unix_ms();
  if (start_ms_ == 0) start_ms_ = redis_ms;
  announced_.clear();
  for (Followed& f : streams_) f.check_trim = true;  // while away, anything may have gone
  if (absl::Status s = refresh_models(); !s.ok()) return s;
  if (!fleet_placed_) {
    // Worker removals after the oldest snapshot restored still count.
    streams_[0].last = restored_fleet_.value_or(StreamId{});
    fleet_placed_ = true;
  }
  if (absl::Status s = check_trims(); !s.ok()) return s;
  const SteadyClock::time_point now = SteadyClock::now();
  next_flush_ = now;
  next_load_ = now;
  if (next_snapshot_ == SteadyClock::time_point{}) next_snapshot_ = now + o_.snapshot_interval;
  return absl::OkStatus();
}

inline absl::Status Engine::step() {
  const SteadyClock::time_point now = SteadyClock::now();
  if (now >= next_flush_ || outbox_full()) {
    if (absl::Status s = flush(); !s.ok()) return s;
    next_flush_ = now + o_.flush_interval;
  }
  if (now >= next_load_) {
    if (absl::Status s = refresh_models(); !s.ok()) return s;
    if (absl::Status s = publish_loads(); !s.ok()) return s;
    apply_loads();
    next_load_ = now + o_.load_interval;
  }
  if (o_.snapshot_interval.count() > 0 && now >= next_snapshot_) {
    if (absl::Status s = write_snapshots(); !s.ok()) return s;
    next_snapshot_ = now + o_.snapshot_interval;
  }
  return read_turn();
}

// Waits `d`, or less when stopping; other replicas' load still expires
// meanwhile.
inline void Engine::wait(std::chrono::milliseconds d) {
  const SteadyClock::time_point until = SteadyClock::now() + d;
  while (!stopping_.load()) {
    apply_loads();
    const SteadyClock::time_point now = SteadyClock::now();
    if (now >= until) return;
    std::unique_lock<std::mutex> lock(wait_mu_);
    wait_cv_.wait_for(lock, std::min<SteadyClock::duration>(until - now, o_.load_interval),
                      [this] { return stopping_.load(); });
  }
}

inline void Engine::mark_caught_up() {
  if (c_.caught_up.load()) return;
  {
    std::lock_guard<std::mutex> lock(caught_mu_);
    c_.caught_up.store(true);
  }
  caught_cv_.notify_all();
}

inline absl::Status Engine::xadd(const std::string& key, std::size_t max_len,
                                 std::string_view bytes) {
  const std::string n = absl::StrCat(max_len);
  return writer_.command({"XADD", key, "MAXLEN", "~", n, "*", kBatchField, bytes}).status();
}

}  // namespace redis_detail
}  // namespace sync
KVROUTE_NAMESPACE_END

#include "kvroute/sync/redis/detail/engine_io.hpp"

#endif  // KVROUTE_SYNC_REDIS_DETAIL_ENGINE_HPP_
