// Benchmarks for kvroute::ApproxRadixTree.
//
// Workloads (fixed seeds, built before timing):
//   * chat: `conversations` multi-turn chats over 8 shared system prompts of
//     1.5-3 KB; each request is the system prompt, the history and a new user
//     message, so consecutive requests of a conversation extend each other.
//     Conversations are interleaved turn by turn, as they arrive at a router,
//     and are pinned to one of 8 tenants. ASCII text (a `_mixed` variant adds
//     CJK and emoji words).
//   * branchy: 4 short prefixes and 20-60 random characters each, the
//     gateway's prefix_match_latency shape: short fragments, many nodes.
//   * random: random ASCII strings of a fixed length (the gateway's
//     insert_throughput/random_text).
//   * the project's three shapes, from workloads/generators.hpp (what
//     kvroute_workload writes, seed 1): chat, batch and branchy, replayed
//     by BM_ShapeReplay with kvroute_tree_replay's routing rule, next to
//     BM_ShapeMemcmp (memcmp over the same requests).
//
// Reported: time per operation, bytes/s over the request bytes, and
// counters: bytes_per_unit (stats().bytes / stats().units: tree bytes per
// distinct stored character), match_rate. BM_Memcmp is the reference speed:
// one memcmp over the same requests. Checksums (total matched units) catch a
// benchmark that stopped doing its work.
//
// Machine references (BM_Reference_*), for reading the tree's figures on the
// machine at hand: a dependent load at random over 2 MB to 256 MB (what one
// step of a descent through a tree that size costs when it misses), the
// first touch of fresh anonymous pages (what a growing tree pays the kernel
// per 4 KB), an uncontended atomic add and compare-exchange, and a written
// line handed between two threads.
//
// Scale (BM_*TreeSize, BM_*Length): match and insert on trees of 10^3 to
// 10^6 nodes (10^7 too when the environment sets KVROUTE_BENCH_HUGE=1: 2.7 GB
// and 76 s for both) and on requests of 64 B to 256 KB.
//
// Run: build/<dir>/benchmarks/kvroute_radix_tree_benchmark --benchmark_min_time=0.2
// (the default run takes 75-95 s on a 2-core machine.)

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kvroute/radix_tree.hpp"
#include "workloads/generators.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace {

using kvroute::ApproxRadixTree;
using kvroute::TenantId;

constexpr int kTenants = 8;

struct Workload {
  std::vector<std::string> requests;  // arrival order
  std::vector<TenantId> tenant;       // per request: the conversation's worker
  std::size_t bytes = 0;
};

// Random text from the workload generators' word source (the same draws as
// TextGen, so every shape shares one vocabulary).
class Words {
 public:
  explicit Words(std::uint64_t seed, bool mixed) : gen_(seed, mixed) {}

  std::string text(std::size_t min_bytes, std::size_t max_bytes) {
    std::string s;
    gen_.append_words(s, gen_.between(min_bytes, max_bytes));
    return s;
  }
  std::uint64_t next() { return gen_.next(); }

 private:
  kvbench::TextGen gen_;
};

Workload make_chat(std::size_t conversations, int turns, bool mixed = false) {
  Words w(0xC0FFEEu + conversations, mixed);
  std::vector<std::string> system;
  for (int i = 0; i < 8; ++i) system.push_back("<|system|>" + w.text(1500, 3000));
  std::vector<std::string> history(conversations);
  for (std::size_t c = 0; c < conversations; ++c) history[c] = system[w.next() % system.size()];
  Workload out;
  for (int t = 0; t < turns; ++t) {
    for (std::size_t c = 0; c < conversations; ++c) {
      history[c] += "<|user|>" + w.text(100, 400);
      out.requests.push_back(history[c]);
      out.tenant.push_back(static_cast<TenantId>(c % kTenants));
      out.bytes += history[c].size();
      history[c] += "<|assistant|>" + w.text(200, 800);
    }
  }
  return out;
}

