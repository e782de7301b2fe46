// The pieces replicas share state with (include/kvroute/sync/): chunk keys,
// the wire format, the outbox, the remote index, shared load, and two
// policies that learn each other's placements.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <latch>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "kvroute/detail/sync/codec.hpp"
#include "kvroute/kvroute.hpp"
#include "kvroute/sync/chunk_key.hpp"
#include "kvroute/sync/outbox.hpp"
#include "kvroute/sync/remote_index.hpp"
#include "kvroute/sync/shared_load.hpp"
#include "kvroute/sync/text_store.hpp"
#include "kvroute/sync/wire.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {
struct TextStoreTestAccess {
  static Mutex& mutex(sync::TextStore& store) { return store.mu_; }
};
}  // namespace detail
KVROUTE_NAMESPACE_END

namespace {

using kvroute::sync::Batch;
using kvroute::sync::Change;
using kvroute::sync::kChunkBytes;

std::string text_of(std::size_t n, char seed) {
  std::string s(n, ' ');
  for (std::size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>('a' + (static_cast<std::size_t>(seed) + i * 7 + i / 13) % 26);
  return s;
}

Batch sample_batch() {
  Batch b{.source = "router-a", .seq = 42, .sent_ns = 123456789};
  b.changes.push_back(
      kvroute::sync::Placement{"m", "http://w1:8000", 3, {1, 2, 0xFFFFFFFFFFFFFFFFull}});
  b.changes.push_back(kvroute::sync::Forget{"", "http://w2:8000", 0, {7}});
  b.changes.push_back(kvroute::sync::WorkerGone{"http://w3:8000"});
  b.changes.push_back(kvroute::sync::Placement{.model = "m",
                                               .worker = "http://w1:8000",
                                               .first = 2,
                                               .text = "the rest of a text",
                                               .anchor = 0xFEDCBA9876543210ull});
  b.changes.push_back(kvroute::sync::Cut{"m", "http://w2:8000", 300});
  b.loads.push_back({"http://w1:8000", 5, 1200});
  return b;
}

}  // namespace

TEST_CASE("sync: chunk keys are fixed, and depend on content and position", "[sync]") {
  // Golden values: replicas on other machines and releases must agree, so
  // a change here is a wire-format change (bump kWireVersion).
  const std::string a(kChunkBytes, 'a');
  std::string bytes;
  for (int i = 0; i < 128; ++i) bytes.push_back(static_cast<char>(i));
  CHECK(kvroute::sync::chunk_key(a, 0) == 0xaafbe9e5290894b3ull);
  CHECK(kvroute::sync::chunk_key(a, 1) == 0x5db37a2bab39f1a5ull);
  CHECK(kvroute::sync::chunk_key(bytes, 1000000) == 0xdd0900df19d40076ull);
  CHECK(kvroute::detail::checksum64("kvroute") == 0x3ee4ac124fd3d331ull);
  CHECK(kvroute::detail::checksum64("") == 0xa00ad3e25de1607cull);
  std::string b = a;
  b[100] = 'b';
  CHECK(kvroute::sync::chunk_key(a, 0) != kvroute::sync::chunk_key(b, 0));

  const std::string t = text_of(5 * kChunkBytes + 17, 1);
  kvroute::sync::TextChunks chunks(t);
  CHECK(chunks.size() == 5);
  REQUIRE(chunks.compute_from(3));
  CHECK(chunks.key(4) == kvroute::sync::chunk_key_at(t, 4));
  REQUIRE(chunks.compute_from(0));
  for (std::size_t i = 0; i < 5; ++i) CHECK(chunks.key(i) == kvroute::sync::chunk_key_at(t, i));
  CHECK(chunks.keys_from(2).size() == 3);

  // A long text asked for from the back, a few chunks at a time (room
  // grows toward the front), and keys looked up one by one (key_at).
  const std::string long_text = text_of(300 * kChunkBytes, 2);
  kvroute::sync::TextChunks scan(long_text);
  CHECK(scan.key_at(7) == kvroute::sync::chunk_key_at(long_text, 7));
  for (std::size_t lo = 300; lo-- > 0;) {
    if (lo % 7 != 0 && lo != 0) continue;
    REQUIRE(scan.compute_from(lo));
    const auto keys = scan.keys_from(lo);
    REQUIRE(keys.size() == 300 - lo);
    for (std::size_t i = lo; i < 300; i += 13) {
      CHECK(keys[i - lo] == kvroute::sync::chunk_key_at(long_text, i));
      CHECK(scan.key(i) == keys[i - lo]);
    }
    CHECK(scan.key_at(299) == kvroute::sync::chunk_key_at(long_text, 299));
  }
}

TEST_CASE("sync: a batch round-trips through the wire format", "[sync]") {
  const Batch b = sample_batch();
  const std::string bytes = kvroute::sync::encode(b);
  auto back = kvroute::sync::decode(bytes);
  REQUIRE(back.ok());
  CHECK(back->source == "router-a");
  CHECK(back->seq == 42);
  CHECK(back->sent_ns == 123456789);
  REQUIRE(back->changes.size() == 5);
  const auto& p = std::get<kvroute::sync::Placement>(back->changes[0]);
  CHECK(p.model == "m");
  CHECK(p.worker == "http://w1:8000");
  CHECK(p.first == 3);
  CHECK(p.keys == std::vector<std::uint64_t>{1, 2, 0xFFFFFFFFFFFFFFFFull});
  CHECK(std::get<kvroute::sync::Forget>(back->changes[1]).keys == std::vector<std::uint64_t>{7});
  CHECK(std::get<kvroute::sync::WorkerGone>(back->changes[2]).worker == "http://w3:8000");
  const auto& t = std::get<kvroute::sync::Placement>(back->changes[3]);
  CHECK((t.model == "m" && t.worker == "http://w1:8000" && t.first == 2 && t.keys.empty()));
  CHECK((t.text == "the rest of a text" && t.anchor == 0xFEDCBA9876543210ull));
  const auto& cut = std::get<kvroute::sync::Cut>(back->changes[4]);
  CHECK((cut.model == "m" && cut.worker == "http://w2:8000" && cut.back == 300));
  REQUIRE(back->loads.size() == 1);
  CHECK(back->loads[0].in_flight == 5);
  CHECK(back->loads[0].tokens == 1200);
}

TEST_CASE("sync: a truncated, corrupt or foreign batch is an error", "[sync]") {
  const std::string bytes = kvroute::sync::encode(sample_batch());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    INFO("truncated to " << n);
    CHECK_FALSE(kvroute::sync::decode(bytes.substr(0, n)).ok());
  }
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x20);
    INFO("byte " << i << " flipped");
    CHECK_FALSE(kvroute::sync::decode(bad).ok());
  }
  auto foreign = kvroute::sync::decode("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  REQUIRE_FALSE(foreign.ok());
  CHECK_THAT(std::string(foreign.status().message()), Catch::Contains("KVRS"));
  std::string future = bytes;
  future[4] = 9;
  auto v = kvroute::sync::decode(future);
  REQUIRE_FALSE(v.ok());
  CHECK_THAT(std::string(v.status().message()), Catch::Contains("version 9"));
  CHECK_FALSE(kvroute::sync::decode(bytes + "x").ok());
}

