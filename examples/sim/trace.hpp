// kvroute_sim: requests, trace readers, built-in generators, session
// inference and text expansion.
//
// Every request is reduced to a chain of KV blocks of kBlockTokens tokens
// (the last one usually partial): block k's id is a hash of the whole prefix
// up to and including it, so equal block ids mean equal prefixes. Mooncake
// traces give the blocks directly (hash_ids); text traces are cut into
// blocks of kBlockTokens * chars_per_token characters. The routing text a
// policy sees is the request's own text, or for a block trace a fixed
// pseudo-random text per hash id, so equal ids give equal text prefixes.
#ifndef KVROUTE_EXAMPLES_SIM_TRACE_HPP_
#define KVROUTE_EXAMPLES_SIM_TRACE_HPP_

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kvroute/detail/rng.hpp"
#include "kvroute/detail/stable_hash.hpp"

namespace kvsim {

inline constexpr std::int64_t kBlockTokens = 512;

struct SimRequest {
  double t = 0;        // arrival, seconds (after --speed)
  double t_trace = 0;  // arrival as the trace has it, seconds from its first
  double think = -1;   // the trace's think time before this request, s (< 0: none)
  std::int64_t input_tokens = 0;
  std::int64_t output_tokens = 0;
  std::vector<std::uint64_t> blocks;  // chained block ids (prefix hashes)
  std::vector<std::uint64_t> ids;     // raw hash ids (block traces), for the text
  std::string text;                   // text traces: the request's text
  std::string session;                // "" = none
  bool session_inferred = false;

  // Tokens of block k.
  std::int64_t block_tokens(std::size_t k) const noexcept {
    const std::int64_t start = static_cast<std::int64_t>(k) * kBlockTokens;
    return std::clamp<std::int64_t>(input_tokens - start, 0, kBlockTokens);
  }
};

inline constexpr std::size_t kNoRequest = static_cast<std::size_t>(-1);

struct Trace {
  std::string name;
  std::vector<SimRequest> requests;
  // Per request: the session's previous and next request (kNoRequest: none), in
  // trace order; see link_sessions().
  std::vector<std::size_t> prev_in_session, next_in_session;
  bool has_sessions = false;  // from the input, not inferred
  double chars_per_token = 4.0;
};

class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline std::uint64_t chain(std::uint64_t prev, std::uint64_t id) noexcept {
  return kvroute::detail::splitmix64(prev * 0x9E3779B97F4A7C15ull ^
                                     kvroute::detail::splitmix64(id));
}

// Fills r.blocks from r.ids (block traces).
inline void chain_ids(SimRequest& r) {
  r.blocks.clear();
  std::uint64_t h = 0x1234;
  for (std::uint64_t id : r.ids) r.blocks.push_back(h = chain(h, id));
}

// Fills r.blocks and r.input_tokens from r.text (text traces).
inline void chain_text(SimRequest& r, double chars_per_token) {
  const auto block_chars =
      static_cast<std::size_t>(static_cast<double>(kBlockTokens) * chars_per_token);
  r.blocks.clear();
  std::uint64_t h = 0x5678;
  for (std::size_t i = 0; i < r.text.size(); i += block_chars) {
    const std::string_view piece = std::string_view(r.text).substr(i, block_chars);
    h = chain(h, kvroute::detail::xxh64(piece));
    r.blocks.push_back(h);
  }
  r.input_tokens =
      static_cast<std::int64_t>(std::ceil(static_cast<double>(r.text.size()) / chars_per_token));
}

// The routing text of block traces: a fixed pseudo-random text per hash id,
// cached. Thread-compatible (one simulation at a time).
class TextExpander {
 public:
  explicit TextExpander(double chars_per_token)
      : block_chars_(static_cast<std::size_t>(static_cast<double>(kBlockTokens) * chars_per_token)),
        cpt_(chars_per_token) {}

  // Writes r's text into `out` (reused buffer) and returns a view of it.
  std::string_view text(const SimRequest& r, std::string& out) {
    if (r.ids.empty()) return r.text;
    const auto total = static_cast<std::size_t>(static_cast<double>(r.input_tokens) * cpt_);
    out.clear();
    for (std::uint64_t id : r.ids) {
      if (out.size() >= total) break;
      const std::string& b = block(id);
      out.append(b, 0, std::min(b.size(), total - out.size()));
    }
    return out;
  }
  std::size_t block_chars() const noexcept { return block_chars_; }

