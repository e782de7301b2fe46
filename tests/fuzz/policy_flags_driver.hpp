// The parse_policy_flags fuzz driver, shared by the libFuzzer target
// (policy_flags_fuzz.cpp), its corpus replay and a Catch2 test
// (policy_flags_driver_test.cpp).
//
// Input: byte 0 chooses the argument separator (bit 0: '\n', else NUL) and
// whether the argc/argv overload is compared too (bit 1, NUL-separated
// only); the rest, split at the separator, is the argument list (empty
// arguments included). Every byte string is a valid input.
//
// Checks, parsing with unknown flags as errors (strict) and passed through:
//   * never an exception; the argv overload agrees with the span one;
//   * an error is InvalidArgument, printable ASCII (other bytes escaped),
//     and names what the user typed: "argument <i>: '<arg>' is not a
//     --flag" for a non-flag argument, else it starts with a flag that an
//     argument spells ("--<flag>: ..." or "<field> (--<flag>): ...", with
//     the --router- prefix dropped, --eviction-interval-secs reported as
//     --eviction-interval when the value is out of range); a quoted value
//     right after the flag is one the arguments hold;
//   * passing unknown flags through never errs where strict parsing
//     succeeds, then gives the same config and passes nothing through; what
//     it passes through is a subsequence of the arguments and holds no
//     known flag; it never reports an unknown flag or a non-flag argument;
//   * a config that parses passes Validate, builds its policy with
//     make_policy (named after it), routes requests in a Router, before and
//     after clock jumps and maintenance, and renders back to flags that
//     parse to the same config.
#ifndef KVROUTE_TESTS_FUZZ_POLICY_FLAGS_DRIVER_HPP_
#define KVROUTE_TESTS_FUZZ_POLICY_FLAGS_DRIVER_HPP_

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "fuzz/byte_reader.hpp"
#include "fuzz/router_checks.hpp"
#include "kvroute/any_policy.hpp"
#include "kvroute/clock.hpp"
#include "kvroute/policy_config.hpp"
#include "kvroute/router.hpp"

namespace kvfuzz {

// The flags parse_policy_flags knows, without "--" and "router-".
inline constexpr std::string_view kPolicyFlags[] = {"policy",
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
                                                    "seed"};

// The flag an argument spells (after "--", before any "=", without one
// "router-"), or nullopt for an argument that is not a --flag.
inline std::optional<std::string_view> flag_name(std::string_view arg) {
  if (arg.size() < 3 || arg.substr(0, 2) != "--") return std::nullopt;
  std::string_view name = arg.substr(2);
  name = name.substr(0, name.find('='));
  if (name.substr(0, 7) == "router-") name = name.substr(7);
  return name;
}

inline bool known_flag(std::string_view name) {
  return std::find(std::begin(kPolicyFlags), std::end(kPolicyFlags), name) !=
         std::end(kPolicyFlags);
}

inline std::string hex_escaped(std::string_view s) {
  return absl::CHexEscape(absl::string_view(s.data(), s.size()));
}

// The config's every field as --flag=value, values spelled so that they
// parse back exactly (shortest round-trip form for doubles).
inline std::vector<std::string> render_flags(const kvroute::PolicyConfig& c) {
  auto num = [](auto v) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof(buf), v);
    return std::string(buf, r.ptr);
  };
  return {"--policy=" + std::string(kvroute::to_string(c.policy)),
          "--cache-threshold=" + num(c.cache_threshold),
          "--balance-abs-threshold=" + num(c.balance_abs_threshold),
          "--balance-rel-threshold=" + num(c.balance_rel_threshold),
          "--eviction-interval=" + num(c.eviction_interval.count()),
          "--max-tree-size=" + num(c.max_tree_size),
          "--max-models=" + num(c.max_models),
          "--max-idle-secs=" + num(c.max_idle.count()),
          "--assignment-mode=" + std::string(kvroute::to_string(c.assignment_mode)),
          "--prefix-token-count=" + num(c.prefix_token_count),
          "--prefix-hash-load-factor=" + num(c.prefix_hash_load_factor),
          "--bucket-adjust-interval-secs=" + num(c.bucket_adjust_interval.count()),
          "--bounded-load-factor=" + num(c.bounded_load_factor),
          "--queue-weight=" + (c.queue_weight ? num(*c.queue_weight) : std::string("adaptive")),
          "--kv-capacity-tokens=" + num(c.kv_capacity_tokens),
          "--chars-per-token=" + num(c.chars_per_token),
          "--seed=" + num(c.seed)};
}