TEST_CASE("sync: the outbox is bounded and counts what it drops", "[sync]") {
  kvroute::sync::Outbox out({.max_bytes = 1000});
  const std::vector<std::uint64_t> keys(50, 1);  // 400 bytes of keys
  out.placed("m", "http://w", 0, keys);
  out.placed("m", "http://w", 0, keys);
  out.placed("m", "http://w", 0, keys);  // over the bound
  CHECK(out.accepted() == 2);
  CHECK(out.dropped() == 1);
  std::vector<Change> batch;
  CHECK(out.drain(batch) == 2);
  CHECK(batch.size() == 2);
  out.worker_gone("http://w");  // room again
  CHECK(out.drain(batch) == 1);
  CHECK(batch.size() == 3);
  CHECK(out.held_bytes() == 0);
}

TEST_CASE("sync: the remote index finds the deepest known chunk", "[sync]") {
  const std::string t = text_of(6 * kChunkBytes, 2);
  kvroute::sync::TextChunks all(t);
  REQUIRE(all.compute_from(0));
  kvroute::sync::RemoteIndex index;
  REQUIRE(index.add(7, all.keys_from(0).subspan(0, 4)));  // chunks 0..3 on worker 7
  REQUIRE(index.add(9, all.keys_from(2).subspan(0, 1)));  // chunk 2 on worker 9 too
  CHECK(index.size() == 4);

  kvroute::sync::TextChunks req(t);
  kvroute::sync::RemoteIndex::Taken holders;
  CHECK(index.take_deepest(req, 0, &holders) == 3);
  CHECK(holders == kvroute::sync::RemoteIndex::Taken{7});
  holders.clear();
  CHECK(index.take_deepest(req, 0, &holders) == 2);
  CHECK(holders == kvroute::sync::RemoteIndex::Taken{7, 9});
  holders.clear();
  CHECK(index.take_deepest(req, 2, &holders) == -1);  // below lo is not looked at

  index.remove(7, all.keys_from(0).subspan(0, 1));
  CHECK(index.take_deepest(req, 0, &holders) == 1);
  index.remove_worker(7);
  CHECK(index.empty());
}

