// Stress tests for kvroute::ApproxRadixTree: several threads insert, match,
// evict, drop and remove at once for a bounded number of operations; then
// the tree must be exactly consistent (maintained sizes == recount, LRU lists
// ordered, bytes accounted) and a final evict must bring every tenant within
// budget. Built to run under ThreadSanitizer (the tree's locks are std::atomic
// and std::mutex, which TSan understands).

#include "kvroute/radix_tree.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using kvroute::ApproxRadixTree;
using kvroute::MatchResult;
using kvroute::TenantId;

constexpr int kTenants = 6;

// Chat-like text: a few long system prompts (ASCII, CJK and emoji), then
// conversation turns that extend the previous request.
struct ChatGen {
  explicit ChatGen(std::uint64_t seed) : rng(seed) {}

  std::string system(std::size_t i) const {
    static const char* const kPrompts[] = {
        "You are a helpful assistant. Answer briefly and cite sources when you can. ",
        "你是一个乐于助人的助手。请用中文回答问题，并保持礼貌。 ",
        "System: you are a coding agent 🤖. Use tools; never guess file contents. ",
        "You are a translator. Translate everything the user says into French. ",
    };
    std::string s = kPrompts[i % 4];
    s += "[policy v" + std::to_string(i) + "] ";
    return s;
  }

  std::string turn() {
    static constexpr char kAlpha[] = "abcdefghij klmnopqrst uvwxyz 0123 你好 ";
    const std::size_t n = 10 + rng() % 40;
    std::string s = "<user>";
    for (std::size_t i = 0; i < n; ++i) s += kAlpha[rng() % (sizeof(kAlpha) - 1)];
    return s;
  }

  std::mt19937_64 rng;
};

struct Conversation {
  std::string text;
  int turns = 0;
};

// Runs f(0..n-1) on n threads released together.
template <class F>
void run_threads(int n, F f) {
  std::atomic<int> ready{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) {
    ts.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < n) std::this_thread::yield();
      f(i);
    });
  }
  for (auto& t : ts) t.join();
}

void require_consistent(const ApproxRadixTree& tree) {
  const std::string problem = tree.check_invariants();
  INFO(problem);
  REQUIRE(problem.empty());
  REQUIRE(tree.tenant_sizes() == tree.recount_sizes());
}

// A writer's step on ASCII text `s`: one time in three a match, whose
// counts must be those of a prefix of `s`; else an insert under t, which
// must succeed. Returns true when it inserted.
bool match_or_insert(ApproxRadixTree& tree, std::mt19937_64& rng, const std::string& s, TenantId t,
                     std::atomic<int>& bad) {
  if (rng() % 3 == 0) {
    const MatchResult m = tree.match(s);
    if (m.matched > s.size() || m.input != s.size()) ++bad;
    return false;
  }
  if (!tree.insert(s, t).ok()) ++bad;
  return true;
}

// Runs `writers` threads of write(rng) and one maintainer calling
// maintain(rng, round) for rounds 0, 1, ... until every writer is done. Each
// thread has its own generator, seeded from `seed` and its index.
template <class Write, class Maintain>
void writers_and_maintainer(int writers, std::uint64_t seed, Write write, Maintain maintain) {
  std::atomic<int> done{0};
  run_threads(writers + 1, [&](int id) {
    std::mt19937_64 rng(seed + static_cast<std::uint64_t>(id));
    if (id < writers) {
      write(rng);
      done.fetch_add(1);
      return;
    }
    for (int round = 0; done.load() < writers; ++round) maintain(rng, round);
  });
}