inline bool same_config(const kvroute::PolicyConfig& a, const kvroute::PolicyConfig& b) {
  return a.policy == b.policy && a.cache_threshold == b.cache_threshold &&
         a.balance_abs_threshold == b.balance_abs_threshold &&
         a.balance_rel_threshold == b.balance_rel_threshold &&
         a.eviction_interval == b.eviction_interval && a.max_tree_size == b.max_tree_size &&
         a.max_models == b.max_models && a.max_idle == b.max_idle &&
         a.assignment_mode == b.assignment_mode && a.prefix_token_count == b.prefix_token_count &&
         a.prefix_hash_load_factor == b.prefix_hash_load_factor &&
         a.bucket_adjust_interval == b.bucket_adjust_interval &&
         a.bounded_load_factor == b.bounded_load_factor && a.queue_weight == b.queue_weight &&
         a.kv_capacity_tokens == b.kv_capacity_tokens && a.chars_per_token == b.chars_per_token &&
         a.seed == b.seed;
}

// Whether `rest`, an error after its flag prefix, quotes a value the
// arguments hold (a whole argument or what follows its "="), if it quotes
// one.
inline bool quotes_an_argument(std::string_view rest, std::span<const std::string_view> args) {
  if (rest.empty() || rest.front() != '\'') return true;  // no quoted value
  auto quoted = [rest](std::string_view v) { return rest.starts_with("'" + hex_escaped(v) + "'"); };
  for (std::string_view a : args) {
    if (quoted(a)) return true;
    if (const auto eq = a.find('='); eq != std::string_view::npos && quoted(a.substr(eq + 1))) {
      return true;
    }
  }
  return false;
}

// "" when `st` is an error that says what the user typed (see the file
// comment); `passthrough` when unknown flags were passed through.
inline std::string check_flag_error(const absl::Status& st, std::span<const std::string_view> args,
                                    bool passthrough) {
  const std::string m(st.message());
  if (st.code() != absl::StatusCode::kInvalidArgument) return "error code: " + st.ToString();
  if (!printable(m)) return "raw bytes in the error: " + show_bytes(m);
  if (m.starts_with("argument ")) {
    if (passthrough) return "a non-flag argument is an error although they pass through";
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (!flag_name(args[i]) && m == "argument " + std::to_string(i) + ": '" +
                                          hex_escaped(args[i]) + "' is not a --flag") {
        return "";
      }
    }
    return "the error names no non-flag argument: " + m;
  }
  for (std::string_view a : args) {
    const std::optional<std::string_view> name = flag_name(a);
    if (!name) continue;
    std::vector<std::string> spelled = {hex_escaped(*name)};
    if (*name == "eviction-interval-secs") spelled.emplace_back("eviction-interval");
    for (const std::string& f : spelled) {
      const std::string direct = "--" + f + ": ";
      if (m.starts_with(direct)) {
        if (passthrough && m == direct + "unknown flag") return "an unknown flag although passed";
        if (!quotes_an_argument(std::string_view(m).substr(direct.size()), args)) {
          return "the error quotes a value no argument holds: " + m;
        }
        return "";
      }
      const std::size_t at = m.find(" (--" + f + "): ");
      const bool field = at != std::string::npos && at > 0 &&
                         std::all_of(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(at),
                                     [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; });
      if (field) return "";
    }
  }
  return "the error names no flag an argument spells: " + m;
}