TEST_CASE("sync: the remote index keeps at most max_keys keys", "[sync]") {
  kvroute::sync::RemoteIndex index(100);
  for (std::uint64_t k = 0; k < 1000; ++k) {
    const std::uint64_t key = k * 0x9E3779B97F4A7C15ull;
    REQUIRE(index.add(1, std::span<const std::uint64_t>(&key, 1)));
    CHECK(index.size() <= 100);
  }
}

TEST_CASE("sync: the text store gives back the prefix an anchor names", "[sync]") {
  using kvroute::sync::chunk_key_at;
  kvroute::sync::TextStore store;
  const std::string t1 = text_of(3 * kChunkBytes + 40, 3);
  kvroute::sync::TextChunks c1(t1);
  REQUIRE(store.add(c1, 0));
  std::string out = "x";
  REQUIRE(store.prefix(chunk_key_at(t1, 2), 3, &out));
  CHECK(out == "x" + t1.substr(0, 3 * kChunkBytes));
  out.clear();
  REQUIRE(store.prefix(chunk_key_at(t1, 0), 1, &out));
  CHECK(out == t1.substr(0, kChunkBytes));
  // An unknown anchor, or one that names another position: nothing.
  CHECK_FALSE(store.prefix(chunk_key_at(t1, 2) ^ 1, 3, &out));
  CHECK_FALSE(store.prefix(chunk_key_at(t1, 2), 2, &out));
  CHECK(out == t1.substr(0, kChunkBytes));
  CHECK(store.prefix(0, 0, &out));  // no prefix to find

  // The next turn extends t1's whole chunks: it takes t1's place.
  const std::string t2 = t1.substr(0, 3 * kChunkBytes) + text_of(4 * kChunkBytes, 4);
  kvroute::sync::TextChunks c2(t2);
  REQUIRE(store.add(c2, 3));
  CHECK(store.bytes() == t2.size());
  out.clear();
  REQUIRE(store.prefix(chunk_key_at(t2, 6), 7, &out));
  CHECK(out == t2.substr(0, 7 * kChunkBytes));
  out.clear();
  REQUIRE(store.prefix(chunk_key_at(t1, 1), 2, &out));  // t1's chunks, now in t2
  CHECK(out == t1.substr(0, 2 * kChunkBytes));

  // A branch after chunk 1: kept beside t2, found by its own chunks.
  const std::string t3 = t1.substr(0, 2 * kChunkBytes) + text_of(2 * kChunkBytes, 5);
  kvroute::sync::TextChunks c3(t3);
  REQUIRE(store.add(c3, 2));
  CHECK(store.bytes() == t2.size() + t3.size());
  out.clear();
  REQUIRE(store.prefix(chunk_key_at(t3, 3), 4, &out));
  CHECK(out == t3.substr(0, 4 * kChunkBytes));
  out.clear();
  REQUIRE(store.prefix(chunk_key_at(t2, 3), 4, &out));
  CHECK(out == t2.substr(0, 4 * kChunkBytes));

  // A text whose prefix is nowhere here is found by all its chunks.
  const std::string t4 = text_of(5 * kChunkBytes, 6);
  kvroute::sync::TextChunks c4(t4);
  REQUIRE(store.add(c4, 3));
  out.clear();
  REQUIRE(store.prefix(chunk_key_at(t4, 1), 2, &out));
  CHECK(out == t4.substr(0, 2 * kChunkBytes));

  CHECK(store.contains(chunk_key_at(t4, 4), 5));
  CHECK_FALSE(store.contains(chunk_key_at(t4, 4), 4));  // another position
  CHECK_FALSE(store.contains(chunk_key_at(t4, 4) ^ 1, 5));
}

