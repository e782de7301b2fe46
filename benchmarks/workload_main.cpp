// kvroute_workload: writes one of the benchmark workload shapes
// (workloads/generators.hpp) to stdout, one request per line (newlines
// inside a request become spaces), for kvroute_tree_replay or another
// implementation's replay tool.
//
//   kvroute_workload SHAPE [-n N] [--seed S] [--stats]
//     SHAPE    chat | chat_mixed | chat_wide | batch | branchy
//     -n N     number of requests (default 20000)
//     --seed S generator seed (default 1)
//     --stats  also print one line of JSON with the shape's statistics to
//              stderr: requests, mean/median/max length in characters, and
//              the fraction of characters shared with an earlier request
//              (the longest prefix any earlier request has in common).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "kvroute/detail/utf8.hpp"
#include "kvroute/radix_tree.hpp"
#include "workloads/generators.hpp"

namespace {

int usage(const char* msg) {
  std::fprintf(stderr,
               "kvroute_workload: %s\n"
               "usage: kvroute_workload chat|chat_mixed|chat_wide|batch|branchy [-n N] [--seed S] "
               "[--stats]\n",
               msg);
  return 2;
}

bool parse_u64(const char* s, std::uint64_t& out) {
  if (s == nullptr || *s == '\0') return false;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (*end != '\0' || s[0] == '-') return false;
  out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage("missing SHAPE");
  const std::string_view shape = argv[1];
  std::uint64_t n = 20000;
  std::uint64_t seed = 1;
  bool stats = false;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    if ((a == "-n" || a == "--seed") && i + 1 < argc) {
      std::uint64_t v = 0;
      if (!parse_u64(argv[i + 1], v)) return usage("expected a non-negative integer");
      (a == "-n" ? n : seed) = v;
      ++i;
    } else if (a == "--stats") {
      stats = true;
    } else {
      return usage(("unknown or incomplete argument: " + std::string(a)).c_str());
    }
  }
  if (shape != "chat" && shape != "chat_mixed" && shape != "chat_wide" && shape != "batch" &&
      shape != "branchy") {
    return usage(("unknown shape: " + std::string(shape)).c_str());
  }
  std::vector<std::string> reqs = kvbench::make_workload(shape, static_cast<std::size_t>(n), seed);
  for (std::string& r : reqs) {
    std::replace(r.begin(), r.end(), '\n', ' ');
    std::replace(r.begin(), r.end(), '\r', ' ');
    r += '\n';
    if (std::fwrite(r.data(), 1, r.size(), stdout) != r.size()) {
      std::fprintf(stderr, "kvroute_workload: write failed\n");
      return 1;
    }
    r.pop_back();
  }
  if (std::fflush(stdout) != 0) {
    std::fprintf(stderr, "kvroute_workload: write failed\n");
    return 1;
  }
  if (stats) {
    kvroute::ApproxRadixTree tree;
    std::vector<std::size_t> len;
    std::size_t chars = 0, shared = 0, bytes = 0;
    for (const std::string& r : reqs) {
      const auto m = tree.match(r);
      shared += m.matched;
      chars += m.input;
      bytes += r.size();
      len.push_back(m.input);
      tree.insert(r, 0);
    }
    std::sort(len.begin(), len.end());
    const double mean =
        len.empty() ? 0.0 : static_cast<double>(chars) / static_cast<double>(len.size());
    const std::size_t median = len.empty() ? 0 : len[len.size() / 2];
    const std::size_t max = len.empty() ? 0 : len.back();
    std::fprintf(stderr,
                 "{\"shape\":\"%.*s\",\"seed\":%llu,\"requests\":%zu,\"chars\":%zu,\"bytes\":%zu,"
                 "\"mean_chars\":%.1f,\"median_chars\":%zu,\"max_chars\":%zu,"
                 "\"shared_fraction\":%.4f,\"distinct_chars\":%zu}\n",
                 static_cast<int>(shape.size()), shape.data(),
                 static_cast<unsigned long long>(seed), len.size(), chars, bytes, mean, median, max,
                 chars == 0 ? 0.0 : static_cast<double>(shared) / static_cast<double>(chars),
                 tree.stats().units);
  }
  return 0;
}
