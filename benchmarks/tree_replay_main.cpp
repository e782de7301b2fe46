// kvroute_tree_replay: replays a file of requests through one
// kvroute::ApproxRadixTree the way a cache-aware router uses it, and prints
// one line of JSON. The interface is shared with other implementations'
// replay tools so that results compare on the same input:
//
//   kvroute_tree_replay FILE [--workers N] [--evict-every K --max-size M] [--threads T]
//
// and options of its own, below (the usage message lists them all).
//
// FILE holds one request text per line (kvroute_workload writes such files).
// For line i (0-based): match it; if the match rate is above 0.3 take the
// matched tenant (an "affinity route"), else tenant i mod N; insert the line
// under that tenant; after every K-th line, evict every tenant to M
// characters. With T threads, line i goes to thread i mod T (by default;
// see --partition); all threads share the tree, and the thread that
// handles line i also runs the eviction due after it.
//
// Output fields: requests, chars (code points), bytes, seconds (wall time of
// the replay, reading the file excluded), chars_per_second, bytes_per_second,
// affinity_routes, matched_chars, tree_nodes, tree_bytes (every byte the
// tree allocated), tree_chars (distinct stored characters),
// tree_bytes_per_char, rss_bytes and rss_peak_bytes (/proc/self/status),
// memcmp_seconds (one memcmp of each line against a copy of itself, measured
// in this process, best of three passes: the machine's reference speed) and memcmp_ratio
// (memcmp_seconds / seconds: the replay's speed as a fraction of memcmp's),
// cpu_seconds (CPU time of the replay, all threads: on a loaded machine a
// steadier figure than wall time for one thread), evict_seconds (time
// inside evict(), summed over threads), evicted_chars, memcmp_cpu_seconds
// and cpu_memcmp_ratio (the same ratio in CPU time: on a loaded machine the
// steadier one for a single thread; with T threads it is per CPU second),
// workers, threads, evict_every, max_size, us_per_request, private (true
// with --private), worker_thread (true when the replay ran on threads other
// than the main one: --worker-thread, or T > 1), memcmp_threads_seconds and
// memcmp_scaling (below), page_faults (the process's page faults during the
// replay: memory the tree touched for the first time, or again after the
// allocator gave it back to the system), sys_seconds (the part of
// cpu_seconds spent in the kernel: mostly those page faults),
// tree_reserved_bytes (what the tree holds from the system: tree_bytes plus
// its arena's free space).
//
// Each line is one ApproxRadixTree::match_and_insert call (one descent for
// the match and the insert that follows it); --separate runs match, then
// insert, as two calls, for comparison in the same build.
//
// Scaling references, for judging a T-thread figure on the machine at hand:
// memcmp_threads_seconds is the memcmp reference with the lines dealt to T
// threads as the replay deals them (best of three: how far the machine's
// memory system scales the plain reading of the same text), and
// memcmp_scaling = memcmp_seconds / memcmp_threads_seconds. --private gives
// each of the T threads a tree of its own and has every thread replay every
// line (T times the work, nothing shared between the threads; requests,
// chars, bytes and the tree figures count all of it, and the memcmp ratios
// compare with T memcmp passes): T times the one-thread seconds over the
// --private seconds is what T threads reach when they share no tree, the
// ceiling for the shared tree's scaling on that machine. --partition
// changes the deal: each of the T threads takes the lines of whole prefix
// groups (lines with the same first 24 bytes: on chat a system prompt, on
// branchy a root context; groups dealt largest first to the thread with the
// fewest lines), so that two threads' requests share no more of a path than
// the groups' first bytes have in common (the tag every line of
// kvroute_workload's files starts with); with --private too each thread
// replays only those lines, in a tree of its own (the work split, not
// repeated). The memcmp reference deals the lines the same way. T-thread
// seconds against one thread's then say how far the same work scales when
// the threads' requests do not meet on their paths (but the groups differ
// in cost, and each thread's part of the tree is smaller than the whole).
// Output: partition (true with it) and partition_max_lines (the most lines
// a thread took; 0 without it). It does not go with --window or --reads.
// --worker-thread runs a one-thread replay on a thread of its own instead
// of the main thread, as every thread of a T-thread run is: the main thread
// allocates from glibc's main arena, a new thread from an arena of its own;
// while the tree allocated with malloc the two did not cost the same, and
// with the tree's own arena about the same on chat (see
// benchmarks/README.md).
// One-thread seconds with --worker-thread are the like-for-like base for a
// T-thread figure.
// --huge-pages builds the trees with Options::huge_pages (transparent huge
// pages for their 2 MB memory regions). --recency-shift S (0 to 16, default
// 0) builds them with Options::recency_shift = S: one recency step per 2^S
// stamps, so that requests sharing a path's upper claims do not all rewrite
// them; recency_shift is also in the output, with claims_per_stamp (the
// claims a path stamp wrote on average, RadixTreeStats::stamped_claims /
// stamps, over all trees). descent_fallbacks: RadixTreeStats'
// descent_fallbacks over all trees (descents that took the locked walk).
//
// Threads deal freely by default: each takes its lines as fast as it goes,
// so one can drift ahead of another by hundreds of lines over a long file,
// and a conversation's turn k+1 can then reach the tree before the turn k
// it extends, which a router never sees (turn k+1 is sent after turn k's
// reply). It then misses the match, goes to another tenant, and the
// splits it causes leave buffers behind. --window W (output field
// `window`) keeps the threads within W lines of each other (waiting,
// spinning and then yielding, counts in the wall time): with W = 8 two
// threads on chat 100k route like one
// (affinity_routes 99,985 of 100,000 against 99,526 free; 1.11 bytes per
// character against 1.26-1.36), at no gain in speed (benchmarks/README.md).
//
// --scaling R, after the replay above, runs R rounds of a one-thread replay
// (on a worker thread) and a T-thread one (with --private, T private
// trees), each on fresh trees in this process, and adds scaling_rounds,
// one_thread_seconds_best and _median, threads_seconds_best and _median,
// and scaling_best and scaling_median (one-thread seconds over T-thread
// seconds, times T with --private alone; from the best runs and from the
// medians). Without a file to load between runs, many rounds take
// little time and the two kinds alternate closely. On the VM measured in
// benchmarks/README.md two threads scaled better in these rounds than as
// the first replay of a process; it gives both.
// Each round also measures the fresh-memory reference: as many bytes as
// the first round's one-thread tree holds from the system at its end
// (fresh_memory_bytes: its tree_reserved_bytes), obtained through a new
// arena of the kind the tree's fragments and blocks come from
// (detail::BlockArena, with --huge-pages as the trees; the tree's nodes,
// claims and tenant states, counted too, come from malloc) in 4 KB blocks,
// one byte of each written, by one thread and by T threads taking a share
// each (with --private alone each the whole amount, as each builds a whole
// tree), in alternating order. It adds fresh_memory_one_seconds_median,
// fresh_memory_threads_seconds_median and fresh_memory_scaling_median
// (all 0 when the tree holds nothing from the system): about what getting
// its memory costs a replay on a fresh tree, measured alone, and how far T
// threads doing nothing else scale it. Within a replay that work falls
// between other work, and threads overlap less on it than here.
//
// --reads R measures how far T threads scale the replay's descents alone,
// with nothing written: after the above, a one-thread replay of every
// line, without eviction, builds a tree (with --private, one per thread)
// untimed; then R rounds, each reading every line on one worker thread and
// then the lines dealt to T threads, line i to thread i mod T (with
// --private too: thread k reads its lines in tree k). A read is
// match_and_insert with a decider that declines: the descent and locks of
// the replay's match, nothing inserted or stamped; on the finished tree
// every line matches in full. --separate and --window do not apply to the
// reads. Adds reads_rounds, reads_matched_chars (one pass's matched
// characters; the T threads' pass must match as many, else the replay
// fails), reads_one_seconds_median, reads_threads_seconds_median,
// reads_scaling_best and reads_scaling_median: how far T threads scale
// the reading part of the replay's work on this machine, a reference for
// the replay's own scaling.
//
// Defaults: --workers 8, no eviction, --threads 1, --window 0 (free),
// no --scaling or --reads rounds. Errors (bad arguments, an
// unreadable file) print a message to stderr and exit with status 2 (usage)
// or 1 (I/O).
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include "kvroute/detail/radix/arena.hpp"
#include "kvroute/radix_tree.hpp"