namespace {

// Holds a text store's lock on a thread of its own from construction to
// release(), as an add() that takes long (growing the index) would.
class StoreWriter {
 public:
  explicit StoreWriter(kvroute::sync::TextStore& store)
      : thread_([this, &store] {
          kvroute::detail::MutexLock lock(&kvroute::detail::TextStoreTestAccess::mutex(store));
          held_.count_down();
          done_.wait();
        }) {
    held_.wait();
  }
  StoreWriter(const StoreWriter&) = delete;
  StoreWriter& operator=(const StoreWriter&) = delete;
  ~StoreWriter() { release(); }
  void release() {
    if (!thread_.joinable()) return;
    done_.count_down();
    thread_.join();
  }

 private:
  std::latch held_{1};
  std::latch done_{1};
  std::thread thread_;
};

}  // namespace

TEST_CASE("sync: what a selection asks of the text store never waits for a writer", "[sync]") {
  using kvroute::sync::chunk_key_at;
  kvroute::sync::TextStore store;
  const std::string t = text_of(4 * kChunkBytes, 7);
  kvroute::sync::TextChunks c(t);
  REQUIRE(store.add(c, 0));
  const std::string next = t + text_of(2 * kChunkBytes, 8);
  REQUIRE(store.contains(chunk_key_at(t, 3), 4));

  SECTION("lookups answer at once that nothing is kept") {
    StoreWriter writer(store);
    CHECK_FALSE(store.contains(chunk_key_at(t, 3), 4));
    kvroute::sync::TextChunks busy(next);
    CHECK(store.deepest(busy, 6) == 0);
    writer.release();
    CHECK(store.contains(chunk_key_at(t, 3), 4));
    kvroute::sync::TextChunks free(next);
    CHECK(store.deepest(free, 6) == 4);
  }
  SECTION("try_add returns at once and keeps nothing") {
    // A text that extends a kept one (its anchor is looked up first) and
    // a new one.
    const std::string other = text_of(3 * kChunkBytes, 9);
    StoreWriter writer(store);
    kvroute::sync::TextChunks busy_next(next);
    CHECK_FALSE(store.try_add(busy_next, 4));
    kvroute::sync::TextChunks busy_other(other);
    CHECK_FALSE(store.try_add(busy_other, 0));
    writer.release();
    CHECK_FALSE(store.contains(chunk_key_at(next, 5), 6));
    CHECK_FALSE(store.contains(chunk_key_at(other, 2), 3));
    kvroute::sync::TextChunks free_next(next);
    CHECK(store.try_add(free_next, 4));
    CHECK(store.contains(chunk_key_at(next, 5), 6));
    kvroute::sync::TextChunks free_other(other);
    CHECK(store.try_add(free_other, 0));
    CHECK(store.contains(chunk_key_at(other, 2), 3));
  }
}

