// kvroute_sim --compare-replicas: one router against R synced replicas and
// R unsynced ones, per policy, and the targets that comparison is held to.
//
// The targets: R replicas synced are within 0.01 of one router's hit rate
// and within 1.1x of its mean TTFT, and the state changes they send are at
// most 1/8 of the routed text's bytes (the figure for the Mooncake
// conversation trace). The unsynced row shows what syncing saves.
#ifndef KVROUTE_EXAMPLES_SIM_REPLICA_COMPARE_HPP_
#define KVROUTE_EXAMPLES_SIM_REPLICA_COMPARE_HPP_

#include <fmt/core.h>

#include <optional>
#include <string>
#include <vector>

#include "sim/config.hpp"
#include "sim/replicas.hpp"
#include "sim/report.hpp"
#include "sim/result.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"

namespace kvsim {

inline constexpr double kMaxHitLoss = 0.01;
inline constexpr double kMaxTtftRatio = 1.1;
inline constexpr double kMaxChangeBytesPerTextByte = 1.0 / 8;

// One policy as one router, as cfg.replicas says (synced), and with the
// same replicas unsynced; with --sync on, also with the state changes alone
// shared (loads not), which the targets are checked on too: a stale view of
// the other replicas' load can cost more than no view of it.
struct ReplicaRows {
  PolicyResult one, synced, unsynced;
  std::optional<PolicyResult> trees;
};

// The rows' names: "cache_aware", "cache_aware x4 synced", ...
inline std::string replica_row_name(const std::string& policy, const Replicas& r) {
  const char* how = r.sync == SyncMode::kOff     ? "unsynced"
                    : r.sync == SyncMode::kTrees ? "trees only"
                    : r.sync == SyncMode::kLoads ? "loads only"
                                                 : "synced";
  return fmt::format("{} x{} {}", policy, r.count, how);
}

// Runs `policy` three ways on `tr`. cfg.replicas.count > 1 and its sync is
// not kOff.
inline ReplicaRows compare_replicas(const Trace& tr, const std::string& policy,
                                    const SimConfig& cfg) {
  ReplicaRows rows;
  SimConfig one = cfg;
  one.replicas.count = 1;
  rows.one = run_policy(tr, policy, one);
  rows.synced = run_policy(tr, policy, cfg);
  rows.synced.name = replica_row_name(policy, cfg.replicas);
  SimConfig off = cfg;
  off.replicas.sync = SyncMode::kOff;
  rows.unsynced = run_policy(tr, policy, off);
  rows.unsynced.name = replica_row_name(policy, off.replicas);
  if (cfg.replicas.sync == SyncMode::kOn) {
    SimConfig trees = cfg;
    trees.replicas.sync = SyncMode::kTrees;
    rows.trees = run_policy(tr, policy, trees);
    rows.trees->name = replica_row_name(policy, trees.replicas);
  }
  return rows;
}

inline const char* pass(bool ok) { return ok ? "PASS" : "FAIL"; }

inline double change_bytes_per_text_byte(const PolicyResult& p) {
  return p.text_bytes == 0
             ? 0
             : static_cast<double>(p.change_bytes) / static_cast<double>(p.text_bytes);
}

// One replicated row against one router: the three targets, checked.
inline std::string target_line(const std::string& label, const PolicyResult& row,
                               const PolicyResult& one) {
  const double dhit = row.hit_rate - one.hit_rate;
  const double ttft = one.ttft_mean > 0 ? row.ttft_mean / one.ttft_mean : 0;
  const double bytes = change_bytes_per_text_byte(row);
  return fmt::format(
      "{}: hit {:.3f} vs {:.3f} ({:+.3f}) {}; mean TTFT {:.3f} s vs {:.3f} s ({:.2f}x) {}; "
      "change bytes / text byte {:.4f} {}\n",
      label, row.hit_rate, one.hit_rate, dhit, pass(dhit >= -kMaxHitLoss), row.ttft_mean,
      one.ttft_mean, ttft, pass(ttft <= kMaxTtftRatio), bytes,
      pass(bytes <= kMaxChangeBytesPerTextByte));
}

// The targets, checked, for each policy's rows; one paragraph per policy.
inline std::string replica_targets(const std::vector<ReplicaRows>& all, const Replicas& cfg) {
  std::string out = fmt::format(
      "targets: {} replicas {} against one router: hit rate within {:g}, mean TTFT within "
      "{:g}x;\nstate changes on the wire at most 1/8 of the routed text's bytes (the target is "
      "set on the\nMooncake conversation trace)\n",
      cfg.count, sync_text(cfg), kMaxHitLoss, kMaxTtftRatio);
  for (const ReplicaRows& r : all) {
    out += target_line("  " + r.one.name, r.synced, r.one);
    if (r.trees) out += target_line("    trees only", *r.trees, r.one);
    const double off_ttft = r.one.ttft_mean > 0 ? r.unsynced.ttft_mean / r.one.ttft_mean : 0;
    out += fmt::format("    unsynced: hit {:.3f} ({:+.3f}), mean TTFT {:.3f} s ({:.2f}x)\n",
                       r.unsynced.hit_rate, r.unsynced.hit_rate - r.one.hit_rate,
                       r.unsynced.ttft_mean, off_ttft);
  }
  return out;
}

}  // namespace kvsim

#endif  // KVROUTE_EXAMPLES_SIM_REPLICA_COMPARE_HPP_
