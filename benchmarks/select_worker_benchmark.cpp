// select_worker for every policy (cache_aware and least_prefill included), 2 to
// 256 workers, on a fixed request mix.
//
//   cmake --workflow --preset bench
//   ./build/bench/benchmarks/kvroute_select_worker_benchmark
//
// The reference in the same run is BM_Baseline_RandomIndex: one draw from the
// same random generator plus an index, the floor any policy pays.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kvroute/kvroute.hpp"
#include "workloads/request_mix.hpp"

namespace {

struct Fixture {
  explicit Fixture(int n) {
    std::vector<kvroute::WorkerSpec> specs;
    for (int i = 0; i < n; ++i) {
      specs.push_back({.url = "http://10.0.0." + std::to_string(i) + ":30000"});
    }
    ids = *workers.add(specs);
    snap = workers.snapshot();
    // Uneven loads so that min-load logic has work to do; the last worker is
    // idle (not worker 0, so that a load-aware policy that rightly always
    // picks the idle one, e.g. power_of_two over 2, passes the checksum).
    for (int i = 0; i < n; ++i) {
      for (int k = 0; k < (n - 1 - i) % 4; ++k)
        guards.push_back(load.dispatch(ids[static_cast<std::size_t>(i)]));
    }
  }
  kvroute::WorkerSet workers;
  kvroute::LoadTracker load;
  std::vector<kvroute::WorkerId> ids;
  std::shared_ptr<const kvroute::WorkerSnapshot> snap;
  std::vector<kvroute::LoadGuard> guards;
};

// least_prefill once its workers' server pools are full: a pool of 16k
// tokens (64k characters) against each worker's share of the mix's texts, so
// that a worker lacking part of a text has live(w) to weigh, a walk down its
// LRU list. Beside kvroute::LeastPrefill above (pools never full, no walk),
// the difference is what the walks cost.
struct LeastPrefillFullPools : kvroute::LeastPrefill {
  LeastPrefillFullPools() noexcept : kvroute::LeastPrefill(Options{.kv_capacity_tokens = 16384}) {}
};

template <class P>
std::unique_ptr<P> make_policy() {
  if constexpr (std::is_default_constructible_v<P>) {
    return std::make_unique<P>();
  }
}

template <class P>
void BM_SelectWorker(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)));
  auto policy = make_policy<P>();
  const kvbench::RequestMix& mix = kvbench::RequestMix::standard();
  std::size_t i = 0;
  std::uint64_t checksum = 0;
  std::uint64_t cache_hits = 0;
  for (auto _ : state) {
    kvroute::Decision d = kvroute::select_worker(*policy, mix.view(i++), *f.snap, f.load);
    checksum += d ? d.worker->id.value : 1000000;
    cache_hits += d.branch == kvroute::Branch::kCacheHit ? 1 : 0;
    benchmark::DoNotOptimize(d);
  }
  // A policy that stopped choosing would show up here, not as a speed-up.
  if (checksum == 0 && state.range(0) > 1 && state.iterations() > 100) {
    state.SkipWithError("policy always chose worker 0");
  }
  if constexpr (std::is_same_v<P, kvroute::CacheAware> ||
                std::is_base_of_v<kvroute::LeastPrefill, P>) {
    // Its tree must have matched: the proof that it did its work.
    if (cache_hits == 0 && state.iterations() > 100)
      state.SkipWithError("the policy never hit its tree");
    state.counters["hit_rate"] =
        static_cast<double>(cache_hits) / static_cast<double>(state.iterations());
  }
  state.counters["workers"] = static_cast<double>(state.range(0));
}

void BM_Baseline_RandomIndex(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)));
  kvroute::detail::SharedRng rng(1);
  for (auto _ : state) {
    const auto& healthy = f.snap->group("").available();
    benchmark::DoNotOptimize(healthy[rng.below(healthy.size())]);
  }
}

}  // namespace

#define KVROUTE_POLICY_BENCH(P) \
  BENCHMARK_TEMPLATE(BM_SelectWorker, P)->RangeMultiplier(2)->Range(2, 256)

BENCHMARK(BM_Baseline_RandomIndex)->RangeMultiplier(2)->Range(2, 256);
KVROUTE_POLICY_BENCH(kvroute::RoundRobin);
KVROUTE_POLICY_BENCH(kvroute::Random);
KVROUTE_POLICY_BENCH(kvroute::PowerOfTwo);
KVROUTE_POLICY_BENCH(kvroute::ConsistentHashing);
KVROUTE_POLICY_BENCH(kvroute::PrefixHash);
KVROUTE_POLICY_BENCH(kvroute::Manual);
KVROUTE_POLICY_BENCH(kvroute::Bucket);
// Match + insert in a radix tree per request (the tree grows to the mix's
// 4096 distinct texts, then stays), plus the load-balance check.
KVROUTE_POLICY_BENCH(kvroute::CacheAware);
// One walk down the text's path for every worker's match, then an insert
// (no queued tokens are dispatched here, so the choice is the best match).
KVROUTE_POLICY_BENCH(kvroute::LeastPrefill);
KVROUTE_POLICY_BENCH(LeastPrefillFullPools);