TEST_CASE("sync: the text store keeps at most max_bytes", "[sync]") {
  using kvroute::sync::chunk_key_at;
  const std::size_t len = 4 * kChunkBytes;
  kvroute::sync::TextStore store(8 * len);
  std::vector<std::string> texts;
  for (int i = 0; i < 40; ++i) {
    texts.push_back(text_of(len, static_cast<char>(i)) + std::to_string(i));
    kvroute::sync::TextChunks c(texts.back());
    REQUIRE(store.add(c, 0));
    CHECK(store.bytes() <= 8 * len + 2 * 40);
  }
  std::string out;
  CHECK(store.prefix(chunk_key_at(texts.back(), 3), 4, &out));         // the newest stays
  CHECK_FALSE(store.prefix(chunk_key_at(texts.front(), 3), 4, &out));  // the oldest went
  const std::string huge = text_of(5 * len, 9);                        // longer than half the bound
  kvroute::sync::TextChunks h(huge);
  CHECK_FALSE(store.add(h, 0));
  const std::string tiny = "shorter than a chunk";
  kvroute::sync::TextChunks t(tiny);
  CHECK_FALSE(store.add(t, 0));
}

TEST_CASE("sync: a sink that keeps keys only gets a placed text's keys", "[sync]") {
  struct Keys final : kvroute::sync::StateSink {
    std::uint32_t first = 0;
    std::vector<std::uint64_t> keys;
    void placed(std::string_view, std::string_view, std::uint32_t f,
                std::span<const std::uint64_t> k) noexcept override {
      first = f;
      keys.assign(k.begin(), k.end());
    }
    void forgot(std::string_view, std::string_view, std::uint32_t,
                std::span<const std::uint64_t>) noexcept override {}
    void worker_gone(std::string_view) noexcept override {}
    void pinned(std::string_view, std::string_view, std::string_view, std::int64_t,
                bool) noexcept override {}
  } sink;
  const std::string t = text_of(5 * kChunkBytes + 9, 7);
  sink.placed_text("m", "http://w", 2, 0, std::string_view(t).substr(2 * kChunkBytes));
  CHECK(sink.first == 2);
  REQUIRE(sink.keys.size() == 3);
  for (std::size_t j = 0; j < 3; ++j) CHECK(sink.keys[j] == kvroute::sync::chunk_key_at(t, 2 + j));
}

TEST_CASE("sync: shared load adds live replicas' loads and expires silent ones", "[sync]") {
  kvroute::ManualClock clock;
  kvroute::Router<kvroute::RoundRobin> r;
  const auto a = *r.add_worker({.url = "http://a"});
  const auto b = *r.add_worker({.url = "http://b"});
  auto guard = r.load().dispatch(a, {.tokens = 10});
  kvroute::sync::SharedLoad shared({.ttl = std::chrono::seconds(5), .clock = &clock});
  const std::vector<kvroute::sync::LoadEntry> from_x = {{"http://a", 3, 300}, {"http://b", 1, 0}};
  const std::vector<kvroute::sync::LoadEntry> from_y = {{"http://a", 2, 50}};
  shared.update("x", from_x);
  clock.advance(std::chrono::seconds(3));
  shared.update("y", from_y);
  shared.apply(*r.workers().snapshot(), r.load());
  CHECK(r.load().in_flight(a) == 1 + 3 + 2);
  CHECK(r.load().in_flight_tokens(a) == 10 + 300 + 50);
  CHECK(r.load().in_flight(b) == 1);
  CHECK(r.load().local_in_flight(a) == 1);
  const auto mine = kvroute::sync::local_loads(*r.workers().snapshot(), r.load());
  REQUIRE(mine.size() == 2);
  CHECK(mine[0].in_flight + mine[1].in_flight == 1);  // never others' load

  clock.advance(std::chrono::seconds(3));  // x silent for 6 s
  shared.apply(*r.workers().snapshot(), r.load());
  CHECK(shared.sources() == 1);
  CHECK(r.load().in_flight(a) == 1 + 2);
  CHECK(r.load().in_flight(b) == 0);
  shared.update("y", from_y);  // a report replaces, never adds
  shared.apply(*r.workers().snapshot(), r.load());
  CHECK(r.load().in_flight(a) == 1 + 2);
}