namespace {

int usage(const std::string& msg) {
  std::fprintf(stderr,
               "kvroute_tree_replay: %s\n"
               "usage: kvroute_tree_replay FILE [--workers N] [--evict-every K --max-size M] "
               "[--threads T] [--separate] [--private] [--worker-thread] [--huge-pages] "
               "[--recency-shift S] [--window W] [--partition] [--scaling R] [--reads R]\n",
               msg.c_str());
  return 2;
}

// A decimal integer, digits only (zero too).
bool parse_count(const char* s, std::uint64_t& out) {
  if (s == nullptr || *s < '0' || *s > '9') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (*end != '\0' || errno != 0) return false;
  out = v;
  return true;
}

bool parse_positive(const char* s, std::uint64_t& out) {
  std::uint64_t v = 0;
  if (!parse_count(s, v) || v == 0) return false;
  out = v;
  return true;
}

// An integer from 0 to ApproxRadixTree::kMaxRecencyShift (16), digits only.
bool parse_shift(const char* s, unsigned& out) {
  if (s == nullptr || *s == '\0' || std::strlen(s) > 2) return false;
  unsigned v = 0;
  for (const char* p = s; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + static_cast<unsigned>(*p - '0');
  }
  if (v > kvroute::ApproxRadixTree::kMaxRecencyShift) return false;
  out = v;
  return true;
}

std::size_t proc_status_kb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::size_t n = std::strlen(field);
  while (std::getline(f, line)) {
    if (line.compare(0, n, field) == 0) return std::strtoull(line.c_str() + n, nullptr, 10) * 1024;
  }
  return 0;
}

