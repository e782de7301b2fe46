// kvroute_sim: the run's configuration and the server model's constants.
//
// SglangModel holds the time of one forward step of one model on one GPU
// server, as the `sglang` server model (sglang_server.hpp) charges it. The
// defaults describe Llama-2-70B in fp16 on one DGX-H100 (8 x H100-80GB,
// tensor parallel 8), fitted to SplitwiseSim's published profile of that
// configuration (github.com/Mutinifni/splitwise-sim, data/perf_model.csv,
// rows `llama2-70b,h100-80gb,...,8`); examples/sim/README.md shows the fit.
#ifndef KVROUTE_EXAMPLES_SIM_CONFIG_HPP_
#define KVROUTE_EXAMPLES_SIM_CONFIG_HPP_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kvroute/kvroute.hpp"
#include "kvroute/policies/least_prefill.hpp"

namespace kvsim {

struct SglangModel {
  // Prefill step: prefill_step_s + prefill_token_s x new tokens +
  // prefill_pair_s x (new token, context token) pairs attended, where a
  // chunk of n new tokens after c tokens of context attends n x (c + n/2).
  double prefill_step_s = 0.005;
  double prefill_token_s = 0.095e-3;
  double prefill_pair_s = 1.9e-9;
  // Decode step over a batch of b requests holding c context tokens in all:
  // decode_step_s + decode_seq_s x b + decode_ctx_s x c.
  double decode_step_s = 0.0294;
  double decode_seq_s = 0.32e-3;
  double decode_ctx_s = 2.4e-8;
  // SGLang's --chunked-prefill-size: new tokens per prefill step (8192 is
  // its default on 80 GB GPUs).
  std::int64_t chunked_prefill_size = 8192;

  // One prefill step over `tokens` new tokens attending `pairs` pairs.
  double prefill_step(std::int64_t tokens, double pairs) const noexcept {
    return prefill_step_s + prefill_token_s * static_cast<double>(tokens) + prefill_pair_s * pairs;
  }
  // `uncached` tokens after `cached` ones prefilled alone, chunk by chunk.
  double prefill_alone(std::int64_t uncached, std::int64_t cached) const noexcept {
    double s = 0;
    for (std::int64_t done = 0; done < uncached;) {
      const std::int64_t n = std::min(chunked_prefill_size, uncached - done);
      const double ctx = static_cast<double>(cached + done);
      s += prefill_step(n, static_cast<double>(n) * (ctx + static_cast<double>(n) / 2));
      done += n;
    }
    return s;
  }
  // One decode step over `batch` requests holding `context` tokens.
  double decode_step(std::int64_t batch, std::int64_t context) const noexcept {
    return decode_step_s + decode_seq_s * static_cast<double>(batch) +
           decode_ctx_s * static_cast<double>(context);
  }
};

enum class ServerModel { kSglang, kSimple };

// What router replicas share with each other (replicas.hpp).
enum class SyncMode {
  kOff,    // nothing: each replica routes on its own state
  kOn,     // tree policies' state changes, and every replica's load
  kTrees,  // state changes only
  kLoads,  // load only
};

// Router replicas behind a round-robin front (replicas.hpp).
struct Replicas {
  int count = 1;
  SyncMode sync = SyncMode::kOn;
  // A replica's changes and loads reach the others this long after they
  // were sent.
  double delay_s = 0.1;
  // Each replica publishes its load every load_period_s (0: whenever it
  // changed, at the event that changed it).
  double load_period_s = 0.1;
  // The tree policies' sync_text_share: placements carry their new text
  // while the requests that extend known text add at most this share of
  // their bytes (0: keys only).
  double text_share = kvroute::LeastPrefill::Options{}.sync_text_share;

  bool trees() const noexcept { return sync == SyncMode::kOn || sync == SyncMode::kTrees; }
  bool loads() const noexcept { return sync == SyncMode::kOn || sync == SyncMode::kLoads; }
};

struct SimConfig {
  int servers = 8;
  // Per server: the KV pool (sglang: cache and running requests share it)
  // or the prefix cache (simple), in tokens.
  std::int64_t cache_tokens = 1'000'000;
  ServerModel server_model = ServerModel::kSglang;
  SglangModel sglang;
  // sglang only: a session's next request is sent when the previous
  // response has ended plus the think time the trace implies; false sends
  // every request at its trace time.
  bool closed_loop = true;
  double prefill_rate = 20'000;  // simple: tokens/s
  double tpot = 0.025;           // simple: s per output token
  std::uint64_t seed = 1;
  bool progress = false;
  double lp_queue_weight = kvroute::LeastPrefill::Options{}.queue_weight;
  // LeastPrefill::Options::max_tree_size in multiples of a server's cache;
  // 0 keeps the policy's default.
  double lp_tree_scale = 0;
  // CacheAware::Options::recency_shift of the cache_aware policies.
  unsigned ca_recency_shift = kvroute::CacheAware::Options{}.recency_shift;
  // CacheAware::Options::feedback_slack_stamps of cache_aware_feedback.
  std::uint64_t ca_feedback_slack_stamps = 0;
  // CacheAware::Options::tenant_rule of the cache_aware policies.
  kvroute::CacheAware::TenantRule ca_tenant_rule = kvroute::CacheAware::Options{}.tenant_rule;
  // Replicas of each kvroute policy (the oracle and sticky stay single).
  Replicas replicas;
};

}  // namespace kvsim

#endif  // KVROUTE_EXAMPLES_SIM_CONFIG_HPP_