 private:
  const std::string& block(std::uint64_t id) {
    auto [it, inserted] = cache_.try_emplace(id);
    if (inserted) {
      std::string& s = it->second;
      s.resize(block_chars_);
      std::uint64_t x = kvroute::detail::splitmix64(id ^ 0xB10C);
      static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz      ";
      for (std::size_t i = 0; i < block_chars_; ++i) {
        if (i % 8 == 0) x = kvroute::detail::splitmix64(x);
        s[i] = kAlphabet[(x >> ((i % 8) * 5)) & 31];
      }
      // Start each block with its id, so that different ids differ at once.
      const std::string tag = "[" + std::to_string(id) + "]";
      s.replace(0, std::min(tag.size(), s.size()), tag.substr(0, s.size()));
    }
    return it->second;
  }

  std::size_t block_chars_;
  double cpt_;
  std::unordered_map<std::uint64_t, std::string> cache_;
};

// ---------------------------------------------------------------------------
// Readers.

inline std::string read_file(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    throw TraceError(path +
                     ": cannot open (TRACE is a file or a built-in generator: chat, agent, "
                     "batch)");
  }
  std::string data;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) data.append(buf, static_cast<std::size_t>(n));
  int err = 0;
  const char* msg = gzerror(f, &err);
  std::string why = (n < 0 && msg != nullptr) ? msg : "";
  gzclose(f);
  if (n < 0) throw TraceError(path + ": read error: " + why);
  return data;
}

namespace detail {

inline const nlohmann::json& field(const nlohmann::json& j, const char* name,
                                   const std::string& where) {
  auto it = j.find(name);
  if (it == j.end()) throw TraceError(where + ": missing field \"" + name + "\"");
  return *it;
}

inline double number(const nlohmann::json& j, const char* name, const std::string& where) {
  const nlohmann::json& v = field(j, name, where);
  if (!v.is_number()) throw TraceError(where + ": field \"" + name + "\" is not a number");
  const double d = v.get<double>();
  if (!(d >= 0)) throw TraceError(where + ": field \"" + name + "\" is negative");
  return d;
}

inline std::string seconds(double t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", t);
  return buf;
}

inline std::string session_of(const nlohmann::json& j, const std::string& where) {
  auto it = j.find("session");
  if (it == j.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<std::int64_t>());
  throw TraceError(where + ": field \"session\" is neither a string nor an integer");
}

}  // namespace detail

// Parses JSONL content: Mooncake lines (timestamp ms, input_length,
// output_length, hash_ids, optional session) or text lines (t seconds, text,
// optional session, output_length). The format is recognised per file from
// the first non-empty line.
inline Trace parse_jsonl(std::string_view data, const std::string& name, double chars_per_token,
                         std::size_t limit = 0) {
  Trace tr;
  tr.name = name;
  tr.chars_per_token = chars_per_token;
  enum class Fmt { kUnknown, kMooncake, kText } fmt = Fmt::kUnknown;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < data.size()) {
    if (limit != 0 && tr.requests.size() >= limit) break;
    std::size_t end = data.find('\n', pos);
    if (end == std::string_view::npos) end = data.size();
    std::string_view line = data.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const std::string where = name + ":" + std::to_string(line_no);
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw TraceError(where + ": not valid JSON");
    if (!j.is_object()) throw TraceError(where + ": not a JSON object");
    if (fmt == Fmt::kUnknown) {
      if (j.contains("hash_ids")) {
        fmt = Fmt::kMooncake;
      } else if (j.contains("text")) {
        fmt = Fmt::kText;
      } else {
        throw TraceError(where + ": neither a Mooncake line (hash_ids) nor a text line (text)");
      }
    }
    SimRequest r;
    r.session = detail::session_of(j, where);
    if (fmt == Fmt::kMooncake) {
      r.t = detail::number(j, "timestamp", where) / 1000.0;
      r.input_tokens = static_cast<std::int64_t>(detail::number(j, "input_length", where));
      r.output_tokens = static_cast<std::int64_t>(detail::number(j, "output_length", where));
      const nlohmann::json& h = detail::field(j, "hash_ids", where);
      if (!h.is_array()) throw TraceError(where + ": field \"hash_ids\" is not an array");
      for (const auto& x : h) {
        if (!x.is_number_integer()) throw TraceError(where + ": hash_ids holds a non-integer");
        r.ids.push_back(static_cast<std::uint64_t>(x.get<std::int64_t>()));
      }
      const std::int64_t need = (r.input_tokens + kBlockTokens - 1) / kBlockTokens;
      if (static_cast<std::int64_t>(r.ids.size()) < need) {
        // Traces re-blocked from full blocks only: pad with fresh ids.
        while (static_cast<std::int64_t>(r.ids.size()) < need) {
          r.ids.push_back(
              kvroute::detail::splitmix64(0xFEED0000ull + line_no * 4096 + r.ids.size()));
        }
      }
      r.ids.resize(static_cast<std::size_t>(need));
      chain_ids(r);
    } else {
      r.t = detail::number(j, "t", where);
      const nlohmann::json& t = detail::field(j, "text", where);
      if (!t.is_string()) throw TraceError(where + ": field \"text\" is not a string");
      r.text = t.get<std::string>();
      r.output_tokens = j.contains("output_length")
                            ? static_cast<std::int64_t>(detail::number(j, "output_length", where))
                            : 128;
      chain_text(r, chars_per_token);
    }
    if (j.contains("think_time")) r.think = detail::number(j, "think_time", where);
    if (!tr.requests.empty() && r.t < tr.requests.back().t) {
      throw TraceError(where + ": timestamp " + detail::seconds(r.t) +
                       " is earlier than the previous request's " +
                       detail::seconds(tr.requests.back().t) + " (requests must be in time order)");
    }
    if (!r.session.empty()) tr.has_sessions = true;
    tr.requests.push_back(std::move(r));
  }
  if (tr.requests.empty()) throw TraceError(name + ": no requests");
  return tr;
}

