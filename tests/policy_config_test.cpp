#include "kvroute/policy_config.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "kvroute/policies/cache_aware.hpp"
#include "kvroute/policies/least_prefill.hpp"

using kvroute::parse_policy_flags;
using kvroute::PolicyConfig;
using kvroute::PolicyKind;

namespace {
absl::StatusOr<PolicyConfig> parse(std::vector<std::string_view> args,
                                   std::vector<std::string>* rest = nullptr) {
  return parse_policy_flags(args, rest);
}
std::string error_of(std::vector<std::string_view> args) {
  auto r = parse(std::move(args));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}
}  // namespace

TEST_CASE("config: defaults are the gateway's command-line defaults", "[config]") {
  auto cfg = parse({});
  REQUIRE(cfg.ok());
  CHECK(cfg->policy == PolicyKind::kCacheAware);
  CHECK(cfg->cache_threshold == 0.3);
  CHECK(cfg->balance_abs_threshold == 64);
  CHECK(cfg->balance_rel_threshold == 1.5);
  CHECK(cfg->eviction_interval == std::chrono::seconds(120));
  CHECK(cfg->max_tree_size == 67108864u);
  CHECK(cfg->max_idle == std::chrono::seconds(14400));
  CHECK(cfg->assignment_mode == kvroute::AssignmentMode::kRandom);
  CHECK(cfg->prefix_token_count == 256u);
  CHECK(cfg->prefix_hash_load_factor == 1.25);
  CHECK(cfg->bucket_adjust_interval == std::chrono::seconds(5));
  CHECK(cfg->bounded_load_factor == 0.0);
  CHECK_FALSE(cfg->queue_weight.has_value());  // adaptive
  CHECK(cfg->kv_capacity_tokens == 0);
  CHECK(cfg->chars_per_token == 4.0);
  CHECK(cfg->max_models == 0u);
  // kvroute's own: texts among replicas while sessions add little a turn.
  CHECK(cfg->sync_text_share == 0.25);
  CHECK(cfg->sync_text_share == kvroute::CacheAware::Options{}.sync_text_share);
  CHECK(cfg->sync_text_share == kvroute::LeastPrefill::Options{}.sync_text_share);
  CHECK(PolicyConfig{}.validate().ok());
}

TEST_CASE("config: every flag parses, in both spellings", "[config]") {
  auto cfg = parse({"--policy",
                    "manual",
                    "--cache-threshold=0.5",
                    "--balance-abs-threshold",
                    "32",
                    "--balance-rel-threshold=1.1",
                    "--eviction-interval",
                    "30",
                    "--max-tree-size",
                    "10000",
                    "--max-models=7",
                    "--max-idle-secs=60",
                    "--assignment-mode",
                    "min_group",
                    "--prefix-token-count",
                    "5",
                    "--prefix-hash-load-factor",
                    "2",
                    "--bucket-adjust-interval-secs",
                    "10",
                    "--bounded-load-factor",
                    "1.5",
                    "--queue-weight=0.25",
                    "--kv-capacity-tokens",
                    "500000",
                    "--chars-per-token",
                    "3.5",
                    "--sync-text-share",
                    "0.5",
                    "--seed",
                    "42"});
  REQUIRE(cfg.ok());
  CHECK(cfg->policy == PolicyKind::kManual);
  CHECK(cfg->cache_threshold == 0.5);
  CHECK(cfg->balance_abs_threshold == 32);
  CHECK(cfg->balance_rel_threshold == 1.1);
  CHECK(cfg->eviction_interval == std::chrono::seconds(30));
  CHECK(cfg->max_tree_size == 10000u);
  CHECK(cfg->max_models == 7u);
  CHECK(cfg->max_idle == std::chrono::seconds(60));
  CHECK(cfg->assignment_mode == kvroute::AssignmentMode::kMinGroup);
  CHECK(cfg->prefix_token_count == 5u);
  CHECK(cfg->prefix_hash_load_factor == 2.0);
  CHECK(cfg->bucket_adjust_interval == std::chrono::seconds(10));
  CHECK(cfg->bounded_load_factor == 1.5);
  CHECK(cfg->queue_weight == 0.25);
  CHECK(cfg->kv_capacity_tokens == 500000);
  CHECK(cfg->chars_per_token == 3.5);
  CHECK(cfg->sync_text_share == 0.5);
  CHECK(cfg->seed == 42u);
}

TEST_CASE("config: --queue-weight adaptive restores the adaptive rule", "[config]") {
  auto cfg = parse({"--queue-weight", "1", "--queue-weight", "adaptive"});
  REQUIRE(cfg.ok());
  CHECK_FALSE(cfg->queue_weight.has_value());
}

