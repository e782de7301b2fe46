// -----------------------------------------------------------------------------
// File: kvroute/policy_config.hpp
// -----------------------------------------------------------------------------
//
// `PolicyConfig`: the one canonical configuration of every policy, with the
// gateway's command-line defaults (not its struct defaults, which differ), and
// `parse_policy_flags`, which reads it from argv-style strings using the
// gateway's flag names. `make_policy` (any_policy.hpp) builds a policy from it.
//
//   flag                            default     field
//   --policy                        cache_aware policy
//   --cache-threshold               0.3         cache_threshold        [0, 1]
//   --balance-abs-threshold         64          balance_abs_threshold
//   --balance-rel-threshold         1.5         balance_rel_threshold  >= 1
//   --eviction-interval             120         eviction_interval (s)  > 0
//   --max-tree-size                 67108864    max_tree_size (chars)  > 0
//   --max-models                    0 (no cap)  max_models
//   --max-idle-secs                 14400       max_idle (s)
//   --assignment-mode               random      assignment_mode
//   --prefix-token-count            256         prefix_token_count     > 0
//   --prefix-hash-load-factor       1.25        prefix_hash_load_factor >= 1
//   --bucket-adjust-interval-secs   5           bucket_adjust_interval [1, 2^32)
//   --bounded-load-factor           0 (off)     bounded_load_factor    0 or >= 1
//   --queue-weight                  adaptive    queue_weight           adaptive or >= 0
//   --kv-capacity-tokens            0 (unknown) kv_capacity_tokens     >= 0
//   --chars-per-token               4           chars_per_token        > 0
//   --sync-text-share               0.25        sync_text_share        [0, 1]
//   --seed                          fixed       seed
//
// `--eviction-interval-secs` (the Python launcher's spelling) is accepted as
// an alias, and every flag may carry the `--router-` prefix that
// launch_server uses. Values come as `--flag value` or `--flag=value`.
// bucket reads --balance-abs-threshold and --balance-rel-threshold, as in the
// gateway; manual sweeps every --eviction-interval.
//
// Every error is an absl::Status naming the flag (or field) and the value.
//
// Thread safety: values and pure functions.
//
// Example:
//
//   std::vector<std::string_view> args = {"--policy", "round_robin",
//                                         "--cache-threshold=0.5"};
//   absl::StatusOr<kvroute::PolicyConfig> cfg = kvroute::parse_policy_flags(args);
//   // cfg->policy == PolicyKind::kRoundRobin, cfg->cache_threshold == 0.5
//   // {"--cache-threshold", "2"} -> InvalidArgument:
//   //   "cache_threshold (--cache-threshold): 2 is outside [0, 1]"

#ifndef KVROUTE_POLICY_CONFIG_HPP_
#define KVROUTE_POLICY_CONFIG_HPP_

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kvroute/config.hpp"
#include "kvroute/detail/ascii.hpp"
#include "kvroute/detail/rng.hpp"

KVROUTE_NAMESPACE_BEGIN

enum class PolicyKind : std::uint8_t {
  kCacheAware,
  kRoundRobin,
  kRandom,
  kPowerOfTwo,
  kPrefixHash,
  kManual,
  kBucket,
  kConsistentHashing,
  kLeastPrefill,
};

inline constexpr std::array<PolicyKind, 9> kAllPolicyKinds = {
    PolicyKind::kCacheAware, PolicyKind::kRoundRobin,        PolicyKind::kRandom,
    PolicyKind::kPowerOfTwo, PolicyKind::kPrefixHash,        PolicyKind::kManual,
    PolicyKind::kBucket,     PolicyKind::kConsistentHashing, PolicyKind::kLeastPrefill,
};

constexpr std::string_view to_string(PolicyKind k) noexcept {
  switch (k) {
    case PolicyKind::kCacheAware:
      return "cache_aware";
    case PolicyKind::kRoundRobin:
      return "round_robin";
    case PolicyKind::kRandom:
      return "random";
    case PolicyKind::kPowerOfTwo:
      return "power_of_two";
    case PolicyKind::kPrefixHash:
      return "prefix_hash";
    case PolicyKind::kManual:
      return "manual";
    case PolicyKind::kBucket:
      return "bucket";
    case PolicyKind::kConsistentHashing:
      return "consistent_hashing";
    case PolicyKind::kLeastPrefill:
      return "least_prefill";
  }
  return "unknown";
}