TEST_CASE("radix tree stress: chat routing with concurrent eviction, drops and removals",
          "[radix_tree][concurrency][stress]") {
  // Exact recency, and recency in steps of 4 stamps (Options::recency_shift),
  // whose stamps stop at claims already in the step.
  const unsigned shift = GENERATE(0u, 2u);
  ApproxRadixTree tree({.recency_shift = shift});
  constexpr int kRouters = 2;
  constexpr int kOpsPerRouter = 10000;
  std::atomic<int> routers_done{0};
  std::atomic<int> bad{0};

  run_threads(kRouters + 2, [&](int id) {
    ChatGen gen(static_cast<std::uint64_t>(1000 + id));
    if (id < kRouters) {
      // A cache-aware router: match, pick the matched tenant on a good
      // match else a random one, insert under it (as two calls, or as one
      // match_and_insert).
      std::vector<Conversation> convs(6);
      for (int op = 0; op < kOpsPerRouter; ++op) {
        Conversation& c = convs[gen.rng() % convs.size()];
        if (c.turns == 0 || c.turns > 6) {
          c.text = gen.system(gen.rng() % 8);
          c.turns = 0;
        }
        c.text += gen.turn();
        ++c.turns;
        const auto other = static_cast<TenantId>(gen.rng() % kTenants);
        if (op % 2 == 0) {  // two calls
          const MatchResult m = tree.match(c.text);
          if (m.matched > m.input || m.matched_symbols > c.text.size()) ++bad;
          const TenantId t = (m.has_tenant() && m.match_rate() > 0.5f) ? m.tenant : other;
          if (t >= kTenants) ++bad;
          if (!tree.insert(c.text, t).ok()) ++bad;
        } else {  // the fused step
          const kvroute::MatchInsertResult r = tree.match_and_insert(
              c.text, [&](const kvroute::RadixCandidates& cands, const MatchResult& m) noexcept {
                return !cands.empty() && m.match_rate() > 0.5f ? kvroute::MostRecentlyUsed{}(cands)
                                                               : other;
              });
          if (r.match.matched > r.match.input || r.match.matched_symbols > c.text.size()) ++bad;
          if (!r.inserted || r.match.tenant >= kTenants || !r.insert.ok()) ++bad;
        }
      }
      routers_done.fetch_add(1);
    } else if (id == kRouters) {
      // Reader: matches with a load-like chooser and per-tenant matches.
      while (routers_done.load() < kRouters) {
        const std::string q = gen.system(gen.rng() % 8) + gen.turn();
        const MatchResult m = tree.match(q, [](const kvroute::RadixCandidates& c) noexcept {
          return c[c.size() - 1].tenant;  // the highest id: a "least loaded"
        });
        if (m.matched > m.input) ++bad;
        const auto tm = tree.match_for_tenant(q, static_cast<TenantId>(gen.rng() % kTenants));
        if (tm.matched > tm.input) ++bad;
        for (TenantId t = 0; t < kTenants; ++t) (void)tree.tenant_size(t);
        (void)tree.stats();
      }
    } else {
      // Maintenance: budgets, feedback drops and worker removals.
      while (routers_done.load() < kRouters) {
        const auto r = gen.rng() % 16;
        if (r < 10) {
          tree.evict(500 + gen.rng() % 3000);
        } else if (r < 14) {
          const auto now = tree.now();
          tree.drop_older_than(static_cast<TenantId>(gen.rng() % kTenants),
                               now - std::min<std::uint64_t>(now, 200));
        } else {
          tree.remove_tenant(static_cast<TenantId>(gen.rng() % kTenants));
        }
        std::this_thread::yield();
      }
    }
  });

  CHECK(bad == 0);
  require_consistent(tree);
  tree.evict(1000);
  for (const auto& s : tree.tenant_sizes()) CHECK(s.size <= 1000);
  require_consistent(tree);
}

TEST_CASE("radix tree stress: tiny alphabet, one hot path, evict(0) racing inserts",
          "[radix_tree][concurrency][stress]") {
  // Short strings over {a, b} share nodes and split constantly, while a
  // maintainer empties the tree as fast as it can: inserts race with the
  // eviction of the very nodes they are upgrading. With and without
  // recency steps.
  const unsigned shift = GENERATE(0u, 1u);
  ApproxRadixTree tree({.recency_shift = shift});
  constexpr int kOps = 60000;
  std::atomic<int> bad{0};
  std::size_t merges = 0;  // the maintainer's: evictions here undo splits all the time
  writers_and_maintainer(
      3, 7,
      [&](std::mt19937_64& rng) {
        for (int op = 0; op < kOps; ++op) {
          std::string s(1 + rng() % 8, 'a');
          for (char& ch : s) ch = (rng() & 1) ? 'a' : 'b';
          match_or_insert(tree, rng, s, static_cast<TenantId>(rng() % 3), bad);
        }
      },
      [&](std::mt19937_64& rng, int round) {
        switch (round % 8) {
          case 0:
            tree.remove_tenant(static_cast<TenantId>(rng() % 3));
            break;
          case 1:
            merges += tree.drop_older_than(static_cast<TenantId>(rng() % 3), tree.now()).merges;
            break;
          default:
            merges += tree.evict(rng() % 4).merges;
            break;
        }
      });
  CHECK(bad == 0);
  CHECK(merges > 0);
  require_consistent(tree);
  tree.evict(0);
  for (const auto& s : tree.tenant_sizes()) CHECK(s.size == 0);
  CHECK(tree.stats().nodes == 1);
  require_consistent(tree);
}

