// The parse_policy_flags fuzz driver (fuzz/policy_flags_driver.hpp) in every
// build: on hand-written argument lists, and on seeded pseudo-random lists
// of flags, values and stray bytes, which must both parse and fail often
// enough for the checks to mean something.
#include "fuzz/policy_flags_driver.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace {

// The driver's input for `args`: NUL-separated, argv overload compared.
std::vector<std::uint8_t> input(const std::vector<std::string_view>& args) {
  std::vector<std::uint8_t> in = {2};
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (i > 0) in.push_back(0);
    in.insert(in.end(), args[i].begin(), args[i].end());
  }
  return in;
}

std::string run(const std::vector<std::string_view>& args) {
  const std::vector<std::uint8_t> in = input(args);
  return kvfuzz::run_policy_flags(in.data(), in.size());
}

TEST_CASE("flags driver: hand-written argument lists pass every check") {
  const std::vector<std::vector<std::string_view>> lists = {
      {},
      {"--policy", "round_robin"},
      {"--router-policy=least_prefill", "--chars-per-token", "4.9e-324"},
      {"--policy=consistent_hashing", "--bounded-load-factor=1e308"},
      {"--policy=manual", "--assignment-mode", "MIN_GROUP", "--max-idle-secs=0"},
      {"--policy=bucket", "--bucket-adjust-interval-secs", "4294967295"},
      {"--eviction-interval-secs", "0"},
      {"--cache-threshold"},
      {"--policy", "--seed"},
      {"positional"},
      {"--worker-urls", "http://a", "--policy=random"},
      {"--x", ""},
      {"--max-tree-size=18446744073709551616"},
      {"--queue-weight=-0"},
  };
  for (const auto& args : lists) {
    const std::string failure = run(args);
    CHECK(failure.empty());
    if (!failure.empty()) UNSCOPED_INFO(failure);
  }
}

TEST_CASE("flags driver: random argument lists pass every check") {
  const std::vector<std::string> vocabulary = [] {
    std::vector<std::string> v;
    for (std::string_view f : kvfuzz::kPolicyFlags) {
      v.push_back("--" + std::string(f));
      v.push_back("--router-" + std::string(f) + "=");
    }
    for (const char* x : {"cache_aware", "round_robin", "LeastPrefill",
                          "min_load",    "0",           "1",
                          "-1",          "0.3",         "1.5",
                          "nan",         "inf",         "1e308",
                          "4.9e-324",    "4294967296",  "18446744073709551615",
                          "1e3",         " 5",          "--",
                          "--router-",   "--x",         "",
                          "\x01",        "\xff",        "\n"}) {
      v.emplace_back(x);
    }
    return v;
  }();
  std::mt19937_64 rng(20261203);
  int parsed = 0;
  int failed = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<std::uint8_t> in = {static_cast<std::uint8_t>(rng() % 4)};
    const int n = static_cast<int>(rng() % 7);
    for (int k = 0; k < n; ++k) {
      if (k > 0) in.push_back((in[0] & 1) != 0 ? '\n' : '\0');
      const std::string& w = vocabulary[rng() % vocabulary.size()];
      in.insert(in.end(), w.begin(), w.end());
      if (rng() % 3 == 0) {  // glue a value on
        const std::string& v = vocabulary[rng() % vocabulary.size()];
        in.insert(in.end(), v.begin(), v.end());
      }
    }
    const std::string failure = kvfuzz::run_policy_flags(in.data(), in.size());
    if (!failure.empty()) {
      FAIL_CHECK("input " << i << ":\n" << failure);
      return;
    }
    // Count what strict parsing made of it (the driver checked the rest).
    std::vector<std::string_view> args;
    const std::string_view bytes(reinterpret_cast<const char*>(in.data()) + 1, in.size() - 1);
    const char sep = (in[0] & 1) != 0 ? '\n' : '\0';
    for (std::size_t start = 0; !bytes.empty() && start <= bytes.size();) {
      const std::size_t end = std::min(bytes.find(sep, start), bytes.size());
      args.push_back(bytes.substr(start, end - start));
      start = end + 1;
    }
    ++(kvroute::parse_policy_flags(args).ok() ? parsed : failed);
  }
  CHECK(parsed > 100);
  CHECK(failed > 100);
}

}  // namespace