// How manual assigns a worker to a new routing key.
enum class AssignmentMode : std::uint8_t { kRandom, kMinLoad, kMinGroup };

constexpr std::string_view to_string(AssignmentMode m) noexcept {
  switch (m) {
    case AssignmentMode::kRandom:
      return "random";
    case AssignmentMode::kMinLoad:
      return "min_load";
    case AssignmentMode::kMinGroup:
      return "min_group";
  }
  return "unknown";
}

// Parses a policy name: the snake_case names above, case-insensitive, also
// without underscores ("RoundRobin", "roundrobin"), as the gateway accepts.
inline absl::StatusOr<PolicyKind> parse_policy_kind(std::string_view name) {
  std::string squashed;
  for (char ch : name) {
    if (ch != '_' && ch != '-') squashed.push_back(detail::ascii_lower(ch));
  }
  for (PolicyKind k : kAllPolicyKinds) {
    std::string candidate;
    for (char ch : to_string(k)) {
      if (ch != '_') candidate.push_back(ch);
    }
    if (candidate == squashed) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--policy: '", absl::CHexEscape(absl::string_view(name.data(), name.size())),
                   "' is not a policy (expected one of cache_aware, round_robin, random, "
                   "power_of_two, prefix_hash, manual, bucket, consistent_hashing, "
                   "least_prefill)"));
}

inline absl::StatusOr<AssignmentMode> parse_assignment_mode(std::string_view s) {
  for (AssignmentMode m :
       {AssignmentMode::kRandom, AssignmentMode::kMinLoad, AssignmentMode::kMinGroup}) {
    if (detail::ascii_iequals(s, to_string(m))) return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--assignment-mode: '", absl::CHexEscape(absl::string_view(s.data(), s.size())),
                   "' is not an assignment mode (expected random, min_load or min_group)"));
}

struct PolicyConfig {
  PolicyKind policy = PolicyKind::kCacheAware;

  // cache_aware (and bucket's balance test).
  double cache_threshold = 0.3;
  std::uint64_t balance_abs_threshold = 64;
  double balance_rel_threshold = 1.5;
  std::chrono::seconds eviction_interval{120};
  std::uint64_t max_tree_size = std::uint64_t{1} << 26;
  // cache_aware and least_prefill (kvroute's own): most model trees kept,
  // the least recently used dropped beyond it; 0 keeps every model's tree,
  // as the gateway does.
  std::uint64_t max_models = 0;

  // manual.
  std::chrono::seconds max_idle{14400};
  AssignmentMode assignment_mode = AssignmentMode::kRandom;

  // prefix_hash.
  std::uint32_t prefix_token_count = 256;
  double prefix_hash_load_factor = 1.25;

  // bucket.
  std::chrono::seconds bucket_adjust_interval{5};

  // consistent_hashing: spill past workers above factor x average load.
  double bounded_load_factor = 0.0;

  // least_prefill (kvroute's own; it also reads eviction_interval and
  // max_tree_size): the weight of queued prefill work against this
  // request's uncached work (none: adaptive, as least_prefill.hpp derives;
  // a number: that fixed weight), the servers' KV pool in tokens for the
  // adaptive rule (0: unknown), and characters per token.
  std::optional<double> queue_weight;
  std::int64_t kv_capacity_tokens = 0;
  double chars_per_token = 4.0;

  // cache_aware and least_prefill among router replicas (sync/change.hpp):
  // placements carry their new text while the requests that extend known
  // text add at most this share of their bytes, keys otherwise (0: keys
  // only; 1: text always).
  double sync_text_share = 0.25;

  // Every randomised choice.
  std::uint64_t seed = detail::kDefaultSeed;

  // Returns OK, or InvalidArgument naming the first bad field and its value.
  absl::Status validate() const;

  // NOLINTNEXTLINE(readability-identifier-naming): the name before 0.2
  [[deprecated("use validate()")]] absl::Status Validate() const { return validate(); }
};

namespace detail {

inline constexpr std::int64_t kMaxConfigSeconds = std::int64_t{1} << 32;

inline std::string show(double v) { return absl::StrCat(v); }

inline absl::Status bad(std::string_view field, std::string_view flag, const std::string& value,
                        std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(absl::string_view(field.data(), field.size()),
                                                 " (", absl::string_view(flag.data(), flag.size()),
                                                 "): ", value, " ",
                                                 absl::string_view(why.data(), why.size())));
}

}  // namespace detail