// What the whole process (all threads) has used so far, from one getrusage.
struct Usage {
  double cpu_seconds = 0;  // user + kernel
  // Kernel only: on a VM where a page fault is expensive, the part of
  // cpu_seconds the tree's first touches of memory cost.
  double sys_seconds = 0;
  std::size_t page_faults = 0;  // minor and major
};

Usage usage() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  const double sys = seconds(u.ru_stime);
  return {seconds(u.ru_utime) + sys, sys, static_cast<std::size_t>(u.ru_minflt + u.ru_majflt)};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs f(k) for k = 0 .. n-1, each on a thread of its own, and waits for
// them all (every timed multi-thread pass of the replay runs this way).
template <class F>
void on_threads(std::size_t n, F f) {
  std::vector<std::thread> pool;
  for (std::size_t k = 0; k < n; ++k) pool.emplace_back(f, k);
  for (auto& th : pool) th.join();
}

// One line through `tree` by the replay's rule: the matched tenant when the
// match rate is above 0.3 (`affine`), else tenant line mod `workers`.
kvroute::MatchInsertResult route_line(kvroute::ApproxRadixTree& tree, const std::string& text,
                                      std::size_t line, std::uint64_t workers, bool& affine) {
  const auto fallback = static_cast<kvroute::TenantId>(line % workers);
  return tree.match_and_insert(
      text, [&](const kvroute::RadixCandidates& c, const kvroute::MatchResult& m) noexcept {
        affine = !c.empty() && m.match_rate() > 0.3f;
        return affine ? kvroute::MostRecentlyUsed{}(c) : fallback;
      });
}

// What a replay is asked to do, besides its lines and threads.
struct ReplayConfig {
  std::uint64_t workers = 8;
  std::uint64_t evict_every = 0;
  std::uint64_t max_size = 0;
  std::uint64_t window = 0;
  bool separate = false;
  bool private_trees = false;
  bool huge_pages = false;
  unsigned recency_shift = 0;
  // --partition: the thread each line goes to (null: line i to thread
  // i mod T).
  const std::vector<std::uint16_t>* partition = nullptr;
};

// Whether every thread replays every line: --private without --partition
// (T times the work).
bool repeats_work(const ReplayConfig& cfg) { return cfg.private_trees && cfg.partition == nullptr; }

// What one replay did. The tree figures are summed over the trees (with
// --private), and read, like the RSS, before the trees are destroyed.
struct ReplayResult {
  double seconds = 0, cpu_seconds = 0, sys_seconds = 0;
  double evict_seconds = 0;  // summed over threads
  std::size_t page_faults = 0, rss_bytes = 0, rss_peak_bytes = 0;
  // Summed over the threads' requests.
  std::size_t affinity = 0, matched = 0, chars = 0, failed = 0, evicted = 0;
  bool in_step = false;
  kvroute::RadixTreeStats stats;
};

// Fresh trees built as cfg asks: one, or with --private one per thread.
std::vector<std::unique_ptr<kvroute::ApproxRadixTree>> make_trees(const ReplayConfig& cfg,
                                                                  std::size_t threads) {
  kvroute::ApproxRadixTree::Options options;
  options.huge_pages = cfg.huge_pages;
  options.recency_shift = cfg.recency_shift;
  std::vector<std::unique_ptr<kvroute::ApproxRadixTree>> trees;
  for (std::size_t k = 0; k < (cfg.private_trees ? threads : 1); ++k) {
    trees.push_back(std::make_unique<kvroute::ApproxRadixTree>(options));
  }
  return trees;
}