Workload make_branchy(std::size_t n) {
  std::mt19937_64 rng(42);
  static const char* const kPrefixes[] = {"user_session_", "api_request_", "chat_message_",
                                          "doc_chunk_"};
  Workload out;
  for (std::size_t i = 0; i < n; ++i) {
    std::string s = kPrefixes[rng() % 4];
    const std::size_t len = 20 + rng() % 41;
    for (std::size_t k = 0; k < len; ++k) s += static_cast<char>('a' + rng() % 26);
    out.bytes += s.size();
    out.requests.push_back(std::move(s));
    out.tenant.push_back(static_cast<TenantId>(i % kTenants));
  }
  return out;
}

Workload make_random(std::size_t n, std::size_t len) {
  std::mt19937_64 rng(7 + len);
  Workload out;
  for (std::size_t i = 0; i < n; ++i) {
    std::string s(len, ' ');
    for (char& c : s) c = static_cast<char>(' ' + rng() % 95);
    out.bytes += s.size();
    out.requests.push_back(std::move(s));
    out.tenant.push_back(static_cast<TenantId>(i % kTenants));
  }
  return out;
}

void fill(ApproxRadixTree& tree, const Workload& w) {
  for (std::size_t i = 0; i < w.requests.size(); ++i) tree.insert(w.requests[i], w.tenant[i]);
}

void report_tree(benchmark::State& state, const ApproxRadixTree& tree) {
  const auto s = tree.stats();
  state.counters["nodes"] = static_cast<double>(s.nodes);
  state.counters["bytes_per_unit"] =
      s.units == 0 ? 0.0 : static_cast<double>(s.bytes) / static_cast<double>(s.units);
}

// --- reference: memcmp over the same bytes ----------------------------------