TEST_CASE("sync: the outbox gives back every kind of change, in order", "[sync]") {
  kvroute::sync::Outbox out;
  const std::vector<std::uint64_t> keys = {1, 0xFFFFFFFFFFFFFFFFull, 3};
  out.placed("m", "http://w1:8000", 4, keys);
  out.forgot("", "http://w2:8000", 0, std::span(keys).subspan(1));
  out.worker_gone("http://w3:8000");
  out.pinned("m2", "user-7", "http://w4:8000", -5, true);
  out.placed("", "", 0, {});
  out.placed_text("m", "http://w1:8000", 7, 0xFFFFFFFFFFFFFFF0ull, "a placement's text");
  out.cut("m", "http://w2:8000", 0xFFFFFFFFFFFFFFFFull);
  std::vector<Change> got;
  REQUIRE(out.drain(got) == 7);
  const auto& p = std::get<kvroute::sync::Placement>(got[0]);
  CHECK((p.model == "m" && p.worker == "http://w1:8000" && p.first == 4 && p.keys == keys));
  const auto& f = std::get<kvroute::sync::Forget>(got[1]);
  CHECK((f.model.empty() && f.worker == "http://w2:8000" && f.first == 0));
  CHECK(f.keys == std::vector<std::uint64_t>(keys.begin() + 1, keys.end()));
  CHECK(std::get<kvroute::sync::WorkerGone>(got[2]).worker == "http://w3:8000");
  const auto& pin = std::get<kvroute::sync::Pin>(got[3]);
  CHECK((pin.model == "m2" && pin.key == "user-7" && pin.worker == "http://w4:8000"));
  CHECK((pin.stamp == -5 && pin.reset));
  CHECK(std::get<kvroute::sync::Placement>(got[4]).keys.empty());
  const auto& t = std::get<kvroute::sync::Placement>(got[5]);
  CHECK((t.model == "m" && t.worker == "http://w1:8000" && t.first == 7 && t.keys.empty()));
  CHECK((t.text == "a placement's text" && t.anchor == 0xFFFFFFFFFFFFFFF0ull));
  const auto& cut = std::get<kvroute::sync::Cut>(got[6]);
  CHECK((cut.model == "m" && cut.worker == "http://w2:8000" && cut.back == 0xFFFFFFFFFFFFFFFFull));
  CHECK(out.drain(got) == 0);  // emptied
}

TEST_CASE("sync: the outbox takes changes from many threads while one drains", "[sync]") {
  kvroute::sync::Outbox out({.max_bytes = std::size_t{1} << 20});
  constexpr int kThreads = 4, kEach = 2000;
  std::vector<Change> got;
  std::atomic<int> running{kThreads};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&out, &running, t] {
      for (int i = 0; i < kEach; ++i) {
        const std::uint64_t k[] = {static_cast<std::uint64_t>(t), static_cast<std::uint64_t>(i)};
        out.placed("m", "http://w", static_cast<std::uint32_t>(i), k);
      }
      running.fetch_sub(1);
    });
  }
  while (running.load() > 0) out.drain(got);
  for (auto& th : threads) th.join();
  out.drain(got);
  CHECK(got.size() + out.dropped() == kThreads * kEach);
  std::vector<int> next(kThreads, 0);  // each thread's changes in its order
  for (const Change& c : got) {
    const auto& p = std::get<kvroute::sync::Placement>(c);
    REQUIRE(p.keys.size() == 2);
    const auto t = static_cast<std::size_t>(p.keys[0]);
    CHECK(static_cast<int>(p.keys[1]) >= next[t]);
    next[t] = static_cast<int>(p.keys[1]) + 1;
  }
}
