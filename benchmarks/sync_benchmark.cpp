// What sharing state between router replicas costs select_worker, for
// cache_aware and least_prefill over 8 workers on the standard request mix
// (benchmarks/workloads/request_mix.hpp):
//
//   * no_sink: the policy alone, the reference in the same run;
//   * sink: placements emitted to an Outbox, drained every 256 selections as
//     a sender thread would (the drain is inside the timing); the target is
//     at most 10% below no_sink's rate;
//   * sink_and_receiving: the same, and another replica's placements (of
//     the same mix, routed once beforehand) applied every 256 selections,
//     so that selections fold remote prefixes in.
//
// Counters: wire_bytes_per_request (the encoded batches, sync/wire.hpp) and
// text_bytes_per_request, whose ratio is what travels per byte routed.
//
//   cmake --workflow --preset bench
//   ./build/bench/benchmarks/kvroute_sync_benchmark
#include <benchmark/benchmark.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kvroute/kvroute.hpp"
#include "kvroute/sync/outbox.hpp"
#include "kvroute/sync/wire.hpp"
#include "workloads/request_mix.hpp"

namespace {

enum Mode { kNoSink = 0, kSink = 1, kSinkAndReceiving = 2 };
constexpr std::size_t kWorkers = 8;
constexpr std::size_t kDrainEvery = 256;

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

// Another replica's changes for the whole mix, routed once.
template <class P>
std::vector<kvroute::sync::Change> remote_changes(const kvbench::RequestMix& mix) {
  Replica other;
  P policy(typename P::Options{.seed = 99});
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
void BM_Sync(benchmark::State& state) {
  const auto mode = static_cast<Mode>(state.range(0));
  const kvbench::RequestMix& mix = kvbench::RequestMix::standard();
  Replica r;
  P policy(typename P::Options{.seed = 1});
  kvroute::notify_workers_changed(policy, *r.snap);
  kvroute::sync::Outbox out({.max_bytes = std::size_t{64} << 20});
  if (mode != kNoSink) policy.set_state_sink(&out);
  std::vector<kvroute::sync::Change> incoming;
  if (mode == kSinkAndReceiving) incoming = remote_changes<P>(mix);

  std::vector<kvroute::sync::Change> drained;
  std::size_t next_in = 0, wire_bytes = 0, text_bytes = 0, i = 0;
  std::uint64_t hits = 0;
  for (auto _ : state) {
    const kvroute::RequestView req = mix.view(i++);
    text_bytes += req.text.size();
    kvroute::Decision d = kvroute::select_worker(policy, req, *r.snap, r.load);
    hits += d.branch == kvroute::Branch::kCacheHit ? 1 : 0;
    benchmark::DoNotOptimize(d);
    if (mode != kNoSink && i % kDrainEvery == 0) {
      drained.clear();
      out.drain(drained);
      wire_bytes += kvroute::sync::encode({.source = "bench", .changes = drained}).size();
      for (std::size_t k = 0; k < kDrainEvery && !incoming.empty(); ++k) {
        (void)policy.apply_change(incoming[next_in], *r.snap);
        next_in = (next_in + 1) % incoming.size();
      }
    }
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["hit_rate"] = static_cast<double>(hits) / n;
  state.counters["text_bytes_per_request"] = static_cast<double>(text_bytes) / n;
  state.counters["wire_bytes_per_request"] = static_cast<double>(wire_bytes) / n;
  state.counters["dropped"] = static_cast<double>(out.dropped());
  if (hits == 0 && state.iterations() > 100) state.SkipWithError("the policy never hit its tree");
}

}  // namespace

BENCHMARK_TEMPLATE(BM_Sync, kvroute::CacheAware)
    ->ArgName("mode")
    ->Arg(kNoSink)
    ->Arg(kSink)
    ->Arg(kSinkAndReceiving);
BENCHMARK_TEMPLATE(BM_Sync, kvroute::LeastPrefill)
    ->ArgName("mode")
    ->Arg(kNoSink)
    ->Arg(kSink)
    ->Arg(kSinkAndReceiving);