void BM_Memcmp(benchmark::State& state) {
  const Workload w =
      make_chat(static_cast<std::size_t>(state.range(0)), static_cast<int>(state.range(1)));
  std::vector<std::string> copies = w.requests;
  std::size_t i = 0, bytes = 0;
  for (auto _ : state) {
    const std::string& a = w.requests[i];
    benchmark::DoNotOptimize(std::memcmp(a.data(), copies[i].data(), a.size()));
    bytes += a.size();
    if (++i == w.requests.size()) i = 0;
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_Memcmp)->Args({512, 4});

// --- references: what this machine's memory and atomics cost --------------

// One dependent load per iteration, over a random cycle through every 64-byte
// line of range(0) MB: memory latency at that footprint, caches and TLB
// included.
void BM_Reference_PointerChase(benchmark::State& state) {
  constexpr std::size_t kLine = 64 / sizeof(std::size_t);  // words per line
  const std::size_t lines = (static_cast<std::size_t>(state.range(0)) << 20) / 64;
  std::vector<std::size_t> order(lines);
  for (std::size_t i = 0; i < lines; ++i) order[i] = i;
  std::mt19937_64 rng(11);
  for (std::size_t i = lines - 1; i > 0; --i) std::swap(order[i], order[rng() % (i + 1)]);
  std::vector<std::size_t> next(lines * kLine);
  for (std::size_t i = 0; i < lines; ++i) next[order[i] * kLine] = order[(i + 1) % lines] * kLine;
  std::size_t p = order[0] * kLine;
  for (auto _ : state) {
    p = next[p];
    benchmark::DoNotOptimize(p);
  }
  state.SetLabel(std::to_string(state.range(0)) + " MB");
}
BENCHMARK(BM_Reference_PointerChase)->Arg(2)->Arg(4)->Arg(8)->Arg(24)->Arg(256);

#if defined(__linux__)
// The first write to each 4 KB page of a fresh 4 MB anonymous mapping, per
// page (items); range(0) = 1 asks the kernel to populate the mapping up
// front (MAP_POPULATE), which is then timed instead.
void BM_Reference_FreshPages(benchmark::State& state) {
  constexpr std::size_t kBytes = std::size_t{4} << 20;
  constexpr std::size_t kPage = 4096;
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (state.range(0) != 0 ? MAP_POPULATE : 0);
  std::size_t pages = 0;
  for (auto _ : state) {
    void* m = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (m == MAP_FAILED) {
      state.SkipWithError("mmap failed");
      break;
    }
    auto* b = static_cast<volatile char*>(m);
    for (std::size_t off = 0; off < kBytes; off += kPage) b[off] = 1;
    pages += kBytes / kPage;
    state.PauseTiming();
    ::munmap(m, kBytes);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(pages));
  state.counters["s_per_page"] = benchmark::Counter(
      static_cast<double>(pages), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Reference_FreshPages)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
#endif

void BM_Reference_AtomicFetchAdd(benchmark::State& state) {
  std::atomic<std::uint64_t> x{0};
  for (auto _ : state) benchmark::DoNotOptimize(x.fetch_add(1, std::memory_order_relaxed));
  if (x.load() == 0) state.SkipWithError("no work done");
}
BENCHMARK(BM_Reference_AtomicFetchAdd);

void BM_Reference_CompareExchange(benchmark::State& state) {
  std::atomic<std::uint64_t> x{0};
  std::uint64_t v = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(x.compare_exchange_strong(v, v + 1, std::memory_order_acq_rel));
  }
  if (x.load() == 0) state.SkipWithError("no work done");
}
BENCHMARK(BM_Reference_CompareExchange);

// Two threads hand one written cache line back and forth: each waits for
// its turn, then writes the line. Time per iteration (wall time over both
// threads' iterations) is one handoff: the line moving from one core to the
// other, then written. About what a thread pays to read or write a node,
// claim or lock word the other core has just written, which is where two
// threads on one tree lose most (docs/benchmarks.md). Both threads run the
// same number of iterations, and each run
// adds an even count, so thread 0 always starts.
void BM_Reference_LineHandoff(benchmark::State& state) {
  alignas(128) static std::atomic<std::uint64_t> turn{0};
  const auto me = static_cast<std::uint64_t>(state.thread_index());
  for (auto _ : state) {
    for (int spins = 0; turn.load(std::memory_order_acquire) % 2 != me;) {
      if (++spins == 4096) {  // one core for both threads: let the other run
        std::this_thread::yield();
        spins = 0;
      }
    }
    turn.fetch_add(1, std::memory_order_release);
  }
}
BENCHMARK(BM_Reference_LineHandoff)->Threads(2)->UseRealTime();

// --- match on a built tree ---------------------------------------------------

void BM_MatchChat(benchmark::State& state) {
  const Workload w =
      make_chat(static_cast<std::size_t>(state.range(0)), static_cast<int>(state.range(1)));
  ApproxRadixTree tree;
  fill(tree, w);
  std::size_t i = 0, bytes = 0, matched = 0, input = 0;
  for (auto _ : state) {
    const auto m = tree.match(w.requests[i]);
    matched += m.matched;
    input += m.input;
    bytes += w.requests[i].size();
    if (++i == w.requests.size()) i = 0;
  }
  if (matched != input) state.SkipWithError("every request was inserted: all must match fully");
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  report_tree(state, tree);
}
// {conversations, turns}: tree size and request length grow with both.
BENCHMARK(BM_MatchChat)->Args({64, 1})->Args({512, 4})->Args({4096, 2})->Args({512, 8});

// A new user message on an existing conversation: matches the history, then
// stops inside nothing (the new text is unknown).
void BM_MatchChatNewTurn(benchmark::State& state) {
  const Workload w = make_chat(static_cast<std::size_t>(state.range(0)), 4);
  ApproxRadixTree tree;
  fill(tree, w);
  std::vector<std::string> queries;
  Words extra(99, false);
  for (const auto& r : w.requests) queries.push_back(r + "<|assistant|>" + extra.text(300, 600));
  std::size_t i = 0, bytes = 0, matched = 0, input = 0;
  for (auto _ : state) {
    const auto m = tree.match(queries[i]);
    matched += m.matched;
    input += m.input;
    bytes += queries[i].size();
    if (++i == queries.size()) i = 0;
  }
  if (matched == 0) state.SkipWithError("nothing matched");
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.counters["match_rate"] = static_cast<double>(matched) / static_cast<double>(input);
}
BENCHMARK(BM_MatchChatNewTurn)->Arg(512);

void BM_MatchRandom(benchmark::State& state) {
  const Workload w = make_random(1000, static_cast<std::size_t>(state.range(0)));
  ApproxRadixTree tree;
  fill(tree, w);
  std::size_t i = 0, matched = 0;
  for (auto _ : state) {
    matched += tree.match(w.requests[i]).matched;
    if (++i == w.requests.size()) i = 0;
  }
  if (matched == 0) state.SkipWithError("nothing matched");
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_MatchRandom)->Arg(10)->Arg(50)->Arg(100)->Arg(500);

// --- the router's step: match, then insert under the chosen tenant ---------

// Steady state: every request is already in the tree (a re-sent prompt).
void BM_MatchInsertChatHit(benchmark::State& state) {
  const Workload w =
      make_chat(static_cast<std::size_t>(state.range(0)), static_cast<int>(state.range(1)));
  ApproxRadixTree tree;
  fill(tree, w);
  std::size_t i = 0, bytes = 0;
  for (auto _ : state) {
    const auto m = tree.match(w.requests[i]);
    tree.insert(w.requests[i], m.has_tenant() ? m.tenant : w.tenant[i]);
    bytes += w.requests[i].size();
    if (++i == w.requests.size()) i = 0;
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  report_tree(state, tree);
}
BENCHMARK(BM_MatchInsertChatHit)->Args({512, 4})->Args({4096, 2});

// Growth: requests arrive in order into an empty tree (each extends its
// conversation's previous request); the tree is rebuilt when the workload
// runs out (rebuild not timed).
void BM_MatchInsertChatGrow(benchmark::State& state) {
  const bool mixed = state.range(2) != 0;
  const Workload w =
      make_chat(static_cast<std::size_t>(state.range(0)), static_cast<int>(state.range(1)), mixed);
  auto tree = std::make_unique<ApproxRadixTree>();
  std::size_t i = 0, bytes = 0;
  double bpu = 0;
  for (auto _ : state) {
    const auto m = tree->match(w.requests[i]);
    const TenantId t = m.match_rate() > 0.5f ? m.tenant : w.tenant[i];
    tree->insert(w.requests[i], t);
    bytes += w.requests[i].size();
    if (++i == w.requests.size()) {
      state.PauseTiming();
      const auto s = tree->stats();
      bpu = static_cast<double>(s.bytes) / static_cast<double>(s.units);
      tree = std::make_unique<ApproxRadixTree>();
      i = 0;
      state.ResumeTiming();
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  if (bpu == 0) {
    const auto s = tree->stats();
    bpu = s.units == 0 ? 0 : static_cast<double>(s.bytes) / static_cast<double>(s.units);
  }
  state.counters["bytes_per_unit"] = bpu;
}
BENCHMARK(BM_MatchInsertChatGrow)->Args({512, 4, 0})->Args({512, 4, 1});

// BM_MatchInsertChatGrow's step as one match_and_insert call (one descent):
// compare the two in the same run.
void BM_MatchAndInsertChatGrow(benchmark::State& state) {
  const bool mixed = state.range(2) != 0;
  const Workload w =
      make_chat(static_cast<std::size_t>(state.range(0)), static_cast<int>(state.range(1)), mixed);
  auto tree = std::make_unique<ApproxRadixTree>();
  std::size_t i = 0, bytes = 0, inserted = 0;
  for (auto _ : state) {
    const TenantId fallback = w.tenant[i];
    const auto r = tree->match_and_insert(
        w.requests[i],
        [fallback](const kvroute::RadixCandidates& c, const kvroute::MatchResult& m) noexcept {
          return !c.empty() && m.match_rate() > 0.5f ? kvroute::MostRecentlyUsed{}(c) : fallback;
        });
    inserted += r.insert.ok() ? 1 : 0;
    bytes += w.requests[i].size();
    if (++i == w.requests.size()) {
      state.PauseTiming();
      tree = std::make_unique<ApproxRadixTree>();
      i = 0;
      state.ResumeTiming();
    }
  }
  if (inserted != static_cast<std::size_t>(state.iterations()))
    state.SkipWithError("insert failed");
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_MatchAndInsertChatGrow)->Args({512, 4, 0})->Args({512, 4, 1});

// --- the generators' three shapes --------------------------------------------

// The generators' requests (workloads/generators.hpp, seed 1; the files of
// kvroute_workload hold the same text, with any line break made a space):
// chat (2,000 requests), batch (4,000) and branchy (20,000), 9-14 MB each.
// range(0): 0 = chat, 1 = batch, 2 = branchy.
const std::vector<std::string>& shape_requests(std::int64_t shape) {
  static const std::vector<std::string> chat = kvbench::make_workload("chat", 2000);
  static const std::vector<std::string> batch = kvbench::make_workload("batch", 4000);
  static const std::vector<std::string> branchy = kvbench::make_workload("branchy", 20000);
  return shape == 0 ? chat : shape == 1 ? batch : branchy;
}
const char* shape_name(std::int64_t shape) {
  return shape == 0 ? "chat" : shape == 1 ? "batch" : "branchy";
}

// One request per iteration, routed as kvroute_tree_replay routes: the
// matched tenant when more than 30% of the request matched, else the
// request's number mod 8, inserted by the same descent (match_and_insert).
// The tree starts over (untimed) after the last request. Compare with
// BM_ShapeMemcmp on the same shape: the replay's memcmp reference.
void BM_ShapeReplay(benchmark::State& state) {
  const auto& requests = shape_requests(state.range(0));
  auto tree = std::make_unique<ApproxRadixTree>();
  std::size_t i = 0, bytes = 0, affinity = 0, inserted = 0;
  for (auto _ : state) {
    const TenantId fallback = static_cast<TenantId>(i % kTenants);
    bool took_match = false;
    const auto r = tree->match_and_insert(requests[i], [&](const kvroute::RadixCandidates& c,
                                                           const kvroute::MatchResult& m) noexcept {
      took_match = !c.empty() && m.match_rate() > 0.3f;
      return took_match ? kvroute::MostRecentlyUsed{}(c) : fallback;
    });
    affinity += took_match ? 1 : 0;
    inserted += r.insert.ok() ? 1 : 0;
    bytes += requests[i].size();
    if (++i == requests.size()) {
      state.PauseTiming();
      report_tree(state, *tree);
      tree = std::make_unique<ApproxRadixTree>();
      i = 0;
      state.ResumeTiming();
    }
  }
  const auto done = static_cast<std::size_t>(state.iterations());
  if (inserted != done) state.SkipWithError("insert failed");
  // Over a whole file, chat and branchy route most requests by affinity
  // (about 99.7% and 99.96% of them); batch shares nothing.
  if (state.range(0) != 1 && done >= requests.size() && affinity * 2 < done)
    state.SkipWithError("too few affinity routes");
  if (done < requests.size()) report_tree(state, *tree);
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.counters["affinity"] =
      static_cast<double>(affinity) / static_cast<double>(state.iterations());
  state.SetLabel(shape_name(state.range(0)));
}
BENCHMARK(BM_ShapeReplay)->DenseRange(0, 2);

void BM_ShapeMemcmp(benchmark::State& state) {
  const auto& requests = shape_requests(state.range(0));
  static const std::vector<std::string> copies[3] = {shape_requests(0), shape_requests(1),
                                                     shape_requests(2)};
  const auto& same = copies[state.range(0)];
  std::size_t i = 0, bytes = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(std::memcmp(requests[i].data(), same[i].data(), requests[i].size()));
    bytes += requests[i].size();
    if (++i == requests.size()) i = 0;
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.SetLabel(shape_name(state.range(0)));
}
BENCHMARK(BM_ShapeMemcmp)->DenseRange(0, 2);

void BM_InsertRandom(benchmark::State& state) {
  const Workload w = make_random(1000, static_cast<std::size_t>(state.range(0)));
  ApproxRadixTree tree;
  std::size_t i = 0;
  for (auto _ : state) {
    tree.insert(w.requests[i], w.tenant[i]);
    if (++i == w.requests.size()) i = 0;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_InsertRandom)->Arg(10)->Arg(50)->Arg(100)->Arg(500);

// --- memory --------------------------------------------------------------------

// Builds a tree and reports its bytes per distinct stored character.
void BM_BuildMemory(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  const Workload w = kind == 0   ? make_chat(512, 4)
                     : kind == 1 ? make_chat(512, 4, true)
                                 : make_branchy(20000);
  double bpu = 0;
  std::size_t nodes = 0;
  for (auto _ : state) {
    ApproxRadixTree tree;
    fill(tree, w);
    const auto s = tree.stats();
    bpu = static_cast<double>(s.bytes) / static_cast<double>(s.units);
    nodes = s.nodes;
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(w.bytes));
  state.counters["bytes_per_unit"] = bpu;
  state.counters["nodes"] = static_cast<double>(nodes);
  state.SetLabel(kind == 0 ? "chat" : kind == 1 ? "chat_mixed" : "branchy");
}
BENCHMARK(BM_BuildMemory)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

// --- eviction ------------------------------------------------------------------

// Insert one new entry and evict back to the budget: the cost per operation
// must not grow with the tree (n entries held by the tenant).
void BM_InsertEvictSteady(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  ApproxRadixTree tree;
  std::mt19937_64 rng(3);
  auto entry = [&] {
    std::string s = "entry_";
    for (int k = 0; k < 24; ++k) s += static_cast<char>('a' + rng() % 26);
    return s;
  };
  for (std::size_t i = 0; i < n; ++i) tree.insert(entry(), 0);
  const std::size_t budget = tree.tenant_size(0);
  // Always a new entry: a counter makes it unique, the tail keeps it long.
  std::string fresh = "fresh_0000000000_" + entry();
  std::uint64_t serial = 0;
  std::size_t evicted = 0;
  for (auto _ : state) {
    std::uint64_t v = ++serial;
    for (std::size_t k = 15; k >= 6; --k, v /= 10) fresh[k] = static_cast<char>('0' + v % 10);
    tree.insert(fresh, 0);
    evicted += tree.evict_tenant(0, budget).claims;
  }
  if (evicted == 0) state.SkipWithError("nothing evicted");
  state.counters["claims_evicted_per_op"] =
      static_cast<double>(evicted) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_InsertEvictSteady)->Arg(1000)->Arg(10000)->Arg(100000);

// --- concurrency ---------------------------------------------------------------

// Threads sharing one prefilled tree (no growth, so no page faults and no
// allocator in the figure). range(0): 0 = chat (512 conversations of 4
// turns), 1 = branchy (20,000 agent fan-out requests, the replay's shape).
// range(1): 0 = match, then insert under the matched tenant (a router's
// step: shared locks, the path's stamp, the LRU lists); 1 = match whose
// chooser declines (readers only: nothing is written but the node locks'
// reader counts). Compare each mode's 2-thread time with its 1-thread time:
// what mode 1 loses is the cost of the reader locks alone.
void BM_TreeThreads(benchmark::State& state) {
  static const Workload chat = make_chat(512, 4);
  static const Workload branchy = [] {
    Workload w;
    w.requests = kvbench::make_branchy(20000);
    for (std::size_t i = 0; i < w.requests.size(); ++i) {
      w.bytes += w.requests[i].size();
      w.tenant.push_back(static_cast<TenantId>(i % kTenants));
    }
    return w;
  }();
  const Workload& w = state.range(0) == 0 ? chat : branchy;
  const bool readers_only = state.range(1) == 1;
  static ApproxRadixTree* tree = nullptr;
  if (state.thread_index() == 0) {
    tree = new ApproxRadixTree();
    fill(*tree, w);
  }
  // Google Benchmark synchronises threads at the start of the timed loop.
  std::size_t i = static_cast<std::size_t>(state.thread_index()) * 97, bytes = 0, matched = 0;
  for (auto _ : state) {
    const auto& r = w.requests[i % w.requests.size()];
    if (readers_only) {
      matched +=
          tree->match(r,
                      [](const kvroute::RadixCandidates&) noexcept { return kvroute::kNoTenant; })
              .matched;
    } else {
      const auto m = tree->match(r);
      matched += m.matched;
      tree->insert(r, m.has_tenant() ? m.tenant : 0);
    }
    bytes += r.size();
    ++i;
  }
  if (matched == 0) state.SkipWithError("nothing matched");
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.SetLabel(std::string(state.range(0) == 0 ? "chat" : "branchy") +
                 (readers_only ? " readers only" : " match+insert"));
  if (state.thread_index() == 0) {
    delete tree;
    tree = nullptr;
  }
}
BENCHMARK(BM_TreeThreads)->ArgsProduct({{0, 1}, {0, 1}})->Threads(1)->Threads(2)->UseRealTime();

// --- scale: tree size ----------------------------------------------------------

// A tree of at least `nodes` nodes: random 32-letter keys under 8 tenants
// (each key adds about two nodes: a leaf and a split). Built once per size
// and kept for the benchmarks at that size.
struct SizedTree {
  std::size_t nodes = 0;
  ApproxRadixTree tree;
  std::vector<std::string> keys;
};

std::string random_letters(std::mt19937_64& rng, std::size_t n) {
  std::string s(n, 'a');
  for (char& c : s) c = static_cast<char>('a' + rng() % 26);
  return s;
}

SizedTree& sized_tree(std::size_t nodes) {
  static std::unique_ptr<SizedTree> cached;
  if (cached != nullptr && cached->nodes == nodes) return *cached;
  cached.reset();
  auto t = std::make_unique<SizedTree>();
  t->nodes = nodes;
  std::mt19937_64 rng(1000 + nodes);
  std::size_t i = 0;
  while (t->tree.stats().nodes < nodes) {
    std::string k = random_letters(rng, 32);
    t->tree.insert(k, static_cast<TenantId>(i++ % kTenants));
    if (t->keys.size() < 4096) {
      t->keys.push_back(std::move(k));
    } else if (rng() % 64 == 0) {
      t->keys[rng() % t->keys.size()] = std::move(k);
    }
  }
  cached = std::move(t);
  return *cached;
}

void BM_MatchTreeSize(benchmark::State& state) {
  SizedTree& t = sized_tree(static_cast<std::size_t>(state.range(0)));
  std::size_t i = 0, matched = 0, input = 0;
  for (auto _ : state) {
    const auto m = t.tree.match(t.keys[i]);
    matched += m.matched;
    input += m.input;
    if (++i == t.keys.size()) i = 0;
  }
  // Every key was inserted and nothing evicts: each must match fully.
  if (matched != input || matched == 0) state.SkipWithError("a stored key did not match fully");
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  report_tree(state, t.tree);
}

// Inserts a new key (16 letters of a stored key + 16 new ones: a split and a
// leaf the first time, a leaf and claims on a 16-letter path afterwards)
// under a tenant of its own, which is removed every 4096 inserts (not timed)
// so that the tree keeps its size.
void BM_InsertTreeSize(benchmark::State& state) {
  SizedTree& t = sized_tree(static_cast<std::size_t>(state.range(0)));
  std::mt19937_64 rng(5);
  std::vector<std::string> fresh;
  for (const auto& k : t.keys) fresh.push_back(k.substr(0, 16) + random_letters(rng, 16));
  constexpr TenantId kFresh = 100;
  std::size_t i = 0, ok = 0;
  for (auto _ : state) {
    ok += t.tree.insert(fresh[i], kFresh).ok() ? 1 : 0;
    if (++i == fresh.size()) {
      state.PauseTiming();
      t.tree.remove_tenant(kFresh);
      i = 0;
      state.ResumeTiming();
    }
  }
  t.tree.remove_tenant(kFresh);
  if (ok != static_cast<std::size_t>(state.iterations())) state.SkipWithError("an insert failed");
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  report_tree(state, t.tree);
}

BENCHMARK(BM_MatchTreeSize)->RangeMultiplier(10)->Range(1000, 1000000);
BENCHMARK(BM_InsertTreeSize)->RangeMultiplier(10)->Range(1000, 1000000);

// 10^7 nodes only on request (memory and build time).
[[maybe_unused]] const bool kHugeRegistered = [] {
  const char* e = std::getenv("KVROUTE_BENCH_HUGE");
  if (e == nullptr || std::strcmp(e, "1") != 0) return false;
  benchmark::RegisterBenchmark("BM_MatchTreeSize", BM_MatchTreeSize)->Arg(10000000);
  benchmark::RegisterBenchmark("BM_InsertTreeSize", BM_InsertTreeSize)->Arg(10000000);
  return true;
}();

// --- scale: request length -----------------------------------------------------

// 64 stored requests of `len` bytes in 8 groups; a group shares its first
// half. Match: every stored request again (a full match through a split).
// Insert: a new request of the same length on a group's half (a new leaf of
// len/2 bytes), under a tenant removed every 64 inserts (not timed).
struct LengthSet {
  std::vector<std::string> stored, fresh;
  std::size_t bytes = 0;
};

LengthSet make_length_set(std::size_t len) {
  std::mt19937_64 rng(77 + len);
  LengthSet s;
  std::vector<std::string> half;
  for (int g = 0; g < 8; ++g) half.push_back(random_letters(rng, len / 2));
  for (int i = 0; i < 64; ++i) {
    s.stored.push_back(half[static_cast<std::size_t>(i % 8)] + random_letters(rng, len - len / 2));
    s.fresh.push_back(half[static_cast<std::size_t>(i % 8)] + random_letters(rng, len - len / 2));
  }
  return s;
}

void BM_MatchLength(benchmark::State& state) {
  const LengthSet s = make_length_set(static_cast<std::size_t>(state.range(0)));
  ApproxRadixTree tree;
  for (std::size_t i = 0; i < s.stored.size(); ++i)
    tree.insert(s.stored[i], static_cast<TenantId>(i % kTenants));
  std::size_t i = 0, bytes = 0, matched = 0, input = 0;
  for (auto _ : state) {
    const auto m = tree.match(s.stored[i]);
    matched += m.matched;
    input += m.input;
    bytes += s.stored[i].size();
    if (++i == s.stored.size()) i = 0;
  }
  if (matched != input || matched == 0) state.SkipWithError("a stored request did not match fully");
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
}

void BM_InsertLength(benchmark::State& state) {
  const LengthSet s = make_length_set(static_cast<std::size_t>(state.range(0)));
  ApproxRadixTree tree;
  for (std::size_t i = 0; i < s.stored.size(); ++i)
    tree.insert(s.stored[i], static_cast<TenantId>(i % kTenants));
  constexpr TenantId kFresh = 100;
  std::size_t i = 0, bytes = 0, ok = 0;
  for (auto _ : state) {
    ok += tree.insert(s.fresh[i], kFresh).ok() ? 1 : 0;
    bytes += s.fresh[i].size();
    if (++i == s.fresh.size()) {
      state.PauseTiming();
      tree.remove_tenant(kFresh);
      i = 0;
      state.ResumeTiming();
    }
  }
  if (ok != static_cast<std::size_t>(state.iterations())) state.SkipWithError("an insert failed");
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
}

BENCHMARK(BM_MatchLength)->RangeMultiplier(4)->Range(64, 256 << 10);
BENCHMARK(BM_InsertLength)->RangeMultiplier(4)->Range(64, 256 << 10);

// --- unit counting -------------------------------------------------------------

// Every match counts the unmatched tail of its request and every insert the
// text of its new leaf, in code points. arg 1: detail::utf8_count (ASCII
// runs 64 bytes a step with SSE2); arg 0: the same count with the portable
// ascii_prefix_words (32 bytes a step), the tree's count before. Chat-like
// text with a little UTF-8 (mixed = 1) or none.
void BM_CountUnits(benchmark::State& state) {
  const bool simd = state.range(0) != 0;
  const bool mixed = state.range(1) != 0;
  std::vector<std::string> texts;
  Words w(11, mixed);
  for (int i = 0; i < 64; ++i) texts.push_back(w.text(1000, 1400));
  std::size_t i = 0, units = 0, bytes = 0;
  for (auto _ : state) {
    const std::string& t = texts[i];
    units += simd ? kvroute::detail::utf8_count(t)
                  : kvroute::detail::utf8_count_by<kvroute::detail::ascii_prefix_words>(t);
    bytes += t.size();
    if (++i == texts.size()) i = 0;
  }
  benchmark::DoNotOptimize(units);
  if (units == 0) state.SkipWithError("nothing counted");
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.SetLabel(simd ? "utf8_count" : "words");
}
BENCHMARK(BM_CountUnits)->Args({0, 0})->Args({1, 0})->Args({0, 1})->Args({1, 1});

}  // namespace
