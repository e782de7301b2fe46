// Benchmark workloads for the radix tree: three request shapes, generated
// from fixed seeds so that every run (and every implementation fed the same
// file, see kvroute_workload) sees the same text.
//
//   * chat:    multi-turn chat over a few shared system prompts (1-4 KB).
//              A conversation's turn k+1 is its turn k text + an assistant
//              reply + a new user message. 48 conversations are active at a
//              time; each step advances a random one (so turns interleave
//              as they would at a router), and a conversation that has had
//              its 2-12 turns is replaced by a new one. `chat_wide`: the
//              same with 2,000 conversations active (a busier router: a
//              conversation's history is no longer in one core's cache
//              when its next turn comes).
//   * batch:   unique prompts (offline batch jobs): random words, 256 B to
//              4 KB, nothing shared on purpose.
//   * branchy: agent fan-out: 8 root contexts (0.5-2 KB); every later
//              request forks a random earlier request at a random point
//              (after the first half of its root) and adds a short
//              (16-128 B) suffix. Many short fragments, many nodes.
//
// Text is ASCII (one byte = one character) unless `mixed` is set, which adds
// multi-byte UTF-8 words (CJK, emoji, accents) to chat. Chat uses '\n' inside
// requests; kvroute_workload writes spaces instead so that a file holds one
// request per line.
//
// Only std::mt19937_64 and `%` are used (no std::*_distribution, whose
// output differs between standard libraries), so the output is the same
// everywhere.
#ifndef KVROUTE_BENCHMARKS_WORKLOADS_GENERATORS_HPP_
#define KVROUTE_BENCHMARKS_WORKLOADS_GENERATORS_HPP_

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace kvbench {

class TextGen {
 public:
  explicit TextGen(std::uint64_t seed, bool mixed = false) : rng_(seed), mixed_(mixed) {}

  // Uniform in [lo, hi].
  std::size_t between(std::size_t lo, std::size_t hi) {
    return lo + static_cast<std::size_t>(rng_() % (hi - lo + 1));
  }
  std::uint64_t next() { return rng_(); }

  // Random words up to about `bytes` bytes (never shorter).
  void append_words(std::string& s, std::size_t bytes) {
    const std::size_t target = s.size() + bytes;
    while (s.size() < target) {
      if (mixed_ && rng_() % 12 == 0) {
        static const char* const kMixed[] = {"你好", "世界", "模型",    "请求",
                                             "👋",    "🚀",    "données", "Straße"};
        s += kMixed[rng_() % 8];
      } else {
        const std::size_t n = 2 + rng_() % 9;
        for (std::size_t i = 0; i < n; ++i) s += static_cast<char>('a' + rng_() % 26);
      }
      s += (rng_() % 15 == 0) ? ". " : " ";
    }
  }
  std::string words(std::size_t lo, std::size_t hi) {
    std::string s;
    append_words(s, between(lo, hi));
    return s;
  }

 private:
  std::mt19937_64 rng_;
  bool mixed_;
};

// (a) Multi-turn chat with shared system prompts.
inline std::vector<std::string> make_chat(std::size_t n, std::uint64_t seed = 1, bool mixed = false,
                                          std::size_t concurrent = 48) {
  TextGen g(0x6368617400000000ull ^ seed, mixed);
  constexpr std::size_t kSystemPrompts = 6;
  std::vector<std::string> system;
  for (std::size_t i = 0; i < kSystemPrompts; ++i) {
    system.push_back("<|system|>\n" + g.words(1024, 4096));
  }
  struct Conversation {
    std::string text;  // the last request sent, empty before the first
    std::size_t turns_left = 0;
    std::size_t system = 0;
  };
  auto fresh = [&] {
    Conversation c;
    c.system = static_cast<std::size_t>(g.next() % kSystemPrompts);
    c.turns_left = g.between(2, 12);
    return c;
  };
  std::vector<Conversation> active;
  for (std::size_t i = 0; i < concurrent; ++i) active.push_back(fresh());
  std::vector<std::string> out;
  out.reserve(n);
  while (out.size() < n) {
    Conversation& c = active[static_cast<std::size_t>(g.next() % concurrent)];
    if (c.text.empty()) {
      c.text = system[c.system];
    } else {
      c.text += "\n<|assistant|>\n";
      g.append_words(c.text, g.between(100, 1500));
    }
    c.text += "\n<|user|>\n";
    g.append_words(c.text, g.between(50, 600));
    out.push_back(c.text);
    if (--c.turns_left == 0) c = fresh();
  }
  return out;
}

// (b) Unique batch prompts.
inline std::vector<std::string> make_batch(std::size_t n, std::uint64_t seed = 1) {
  TextGen g(0x6261746368000000ull ^ seed);
  std::vector<std::string> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.push_back(g.words(256, 4096));
  return out;
}

// (c) Branchy agent fan-out.
inline std::vector<std::string> make_branchy(std::size_t n, std::uint64_t seed = 1) {
  TextGen g(0x6272616e63680000ull ^ seed);
  constexpr std::size_t kRoots = 8;
  std::vector<std::string> out;
  std::vector<std::size_t> root_len;  // per request: its root's length
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (i < kRoots) {
      out.push_back("<|agent|> " + g.words(512, 2048));
      root_len.push_back(out.back().size());
      continue;
    }
    const std::size_t j = static_cast<std::size_t>(g.next() % i);
    const std::string& base = out[j];
    const std::size_t cut = g.between(root_len[j] / 2, base.size());
    std::string s = base.substr(0, cut);
    s += ' ';
    g.append_words(s, g.between(16, 128));
    out.push_back(std::move(s));
    root_len.push_back(root_len[j]);
  }
  return out;
}

// By name: "chat", "chat_mixed", "chat_wide", "batch", "branchy"; empty for
// another name.
inline std::vector<std::string> make_workload(std::string_view shape, std::size_t n,
                                              std::uint64_t seed = 1) {
  if (shape == "chat") return make_chat(n, seed);
  if (shape == "chat_mixed") return make_chat(n, seed, true);
  if (shape == "chat_wide") return make_chat(n, seed, false, 2000);
  if (shape == "batch") return make_batch(n, seed);
  if (shape == "branchy") return make_branchy(n, seed);
  return {};
}

}  // namespace kvbench

#endif  // KVROUTE_BENCHMARKS_WORKLOADS_GENERATORS_HPP_