TEST_CASE("config: launcher aliases and the --router- prefix", "[config]") {
  auto cfg = parse({"--router-policy=round_robin", "--eviction-interval-secs", "60",
                    "--router-max-tree-size=99"});
  REQUIRE(cfg.ok());
  CHECK(cfg->policy == PolicyKind::kRoundRobin);
  CHECK(cfg->eviction_interval == std::chrono::seconds(60));
  CHECK(cfg->max_tree_size == 99u);
}

TEST_CASE("config: policy names are case-insensitive, with or without underscores", "[config]") {
  for (auto [name, kind] : std::vector<std::pair<std::string_view, PolicyKind>>{
           {"RoundRobin", PolicyKind::kRoundRobin},
           {"roundrobin", PolicyKind::kRoundRobin},
           {"POWER_OF_TWO", PolicyKind::kPowerOfTwo},
           {"cacheaware", PolicyKind::kCacheAware},
           {"ConsistentHashing", PolicyKind::kConsistentHashing},
           {"prefixhash", PolicyKind::kPrefixHash},
           {"least_prefill", PolicyKind::kLeastPrefill},
           {"bucket", PolicyKind::kBucket}}) {
    auto k = kvroute::parse_policy_kind(name);
    REQUIRE(k.ok());
    CHECK(*k == kind);
  }
  for (PolicyKind k : kvroute::kAllPolicyKinds) {
    auto back = kvroute::parse_policy_kind(kvroute::to_string(k));
    REQUIRE(back.ok());
    CHECK(*back == k);
  }
}

TEST_CASE("config: errors name the flag and the value", "[config]") {
  CHECK_THAT(error_of({"--policy", "fastest"}),
             Catch::Contains("--policy") && Catch::Contains("'fastest'"));
  CHECK_THAT(error_of({"--cache-threshold", "abc"}), Catch::Contains("--cache-threshold") &&
                                                         Catch::Contains("'abc'") &&
                                                         Catch::Contains("not a number"));
  CHECK_THAT(error_of({"--cache-threshold", "1.5"}), Catch::Contains("--cache-threshold") &&
                                                         Catch::Contains("1.5") &&
                                                         Catch::Contains("[0, 1]"));
  CHECK_THAT(error_of({"--cache-threshold", "nan"}),
             Catch::Contains("--cache-threshold") && Catch::Contains("'nan'"));
  CHECK_THAT(error_of({"--cache-threshold", "-0.1"}),
             Catch::Contains("--cache-threshold") && Catch::Contains("-0.1"));
  CHECK_THAT(error_of({"--balance-rel-threshold", "0.5"}),
             Catch::Contains("--balance-rel-threshold") && Catch::Contains("0.5"));
  CHECK_THAT(error_of({"--balance-rel-threshold", "inf"}),
             Catch::Contains("--balance-rel-threshold") && Catch::Contains("inf"));
  CHECK_THAT(error_of({"--balance-abs-threshold", "-3"}),
             Catch::Contains("--balance-abs-threshold") && Catch::Contains("'-3'"));
  CHECK_THAT(error_of({"--eviction-interval", "0"}),
             Catch::Contains("--eviction-interval") && Catch::Contains("0"));
  CHECK_THAT(error_of({"--eviction-interval", "99999999999999"}),
             Catch::Contains("--eviction-interval") && Catch::Contains("99999999999999"));
  CHECK_THAT(error_of({"--max-tree-size", "0"}), Catch::Contains("--max-tree-size"));
  CHECK_THAT(error_of({"--max-tree-size", "1e3"}),
             Catch::Contains("--max-tree-size") && Catch::Contains("'1e3'"));
  CHECK_THAT(error_of({"--max-tree-size", "999999999999999999999999"}),
             Catch::Contains("--max-tree-size"));
  CHECK_THAT(error_of({"--prefix-token-count", "0"}), Catch::Contains("--prefix-token-count"));
  CHECK_THAT(error_of({"--prefix-token-count", "5000000000"}),
             Catch::Contains("--prefix-token-count") && Catch::Contains("5000000000"));
  CHECK_THAT(error_of({"--prefix-hash-load-factor", "0.9"}),
             Catch::Contains("--prefix-hash-load-factor") && Catch::Contains("0.9"));
  CHECK_THAT(error_of({"--bucket-adjust-interval-secs", "0"}),
             Catch::Contains("--bucket-adjust-interval-secs"));
  CHECK_THAT(error_of({"--bounded-load-factor", "0.5"}),
             Catch::Contains("--bounded-load-factor") && Catch::Contains("0.5"));
  CHECK_THAT(error_of({"--queue-weight", "-0.5"}),
             Catch::Contains("--queue-weight") && Catch::Contains("-0.5"));
  CHECK_THAT(error_of({"--queue-weight", "fast"}), Catch::Contains("--queue-weight") &&
                                                       Catch::Contains("'fast'") &&
                                                       Catch::Contains("adaptive"));
  CHECK_THAT(error_of({"--kv-capacity-tokens", "-5"}),
             Catch::Contains("kv_capacity_tokens") && Catch::Contains("-5"));
  CHECK_THAT(error_of({"--kv-capacity-tokens", "1.5"}),
             Catch::Contains("--kv-capacity-tokens") && Catch::Contains("'1.5'"));
  CHECK_THAT(error_of({"--chars-per-token", "0"}), Catch::Contains("--chars-per-token"));
  CHECK_THAT(error_of({"--sync-text-share", "1.5"}),
             Catch::Contains("sync_text_share") && Catch::Contains("1.5"));
  CHECK_THAT(error_of({"--sync-text-share", "-0.1"}),
             Catch::Contains("--sync-text-share") && Catch::Contains("-0.1"));
  CHECK_THAT(error_of({"--assignment-mode", "fair"}),
             Catch::Contains("--assignment-mode") && Catch::Contains("'fair'"));
  CHECK_THAT(error_of({"--cache-threshold"}),
             Catch::Contains("--cache-threshold") && Catch::Contains("missing value"));
  CHECK_THAT(error_of({"--worker-urls", "http://a"}),
             Catch::Contains("--worker-urls") && Catch::Contains("unknown flag"));
  CHECK_THAT(error_of({"round_robin"}), Catch::Contains("'round_robin'"));
  // Control bytes in a value are shown escaped, never raw.
  CHECK_THAT(error_of({"--policy", std::string_view("ra\x01nd", 5)}), Catch::Contains("\\x01"));
}

