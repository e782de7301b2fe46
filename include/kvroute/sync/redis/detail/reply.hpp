// -----------------------------------------------------------------------------
// File: kvroute/sync/redis/detail/reply.hpp
// -----------------------------------------------------------------------------
//
// Not API. Reading hiredis replies (RESP2) into the few shapes the
// replicator needs: stream entry ids ("<ms>-<seq>", compared as pairs),
// XREAD's entries, XINFO STREAM's trimming marks and a snapshot's hash.
// Every reader tolerates a reply of another shape (a server of another
// version, a key of another type) by returning nothing, never by reading
// out of bounds.
//
// Thread safety: values and pure functions.

#ifndef KVROUTE_SYNC_REDIS_DETAIL_REPLY_HPP_
#define KVROUTE_SYNC_REDIS_DETAIL_REPLY_HPP_

#include <hiredis/hiredis.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kvroute/config.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {
namespace redis_detail {

// Abseil's string_view is not std's in every build (Debian's is its own).
inline absl::string_view av(std::string_view s) { return {s.data(), s.size()}; }

struct ReplyDeleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// A stream entry's id. {0, 0} is before every entry.
struct StreamId {
  std::uint64_t ms = 0;
  std::uint64_t seq = 0;

  friend auto operator<=>(const StreamId&,
                          const StreamId&) = default;  // NOLINT(modernize-use-nullptr)
  std::string to_string() const { return absl::StrCat(ms, "-", seq); }