inline absl::Status PolicyConfig::validate() const {
  using detail::bad;
  using detail::show;
  if (!(cache_threshold >= 0.0 && cache_threshold <= 1.0)) {
    return bad("cache_threshold", "--cache-threshold", show(cache_threshold), "is outside [0, 1]");
  }
  if (!(balance_rel_threshold >= 1.0) || std::isinf(balance_rel_threshold)) {
    return bad("balance_rel_threshold", "--balance-rel-threshold", show(balance_rel_threshold),
               "must be finite and >= 1");
  }
  if (eviction_interval.count() <= 0 || eviction_interval.count() >= detail::kMaxConfigSeconds) {
    return bad("eviction_interval", "--eviction-interval", absl::StrCat(eviction_interval.count()),
               "must be in [1, 2^32) seconds");
  }
  if (max_tree_size == 0) {
    return bad("max_tree_size", "--max-tree-size", "0", "must be > 0");
  }
  if (max_idle.count() < 0 || max_idle.count() >= detail::kMaxConfigSeconds) {
    return bad("max_idle", "--max-idle-secs", absl::StrCat(max_idle.count()),
               "must be in [0, 2^32) seconds (0 disables expiry)");
  }
  if (prefix_token_count == 0) {
    return bad("prefix_token_count", "--prefix-token-count", "0", "must be > 0");
  }
  if (!(prefix_hash_load_factor >= 1.0) || std::isinf(prefix_hash_load_factor)) {
    return bad("prefix_hash_load_factor", "--prefix-hash-load-factor",
               show(prefix_hash_load_factor), "must be finite and >= 1");
  }
  if (bucket_adjust_interval.count() < 1 ||
      bucket_adjust_interval.count() >= detail::kMaxConfigSeconds) {
    return bad("bucket_adjust_interval", "--bucket-adjust-interval-secs",
               absl::StrCat(bucket_adjust_interval.count()), "must be in [1, 2^32) seconds");
  }
  if (!(bounded_load_factor == 0.0 ||
        (bounded_load_factor >= 1.0 && !std::isinf(bounded_load_factor)))) {
    return bad("bounded_load_factor", "--bounded-load-factor", show(bounded_load_factor),
               "must be 0 (off) or finite and >= 1");
  }
  if (queue_weight && (!(*queue_weight >= 0.0) || std::isinf(*queue_weight))) {
    return bad("queue_weight", "--queue-weight", show(*queue_weight),
               "must be finite and >= 0 (or unset: adaptive)");
  }
  if (kv_capacity_tokens < 0) {
    return bad("kv_capacity_tokens", "--kv-capacity-tokens", absl::StrCat(kv_capacity_tokens),
               "must be >= 0 (0: unknown)");
  }
  if (!(chars_per_token > 0.0) || std::isinf(chars_per_token)) {
    return bad("chars_per_token", "--chars-per-token", show(chars_per_token),
               "must be finite and > 0");
  }
  if (!(sync_text_share >= 0.0 && sync_text_share <= 1.0)) {
    return bad("sync_text_share", "--sync-text-share", show(sync_text_share), "is outside [0, 1]");
  }
  return absl::OkStatus();
}

namespace detail {

inline std::string quoted(std::string_view v) {
  return absl::StrCat("'", absl::CHexEscape(absl::string_view(v.data(), v.size())), "'");
}

inline absl::Status parse_value(std::string_view flag, std::string_view v, double& out) {
  double d;
  if (!absl::SimpleAtod(absl::string_view(v.data(), v.size()), &d) || std::isnan(d)) {
    return absl::InvalidArgumentError(absl::StrCat(absl::string_view(flag.data(), flag.size()),
                                                   ": ", quoted(v), " is not a number"));
  }
  out = d;
  return absl::OkStatus();
}

// "adaptive", or a number.
inline absl::Status parse_value(std::string_view flag, std::string_view v,
                                std::optional<double>& out) {
  if (v == "adaptive") {
    out.reset();
    return absl::OkStatus();
  }
  double d = 0;
  if (absl::Status s = parse_value(flag, v, d); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(absl::string_view(flag.data(), flag.size()),
                                                   ": ", quoted(v),
                                                   " is neither 'adaptive' nor a number"));
  }
  out = d;
  return absl::OkStatus();
}