// Replays `lines` with `threads` threads through fresh trees: on the
// calling thread when threads == 1 and !worker_thread, else on threads of
// their own.
ReplayResult replay(const std::vector<std::string>& lines, const ReplayConfig& cfg,
                    std::size_t threads, bool worker_thread) {
  const std::uint64_t workers = cfg.workers, evict_every = cfg.evict_every, max_size = cfg.max_size,
                      window = cfg.window;
  const bool separate = cfg.separate, private_trees = cfg.private_trees;
  ReplayResult out;
  // One tree, or with --private one per thread.
  std::vector<std::unique_ptr<kvroute::ApproxRadixTree>> trees = make_trees(cfg, threads);
  std::atomic<std::size_t> affinity{0}, matched{0}, chars{0}, failed{0}, evicted{0};
  std::mutex evict_mu;
  double evict_seconds = 0;  // summed over threads
  // --window W: each thread publishes the next line it will take, and
  // before each line waits until no other thread is more than W lines
  // behind it (the thread furthest behind never waits, so this cannot
  // deadlock).
  struct alignas(64) Progress {
    std::atomic<std::size_t> next{0};
  };
  constexpr std::size_t kSpins = 4096;
  constexpr std::size_t kDone = static_cast<std::size_t>(-1);
  const std::vector<std::uint16_t>* const partition = threads > 1 ? cfg.partition : nullptr;
  const bool in_step = window != 0 && threads > 1 && !private_trees;
  std::vector<Progress> progress(threads);
  for (std::size_t k = 0; k < threads; ++k) progress[k].next.store(k, std::memory_order_relaxed);
  const auto wait_for_others = [&](std::size_t self, std::size_t line) {
    for (std::size_t k = 0; k < threads; ++k) {
      if (k == self) continue;
      // Spin a while (the other thread is a request or two away), then
      // yield (more threads than cores).
      for (std::size_t spins = 0;; ++spins) {
        const std::size_t other = progress[k].next.load(std::memory_order_acquire);
        if (other == kDone || other + window >= line) break;
        if (spins >= kSpins) std::this_thread::yield();
      }
    }
  };
  const Usage used0 = usage();
  const auto t0 = std::chrono::steady_clock::now();
  auto run = [&](std::size_t first) {
    std::size_t my_affinity = 0, my_matched = 0, my_chars = 0, my_failed = 0, my_evicted = 0;
    double my_evict_seconds = 0;
    kvroute::ApproxRadixTree& tree = *trees[private_trees ? first : 0];
    // Every line (--private), the lines of this thread's groups
    // (--partition) or every T-th line.
    const bool scan = private_trees || partition != nullptr;
    const std::size_t from = scan ? 0 : first;
    const std::size_t step = scan ? 1 : threads;
    for (std::size_t i = from; i < lines.size(); i += step) {
      if (partition != nullptr && (*partition)[i] != first) continue;
      if (in_step) {
        progress[first].next.store(i, std::memory_order_release);
        wait_for_others(first, i);
      }
      const std::string& line = lines[i];
      const auto fallback = static_cast<kvroute::TenantId>(i % workers);
      if (separate) {
        const kvroute::MatchResult m = tree.match(line);
        kvroute::TenantId t = fallback;
        if (m.has_tenant() && m.match_rate() > 0.3f) {
          t = m.tenant;
          ++my_affinity;
        }
        my_matched += m.matched;
        my_chars += m.input;
        if (!tree.insert(line, t).ok()) ++my_failed;
      } else {
        bool affine = false;
        const kvroute::MatchInsertResult r = route_line(tree, line, i, workers, affine);
        my_affinity += affine ? 1 : 0;
        my_matched += r.match.matched;
        my_chars += r.match.input;
        if (!r.insert.ok()) ++my_failed;
      }
      if (evict_every != 0 && (i + 1) % evict_every == 0) {
        const auto e0 = std::chrono::steady_clock::now();
        my_evicted += tree.evict(max_size).units;
        my_evict_seconds += seconds_since(e0);
      }
    }
    progress[first].next.store(kDone, std::memory_order_release);
    affinity += my_affinity;
    matched += my_matched;
    chars += my_chars;
    failed += my_failed;
    evicted += my_evicted;
    std::lock_guard<std::mutex> g(evict_mu);
    evict_seconds += my_evict_seconds;
  };
  if (threads == 1 && !worker_thread) {
    run(0);
  } else {
    on_threads(threads, run);
  }
  out.seconds = seconds_since(t0);
  const Usage used1 = usage();
  out.cpu_seconds = used1.cpu_seconds - used0.cpu_seconds;
  out.sys_seconds = used1.sys_seconds - used0.sys_seconds;
  out.page_faults = used1.page_faults - used0.page_faults;
  out.evict_seconds = evict_seconds;
  out.affinity = affinity.load();
  out.matched = matched.load();
  out.chars = chars.load();
  out.failed = failed.load();
  out.evicted = evicted.load();
  out.in_step = in_step;
  out.rss_bytes = proc_status_kb("VmRSS:");
  out.rss_peak_bytes = proc_status_kb("VmHWM:");
  kvroute::RadixTreeStats& s = out.stats;
  for (const auto& tree : trees) {
    const kvroute::RadixTreeStats one = tree->stats();
    s.nodes += one.nodes;
    s.bytes += one.bytes;
    s.units += one.units;
    s.reserved_bytes += one.reserved_bytes;
    s.stamps += one.stamps;
    s.stamped_claims += one.stamped_claims;
    s.descent_fallbacks += one.descent_fallbacks;
  }
  return out;
}

// --scaling R: R rounds, each a one-thread replay (on a worker thread, as
// every thread of a T-thread replay runs) and then a T-thread replay, on
// fresh trees, in one process: no file to load between them, so that many
// rounds take little time and the two kinds of run alternate closely.
struct Scaling {
  std::uint64_t rounds = 0;
  std::size_t failed = 0;  // inserts that failed in the rounds (out of memory)
  double one_best = 0, one_median = 0, threads_best = 0, threads_median = 0;
  double best = 0, median = 0;  // one-thread seconds / T-thread seconds (x T with --private)
};