// ---------------------------------------------------------------------------
// Built-in generators (fixed seeds). Block ids are drawn from disjoint ranges
// per generator; ids stand for their prefix as in Mooncake traces.

struct GenSpec {
  std::string_view name;
  std::string_view about;
};
inline constexpr GenSpec kGenerators[] = {
    {"chat", "multi-turn chat sessions over 4 shared system prompts"},
    {"agent", "agent sessions with long context growth over a shared tool prefix"},
    {"batch", "unique batch prompts after one shared instruction block"},
};

inline bool is_generator(std::string_view n) {
  for (const GenSpec& g : kGenerators)
    if (g.name == n) return true;
  return false;
}

inline Trace generate(std::string_view gen, std::size_t n, double chars_per_token) {
  if (n == 0) n = 2000;
  Trace tr;
  tr.name = std::string(gen);
  tr.chars_per_token = chars_per_token;
  tr.has_sessions = gen != "batch";
  std::mt19937_64 rng(gen == "chat" ? 1 : gen == "agent" ? 2 : 3);
  auto uni = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  auto expo = [&](double mean) { return std::exponential_distribution<double>(1.0 / mean)(rng); };
  std::uint64_t next_id = 1000;
  struct Session {
    std::vector<std::uint64_t> ctx;
    double next_t = 0;
    int turns_left = 0;
    std::string name;
  };
  if (gen == "batch") {
    double t = 0;
    for (std::size_t i = 0; i < n; ++i) {
      SimRequest r;
      t += expo(0.08);
      r.t = t;
      r.ids.push_back(1);  // the shared instruction
      const std::int64_t blocks = uni(2, 12);
      for (std::int64_t b = 1; b < blocks; ++b) r.ids.push_back(next_id++);
      r.input_tokens = (blocks - 1) * kBlockTokens + uni(1, kBlockTokens);
      r.output_tokens = uni(16, 256);
      chain_ids(r);
      tr.requests.push_back(std::move(r));
    }
    return tr;
  }
  const bool agent = gen == "agent";
  // Sessions arrive as a Poisson process; each runs a number of turns with
  // think times between them; requests are emitted in time order.
  std::vector<Session> live;
  double next_session_t = 0;
  std::size_t sessions = 0;
  while (tr.requests.size() < n) {
    // The earliest event: a new session or a live session's next turn.
    std::size_t best = live.size();
    for (std::size_t i = 0; i < live.size(); ++i) {
      if (best == live.size() || live[i].next_t < live[best].next_t) best = i;
    }
    if (best == live.size() || next_session_t < live[best].next_t) {
      Session s;
      s.name = std::string(gen) + "-" + std::to_string(sessions++);
      s.next_t = next_session_t;
      if (agent) {
        for (std::uint64_t b = 0; b < 20; ++b) s.ctx.push_back(10 + b);  // tools
        s.turns_left = static_cast<int>(uni(10, 40));
      } else {
        const std::uint64_t sys = static_cast<std::uint64_t>(uni(0, 3));
        for (std::uint64_t b = 0; b < 2 + sys; ++b) s.ctx.push_back(100 + sys * 10 + b);
        s.turns_left = static_cast<int>(uni(1, 8));
      }
      live.push_back(std::move(s));
      next_session_t += expo(agent ? 1.0 : 0.02);
      continue;
    }
    Session& s = live[best];
    const std::int64_t add = agent ? uni(1, 4) : uni(1, 3);
    for (std::int64_t b = 0; b < add; ++b) s.ctx.push_back(next_id++);
    SimRequest r;
    r.t = s.next_t;
    r.ids = s.ctx;
    r.session = s.name;
    r.input_tokens =
        static_cast<std::int64_t>(s.ctx.size() - 1) * kBlockTokens + uni(64, kBlockTokens);
    r.output_tokens = agent ? uni(50, 600) : uni(50, 500);
    chain_ids(r);
    tr.requests.push_back(std::move(r));
    // The partial last block is re-hashed next turn (as in Mooncake).
    s.ctx.back() = next_id++;
    if (--s.turns_left == 0) {
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(best));
    } else {
      s.next_t += agent ? 2.0 + expo(8.0) : 5.0 + expo(20.0);
    }
  }
  return tr;
}