inline absl::Status parse_value(std::string_view flag, std::string_view v, std::int64_t& out) {
  std::int64_t i = 0;
  if (!absl::SimpleAtoi(absl::string_view(v.data(), v.size()), &i)) {
    return absl::InvalidArgumentError(absl::StrCat(absl::string_view(flag.data(), flag.size()),
                                                   ": ", quoted(v), " is not an integer"));
  }
  out = i;
  return absl::OkStatus();
}

inline absl::Status parse_value(std::string_view flag, std::string_view v, std::uint64_t& out) {
  std::uint64_t u;
  if (!absl::SimpleAtoi(absl::string_view(v.data(), v.size()), &u)) {
    return absl::InvalidArgumentError(absl::StrCat(absl::string_view(flag.data(), flag.size()),
                                                   ": ", quoted(v),
                                                   " is not a non-negative integer"));
  }
  out = u;
  return absl::OkStatus();
}

inline absl::Status parse_value(std::string_view flag, std::string_view v, std::uint32_t& out) {
  std::uint64_t u = 0;
  if (absl::Status s = parse_value(flag, v, u); !s.ok()) return s;
  if (u > 0xFFFFFFFFu) {
    return absl::InvalidArgumentError(absl::StrCat(absl::string_view(flag.data(), flag.size()),
                                                   ": ", quoted(v), " is larger than 4294967295"));
  }
  out = static_cast<std::uint32_t>(u);
  return absl::OkStatus();
}

inline absl::Status parse_value(std::string_view flag, std::string_view v,
                                std::chrono::seconds& out) {
  std::uint64_t u = 0;
  if (absl::Status s = parse_value(flag, v, u); !s.ok()) return s;
  if (u >= static_cast<std::uint64_t>(kMaxConfigSeconds)) {
    return absl::InvalidArgumentError(absl::StrCat(absl::string_view(flag.data(), flag.size()),
                                                   ": ", quoted(v), " seconds is more than 2^32"));
  }
  out = std::chrono::seconds(static_cast<std::int64_t>(u));
  return absl::OkStatus();
}

}  // namespace detail

namespace detail {

// Every flag parse_policy_flags reads, without its "--" (and "router-").
inline constexpr std::array<std::string_view, 19> kPolicyFlags = {
    "policy",
    "cache-threshold",
    "balance-abs-threshold",
    "balance-rel-threshold",
    "eviction-interval",
    "eviction-interval-secs",
    "max-tree-size",
    "max-models",
    "max-idle-secs",
    "assignment-mode",
    "prefix-token-count",
    "prefix-hash-load-factor",
    "bucket-adjust-interval-secs",
    "bounded-load-factor",
    "queue-weight",
    "kv-capacity-tokens",
    "chars-per-token",
    "sync-text-share",
    "seed",
};

template <class T>
absl::Status take(absl::StatusOr<T> parsed, T& out) {
  if (!parsed.ok()) return parsed.status();
  out = *parsed;
  return absl::OkStatus();
}

// Sets the field of flag `name` (one of kPolicyFlags) from `v`; `flag` is
// the flag as errors show it.
inline absl::Status set_policy_flag(PolicyConfig& cfg, std::string_view name, std::string_view flag,
                                    std::string_view v) {
  if (name == "policy") return take(parse_policy_kind(v), cfg.policy);
  if (name == "assignment-mode") return take(parse_assignment_mode(v), cfg.assignment_mode);
  if (name == "cache-threshold") return parse_value(flag, v, cfg.cache_threshold);
  if (name == "balance-abs-threshold") return parse_value(flag, v, cfg.balance_abs_threshold);
  if (name == "balance-rel-threshold") return parse_value(flag, v, cfg.balance_rel_threshold);
  if (name == "eviction-interval" || name == "eviction-interval-secs") {
    return parse_value(flag, v, cfg.eviction_interval);
  }
  if (name == "max-tree-size") return parse_value(flag, v, cfg.max_tree_size);
  if (name == "max-models") return parse_value(flag, v, cfg.max_models);
  if (name == "max-idle-secs") return parse_value(flag, v, cfg.max_idle);
  if (name == "prefix-token-count") return parse_value(flag, v, cfg.prefix_token_count);
  if (name == "prefix-hash-load-factor") return parse_value(flag, v, cfg.prefix_hash_load_factor);
  if (name == "bucket-adjust-interval-secs") {
    return parse_value(flag, v, cfg.bucket_adjust_interval);
  }
  if (name == "bounded-load-factor") return parse_value(flag, v, cfg.bounded_load_factor);
  if (name == "queue-weight") return parse_value(flag, v, cfg.queue_weight);
  if (name == "kv-capacity-tokens") return parse_value(flag, v, cfg.kv_capacity_tokens);
  if (name == "chars-per-token") return parse_value(flag, v, cfg.chars_per_token);
  if (name == "sync-text-share") return parse_value(flag, v, cfg.sync_text_share);
  return parse_value(flag, v, cfg.seed);  // "seed"
}

}  // namespace detail

