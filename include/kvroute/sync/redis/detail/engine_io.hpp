// -----------------------------------------------------------------------------
// File: kvroute/sync/redis/detail/engine_io.hpp
// -----------------------------------------------------------------------------
//
// Not API. The commands of Engine (engine.hpp): writing entries, loads and
// snapshots, reading the streams, following models, noticing trimming.
//
// Thread safety: the engine's thread only.

#ifndef KVROUTE_SYNC_REDIS_DETAIL_ENGINE_IO_HPP_
#define KVROUTE_SYNC_REDIS_DETAIL_ENGINE_IO_HPP_

#include <poll.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "kvroute/sync/redis/detail/engine.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {
namespace redis_detail {

// Writes what was pending, then what the Outbox holds now. An entry Redis
// refuses (an error reply: it never will take it) is dropped and counted;
// one that a lost connection stopped stays first in line.
inline absl::Status Engine::flush() {
  if (pending_.empty()) {
    std::vector<Change> changes;
    h_.outbox->drain(changes);
    if (h_.sent) h_.sent(changes);
    make_entries(changes, o_.replica, seq_, unix_ns(), pending_);
  }
  while (!pending_.empty()) {
    c_.pending_batches.store(pending_.size());
    const Outgoing& e = pending_.front();
    if (!e.fleet && !announced_.contains(e.model)) {
      absl::Status s = soft(writer_.command({"SADD", keys_.models(), e.model}).status());
      if (!s.ok()) return s;
      announced_.insert(e.model);
      if (!followed(e.model)) {
        if (s = follow(e.model); !s.ok()) return s;
      }
    }
    absl::Status s = xadd(e.fleet ? keys_.fleet() : keys_.stream(e.model),
                          e.fleet ? o_.fleet_max_len : o_.stream_max_len, e.bytes);
    if (absl::IsUnavailable(s)) return s;
    if (s.ok()) {
      bump(c_.batches_sent);
      bump(c_.changes_sent, e.changes);
      bump(c_.bytes_sent, e.bytes.size());
    } else {
      (void)soft(s);
    }
    pending_.pop_front();
  }
  c_.pending_batches.store(0);
  return absl::OkStatus();
}

inline absl::Status Engine::publish_loads() {
  if (!h_.workers || h_.load == nullptr) return absl::OkStatus();
  const std::shared_ptr<const WorkerSnapshot> snap = h_.workers();
  if (snap == nullptr) return absl::OkStatus();
  const Batch b{.source = o_.replica,
                .seq = seq_++,
                .sent_ns = unix_ns(),
                .loads = local_loads(*snap, *h_.load)};
  const std::string bytes = encode(b);
  absl::Status s = soft(xadd(keys_.fleet(), o_.fleet_max_len, bytes));
  if (!s.ok()) return s;
  bump(c_.load_reports_sent);
  bump(c_.bytes_sent, bytes.size());
  return absl::OkStatus();
}

inline void Engine::apply_loads() {
  if (!h_.workers || h_.load == nullptr) return;
  const std::shared_ptr<const WorkerSnapshot> snap = h_.workers();
  if (snap == nullptr) return;
  shared_.apply(*snap, *h_.load);
  c_.sources.store(shared_.sources());
}

// Follows the models of the router's workers, the default model ("") and
// those in the models set.
inline absl::Status Engine::refresh_models() {
  std::set<std::string> models = {""};
  if (h_.workers) {
    if (const std::shared_ptr<const WorkerSnapshot> snap = h_.workers()) {
      for (const Worker& w : snap->workers()) models.insert(w.model);
    }
  }
  absl::StatusOr<Reply> r = writer_.command({"SMEMBERS", keys_.models()});
  if (absl::Status s = soft(r.status()); !s.ok()) return s;
  if (r.ok() && is_array(r->get())) {
    const redisReply* set = r->get();
    for (std::size_t i = 0; i < set->elements; ++i) {
      if (is_string(set->element[i]) && set->element[i]->len <= kMaxNameBytes) {
        models.emplace(text(set->element[i]));
      }
    }
  }
  for (const std::string& m : models) {
    if (followed(m)) continue;
    if (absl::Status s = follow(m); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// The model's snapshot hash, if there is one (and restoring is asked for).
inline absl::StatusOr<std::optional<SnapshotRecord>> Engine::fetch_snapshot(
    const std::string& model) {
  if (!h_.restore) return std::optional<SnapshotRecord>();
  absl::StatusOr<Reply> r = writer_.command({"HGETALL", keys_.snapshot(model)});
  if (absl::Status s = soft(r.status()); !s.ok()) return s;
  if (!r.ok() || !is_array(r->get(), 1)) return std::optional<SnapshotRecord>();
  std::optional<SnapshotRecord> snap = parse_snapshot(r->get());
  if (!snap) {
    bump(c_.snapshot_errors);
    c_.set_error(absl::StrCat("snapshot of model '", model, "': not a kvroute snapshot hash"));
  }
  return snap;
}

// Starts reading a model's stream: restores its snapshot, then reads the
// stream from its start all the same. A snapshot holds its writer's trees;
// what the writer knew of other replicas' placements only by chunk key
// (sync/remote_index.hpp) is in the stream alone, and reading an entry
// twice changes nothing. The snapshot stands for what was trimmed.
inline absl::Status Engine::follow(const std::string& model) {
  Followed f{.model = model, .key = keys_.stream(model)};
  absl::StatusOr<std::optional<SnapshotRecord>> snap = fetch_snapshot(model);
  if (!snap.ok()) return snap.status();
  if (snap->has_value()) {
    const SnapshotRecord& rec = **snap;
    if (absl::Status s = h_.restore(model, rec.data); s.ok()) {
      f.snapshot_at = rec.id;
      bump(c_.snapshots_restored);
      c_.snapshot_restored_ms.store(rec.written_ms);
      if (!fleet_placed_)
        restored_fleet_ = std::min(restored_fleet_.value_or(rec.fleet_id), rec.fleet_id);
    } else {
      bump(c_.snapshot_errors);
      c_.set_error(absl::StrCat("restoring the snapshot of model '", model, "': ", s.message()));
    }
  }
  by_key_.emplace(f.key, streams_.size());
  streams_.push_back(std::move(f));
  c_.models.store(streams_.size() - 1);
  return absl::OkStatus();
}

// Whether Redis trimmed entries of a stream before they were read, for the
// streams where that may have happened (Followed::check_trim): after a
// reconnection, a stall, or a read that found the stream far ahead; each
// time before the next read. (A burst of more than stream_max_len entries
// between two reads of a reader that keeps up goes unnoticed.)
// XINFO STREAM carries the first and last entries, so it is not asked on
// every turn.
inline absl::Status Engine::check_trims() {
  for (Followed& f : streams_) {
    if (!f.check_trim) continue;
    f.check_trim = false;
    absl::StatusOr<Reply> r = writer_.command({"XINFO", "STREAM", f.key});
    if (absl::IsUnavailable(r.status())) return r.status();
    if (!r.ok()) {
      // Gone (a Redis restarted empty, a failover to another): what comes
      // next is new, whatever its ids (another server's clock may be
      // behind this one's).
      if (absl::StrContains(r.status().message(), "no such key")) f.last = StreamId{};
      continue;
    }
    const TrimMarks marks = parse_trim_marks(r->get());
    if (marks.last_generated && *marks.last_generated < f.last) f.last = StreamId{};  // the same
    // The fleet's history before this replica started is not promised.
    if (f.fleet && f.last == StreamId{}) continue;
    if (!missed_after(marks, f.last)) continue;
    if (absl::Status s = catch_up(f, marks); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// After missing entries: the model's snapshot when it is newer than what
// was read (unless this replica restored or wrote that one already), then
// every entry left, as follow() reads them. Without a snapshot that
// reaches the first entry left, reading goes on from there, and what was
// trimmed may be lost (a gap).
inline absl::Status Engine::catch_up(Followed& f, const TrimMarks& marks) {
  bool covered = false;  // a snapshot here holds everything trimmed
  if (!f.fleet) {
    absl::StatusOr<std::optional<SnapshotRecord>> snap = fetch_snapshot(f.model);
    if (!snap.ok()) return snap.status();
    if (snap->has_value() && (*snap)->id > f.last) {
      const SnapshotRecord& rec = **snap;
      bool restored = f.snapshot_at && *f.snapshot_at >= rec.id;
      if (!restored) {
        if (absl::Status s = h_.restore(f.model, rec.data); s.ok()) {
          restored = true;
          f.snapshot_at = rec.id;
          bump(c_.catch_ups);
          bump(c_.snapshots_restored);
          c_.snapshot_restored_ms.store(rec.written_ms);
        } else {
          bump(c_.snapshot_errors);
          c_.set_error(
              absl::StrCat("restoring the snapshot of model '", f.model, "': ", s.message()));
        }
      }
      covered = restored && !missed_after(marks, rec.id);
    }
  }
  if (!covered) {
    bump(c_.gaps);
    c_.set_error(absl::StrCat("stream ", f.key, " was trimmed past ", f.last.to_string(),
                              " before it was read"));
  }
  if (marks.first_entry) f.last = std::max(f.last, before(*marks.first_entry));
  return absl::OkStatus();
}

inline absl::Status Engine::write_snapshots() {
  if (!h_.save) return absl::OkStatus();
  for (Followed& f : streams_) {
    if (f.fleet || f.last == StreamId{} || f.snapshot_at == f.last) continue;
    absl::StatusOr<std::string> bytes = h_.save(f.model);
    if (!bytes.ok()) {
      bump(c_.snapshot_errors);
      c_.set_error(absl::StrCat("saving model '", f.model, "': ", bytes.status().message()));
      continue;
    }
    const std::string id = f.last.to_string();
    const std::string fleet = streams_[0].last.to_string();
    const std::string now = absl::StrCat(unix_ms());
    absl::Status s = soft(writer_
                              .command({"HSET", keys_.snapshot(f.model), "id", id, "fleet", fleet,
                                        "source", o_.replica, "time", now, "data", *bytes})
                              .status());
    if (!s.ok()) return s;
    f.snapshot_at = f.last;
    bump(c_.snapshots_written);
    c_.snapshot_written_ms.store(unix_ms());
  }
  return absl::OkStatus();
}

// One XREAD over every stream followed, from the last id read in each,
// sent now and taken when its reply comes (read_turn).
inline absl::Status Engine::send_read() {
  const std::string count = absl::StrCat(o_.read_count);
  const std::string ms = absl::StrCat(o_.read_block.count());
  std::vector<std::string> ids;
  ids.reserve(streams_.size());
  for (const Followed& f : streams_) ids.push_back(f.last.to_string());
  std::vector<std::string_view> args = {"XREAD", "COUNT", count, "BLOCK", ms, "STREAMS"};
  for (const Followed& f : streams_) args.push_back(f.key);
  for (const std::string& id : ids) args.push_back(id);
  if (absl::Status s = reader_.send(args); !s.ok()) return s;
  read_pending_ = true;
  read_sent_ = SteadyClock::now();
  return absl::OkStatus();
}

// Waits for the read's reply until the next periodic work is due (a flush
// at the latest) or the outbox is to be looked at, and applies it when it
// came. A reply later than read_block plus command_timeout means the
// server hangs: Unavailable.
inline absl::Status Engine::read_turn() {
  if (!read_pending_) {
    // A reader that stalled (slow hooks, a busy host) may have been passed
    // by trimming anywhere; look before reading on.
    if (read_sent_ != SteadyClock::time_point{} &&
        SteadyClock::now() - read_sent_ > o_.load_interval + 2 * o_.read_block) {
      for (Followed& f : streams_) f.check_trim = true;
    }
    if (absl::Status s = check_trims(); !s.ok()) return s;
    if (absl::Status s = send_read(); !s.ok()) return s;
  }
  SteadyClock::time_point due = std::min(next_flush_, next_load_);
  if (o_.snapshot_interval.count() > 0) due = std::min(due, next_snapshot_);
  const SteadyClock::time_point now = SteadyClock::now();
  const auto wait = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(due - now),
                               std::chrono::milliseconds(0), look_interval());
  pollfd p{reader_.fd(), POLLIN, 0};
  const int n = ::poll(&p, 1, static_cast<int>(wait.count()));
  if (n == 0 || (n < 0 && errno == EINTR)) {
    if (SteadyClock::now() - read_sent_ <= o_.read_block + o_.command_timeout) {
      return absl::OkStatus();
    }
    reader_.close();
    return absl::UnavailableError("XREAD: no reply within read_block + command_timeout");
  }
  read_pending_ = false;
  absl::StatusOr<Reply> r = reader_.receive("XREAD");
  if (!r.ok()) return r.status();
  take_read(r->get());
  return absl::OkStatus();
}

inline void Engine::take_read(const redisReply* reply) {
  bool full = false;
  bool loads = false;
  for (const StreamEntries& se : parse_xread(reply)) {
    const auto it = by_key_.find(av(se.key));
    if (it == by_key_.end()) continue;
    Followed& f = streams_[it->second];
    full = full || se.entries.size() >= o_.read_count;
    // Many entries at once: the stream ran ahead of this reader, perhaps
    // far enough to be trimmed past it.
    const std::size_t kept = f.fleet ? o_.fleet_max_len : o_.stream_max_len;
    if (se.entries.size() * 2 >= std::min(o_.read_count, kept)) f.check_trim = true;
    for (const Entry& e : se.entries) {
      if (e.id <= f.last) continue;  // a snapshot restored meanwhile covers it
      loads = handle(e, f) || loads;
      f.last = e.id;
    }
  }
  if (loads) apply_loads();
  if (!full) mark_caught_up();
}

// Applies one entry; whether it carried another replica's load.
inline bool Engine::handle(const Entry& e, const Followed& f) {
  const std::optional<std::string_view> bytes = e.field(kBatchField);
  absl::StatusOr<Batch> b =
      bytes
          ? decode(*bytes)
          : absl::StatusOr<Batch>(absl::InvalidArgumentError("no 'b' field (not a kvroute entry)"));
  if (!b.ok()) {
    bump(c_.decode_errors);
    c_.set_error(
        absl::StrCat("entry ", e.id.to_string(), " of ", f.key, ": ", b.status().message()));
    return false;
  }
  const bool own = b->source == o_.replica;
  if (own && static_cast<std::int64_t>(e.id.ms) >= start_ms_) return false;
  bump(c_.batches_applied);
  c_.lag_ns.store(std::max<std::int64_t>(0, unix_ns() - b->sent_ns));
  for (const Change& c : b->changes) {
    bump(h_.apply(c) == Applied::kApplied ? c_.changes_applied : c_.changes_ignored);
  }
  if (own || !f.fleet || !b->changes.empty()) return false;
  // A load report; one older than load_ttl (read while catching up) says
  // nothing of now.
  const std::int64_t age_ms = unix_ms() + offset_ms_ - static_cast<std::int64_t>(e.id.ms);
  if (age_ms > o_.load_ttl.count()) return false;
  shared_.update(b->source, b->loads);
  bump(c_.load_reports_applied);
  return true;
}

}  // namespace redis_detail
}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_REDIS_DETAIL_ENGINE_IO_HPP_
