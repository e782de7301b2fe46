// The Redis transport's pieces that need no server: how the Outbox's
// changes become stream entries, stream ids and the trimming rule, the
// reconnection backoff, and reading replies of unexpected shapes.
#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kvroute/sync/redis/detail/backoff.hpp"
#include "kvroute/sync/redis/detail/outgoing.hpp"
#include "kvroute/sync/redis/detail/reply.hpp"

namespace {

namespace rd = kvroute::sync::redis_detail;
using kvroute::sync::Change;
using kvroute::sync::Placement;
using kvroute::sync::redis_detail::StreamId;

// A reply tree built by hand (hiredis's structs are plain C).
struct Replies {
  std::deque<redisReply> nodes;
  std::deque<std::vector<redisReply*>> arrays;
  std::deque<std::string> texts;

  redisReply* str(std::string s) {
    texts.push_back(std::move(s));
    redisReply& r = nodes.emplace_back();
    r.type = REDIS_REPLY_STRING;
    r.str = texts.back().data();
    r.len = texts.back().size();
    return &r;
  }
  redisReply* integer(long long v) {
    redisReply& r = nodes.emplace_back();
    r.type = REDIS_REPLY_INTEGER;
    r.integer = v;
    return &r;
  }
  redisReply* array(std::vector<redisReply*> items) {
    arrays.push_back(std::move(items));
    redisReply& r = nodes.emplace_back();
    r.type = REDIS_REPLY_ARRAY;
    r.elements = arrays.back().size();
    r.element = arrays.back().data();
    return &r;
  }
};

}  // namespace

TEST_CASE("redis parts: changes become one entry per model and one for the fleet",
          "[redis][parts]") {
  std::vector<Change> changes = {
      Placement{"m1", "http://w0", 0, {1, 2}},
      kvroute::sync::WorkerGone{"http://w9"},
      Placement{"m2", "http://w1", 0, {3}},
      kvroute::sync::Forget{"m1", "http://w0", 1, {2}},
      kvroute::sync::Pin{"m2", "user-7", "http://w1", 5, true},
  };
  std::deque<rd::Outgoing> out;
  std::uint64_t seq = 10;
  rd::make_entries(changes, "r1", seq, 1234, out);
  CHECK(changes.empty());
  REQUIRE(out.size() == 3);
  CHECK(seq == 13);
  // In the order each stream was first seen; changes in emitted order.
  CHECK_FALSE(out[0].fleet);
  CHECK(out[0].model == "m1");
  CHECK(out[1].fleet);
  CHECK(out[2].model == "m2");
  auto m1 = kvroute::sync::decode(out[0].bytes);
  REQUIRE(m1.ok());
  CHECK(m1->source == "r1");
  CHECK(m1->seq == 10);
  CHECK(m1->sent_ns == 1234);
  REQUIRE(m1->changes.size() == 2);
  CHECK(std::get<Placement>(m1->changes[0]).keys == std::vector<std::uint64_t>{1, 2});
  CHECK(std::holds_alternative<kvroute::sync::Forget>(m1->changes[1]));
  auto m2 = kvroute::sync::decode(out[2].bytes);
  REQUIRE(m2.ok());
  CHECK(out[2].changes == 2);
  CHECK(std::get<kvroute::sync::Pin>(m2->changes[1]).key == "user-7");
}

TEST_CASE("redis parts: a large flush is split into bounded entries", "[redis][parts]") {
  std::vector<Change> changes;
  for (std::size_t i = 0; i < rd::kMaxChangesPerEntry * 2 + 5; ++i) {
    changes.push_back(Placement{"", "http://w0", 0, {i}});
  }
  std::deque<rd::Outgoing> out;
  std::uint64_t seq = 0;
  rd::make_entries(changes, "r", seq, 0, out);
  REQUIRE(out.size() == 3);
  CHECK(out[0].changes == rd::kMaxChangesPerEntry);
  CHECK(out[2].changes == 5);
  auto last = kvroute::sync::decode(out[2].bytes);
  REQUIRE(last.ok());
  CHECK(std::get<Placement>(last->changes.back()).keys[0] == rd::kMaxChangesPerEntry * 2 + 4);
}