// A config that parsed: it validates, builds, routes, and renders back.
inline std::string check_parsed_config(const kvroute::PolicyConfig& c) {
  if (absl::Status s = c.validate(); !s.ok()) return "parsed, yet Validate: " + s.ToString();
  const std::vector<std::string> rendered = render_flags(c);
  const std::vector<std::string_view> views(rendered.begin(), rendered.end());
  const absl::StatusOr<kvroute::PolicyConfig> back = kvroute::parse_policy_flags(views);
  if (!back.ok()) return "its own flags do not parse: " + back.status().ToString();
  if (!same_config(*back, c)) return "its own flags parse to another config";

  kvroute::ManualClock clock;
  absl::StatusOr<kvroute::AnyPolicy> policy = kvroute::make_policy(c, clock);
  if (!policy.ok()) return "make_policy: " + policy.status().ToString();
  if (policy->name() != kvroute::to_string(c.policy)) return "the policy's name";
  kvroute::Router<kvroute::AnyPolicy> router(*std::move(policy));
  if (!router.add_worker({.url = "http://a:1"}).ok() ||
      !router.add_worker({.url = "http://b:1", .model = "m"}).ok()) {
    return "add_worker";
  }
  const std::string text = "You are a helpful assistant. " + std::string(300, 'x');
  const kvroute::Header headers[] = {{"x-smg-routing-key", "k"}};
  for (int round = 0; round < 4; ++round) {
    const kvroute::RequestView r{
        .text = std::string_view(text).substr(0, 40 * static_cast<std::size_t>(round)),
        .headers = headers,
        .model = round % 2 == 0 ? "" : "m"};
    const kvroute::Selection s = router.select(r);
    if (!s) return "no worker for round " + std::to_string(round);
    kvroute::DispatchInfo info{.routing_key = "k"};
    if (auto* lp = router.policy().get<kvroute::LeastPrefill>()) {
      info.tokens = lp->predicted_tokens(r, s.decision);
      if (info.tokens < 0) return "negative predicted tokens";
      lp->report_cached(r, s.decision, 0);
    } else if (auto* ca = router.policy().get<kvroute::CacheAware>()) {
      ca->report_cached(r, s.decision, 0);
    }
    kvroute::LoadGuard guard = router.dispatch(s, info);
    if (!guard.active()) return "dispatch";
    clock.advance(std::chrono::seconds(round == 1 ? (std::int64_t{1} << 32) : 121));
    router.maintain();
  }
  return "";
}

// "" or a description of the first failed check.
inline std::string run_policy_flags(const std::uint8_t* data, std::size_t size) {
  ByteReader in(data, size);
  const std::uint8_t mode = in.next();
  const char sep = (mode & 1) != 0 ? '\n' : '\0';
  const std::string_view bytes(reinterpret_cast<const char*>(data) + (size > 0 ? 1 : 0),
                               size > 0 ? size - 1 : 0);
  std::vector<std::string_view> args;
  for (std::size_t start = 0; start <= bytes.size();) {
    const std::size_t end = std::min(bytes.find(sep, start), bytes.size());
    if (!bytes.empty()) args.push_back(bytes.substr(start, end - start));
    start = end + 1;
  }
  std::string shown;
  for (std::string_view a : args) shown += " " + show_bytes(a);
  auto fail = [&](const std::string& e) { return "args:" + shown + "\nFAILED: " + e; };
  try {
    const absl::StatusOr<kvroute::PolicyConfig> strict = kvroute::parse_policy_flags(args);
    std::vector<std::string> rest;
    const absl::StatusOr<kvroute::PolicyConfig> passed = kvroute::parse_policy_flags(args, &rest);
    if (!strict.ok()) {
      if (std::string e = check_flag_error(strict.status(), args, false); !e.empty())
        return fail(e);
    }
    if (!passed.ok()) {
      if (std::string e = check_flag_error(passed.status(), args, true); !e.empty()) return fail(e);
    }
    if (strict.ok() && (!passed.ok() || !same_config(*strict, *passed) || !rest.empty())) {
      return fail("passing unknown flags through changed a strict parse");
    }
    if (passed.ok()) {
      std::size_t at = 0;
      for (const std::string& r : rest) {
        if (const auto name = flag_name(r); name && known_flag(*name)) {
          return fail("known flag passed through: " + show_bytes(r));
        }
        while (at < args.size() && args[at] != r) ++at;
        if (at++ == args.size())
          return fail("passed through what is no argument: " + show_bytes(r));
      }
      if (std::string e = check_parsed_config(*passed); !e.empty()) return fail(e);
    }
    if ((mode & 2) != 0 && sep == '\0') {
      std::vector<std::string> owned = {"router"};
      owned.insert(owned.end(), args.begin(), args.end());
      std::vector<const char*> argv;
      for (const std::string& a : owned) argv.push_back(a.c_str());
      const auto via_argv = kvroute::parse_policy_flags(static_cast<int>(argv.size()), argv.data());
      if (via_argv.ok() != strict.ok() || (strict.ok() && !same_config(*via_argv, *strict)) ||
          (!strict.ok() && via_argv.status() != strict.status())) {
        return fail("the argc/argv overload disagrees");
      }
    }
  } catch (...) {
    return fail("an exception escaped");
  }
  return "";
}

}  // namespace kvfuzz

#endif  // KVROUTE_TESTS_FUZZ_POLICY_FLAGS_DRIVER_HPP_