// The --scaling rounds: the replays' times, and the fresh-memory reference's.
struct ScalingRounds {
  Scaling replays;
  Scaling fresh;                // fresh.failed: rounds with a pass the arena could not serve
  std::size_t fresh_bytes = 0;  // what one thread's pass obtains
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Fills out's bests, medians and ratios from R rounds' one-thread and
// T-thread seconds; `work` is how many one-thread replays a T-thread run
// does (T with --private, else 1).
void summarize(const std::vector<double>& one, const std::vector<double>& many, double work,
               Scaling& out) {
  out.one_best = *std::min_element(one.begin(), one.end());
  out.threads_best = *std::min_element(many.begin(), many.end());
  out.one_median = median_of(one);
  out.threads_median = median_of(many);
  out.best = out.threads_best > 0 ? work * out.one_best / out.threads_best : 0.0;
  out.median = out.threads_median > 0 ? work * out.one_median / out.threads_median : 0.0;
}

// The fresh-memory reference: `bytes` of memory the system has not handed
// out yet, obtained through a new arena of the kind the tree's fragments
// and blocks come from (detail::BlockArena: its regions, and its pages
// filled ahead), in blocks of kFreshBlock bytes, one byte of each written,
// on `threads` threads: each obtains `bytes` with `private_trees` (as each
// builds a whole tree), else its share of it. (The tree's nodes, claims
// and tenant states, which its reserved bytes also count, come from
// malloc instead.) Returns the wall time (thread start to join, as a
// replay's), or a negative value when a block could not be had.
constexpr std::size_t kFreshBlock = 4096;

double fresh_memory_seconds(std::size_t bytes, std::size_t threads, bool private_trees,
                            bool huge_pages) {
  // direct = false even under AddressSanitizer, where the tree's own arena
  // passes every block to malloc: this arena's blocks are never freed one
  // by one, and its regions go back whole when it is destroyed.
  kvroute::detail::BlockArena arena(huge_pages, /*direct=*/false);
  const std::size_t each = private_trees ? bytes : bytes / threads;
  const std::size_t blocks_each = (each + kFreshBlock - 1) / kFreshBlock;
  std::atomic<std::size_t> taken{0};
  const auto t0 = std::chrono::steady_clock::now();
  on_threads(threads, [&arena, &taken, blocks_each](std::size_t) {
    std::size_t mine = 0;
    for (; mine < blocks_each; ++mine) {
      auto* p = static_cast<volatile char*>(arena.allocate(kFreshBlock));
      if (p == nullptr) break;
      p[0] = 1;
    }
    taken += mine;
  });
  const double t = seconds_since(t0);
  // The arena gives everything back when it goes, after the clock stopped.
  return taken == blocks_each * threads ? t : -1.0;
}

ScalingRounds measure_scaling(const std::vector<std::string>& lines, const ReplayConfig& cfg,
                              std::size_t threads, std::uint64_t rounds) {
  ScalingRounds out;
  out.replays.rounds = out.fresh.rounds = rounds;
  if (rounds == 0) return out;
  ReplayConfig one_cfg = cfg;
  one_cfg.private_trees = false;
  one_cfg.partition = nullptr;
  const double work = repeats_work(cfg) ? static_cast<double>(threads) : 1.0;
  std::vector<double> one, many, fresh_one, fresh_many;
  for (std::uint64_t k = 0; k < rounds; ++k) {
    const ReplayResult a = replay(lines, one_cfg, 1, true);
    const ReplayResult b = replay(lines, cfg, threads, false);
    one.push_back(a.seconds);
    many.push_back(b.seconds);
    out.replays.failed += a.failed + b.failed;
    // As much memory as the one-thread replay's tree holds from the system
    // (none: no reference), one thread's pass first in even rounds and
    // second in odd ones, so that neither always follows the same replay.
    if (k == 0) out.fresh_bytes = a.stats.reserved_bytes;
    if (out.fresh_bytes == 0) continue;
    double f1 = 0, ft = 0;
    if (k % 2 == 0) f1 = fresh_memory_seconds(out.fresh_bytes, 1, false, cfg.huge_pages);
    ft = fresh_memory_seconds(out.fresh_bytes, threads, repeats_work(cfg), cfg.huge_pages);
    if (k % 2 == 1) f1 = fresh_memory_seconds(out.fresh_bytes, 1, false, cfg.huge_pages);
    if (f1 < 0 || ft < 0) ++out.fresh.failed;
    fresh_one.push_back(f1);
    fresh_many.push_back(ft);
  }
  summarize(one, many, work, out.replays);
  if (!fresh_one.empty()) summarize(fresh_one, fresh_many, work, out.fresh);
  return out;
}

// --reads R: the replay's descents alone, on trees built beforehand.
struct ReadScaling {
  Scaling times;               // failed: inserts that failed building the trees
  std::size_t matched = 0;     // matched characters of one pass over the lines
  std::size_t mismatches = 0;  // T-thread passes that matched another total
};

// --partition: lines that share their first kPrefixGroupBytes bytes (on
// chat a system prompt, on branchy a root context) form a group, and the
// groups go to the threads largest first, each to the thread with the
// fewest lines so far (ties: the lowest thread, then the group whose
// prefix sorts first), so that a thread takes whole groups and the
// threads about as many lines each. Returns the thread of each line.
constexpr std::size_t kPrefixGroupBytes = 24;
std::vector<std::uint16_t> deal_by_prefix(const std::vector<std::string>& lines,
                                          std::size_t threads) {
  std::map<std::string_view, std::size_t> count;
  for (const std::string& l : lines) {
    ++count[std::string_view(l).substr(0, kPrefixGroupBytes)];
  }
  std::vector<std::pair<std::size_t, std::string_view>> groups;
  for (const auto& [prefix, n] : count) groups.emplace_back(n, prefix);
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::size_t> load(threads, 0);
  std::map<std::string_view, std::uint16_t> owner;
  for (const auto& [n, prefix] : groups) {
    const auto k =
        static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[k] += n;
    owner[prefix] = static_cast<std::uint16_t>(k);
  }
  std::vector<std::uint16_t> deal;
  deal.reserve(lines.size());
  for (const std::string& l : lines) {
    deal.push_back(owner[std::string_view(l).substr(0, kPrefixGroupBytes)]);
  }
  return deal;
}

// The most lines one thread takes under `deal` (0 without one): about
// lines / T when the groups split evenly.
std::size_t most_lines(const std::vector<std::uint16_t>& deal, std::size_t threads) {
  if (deal.empty()) return 0;
  std::vector<std::size_t> load(threads, 0);
  for (const std::uint16_t k : deal) ++load[k];
  return *std::max_element(load.begin(), load.end());
}

// Reads lines from, from + step, ... of `lines` in `tree`: the replay's
// descent (match_and_insert, the same walk and locks) with a decider that
// declines, so that nothing is inserted or stamped. Returns the matched
// characters.
std::size_t read_lines(kvroute::ApproxRadixTree& tree, const std::vector<std::string>& lines,
                       std::size_t from, std::size_t step) {
  std::size_t matched = 0;
  for (std::size_t i = from; i < lines.size(); i += step) {
    matched +=
        tree.match_and_insert(
                lines[i], [](const kvroute::RadixCandidates&,
                             const kvroute::MatchResult&) noexcept { return kvroute::kNoTenant; })
            .match.matched;
  }
  return matched;
}

ReadScaling measure_reads(const std::vector<std::string>& lines, const ReplayConfig& cfg,
                          std::size_t threads, std::uint64_t rounds) {
  ReadScaling out;
  out.times.rounds = rounds;
  if (rounds == 0) return out;
  const std::vector<std::unique_ptr<kvroute::ApproxRadixTree>> trees = make_trees(cfg, threads);
  for (const auto& tree : trees) {
    for (std::size_t i = 0; i < lines.size(); ++i) {
      bool affine = false;
      if (!route_line(*tree, lines[i], i, cfg.workers, affine).insert.ok()) ++out.times.failed;
    }
  }
  std::vector<double> one, many;
  for (std::uint64_t r = 0; r < rounds; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    on_threads(1, [&](std::size_t) { out.matched = read_lines(*trees[0], lines, 0, 1); });
    one.push_back(seconds_since(t0));
    std::vector<std::size_t> matched(threads, 0);
    t0 = std::chrono::steady_clock::now();
    on_threads(threads, [&](std::size_t k) {
      matched[k] = read_lines(*trees[cfg.private_trees ? k : 0], lines, k, threads);
    });
    many.push_back(seconds_since(t0));
    std::size_t total = 0;
    for (const std::size_t m : matched) total += m;
    if (total != out.matched) ++out.mismatches;
  }
  summarize(one, many, 1.0, out.times);  // every thread reads its share of the lines
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage("missing FILE");
  const char* path = nullptr;
  ReplayConfig cfg;  // what the replay and the --scaling rounds do
  std::uint64_t threads = 1, scaling_rounds = 0, read_rounds = 0;
  bool have_every = false, have_max = false, worker_thread = false, partition = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    std::uint64_t* target = a == "--workers"       ? &cfg.workers
                            : a == "--evict-every" ? &cfg.evict_every
                            : a == "--threads"     ? &threads
                            : a == "--scaling"     ? &scaling_rounds
                            : a == "--reads"       ? &read_rounds
                                                   : nullptr;
    if (a == "--max-size") {  // 0 is a budget too: evict everything
      if (i + 1 >= argc || !parse_count(argv[i + 1], cfg.max_size)) {
        return usage("--max-size needs a non-negative integer");
      }
      have_max = true;
      ++i;
    } else if (target != nullptr) {
      if (i + 1 >= argc) return usage(std::string(a) + " needs a value");
      if (!parse_positive(argv[i + 1], *target)) {
        return usage(std::string(a) + " needs a positive integer, got '" + argv[i + 1] + "'");
      }
      if (a == "--evict-every") have_every = true;
      ++i;
    } else if (a == "--window") {
      if (i + 1 >= argc || !parse_count(argv[i + 1], cfg.window)) {
        return usage("--window needs a non-negative integer");
      }
      ++i;
    } else if (a == "--separate") {
      cfg.separate = true;
    } else if (a == "--private") {
      cfg.private_trees = true;
    } else if (a == "--partition") {
      partition = true;
    } else if (a == "--worker-thread") {
      worker_thread = true;
    } else if (a == "--recency-shift") {
      if (i + 1 >= argc || !parse_shift(argv[i + 1], cfg.recency_shift)) {
        return usage("--recency-shift needs an integer from 0 to 16");
      }
      ++i;
    } else if (a == "--huge-pages") {
      cfg.huge_pages = true;
    } else if (a.size() > 1 && a[0] == '-') {
      return usage("unknown option " + std::string(a));
    } else if (path != nullptr) {
      return usage("more than one FILE");
    } else {
      path = argv[i];
    }
  }
  if (path == nullptr) return usage("missing FILE");
  if (have_every != have_max) return usage("--evict-every and --max-size go together");
  if (cfg.workers > kvroute::kMaxTenantId + 1ull) return usage("--workers is too large");
  if (threads > 256) return usage("--threads is too large (at most 256)");
  if (partition && (cfg.window != 0 || read_rounds != 0)) {
    return usage("--partition does not go with --window or --reads");
  }

