// What sharing state between router replicas costs select_worker, for
// cache_aware and least_prefill over 8 workers, on two workloads:
//
//   * BM_SyncMix: the standard request mix (workloads/request_mix.hpp),
//     cycled: after the first pass every text is known, the steady state of
//     a router whose traffic repeats itself;
//   * BM_SyncChat: multi-turn chat (workloads/generators.hpp, make_chat),
//     routed once from empty state: every request brings new text, so
//     every selection has chunks to emit;
//   * BM_SyncChatPaired: the same chat through the policy alone and the
//     policy emitting (sink or sink_texts) in one pass, a few requests each
//     in turn, the outbox drained as the Redis transport drains it at two
//     request rates (per_flush: 30 or 250 requests per flush interval):
//     counter `cost`, the ratio of their times, is the figure the 10%
//     target is read on, since separate runs differ by about as much;
//   * BM_ChunkKeys: the chunk keys alone, against XXH64 over the same
//     chunks.
//
// Modes:
//   * no_sink: the policy alone, the reference in the same run;
//   * sink: placements emitted to an Outbox as keys (sync_text_share 0);
//     the target is at most 10% below no_sink's rate. Every 256 selections
//     the outbox is drained, the policy told what was sent (note_sent) and
//     the batch encoded, as the transport's thread would: that is timed
//     apart (sender_ns_per_request), not in the selections' rate;
//   * sink_texts (chat): placements carry their new text (sync_text_share
//     1), which each selection copies to the outbox; the sender's thread
//     keeps it for the placements that extend it;
//   * sink_and_receiving: the same as sink, plus another replica's changes
//     applied.
//     Mix: that replica routed the same mix, and its changes are applied
//     over and over (each selection folds a remote prefix in: a worst
//     case). Chat: two replicas behind a round-robin front; this one routes
//     the even requests and applies, per request, the other's changes for
//     the odd one before it, so its selections fold in the turns the other
//     routed.
//
// Counters: wire_bytes_per_request (the encoded batches, sync/wire.hpp) and
// text_bytes_per_request, whose ratio is what travels per byte routed.
//
//   cmake --workflow --preset bench
//   ./build/bench/benchmarks/kvroute_sync_benchmark
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kvroute/kvroute.hpp"
#include "kvroute/sync/outbox.hpp"
#include "kvroute/sync/redis/options.hpp"
#include "kvroute/sync/wire.hpp"
#include "workloads/generators.hpp"
#include "workloads/request_mix.hpp"

namespace {

enum Mode { kNoSink = 0, kSink = 1, kSinkAndReceiving = 2, kSinkTexts = 3 };
constexpr std::size_t kWorkers = 8;
// Selections between drains in BM_SyncMix and BM_SyncChat.
constexpr std::size_t kDrainEvery = 256;
// BM_SyncChatPaired's request rates, in requests per flush interval of the
// Redis transport (50 ms by default): 30 is a replica routing 600 requests
// a second, 250 one routing 5,000. How much text waits in the outbox
// decides whether its log stays in the CPU's cache, which a placement with
// text pays for; at the higher rate the transport's flush_bytes drains it
// before the interval ends.
constexpr std::size_t kPerFlushLow = 30;
constexpr std::size_t kPerFlushHigh = 250;

struct Replica {
  Replica() {
    for (std::size_t i = 0; i < kWorkers; ++i) {
      ids.push_back(*workers.add({.url = "http://10.0.0." + std::to_string(i) + ":30000"}));
    }
    snap = workers.snapshot();
  }
  kvroute::WorkerSet workers;
  kvroute::LoadTracker load;
  std::vector<kvroute::WorkerId> ids;
  std::shared_ptr<const kvroute::WorkerSnapshot> snap;
};

// The transport's side, on its own thread in a router: drains the outbox,
// hands the policy what was sent (note_sent keeps the texts that travelled)
// and encodes a batch. Timed apart (paused out of the selections' timing)
// and reported per request as sender_ns_per_request.
struct Sender {
  kvroute::sync::Outbox& out;
  std::vector<kvroute::sync::Change> drained{};
  std::size_t wire_bytes = 0;
  std::chrono::nanoseconds spent{0};