TEST_CASE("redis parts: stream ids parse, order and step back", "[redis][parts]") {
  CHECK(StreamId::parse("1700000000000-3") == StreamId{1700000000000, 3});
  CHECK(StreamId::parse("42") == StreamId{42, 0});
  CHECK_FALSE(StreamId::parse(""));
  CHECK_FALSE(StreamId::parse("x-1"));
  CHECK_FALSE(StreamId::parse("1-"));
  CHECK(StreamId{1, 9} < StreamId{2, 0});
  CHECK(StreamId{5, 2}.to_string() == "5-2");
  CHECK(rd::before({5, 2}) == StreamId{5, 1});
  CHECK(rd::before({5, 0}) == StreamId{4, UINT64_MAX});
  CHECK(rd::before({0, 0}) == StreamId{0, 0});
}

TEST_CASE("redis parts: when a reader missed trimmed entries", "[redis][parts]") {
  rd::TrimMarks m;
  m.first_entry = StreamId{100, 0};
  m.max_deleted = StreamId{0, 0};  // Redis 7.0 after MAXLEN trimming
  m.entries_added = 50;
  m.length = 10;
  CHECK(rd::missed_after(m, {99, 0}));  // the first left is past what was read
  CHECK_FALSE(rd::missed_after(m, {100, 0}));
  CHECK_FALSE(rd::missed_after(m, {150, 0}));
  CHECK(rd::missed_after(m, {}));  // nothing read, and 40 entries went
  m.entries_added = 10;
  CHECK_FALSE(rd::missed_after(m, {}));  // nothing ever deleted
  m.max_deleted = StreamId{120, 0};      // an XDEL past what was read
  CHECK(rd::missed_after(m, {110, 0}));
  CHECK_FALSE(rd::missed_after(rd::TrimMarks{}, {5, 0}));  // an empty stream
}

TEST_CASE("redis parts: backoff doubles within bounds, with jitter, and resets", "[redis][parts]") {
  using std::chrono::milliseconds;
  rd::Backoff b(milliseconds(100), milliseconds(1000), 7);
  std::int64_t bound = 100;
  for (int i = 0; i < 8; ++i) {
    const milliseconds w = b.next();
    CHECK(w.count() >= bound / 2);
    CHECK(w.count() <= bound);
    bound = std::min<std::int64_t>(bound * 2, 1000);
  }
  CHECK(b.bound() == milliseconds(1000));
  b.reset();
  CHECK(b.next() <= milliseconds(100));
}

TEST_CASE("redis parts: replies of unexpected shapes read as nothing", "[redis][parts]") {
  Replies r;
  // [[key, [[id, [b, bytes]], [bad-id, [...]], [id, [odd]]]], [not-a-key]]
  redisReply* good = r.array({r.str("1-1"), r.array({r.str("b"), r.str("x")})});
  redisReply* bad_id = r.array({r.str("one"), r.array({r.str("b"), r.str("y")})});
  redisReply* odd = r.array({r.str("2-0"), r.array({r.str("b")})});
  redisReply* stream = r.array({r.str("k"), r.array({good, bad_id, odd})});
  redisReply* reply = r.array({stream, r.array({r.integer(3)})});
  const std::vector<rd::StreamEntries> read = rd::parse_xread(reply);
  REQUIRE(read.size() == 1);
  CHECK(read[0].key == "k");
  REQUIRE(read[0].entries.size() == 2);
  CHECK(read[0].entries[0].field("b") == std::string_view("x"));
  CHECK_FALSE(read[0].entries[1].field("b"));  // an entry without its field
  CHECK(rd::parse_xread(r.integer(1)).empty());

  // A snapshot hash needs its id and data.
  CHECK_FALSE(rd::parse_snapshot(r.array({r.str("data"), r.str("d")})));
  auto snap = rd::parse_snapshot(r.array(
      {r.str("id"), r.str("7-1"), r.str("data"), r.str("d"), r.str("time"), r.str("soon")}));
  REQUIRE(snap);
  CHECK(snap->id == StreamId{7, 1});
  CHECK(snap->written_ms == 0);
  CHECK(snap->data == "d");

  // XINFO STREAM as Redis 7 answers it, in part.
  const rd::TrimMarks m =
      rd::parse_trim_marks(r.array({r.str("length"), r.integer(6), r.str("max-deleted-entry-id"),
                                    r.str("0-0"), r.str("entries-added"), r.integer(30),
                                    r.str("first-entry"), r.array({r.str("9-0"), r.array({})})}));
  CHECK(m.length == 6u);
  CHECK(m.entries_added == 30u);
  CHECK(m.first_entry == StreamId{9, 0});
  CHECK(m.max_deleted == StreamId{0, 0});
}