TEST_CASE("radix tree stress: long forked texts split in place while eviction runs",
          "[radix_tree][concurrency][stress]") {
  // Texts of hundreds of characters that fork each other at random points:
  // splits inside long fragments (one part keeps the buffer, the lower one
  // with a header written inside it), while a maintainer evicts leaves.
  // Matches read those fragments throughout and check what they matched.
  ApproxRadixTree tree;
  constexpr int kOps = 4000;
  std::atomic<int> bad{0};
  writers_and_maintainer(
      2, 31,
      [&](std::mt19937_64& rng) {
        std::vector<std::string> mine = {std::string(500, 'q')};
        for (int op = 0; op < kOps; ++op) {
          const std::string& from = mine[rng() % mine.size()];
          std::string s = from.substr(0, rng() % (from.size() + 1));
          const std::size_t add = rng() % 300;
          for (std::size_t i = 0; i < add; ++i) s += static_cast<char>('a' + rng() % 3);
          const auto t = static_cast<TenantId>(rng() % 3);
          if (match_or_insert(tree, rng, s, t, bad) &&
              tree.match_for_tenant(s, t).matched > s.size()) {
            ++bad;
          }
          if (mine.size() < 32)
            mine.push_back(s);
          else
            mine[rng() % mine.size()] = s;
        }
      },
      [&](std::mt19937_64& rng, int round) {
        switch (round % 16) {
          case 0:
            tree.remove_tenant(static_cast<TenantId>(rng() % 3));
            break;
          case 1:
            tree.drop_older_than(static_cast<TenantId>(rng() % 3), tree.now() - 20);
            break;
          default:
            tree.evict(2000 + rng() % 4000);
            break;
        }
      });
  CHECK(bad == 0);
  require_consistent(tree);
  tree.evict(0);
  CHECK(tree.stats().nodes == 1);
  require_consistent(tree);
}

TEST_CASE("radix tree stress: a reactive budget holds while inserts run concurrently",
          "[radix_tree][concurrency][stress]") {
  constexpr std::size_t kBudget = 800;
  ApproxRadixTree tree({.tenant_budget = kBudget});
  constexpr int kWriters = 3;
  constexpr int kOps = 800;
  std::atomic<int> writers_done{0};
  std::atomic<std::size_t> worst{0};
  std::atomic<std::size_t> longest{0};
  run_threads(kWriters + 1, [&](int id) {
    ChatGen gen(static_cast<std::uint64_t>(50 + id));
    if (id < kWriters) {
      for (int op = 0; op < kOps; ++op) {
        std::string text = gen.system(gen.rng() % 8) + gen.turn() + gen.turn();
        std::size_t len = kvroute::detail::utf8_count(text);
        std::size_t l = longest.load();
        while (len > l && !longest.compare_exchange_weak(l, len)) {
        }
        tree.insert(text, static_cast<TenantId>(gen.rng() % 2));
      }
      writers_done.fetch_add(1);
    } else {
      while (writers_done.load() < kWriters) {
        for (TenantId t = 0; t < 2; ++t) {
          const std::size_t s = tree.tenant_size(t);
          std::size_t w = worst.load();
          while (s > w && !worst.compare_exchange_weak(w, s)) {
          }
        }
        std::this_thread::yield();
      }
    }
  });
  // Never more over budget than the inserts that can be in flight for one
  // tenant (all writers).
  CHECK(worst.load() <= kBudget + kWriters * longest.load());
  for (TenantId t = 0; t < 2; ++t) CHECK(tree.tenant_size(t) <= kBudget);
  require_consistent(tree);
}

}  // namespace
