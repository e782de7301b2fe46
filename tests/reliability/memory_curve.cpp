// Prints how ApproxRadixTree's own byte accounting (stats().bytes) evolves
// under adversarial traffic (unique random prompts at full speed, reactive
// eviction to a small budget), next to the documented bound from
// memory_bound.hpp. Not a test: run it by hand.
//
//   cmake --build build/dev --target kvroute_memory_curve
//   ./build/dev/tests/reliability/kvroute_memory_curve [inserts] [budget] [tenants]
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kvroute/radix_tree.hpp"
#include "memory_bound.hpp"

int curve(std::size_t inserts, std::size_t budget, std::size_t tenants, kvtest::PromptShape shape);

int main(int argc, char** argv) {
  const std::size_t inserts = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000;
  const std::size_t budget = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 4096;
  const std::size_t tenants = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 8;
  if (inserts == 0 || budget == 0 || tenants == 0) {
    std::fprintf(stderr, "usage: %s [inserts>0] [budget>0] [tenants>0]\n", argv[0]);
    return 2;
  }
  int rc = 0;
  for (kvtest::PromptShape shape : {kvtest::PromptShape::kMixed, kvtest::PromptShape::kBranchy}) {
    rc |= curve(inserts, budget, tenants, shape);
  }
  return rc;
}

int curve(std::size_t inserts, std::size_t budget, std::size_t tenants, kvtest::PromptShape shape) {
  kvroute::ApproxRadixTree tree(kvroute::ApproxRadixTree::Options{.tenant_budget = budget});
  kvtest::AdversarialPrompts prompts(1, shape);
  const std::size_t bound = kvtest::memory_bound(budget, tenants);
  std::printf("\n%s prompts: budget %zu units x %zu tenants, bound %zu bytes\n",
              shape == kvtest::PromptShape::kMixed ? "mixed" : "branchy", budget, tenants, bound);
  std::printf("%10s %12s %10s %10s %10s %8s %8s %8s\n", "inserts", "bytes", "peak", "nodes",
              "units", "B/unit", "peak/bd", "ins/s");
  std::size_t peak = 0;
  const auto start = std::chrono::steady_clock::now();
  const std::size_t every = inserts / 20 == 0 ? 1 : inserts / 20;
  for (std::size_t i = 1; i <= inserts; ++i) {
    const std::string p = prompts.next();
    tree.insert(p, static_cast<kvroute::TenantId>(i % tenants));
    const kvroute::RadixTreeStats s = tree.stats();
    if (s.bytes > peak) peak = s.bytes;
    if (i % every == 0 || i == inserts) {
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("%10zu %12zu %10zu %10zu %10zu %8.1f %8.3f %8.0f\n", i, s.bytes, peak, s.nodes,
                  s.units, static_cast<double>(s.bytes) / static_cast<double>(s.units + 1),
                  static_cast<double>(peak) / static_cast<double>(bound),
                  static_cast<double>(i) / secs);
    }
  }
  if (peak > bound) {
    std::printf("BOUND EXCEEDED: peak %zu > %zu\n", peak, bound);
    return 1;
  }
  return 0;
}