  // Read the file.
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "kvroute_tree_replay: cannot open '%s': %s\n", path, std::strerror(errno));
    return 1;
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  if (in.bad()) {
    std::fprintf(stderr, "kvroute_tree_replay: error reading '%s': %s\n", path,
                 std::strerror(errno));
    return 1;
  }
  const std::vector<std::uint16_t> deal =
      partition ? deal_by_prefix(lines, threads) : std::vector<std::uint16_t>{};
  if (partition) cfg.partition = &deal;

  // Reference: one memcmp of each line against a copy of itself.
  std::size_t bytes = 0;
  double memcmp_seconds = 0;
  double memcmp_cpu_seconds = 0;
  double memcmp_threads_seconds = 0;
  {
    std::vector<std::string> copies = lines;
    for (const auto& l : lines) bytes += l.size();
    // The best of three passes: a shared machine adds noise, never speed.
    volatile int sink = 0;
    for (int pass = 0; pass < 3; ++pass) {
      const double c0 = usage().cpu_seconds;
      const auto t0 = std::chrono::steady_clock::now();
      for (std::size_t i = 0; i < lines.size(); ++i) {
        sink = sink + std::memcmp(lines[i].data(), copies[i].data(), lines[i].size());
      }
      const double t = seconds_since(t0);
      const double c = usage().cpu_seconds - c0;
      if (pass == 0 || t < memcmp_seconds) memcmp_seconds = t;
      if (pass == 0 || c < memcmp_cpu_seconds) memcmp_cpu_seconds = c;
    }
    if (sink != 0) std::fprintf(stderr, "kvroute_tree_replay: memcmp found a difference\n");
    // The same with the lines dealt to the replay's threads.
    memcmp_threads_seconds = memcmp_seconds;
    if (threads > 1) {
      std::atomic<int> differences{0};
      for (int pass = 0; pass < 3; ++pass) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::vector<std::uint16_t>* part = cfg.partition;
        on_threads(threads, [&](std::size_t k) {
          int d = 0;
          for (std::size_t i = part != nullptr ? 0 : k; i < lines.size();
               i += part != nullptr ? 1 : threads) {
            if (part != nullptr && (*part)[i] != k) continue;
            d += std::memcmp(lines[i].data(), copies[i].data(), lines[i].size()) != 0 ? 1 : 0;
          }
          differences += d;
        });
        const double t = seconds_since(t0);
        if (pass == 0 || t < memcmp_threads_seconds) memcmp_threads_seconds = t;
      }
      if (differences != 0) {
        std::fprintf(stderr, "kvroute_tree_replay: memcmp found a difference\n");
      }
    }
  }

  // The replay, and with --scaling R, R rounds of one thread and T threads.
  const ReplayResult r = replay(lines, cfg, threads, worker_thread);
  if (r.failed != 0) {
    std::fprintf(stderr, "kvroute_tree_replay: %zu inserts failed\n", r.failed);
    return 1;
  }
  const ScalingRounds rounds = measure_scaling(lines, cfg, threads, scaling_rounds);
  const Scaling& scaling = rounds.replays;
  if (scaling.failed != 0) {
    std::fprintf(stderr, "kvroute_tree_replay: %zu inserts failed in the --scaling rounds\n",
                 scaling.failed);
    return 1;
  }
  if (rounds.fresh.failed != 0) {
    std::fprintf(stderr,
                 "kvroute_tree_replay: the fresh-memory reference got fewer blocks than it "
                 "asked for (out of memory) in %zu --scaling rounds\n",
                 rounds.fresh.failed);
    return 1;
  }
  const ReadScaling reads = measure_reads(lines, cfg, threads, read_rounds);
  if (reads.times.failed != 0) {
    std::fprintf(stderr, "kvroute_tree_replay: %zu inserts failed building the --reads trees\n",
                 reads.times.failed);
    return 1;
  }
  if (reads.mismatches != 0) {
    std::fprintf(stderr,
                 "kvroute_tree_replay: %zu --reads rounds matched another total on %llu threads "
                 "than on one\n",
                 reads.mismatches, static_cast<unsigned long long>(threads));
    return 1;
  }
  const double seconds = r.seconds, cpu = r.cpu_seconds, sys = r.sys_seconds;
  const double evict_seconds = r.evict_seconds;
  const std::size_t faults = r.page_faults;
  const bool in_step = r.in_step;
  const kvroute::RadixTreeStats& s = r.stats;
  const bool private_trees = cfg.private_trees;
  const bool repeats = repeats_work(cfg);
  const std::size_t requests = lines.size() * (repeats ? threads : 1);
  // With --private alone the threads made `work` passes over the file.
  const double work = repeats ? static_cast<double>(threads) : 1.0;
  const std::size_t all_bytes = bytes * (repeats ? threads : 1);
  const double c = static_cast<double>(r.chars);
  std::printf(
      "{\"requests\":%zu,\"chars\":%zu,\"bytes\":%zu,\"workers\":%llu,\"threads\":%llu,"
      "\"private\":%s,\"worker_thread\":%s,\"evict_every\":%llu,\"max_size\":%llu,\"seconds\":%.6f,"
      "\"chars_per_second\":%.0f,\"bytes_per_second\":%.0f,\"us_per_request\":%.3f,"
      "\"affinity_routes\":%zu,\"matched_chars\":%zu,\"tree_nodes\":%zu,\"tree_bytes\":%zu,"
      "\"tree_chars\":%zu,\"tree_bytes_per_char\":%.3f,\"rss_bytes\":%zu,"
      "\"rss_peak_bytes\":%zu,\"memcmp_seconds\":%.6f,\"memcmp_ratio\":%.4f,"
      "\"cpu_seconds\":%.6f,\"evict_seconds\":%.6f,\"evicted_chars\":%zu,"
      "\"memcmp_cpu_seconds\":%.6f,\"cpu_memcmp_ratio\":%.4f,"
      "\"memcmp_threads_seconds\":%.6f,\"memcmp_scaling\":%.3f,\"page_faults\":%zu,"
      "\"sys_seconds\":%.6f,\"tree_reserved_bytes\":%zu,\"recency_shift\":%u,"
      "\"claims_per_stamp\":%.2f,\"descent_fallbacks\":%llu,\"window\":%llu,"
      "\"scaling_rounds\":%llu,"
      "\"one_thread_seconds_best\":%.6f,\"one_thread_seconds_median\":%.6f,"
      "\"threads_seconds_best\":%.6f,\"threads_seconds_median\":%.6f,\"scaling_best\":%.3f,"
      "\"scaling_median\":%.3f,\"reads_rounds\":%llu,\"reads_matched_chars\":%zu,"
      "\"reads_one_seconds_median\":%.6f,\"reads_threads_seconds_median\":%.6f,"
      "\"reads_scaling_best\":%.3f,\"reads_scaling_median\":%.3f,\"fresh_memory_bytes\":%zu,"
      "\"fresh_memory_one_seconds_median\":%.6f,\"fresh_memory_threads_seconds_median\":%.6f,"
      "\"fresh_memory_scaling_median\":%.3f,\"partition\":%s,\"partition_max_lines\":%zu}\n",
      requests, r.chars, all_bytes, static_cast<unsigned long long>(cfg.workers),
      static_cast<unsigned long long>(threads), private_trees ? "true" : "false",
      worker_thread || threads > 1 ? "true" : "false",
      static_cast<unsigned long long>(cfg.evict_every),
      static_cast<unsigned long long>(cfg.max_size), seconds, seconds > 0 ? c / seconds : 0.0,
      seconds > 0 ? static_cast<double>(all_bytes) / seconds : 0.0,
      requests == 0 ? 0.0 : seconds * 1e6 / static_cast<double>(requests), r.affinity, r.matched,
      s.nodes, s.bytes, s.units,
      s.units == 0 ? 0.0 : static_cast<double>(s.bytes) / static_cast<double>(s.units), r.rss_bytes,
      r.rss_peak_bytes, memcmp_seconds, seconds > 0 ? memcmp_seconds * work / seconds : 0.0, cpu,
      evict_seconds, r.evicted, memcmp_cpu_seconds, cpu > 0 ? memcmp_cpu_seconds * work / cpu : 0.0,
      memcmp_threads_seconds,
      memcmp_threads_seconds > 0 ? memcmp_seconds / memcmp_threads_seconds : 0.0, faults, sys,
      s.reserved_bytes, cfg.recency_shift,
      s.stamps == 0 ? 0.0 : static_cast<double>(s.stamped_claims) / static_cast<double>(s.stamps),
      static_cast<unsigned long long>(s.descent_fallbacks),
      static_cast<unsigned long long>(in_step ? cfg.window : 0),
      static_cast<unsigned long long>(scaling.rounds), scaling.one_best, scaling.one_median,
      scaling.threads_best, scaling.threads_median, scaling.best, scaling.median,
      static_cast<unsigned long long>(reads.times.rounds), reads.matched, reads.times.one_median,
      reads.times.threads_median, reads.times.best, reads.times.median, rounds.fresh_bytes,
      rounds.fresh.one_median, rounds.fresh.threads_median, rounds.fresh.median,
      partition ? "true" : "false", most_lines(deal, threads));
  return 0;
}
