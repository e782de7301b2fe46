// -----------------------------------------------------------------------------
// File: kvroute/policy_config.hpp
// -----------------------------------------------------------------------------
//
// `PolicyConfig`: the one canonical configuration of every policy, with the
// gateway's command-line defaults (not its struct defaults, which differ), and
// `ParsePolicyFlags`, which reads it from argv-style strings using the
// gateway's flag names. `MakePolicy` (any_policy.hpp) builds a policy from it.
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
//   --queue-weight                  0.4         queue_weight           >= 0
//   --chars-per-token               4           chars_per_token        > 0
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
//   absl::StatusOr<kvroute::PolicyConfig> cfg = kvroute::ParsePolicyFlags(args);
//   // cfg->policy == PolicyKind::kRoundRobin, cfg->cache_threshold == 0.5
//   // {"--cache-threshold", "2"} -> InvalidArgument:
//   //   "cache_threshold (--cache-threshold): 2 is outside [0, 1]"

#ifndef KVROUTE_POLICY_CONFIG_HPP_
#define KVROUTE_POLICY_CONFIG_HPP_

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
inline absl::StatusOr<PolicyKind> ParsePolicyKind(std::string_view name) {
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

inline absl::StatusOr<AssignmentMode> ParseAssignmentMode(std::string_view s) {
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
  // request's uncached work, and characters per token.
  double queue_weight = 0.4;
  double chars_per_token = 4.0;

  // Every randomised choice.
  std::uint64_t seed = detail::kDefaultSeed;

  // Returns OK, or InvalidArgument naming the first bad field and its value.
  absl::Status Validate() const;
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

inline absl::Status PolicyConfig::Validate() const {
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
  if (!(queue_weight >= 0.0) || std::isinf(queue_weight)) {
    return bad("queue_weight", "--queue-weight", show(queue_weight), "must be finite and >= 0");
  }
  if (!(chars_per_token > 0.0) || std::isinf(chars_per_token)) {
    return bad("chars_per_token", "--chars-per-token", show(chars_per_token),
               "must be finite and > 0");
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

// Parses policy flags from `args` (no program name). Flags this parser does
// not know are appended to `*unparsed` (with their value when given as
// `--flag=value`; a following separate value cannot be attributed and is
// kept too) when `unparsed` is non-null, and are an error otherwise. The
// result has been validated.
inline absl::StatusOr<PolicyConfig> ParsePolicyFlags(std::span<const std::string_view> args,
                                                     std::vector<std::string>* unparsed = nullptr) {
  PolicyConfig cfg;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg.size() < 3 || arg.substr(0, 2) != "--") {
      if (unparsed != nullptr) {
        unparsed->emplace_back(arg);
        continue;
      }
      return absl::InvalidArgumentError(
          absl::StrCat("argument ", i, ": ", detail::quoted(arg), " is not a --flag"));
    }
    std::string_view name = arg.substr(2);
    std::optional<std::string_view> inline_value;
    if (auto eq = name.find('='); eq != std::string_view::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (name.substr(0, 7) == "router-") name = name.substr(7);

    // Returns the flag's value: inline, or the next argument.
    auto value = [&](std::string_view& out) -> absl::Status {
      if (inline_value) {
        out = *inline_value;
        return absl::OkStatus();
      }
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", absl::string_view(name.data(), name.size()), ": missing value"));
      }
      out = args[++i];
      return absl::OkStatus();
    };
    const std::string flag = absl::StrCat("--", absl::string_view(name.data(), name.size()));
    std::string_view v;
    absl::Status s;
    auto number = [&](auto& field) {
      s = value(v);
      if (s.ok()) s = detail::parse_value(flag, v, field);
    };
    if (name == "policy") {
      s = value(v);
      if (s.ok()) {
        auto k = ParsePolicyKind(v);
        if (k.ok())
          cfg.policy = *k;
        else
          s = k.status();
      }
    } else if (name == "cache-threshold") {
      number(cfg.cache_threshold);
    } else if (name == "balance-abs-threshold") {
      number(cfg.balance_abs_threshold);
    } else if (name == "balance-rel-threshold") {
      number(cfg.balance_rel_threshold);
    } else if (name == "eviction-interval" || name == "eviction-interval-secs") {
      number(cfg.eviction_interval);
    } else if (name == "max-tree-size") {
      number(cfg.max_tree_size);
    } else if (name == "max-models") {
      number(cfg.max_models);
    } else if (name == "max-idle-secs") {
      number(cfg.max_idle);
    } else if (name == "assignment-mode") {
      s = value(v);
      if (s.ok()) {
        auto m = ParseAssignmentMode(v);
        if (m.ok())
          cfg.assignment_mode = *m;
        else
          s = m.status();
      }
    } else if (name == "prefix-token-count") {
      number(cfg.prefix_token_count);
    } else if (name == "prefix-hash-load-factor") {
      number(cfg.prefix_hash_load_factor);
    } else if (name == "bucket-adjust-interval-secs") {
      number(cfg.bucket_adjust_interval);
    } else if (name == "bounded-load-factor") {
      number(cfg.bounded_load_factor);
    } else if (name == "queue-weight") {
      number(cfg.queue_weight);
    } else if (name == "chars-per-token") {
      number(cfg.chars_per_token);
    } else if (name == "seed") {
      number(cfg.seed);
    } else if (unparsed != nullptr) {
      unparsed->emplace_back(arg);
      continue;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": unknown flag"));
    }
    if (!s.ok()) return s;
  }
  if (absl::Status s = cfg.Validate(); !s.ok()) return s;
  return cfg;
}

// Convenience for main(): skips argv[0].
inline absl::StatusOr<PolicyConfig> ParsePolicyFlags(int argc, const char* const* argv,
                                                     std::vector<std::string>* unparsed = nullptr) {
  std::vector<std::string_view> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return ParsePolicyFlags(args, unparsed);
}

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_POLICY_CONFIG_HPP_
