// What a snapshot of a tree policy's state costs (sync/snapshot.hpp): a
// cache_aware tree of about 1M characters over 8 workers, each request
// inserted under a worker as a router would place it (a request that
// mostly matches stays on the matched worker). Argument 0: multi-turn chat
// sessions (workloads/generators.hpp, chat: long shared system prompts,
// long turns); 1: agent fan-out (branchy: many short fragments, many
// nodes), the costly shape per character.
//
//   * BM_SnapshotSave:    save_state of the model's tree;
//   * BM_SnapshotRestore: restore_state into an empty policy (the policy's
//                         construction is outside the timing);
//   * BM_SnapshotRebuild: the reference, in the same run: inserting the
//                         requests themselves into an empty policy's tree,
//                         which is what a replica without a snapshot would
//                         have to replay to get the same tree.
//
// Counters: snapshot_bytes, tree_chars (distinct characters the tree
// holds), bytes_per_char (their ratio), routed_chars (the requests' total
// size, what a replay reads).
//
//   cmake --workflow --preset bench
//   ./build/bench/benchmarks/kvroute_snapshot_benchmark
#include <benchmark/benchmark.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kvroute/kvroute.hpp"
#include "kvroute/sync/snapshot.hpp"
#include "workloads/generators.hpp"

namespace {

constexpr std::size_t kWorkers = 8;
constexpr std::size_t kTreeChars = std::size_t{1} << 20;

struct Fixture {
  explicit Fixture(const char* shape) {
    for (std::size_t i = 0; i < kWorkers; ++i) {
      ids.push_back(*workers.add({.url = "http://10.0.0." + std::to_string(i) + ":30000"}));
    }
    snap = workers.snapshot();
    policy.on_workers_changed(*snap);
    kvroute::ApproxRadixTree* tree = policy.tree("");
    // Requests until the tree holds kTreeChars distinct characters; a
    // conversation's turns extend each other, so the worker that holds the
    // longest prefix keeps it (a router following its cache hits).
    const std::vector<std::string> chat = kvbench::make_workload(shape, 200000, 7);
    for (std::size_t i = 0; i < chat.size() && tree->stats().units < kTreeChars; ++i) {
      const kvroute::MatchResult m = tree->match(chat[i]);
      const kvroute::TenantId w =
          m.has_tenant() && m.match_rate() > 0.5f ? m.tenant : ids[i % kWorkers].value;
      (void)tree->insert(chat[i], w);
      requests.push_back({chat[i], w});
      routed_chars += chat[i].size();
    }
    tree_chars = tree->stats().units;
    nodes = tree->stats().nodes;
    bytes = *policy.save_state("", *snap);
  }
  static Fixture& get(const benchmark::State& state) {
    if (state.range(0) == 0) {
      static Fixture chat("chat");
      return chat;
    }
    static Fixture branchy("branchy");
    return branchy;
  }
  struct Placed {
    std::string text;
    kvroute::TenantId worker;
  };
  kvroute::WorkerSet workers;
  std::vector<kvroute::WorkerId> ids;
  std::shared_ptr<const kvroute::WorkerSnapshot> snap;
  kvroute::CacheAware policy;
  std::vector<Placed> requests;
  std::size_t routed_chars = 0;
  std::size_t tree_chars = 0;
  std::size_t nodes = 0;
  std::string bytes;
};

void counters(benchmark::State& state, const Fixture& f) {
  state.counters["snapshot_bytes"] = static_cast<double>(f.bytes.size());
  state.counters["tree_chars"] = static_cast<double>(f.tree_chars);
  state.counters["bytes_per_char"] =
      static_cast<double>(f.bytes.size()) / static_cast<double>(f.tree_chars);
  state.counters["routed_chars"] = static_cast<double>(f.routed_chars);
  state.counters["nodes"] = static_cast<double>(f.nodes);
}

void BM_SnapshotSave(benchmark::State& state) {
  Fixture& f = Fixture::get(state);
  for (auto _ : state) {
    absl::StatusOr<std::string> b = f.policy.save_state("", *f.snap);
    if (!b.ok() || b->size() != f.bytes.size()) state.SkipWithError("save failed");
    benchmark::DoNotOptimize(b);
  }
  counters(state, f);
}
BENCHMARK(BM_SnapshotSave)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_SnapshotRestore(benchmark::State& state) {
  Fixture& f = Fixture::get(state);
  for (auto _ : state) {
    state.PauseTiming();
    auto p = std::make_unique<kvroute::CacheAware>();
    state.ResumeTiming();
    absl::StatusOr<kvroute::sync::RestoreResult> r = p->restore_state(f.bytes, *f.snap);
    if (!r.ok() || r->failed != 0) state.SkipWithError("restore failed");
    state.PauseTiming();
    p.reset();
    state.ResumeTiming();
  }
  counters(state, f);
}
BENCHMARK(BM_SnapshotRestore)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_SnapshotRebuild(benchmark::State& state) {
  Fixture& f = Fixture::get(state);
  for (auto _ : state) {
    state.PauseTiming();
    auto p = std::make_unique<kvroute::CacheAware>();
    p->on_workers_changed(*f.snap);
    kvroute::ApproxRadixTree* tree = p->tree("");
    state.ResumeTiming();
    std::size_t ok = 0;
    for (const Fixture::Placed& r : f.requests) ok += tree->insert(r.text, r.worker).ok();
    if (ok != f.requests.size()) state.SkipWithError("insert failed");
    state.PauseTiming();
    p.reset();
    state.ResumeTiming();
  }
  counters(state, f);
}
BENCHMARK(BM_SnapshotRebuild)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