TEST_CASE("config: an unknown flag's name is shown escaped", "[config]") {
  // The name was copied into the error raw: a newline or escape sequence
  // in an argument went into the host's log line as is.
  const std::string e = error_of({"--eviction-interval-secs\n\x1b[2J\xff"});
  CHECK_THAT(e, Catch::Contains("--eviction-interval-secs\\n\\x1b[2J\\xff") &&
                    Catch::Contains("unknown flag"));
  CHECK(std::none_of(e.begin(), e.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7F;
  }));
  CHECK_THAT(error_of({std::string_view("--router-x\0y=1", 14)}), Catch::Contains("--x\\x00y"));
}

TEST_CASE("config: unknown flags can be passed through to the host", "[config]") {
  std::vector<std::string> rest;
  auto cfg =
      parse({"--worker-urls", "http://a", "http://b", "--policy=random", "--prometheus-port=29000"},
            &rest);
  REQUIRE(cfg.ok());
  CHECK(cfg->policy == PolicyKind::kRandom);
  CHECK(rest == std::vector<std::string>{"--worker-urls", "http://a", "http://b",
                                         "--prometheus-port=29000"});
}

TEST_CASE("config: validate names the field of a hand-built config", "[config]") {
  PolicyConfig cfg;
  cfg.cache_threshold = std::numeric_limits<double>::quiet_NaN();
  CHECK_THAT(std::string(cfg.validate().message()),
             Catch::Contains("cache_threshold") && Catch::Contains("nan"));
  cfg = PolicyConfig{};
  cfg.max_idle = std::chrono::seconds(-1);
  CHECK_THAT(std::string(cfg.validate().message()),
             Catch::Contains("max_idle") && Catch::Contains("-1"));
}

TEST_CASE("config: argc/argv overload skips the program name", "[config]") {
  const char* argv[] = {"router", "--policy", "bucket"};
  auto cfg = parse_policy_flags(3, argv);
  REQUIRE(cfg.ok());
  CHECK(cfg->policy == PolicyKind::kBucket);
}

TEST_CASE("config: the names before 0.2 still work, deprecated", "[config]") {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  const std::vector<std::string_view> args = {"--policy", "manual", "--assignment-mode",
                                              "min_load"};
  auto old = kvroute::ParsePolicyFlags(args);
  REQUIRE(old.ok());
  CHECK(old->policy == kvroute::PolicyKind::kManual);
  CHECK(old->validate().ok());
  CHECK(old->Validate().ok());
  CHECK(kvroute::ParsePolicyKind("bucket").value() == kvroute::PolicyKind::kBucket);
  CHECK(kvroute::ParseAssignmentMode("min_group").value() == kvroute::AssignmentMode::kMinGroup);
  const char* argv[] = {"prog", "--policy", "random"};
  CHECK(kvroute::ParsePolicyFlags(3, argv)->policy == kvroute::PolicyKind::kRandom);
  kvroute::PolicyConfig bad;
  bad.cache_threshold = 2;
  CHECK(bad.Validate().message() == bad.validate().message());
#pragma GCC diagnostic pop
}