// Parses policy flags from `args` (no program name). Flags this parser does
// not know are appended to `*unparsed` (with their value when given as
// `--flag=value`; a following separate value cannot be attributed and is
// kept too) when `unparsed` is non-null, and are an error otherwise. The
// result has been validated.
inline absl::StatusOr<PolicyConfig> parse_policy_flags(
    std::span<const std::string_view> args, std::vector<std::string>* unparsed = nullptr) {
  PolicyConfig cfg;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg.size() < 3 || arg.substr(0, 2) != "--") {
      if (unparsed == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("argument ", i, ": ", detail::quoted(arg), " is not a --flag"));
      }
      unparsed->emplace_back(arg);
      continue;
    }
    std::string_view name = arg.substr(2);
    std::optional<std::string_view> inline_value;
    if (auto eq = name.find('='); eq != std::string_view::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (name.substr(0, 7) == "router-") name = name.substr(7);
    // As errors show it: an unknown flag's name may hold any bytes.
    const std::string flag =
        absl::StrCat("--", absl::CHexEscape(absl::string_view(name.data(), name.size())));
    if (std::find(detail::kPolicyFlags.begin(), detail::kPolicyFlags.end(), name) ==
        detail::kPolicyFlags.end()) {
      if (unparsed == nullptr)
        return absl::InvalidArgumentError(absl::StrCat(flag, ": unknown flag"));
      unparsed->emplace_back(arg);
      continue;
    }
    // The value: inline, or the next argument.
    if (!inline_value && i + 1 >= args.size()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": missing value"));
    }
    const std::string_view v = inline_value ? *inline_value : args[++i];
    if (absl::Status s = detail::set_policy_flag(cfg, name, flag, v); !s.ok()) return s;
  }
  if (absl::Status s = cfg.validate(); !s.ok()) return s;
  return cfg;
}

// Convenience for main(): skips argv[0].
inline absl::StatusOr<PolicyConfig> parse_policy_flags(
    int argc, const char* const* argv, std::vector<std::string>* unparsed = nullptr) {
  std::vector<std::string_view> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_policy_flags(args, unparsed);
}

// The names before 0.2 (one naming style across the API: snake_case
// functions); removed in the next release.
// NOLINTBEGIN(readability-identifier-naming)
[[deprecated("use kvroute::parse_policy_flags")]] inline absl::StatusOr<PolicyConfig>
ParsePolicyFlags(std::span<const std::string_view> args,
                 std::vector<std::string>* unparsed = nullptr) {
  return parse_policy_flags(args, unparsed);
}
[[deprecated("use kvroute::parse_policy_flags")]] inline absl::StatusOr<PolicyConfig>
ParsePolicyFlags(int argc, const char* const* argv, std::vector<std::string>* unparsed = nullptr) {
  return parse_policy_flags(argc, argv, unparsed);
}
[[deprecated("use kvroute::parse_policy_kind")]] inline absl::StatusOr<PolicyKind> ParsePolicyKind(
    std::string_view name) {
  return parse_policy_kind(name);
}
[[deprecated("use kvroute::parse_assignment_mode")]] inline absl::StatusOr<AssignmentMode>
ParseAssignmentMode(std::string_view s) {
  return parse_assignment_mode(s);
}

// NOLINTEND(readability-identifier-naming)

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_POLICY_CONFIG_HPP_