  static std::optional<StreamId> parse(std::string_view s) {
    const std::size_t dash = s.find('-');
    StreamId id;
    const std::string_view ms = s.substr(0, dash);
    if (!absl::SimpleAtoi(av(ms), &id.ms)) return std::nullopt;
    if (dash != std::string_view::npos) {
      const std::string_view seq = s.substr(dash + 1);
      if (!absl::SimpleAtoi(av(seq), &id.seq)) {
        return std::nullopt;
      }
    }
    return id;
  }
};

inline bool is_string(const redisReply* r) {
  return r != nullptr && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

inline std::string_view text(const redisReply* r) {
  return is_string(r) ? std::string_view(r->str, r->len) : std::string_view();
}

inline bool is_array(const redisReply* r, std::size_t min_elements = 0) {
  return r != nullptr && r->type == REDIS_REPLY_ARRAY && r->elements >= min_elements;
}

// One entry of a stream as XREAD returns it: its id and its fields.
// The views point into the reply, which must outlive them.
struct Entry {
  StreamId id;
  std::vector<std::pair<std::string_view, std::string_view>> fields;

  std::optional<std::string_view> field(std::string_view name) const {
    for (const auto& [k, v] : fields) {
      if (k == name) return v;
    }
    return std::nullopt;
  }
};

// The entries of one stream in an XREAD reply.
struct StreamEntries {
  std::string_view key;
  std::vector<Entry> entries;
};

// XREAD's reply: nil when the read timed out, else [[key, [[id, [f, v, ...]],
// ...]], ...]. An entry whose id does not parse is left out; one whose fields
// are not pairs of strings keeps the pairs that are.
inline std::vector<StreamEntries> parse_xread(const redisReply* r) {
  std::vector<StreamEntries> out;
  if (!is_array(r)) return out;
  for (std::size_t i = 0; i < r->elements; ++i) {
    const redisReply* s = r->element[i];
    if (!is_array(s, 2) || !is_string(s->element[0]) || !is_array(s->element[1])) continue;
    StreamEntries se{text(s->element[0]), {}};
    const redisReply* list = s->element[1];
    se.entries.reserve(list->elements);
    for (std::size_t j = 0; j < list->elements; ++j) {
      const redisReply* e = list->element[j];
      if (!is_array(e, 2)) continue;
      const std::optional<StreamId> id = StreamId::parse(text(e->element[0]));
      if (!id) continue;
      Entry entry{*id, {}};
      const redisReply* f = e->element[1];
      if (is_array(f)) {
        for (std::size_t k = 0; k + 1 < f->elements; k += 2) {
          if (is_string(f->element[k]) && is_string(f->element[k + 1])) {
            entry.fields.emplace_back(text(f->element[k]), text(f->element[k + 1]));
          }
        }
      }
      se.entries.push_back(std::move(entry));
    }
    out.push_back(std::move(se));
  }
  return out;
}

// The value of `name` in a flat [name, value, name, value, ...] reply (XINFO
// STREAM, HGETALL), or null.
inline const redisReply* flat_field(const redisReply* r, std::string_view name) {
  if (!is_array(r)) return nullptr;
  for (std::size_t i = 0; i + 1 < r->elements; i += 2) {
    if (text(r->element[i]) == name) return r->element[i + 1];
  }
  return nullptr;
}

// What XINFO STREAM says of trimming: the first entry left, and (Redis 7)
// how many entries were ever added and the greatest id deleted. Redis 7.0
// moves max-deleted-entry-id on XDEL only, not when MAXLEN trims, so the
// first entry left is what tells of trimming.
struct TrimMarks {
  std::optional<StreamId> last_generated;  // the greatest id the stream ever had
  std::optional<StreamId> max_deleted;
  std::optional<StreamId> first_entry;
  std::optional<std::uint64_t> entries_added;
  std::optional<std::uint64_t> length;
};

inline std::optional<std::uint64_t> integer_of(const redisReply* r) {
  if (r == nullptr || r->type != REDIS_REPLY_INTEGER || r->integer < 0) return std::nullopt;
  return static_cast<std::uint64_t>(r->integer);
}

inline TrimMarks parse_trim_marks(const redisReply* r) {
  TrimMarks m;
  if (const redisReply* g = flat_field(r, "last-generated-id")) {
    m.last_generated = StreamId::parse(text(g));
  }
  if (const redisReply* d = flat_field(r, "max-deleted-entry-id")) {
    m.max_deleted = StreamId::parse(text(d));
  }
  const redisReply* first = flat_field(r, "first-entry");
  if (is_array(first, 1)) m.first_entry = StreamId::parse(text(first->element[0]));
  m.entries_added = integer_of(flat_field(r, "entries-added"));
  m.length = integer_of(flat_field(r, "length"));
  return m;
}

// Whether entries after `read` may have been deleted before they were read.
// Nothing read yet: whether any entry was ever deleted. Else: whether
// `read` itself is gone (the first entry left is past it), which is
// certain when entries after it went too, and a false alarm when `read`
// was the last to go (it then costs a snapshot read).
inline bool missed_after(const TrimMarks& m, StreamId read) {
  if (read == StreamId{}) return m.entries_added && m.length && *m.entries_added > *m.length;
  if (m.max_deleted && *m.max_deleted > read) return true;
  return m.first_entry && *m.first_entry > read;
}

// The greatest id before `id`: reading after it starts at `id`.
inline StreamId before(StreamId id) {
  if (id.seq > 0) return {id.ms, id.seq - 1};
  if (id.ms > 0) return {id.ms - 1, UINT64_MAX};
  return id;
}

// A snapshot's hash (HGETALL): the stream id it covers, the fleet stream's
// id, its writer, when (Unix ms) and its bytes.
struct SnapshotRecord {
  StreamId id;
  StreamId fleet_id;
  std::string source;
  std::int64_t written_ms = 0;
  std::string data;
};

inline std::optional<SnapshotRecord> parse_snapshot(const redisReply* r) {
  const std::optional<StreamId> id = StreamId::parse(text(flat_field(r, "id")));
  const redisReply* data = flat_field(r, "data");
  if (!id || !is_string(data)) return std::nullopt;
  SnapshotRecord s;
  s.id = *id;
  s.fleet_id = StreamId::parse(text(flat_field(r, "fleet"))).value_or(StreamId{});
  s.source.assign(text(flat_field(r, "source")));
  const std::string_view t = text(flat_field(r, "time"));
  if (!absl::SimpleAtoi(av(t), &s.written_ms)) s.written_ms = 0;
  s.data.assign(text(data));
  return s;
}

}  // namespace redis_detail
}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_REDIS_DETAIL_REPLY_HPP_