// ---------------------------------------------------------------------------
// Sessions and scaling.

// Where the trace has no session ids: request i joins the session of the
// latest earlier request j of >= min_blocks blocks all of whose blocks but
// the last are a prefix of i's blocks; otherwise it starts a new session.
inline void infer_sessions(Trace& tr, std::size_t min_blocks = 3) {
  if (tr.has_sessions) return;
  std::unordered_map<std::uint64_t, std::size_t> ends;  // j's second-to-last block -> j
  std::size_t fresh = 0;
  for (std::size_t i = 0; i < tr.requests.size(); ++i) {
    SimRequest& r = tr.requests[i];
    std::optional<std::size_t> j;
    for (std::uint64_t b : r.blocks) {
      auto it = ends.find(b);
      if (it != ends.end()) j = it->second;  // deeper matches override
    }
    r.session = j ? tr.requests[*j].session : "s" + std::to_string(fresh++);
    r.session_inferred = true;
    if (r.blocks.size() >= min_blocks) ends[r.blocks[r.blocks.size() - 2]] = i;
  }
}

// Keeps the first n requests (0 = all), starts the clock at the first one
// (t_trace) and divides arrival times by speed (t).
inline void shape(Trace& tr, std::size_t n, double speed) {
  if (n != 0 && tr.requests.size() > n) tr.requests.resize(n);
  if (tr.requests.empty()) return;
  const double t0 = tr.requests.front().t;
  for (SimRequest& r : tr.requests) {
    r.t_trace = r.t - t0;
    r.t = speed > 0 ? r.t_trace / speed : r.t_trace;
  }
}

// Fills prev_in_session and next_in_session (requests without a session
// are alone in theirs).
inline void link_sessions(Trace& tr) {
  const std::size_t n = tr.requests.size();
  tr.prev_in_session.assign(n, kNoRequest);
  tr.next_in_session.assign(n, kNoRequest);
  std::unordered_map<std::string, std::size_t> last;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string& s = tr.requests[i].session;
    if (s.empty()) continue;
    auto [it, fresh] = last.try_emplace(s, i);
    if (!fresh) {
      tr.prev_in_session[i] = it->second;
      tr.next_in_session[it->second] = i;
      it->second = i;
    }
  }
}

// Loads TRACE: a generator name or a file.
inline Trace load_trace(const std::string& what, std::size_t n, double chars_per_token) {
  if (is_generator(what)) return generate(what, n, chars_per_token);
  const std::string data = read_file(what);
  std::string name = what;
  if (auto slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
  return parse_jsonl(data, name, chars_per_token, n);
}

}  // namespace kvsim

#endif  // KVROUTE_EXAMPLES_SIM_TRACE_HPP_