  template <class P>
  void flush(benchmark::State& state, P& policy) {
    state.PauseTiming();
    const auto t0 = std::chrono::steady_clock::now();
    drained.clear();
    out.drain(drained);
    policy.note_sent(drained);
    wire_bytes += kvroute::sync::encode({.source = "bench", .changes = drained}).size();
    spent += std::chrono::steady_clock::now() - t0;
    state.ResumeTiming();
  }
};

// A policy for `r`'s workers that emits to `out` (none when null), with
// texts (sync_text_share 1) or keys (0).
template <class P>
std::unique_ptr<P> make_policy(const Replica& r, kvroute::sync::Outbox* out, bool texts) {
  auto p =
      std::make_unique<P>(typename P::Options{.sync_text_share = texts ? 1.0 : 0.0, .seed = 1});
  kvroute::notify_workers_changed(*p, *r.snap);
  if (out != nullptr) p->set_state_sink(out);
  return p;
}

// Another replica's changes for the whole mix, routed once.
template <class P>
std::vector<kvroute::sync::Change> remote_changes(const kvbench::RequestMix& mix) {
  Replica other;
  P policy(typename P::Options{.sync_text_share = 0, .seed = 99});
  kvroute::notify_workers_changed(policy, *other.snap);
  kvroute::sync::Outbox out({.max_bytes = std::size_t{1} << 30});
  policy.set_state_sink(&out);
  for (std::size_t i = 0; i < mix.size(); ++i) {
    (void)kvroute::select_worker(policy, mix.view(i), *other.snap, other.load);
  }
  std::vector<kvroute::sync::Change> changes;
  out.drain(changes);
  return changes;
}

template <class P>
void BM_SyncMix(benchmark::State& state) {
  const auto mode = static_cast<Mode>(state.range(0));
  const kvbench::RequestMix& mix = kvbench::RequestMix::standard();
  Replica r;
  P policy(typename P::Options{.sync_text_share = 0, .seed = 1});
  kvroute::notify_workers_changed(policy, *r.snap);
  kvroute::sync::Outbox out({.max_bytes = std::size_t{64} << 20});
  if (mode != kNoSink) policy.set_state_sink(&out);
  std::vector<kvroute::sync::Change> incoming;
  if (mode == kSinkAndReceiving) incoming = remote_changes<P>(mix);

  Sender sender{out};
  std::size_t next_in = 0, text_bytes = 0, i = 0;
  std::uint64_t hits = 0;
  for (auto _ : state) {
    const kvroute::RequestView req = mix.view(i++);
    text_bytes += req.text.size();
    kvroute::Decision d = kvroute::select_worker(policy, req, *r.snap, r.load);
    hits += d.branch == kvroute::Branch::kCacheHit ? 1 : 0;
    benchmark::DoNotOptimize(d);
    if (mode != kNoSink && i % kDrainEvery == 0) {
      sender.flush(state, policy);
      for (std::size_t k = 0; k < kDrainEvery && !incoming.empty(); ++k) {
        (void)policy.apply_change(incoming[next_in], *r.snap);
        next_in = (next_in + 1) % incoming.size();
      }
    }
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["hit_rate"] = static_cast<double>(hits) / n;
  state.counters["text_bytes_per_request"] = static_cast<double>(text_bytes) / n;
  state.counters["wire_bytes_per_request"] = static_cast<double>(sender.wire_bytes) / n;
  state.counters["sender_ns_per_request"] = static_cast<double>(sender.spent.count()) / n;
  state.counters["dropped"] = static_cast<double>(out.dropped());
  if (hits == 0 && state.iterations() > 100) state.SkipWithError("the policy never hit its tree");
}

// Chat requests, each routed once: the other replica's changes per odd
// request (it routes the odd ones), and the even ones for this replica.
struct ChatSplit {
  static const ChatSplit& get() {
    static const ChatSplit split;
    return split;
  }
  static constexpr std::size_t kRequests = 8000;
  std::vector<std::string> texts = kvbench::make_chat(kRequests);
};

template <class P>
std::vector<std::vector<kvroute::sync::Change>> odd_changes(const std::vector<std::string>& texts) {
  Replica other;
  P policy(typename P::Options{.sync_text_share = 0, .seed = 99});
  kvroute::notify_workers_changed(policy, *other.snap);
  kvroute::sync::Outbox out({.max_bytes = std::size_t{1} << 30});
  policy.set_state_sink(&out);
  std::vector<std::vector<kvroute::sync::Change>> per_request(texts.size());
  for (std::size_t i = 1; i < texts.size(); i += 2) {
    (void)kvroute::select_worker(policy, {.text = texts[i]}, *other.snap, other.load);
    out.drain(per_request[i]);
  }
  return per_request;
}

template <class P>
void BM_SyncChat(benchmark::State& state) {
  const auto mode = static_cast<Mode>(state.range(0));
  const std::vector<std::string>& texts = ChatSplit::get().texts;
  std::vector<std::vector<kvroute::sync::Change>> incoming;
  if (mode == kSinkAndReceiving) incoming = odd_changes<P>(texts);
  const std::size_t step = mode == kSinkAndReceiving ? 2 : 1;

  kvroute::sync::Outbox out({.max_bytes = std::size_t{64} << 20});
  Sender sender{out};
  std::size_t text_bytes = 0, routed = 0;
  std::uint64_t hits = 0;
  for (auto _ : state) {  // one pass over the workload per iteration
    state.PauseTiming();
    auto r = std::make_unique<Replica>();
    auto policy = make_policy<P>(*r, mode == kNoSink ? nullptr : &out, mode == kSinkTexts);
    state.ResumeTiming();
    for (std::size_t i = 0; i < texts.size(); i += step) {
      if (mode == kSinkAndReceiving && i > 0) {
        for (const auto& c : incoming[i - 1]) (void)policy->apply_change(c, *r->snap);
      }
      text_bytes += texts[i].size();
      kvroute::Decision d = kvroute::select_worker(*policy, {.text = texts[i]}, *r->snap, r->load);
      hits += d.branch == kvroute::Branch::kCacheHit ? 1 : 0;
      benchmark::DoNotOptimize(d);
      if (mode != kNoSink && ++routed % kDrainEvery == 0) sender.flush(state, *policy);
    }
    if (mode != kNoSink) sender.flush(state, *policy);
    state.PauseTiming();  // the replica's teardown is not timed
    policy.reset();
    r.reset();
    state.ResumeTiming();
  }
  const auto n = static_cast<double>(state.iterations() * ((texts.size() + step - 1) / step));
  state.SetItemsProcessed(static_cast<std::int64_t>(n));
  state.counters["hit_rate"] = static_cast<double>(hits) / n;
  state.counters["text_bytes_per_request"] = static_cast<double>(text_bytes) / n;
  state.counters["wire_bytes_per_request"] = static_cast<double>(sender.wire_bytes) / n;
  state.counters["sender_ns_per_request"] = static_cast<double>(sender.spent.count()) / n;
  state.counters["dropped"] = static_cast<double>(out.dropped());
}

// The policy alone and the policy emitting, routed in one pass, a tenth of
// a flush interval's requests at a time each (in turn first), so that both
// see the machine in the same state: separate runs differ by more than the
// 10% target on a shared machine. The outbox is drained as the Redis
// transport drains it: every flush interval (per_flush requests), and as
// soon as it holds flush_bytes, which the transport looks at every tenth
// of the interval. Counters: `cost`, the emitting policy's time over the
// policy's alone, over the whole run; `requests_per_drain`.
template <class P>
void BM_SyncChatPaired(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  const auto mode = static_cast<Mode>(state.range(0));  // kSink or kSinkTexts
  const auto per_flush = static_cast<std::size_t>(state.range(1));
  const std::size_t per_look = std::max<std::size_t>(1, per_flush / 10);
  const std::size_t flush_bytes = kvroute::sync::RedisReplicatorOptions{}.flush_bytes;
  const std::vector<std::string>& texts = ChatSplit::get().texts;
  kvroute::sync::Outbox out({.max_bytes = std::size_t{64} << 20});
  Sender sender{out};
  Clock::duration alone{0}, emitting{0};
  std::size_t drains = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto ra = std::make_unique<Replica>();
    auto rb = std::make_unique<Replica>();
    auto a = make_policy<P>(*ra, nullptr, false);
    auto b = make_policy<P>(*rb, &out, mode == kSinkTexts);
    state.ResumeTiming();
    auto route = [&](P& p, Replica& r, std::size_t lo, std::size_t hi) {
      const auto t0 = Clock::now();
      for (std::size_t i = lo; i < hi; ++i) {
        benchmark::DoNotOptimize(kvroute::select_worker(p, {.text = texts[i]}, *r.snap, r.load));
      }
      return Clock::now() - t0;
    };
    std::size_t looks = 0;  // since the last drain
    for (std::size_t lo = 0, block = 0; lo < texts.size(); lo += per_look, ++block) {
      const std::size_t hi = std::min(texts.size(), lo + per_look);
      if (block % 2 == 0) {
        alone += route(*a, *ra, lo, hi);
        emitting += route(*b, *rb, lo, hi);
      } else {
        emitting += route(*b, *rb, lo, hi);
        alone += route(*a, *ra, lo, hi);
      }
      if (++looks == 10 || (flush_bytes > 0 && out.held_bytes() >= flush_bytes)) {
        sender.flush(state, *b);
        looks = 0;
        ++drains;
      }
    }
    state.PauseTiming();
    a.reset();
    b.reset();
    ra.reset();
    rb.reset();
    state.ResumeTiming();
  }
  const auto n = static_cast<double>(state.iterations() * texts.size());
  state.counters["cost"] =
      static_cast<double>(emitting.count()) / static_cast<double>(alone.count());
  state.counters["alone_ns_per_request"] =
      static_cast<double>(std::chrono::nanoseconds(alone).count()) / n;
  state.counters["emitting_ns_per_request"] =
      static_cast<double>(std::chrono::nanoseconds(emitting).count()) / n;
  state.counters["requests_per_drain"] = n / static_cast<double>(std::max<std::size_t>(1, drains));
}

// What a placement sent as keys costs per chunk: the keys of a 64 KiB
// text's 512 chunks (sync/chunk_key.hpp), against XXH64 over the same
// chunks (detail/stable_hash.hpp) in the same run. Counter:
// time_per_chunk (seconds).
void BM_ChunkKeys(benchmark::State& state) {
  const bool reference = state.range(0) == 1;
  std::string text;
  for (const std::string& t : kvbench::make_chat(64, 5)) text += t;
  text.resize(std::size_t{64} << 10, ' ');
  std::vector<std::uint64_t> keys;
  keys.reserve(kvroute::sync::whole_chunks(text.size()));
  for (auto _ : state) {
    keys.clear();
    if (reference) {
      for (std::size_t i = 0; i < kvroute::sync::whole_chunks(text.size()); ++i) {
        keys.push_back(
            kvroute::detail::xxh64(std::string_view(text).substr(i * kvroute::sync::kChunkBytes,
                                                                 kvroute::sync::kChunkBytes),
                                   i));
      }
    } else {
      (void)kvroute::sync::append_chunk_keys(text, 0, &keys);
    }
    benchmark::DoNotOptimize(keys.data());
  }
  const auto chunks = static_cast<double>(state.iterations() * keys.size());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["time_per_chunk"] =
      benchmark::Counter(chunks, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

}  // namespace

BENCHMARK(BM_ChunkKeys)->ArgName("xxh64")->Arg(0)->Arg(1);
BENCHMARK_TEMPLATE(BM_SyncMix, kvroute::CacheAware)
    ->ArgName("mode")
    ->Arg(kNoSink)
    ->Arg(kSink)
    ->Arg(kSinkAndReceiving);
BENCHMARK_TEMPLATE(BM_SyncMix, kvroute::LeastPrefill)
    ->ArgName("mode")
    ->Arg(kNoSink)
    ->Arg(kSink)
    ->Arg(kSinkAndReceiving);
BENCHMARK_TEMPLATE(BM_SyncChat, kvroute::CacheAware)
    ->ArgName("mode")
    ->Arg(kNoSink)
    ->Arg(kSink)
    ->Arg(kSinkAndReceiving)
    ->Arg(kSinkTexts)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_SyncChat, kvroute::LeastPrefill)
    ->ArgName("mode")
    ->Arg(kNoSink)
    ->Arg(kSink)
    ->Arg(kSinkAndReceiving)
    ->Arg(kSinkTexts)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_SyncChatPaired, kvroute::CacheAware)
    ->ArgNames({"mode", "per_flush"})
    ->ArgsProduct({{kSink, kSinkTexts}, {kPerFlushLow, kPerFlushHigh}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_SyncChatPaired, kvroute::LeastPrefill)
    ->ArgNames({"mode", "per_flush"})
    ->ArgsProduct({{kSink, kSinkTexts}, {kPerFlushLow, kPerFlushHigh}})
    ->Unit(benchmark::kMillisecond);
