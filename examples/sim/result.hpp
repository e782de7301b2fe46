// kvroute_sim: what one replay measures, and the summary statistics.
#ifndef KVROUTE_EXAMPLES_SIM_RESULT_HPP_
#define KVROUTE_EXAMPLES_SIM_RESULT_HPP_

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sim/trace.hpp"

namespace kvsim {

struct PolicyResult {
  std::string name;
  double hit_rate = 0;
  double ttft_mean = 0, ttft_p50 = 0, ttft_p99 = 0;
  double imbalance = 0;
  double select_us_mean = 0, select_us_p99 = 0;
  std::int64_t rejected = 0;  // requests larger than a server's KV pool
  std::map<std::string, std::int64_t> branches;
  // Router replicas (replicas.hpp): how many routed, and what they sent
  // each other, as encoded on the wire (kvroute::sync::encode).
  int replicas = 1;
  std::int64_t text_bytes = 0;    // of the routed requests' texts
  std::int64_t change_bytes = 0;  // batches of state changes
  std::int64_t load_bytes = 0;    // batches of loads
  std::int64_t changes = 0;       // state changes sent
  std::int64_t not_applied = 0;   // deliveries apply_change did not apply
  std::uint64_t dropped = 0;      // changes the outboxes dropped (full)
  // Per request, in trace order (for tests and deeper analysis).
  std::vector<double> sent;  // when the request was sent (closed loop: not its trace time)
  std::vector<double> ttft;  // < 0: rejected
  std::vector<int> server;
  std::vector<std::int64_t> cached;
  std::vector<std::int64_t> claimed;         // tokens the router's tree claimed (kvroute policies)
  std::vector<std::string_view> branch;      // decision branch
  std::vector<int> completions;              // times each request completed
  std::vector<std::int64_t> prefill_tokens;  // per server
  std::vector<double> select_us;             // per routed request
};

// Bytes the replicas sent each other per routed request, and per byte of
// the routed texts.
inline double sync_bytes_per_request(const PolicyResult& p) {
  const auto n = static_cast<double>(p.select_us.size());
  return n == 0 ? 0 : static_cast<double>(p.change_bytes + p.load_bytes) / n;
}
inline double sync_bytes_per_text_byte(const PolicyResult& p) {
  return p.text_bytes == 0 ? 0
                           : static_cast<double>(p.change_bytes + p.load_bytes) /
                                 static_cast<double>(p.text_bytes);
}

inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
}

// Sizes the per-request vectors of `res` for n requests.
inline void reset(PolicyResult& res, std::string_view name, std::size_t n) {
  res.name = std::string(name);
  res.sent.assign(n, 0);
  res.ttft.assign(n, -1);
  res.server.assign(n, -1);
  res.cached.assign(n, 0);
  res.claimed.assign(n, 0);
  res.branch.assign(n, {});
  res.completions.assign(n, 0);
  res.select_us.reserve(n);
}

// The summary fields from the per-request ones and the servers' prefill
// totals (`res.prefill_tokens`). Rejected requests count in neither the hit
// rate nor the TTFT statistics.
inline void summarize(const Trace& tr, PolicyResult& res) {
  std::int64_t hit = 0, total = 0;
  std::vector<double> ttft;
  ttft.reserve(res.ttft.size());
  for (std::size_t j = 0; j < res.ttft.size(); ++j) {
    if (res.ttft[j] < 0) continue;
    hit += res.cached[j];
    total += tr.requests[j].input_tokens;
    ttft.push_back(res.ttft[j]);
  }
  res.rejected = static_cast<std::int64_t>(res.ttft.size() - ttft.size());
  res.hit_rate = total == 0 ? 0 : static_cast<double>(hit) / static_cast<double>(total);
  double sum = 0;
  for (double x : ttft) sum += x;
  res.ttft_mean = ttft.empty() ? 0 : sum / static_cast<double>(ttft.size());
  res.ttft_p50 = quantile(ttft, 0.50);
  res.ttft_p99 = quantile(ttft, 0.99);
  std::int64_t mx = 0, tot = 0;
  for (std::int64_t t : res.prefill_tokens) {
    mx = std::max(mx, t);
    tot += t;
  }
  const auto servers = static_cast<double>(std::max<std::size_t>(res.prefill_tokens.size(), 1));
  res.imbalance = tot == 0 ? 1.0 : static_cast<double>(mx) / (static_cast<double>(tot) / servers);
  double us = 0;
  for (double x : res.select_us) us += x;
  res.select_us_mean = res.select_us.empty() ? 0 : us / static_cast<double>(res.select_us.size());
  res.select_us_p99 = quantile(res.select_us, 0.99);
}

// Progress on stderr, rewritten in place: only on a terminal, where `\r`
// means something.
class Progress {
 public:
  Progress(bool on, std::string_view name, std::size_t n)
      : on_(on && isatty(fileno(stderr)) != 0), name_(name), n_(n) {}
  void tick(std::size_t done) const {
    if (on_ && done % 1000 == 0) std::fprintf(stderr, "\r  %-24s %zu/%zu", name_.c_str(), done, n_);
  }
  ~Progress() {
    if (on_) std::fprintf(stderr, "\r%60s\r", "");
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

 private:
  bool on_;
  std::string name_;
  std::size_t n_;
};

}  // namespace kvsim

#endif  // KVROUTE_EXAMPLES_SIM_RESULT_HPP_
