// The documented memory bound of ApproxRadixTree under adversarial traffic
// (unique random prompts, every one a miss), shared by memory_bound_test.cpp
// and the memory_curve program.
//
// Bound: with a per-tenant budget of B units (Options::tenant_budget, or
// CacheAware's max_tree_size with reactive eviction) and N tenants,
//
//   stats().bytes <= kBytesPerUnit * B * N + kBytesPerTenant * N + kBytesConstant
//
// Why: every node holds >= 1 unit and at least one tenant, and a tenant's
// nodes hold exactly its size in units, so there are at most B * N nodes and
// B * N + N claims. The worst case is a node per unit (prompts that branch at
// every character): 48 bytes of node, up to 4 bytes of fragment (one code
// point), its child entry and tenant entry (8 bytes each, doubled for array
// growth) and a 24-byte claim - about 110 bytes. A long fragment may sit in
// a buffer up to four times its size after a split, which costs at most 3
// more bytes per byte of text. kBytesPerUnit leaves room for the slab's free
// slots and chunk rounding. kBytesPerTenant covers
// the per-tenant state (~150 bytes) and its root claim; kBytesConstant the
// root and the id table.
#ifndef KVROUTE_TESTS_RELIABILITY_MEMORY_BOUND_HPP_
#define KVROUTE_TESTS_RELIABILITY_MEMORY_BOUND_HPP_

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

namespace kvtest {

inline constexpr std::size_t kBytesPerUnit = 256;
inline constexpr std::size_t kBytesPerTenant = 512;
inline constexpr std::size_t kBytesConstant = 64 * 1024;

constexpr std::size_t memory_bound(std::size_t budget_units, std::size_t tenants) {
  return kBytesPerUnit * budget_units * tenants + kBytesPerTenant * tenants + kBytesConstant;
}

// Unique random prompts. kMixed: a random mix of ASCII, 2-, 3- and 4-byte
// characters, optionally behind one of a few shared system prompts, so that
// the tree branches both at the root and deep inside long fragments.
// kBranchy: strings over a two-letter alphabet, so that the tree is nearly a
// binary trie with a node per character (the worst case per unit; these
// repeat, which is what fills every branch).
enum class PromptShape { kMixed, kBranchy };

class AdversarialPrompts {
 public:
  explicit AdversarialPrompts(std::uint64_t seed, PromptShape shape = PromptShape::kMixed)
      : rng_(seed), shape_(shape) {}

  std::string next() {
    if (shape_ == PromptShape::kBranchy) {
      std::string s;
      const std::size_t n = 1 + rng_() % 14;
      for (std::size_t i = 0; i < n; ++i) s += (rng_() & 1) != 0 ? "a" : "\xF0\x9F\xA4\x96";
      return s;
    }
    static const char* const kSystem[] = {"", "You are a helpful assistant. ",
                                          "\xE4\xBD\xA0\xE5\xA5\xBD, assistant: "};
    static const char* const kChars[] = {
        "a", "b", "z", " ", "\xC3\xA9", "\xE4\xBD\xA0", "\xF0\x9F\xA4\x96", "\xFF"};
    std::string s = kSystem[rng_() % 3];
    const std::size_t n = 1 + rng_() % 96;
    for (std::size_t i = 0; i < n; ++i) s += kChars[rng_() % 8];
    s += std::to_string(counter_++);  // unique
    return s;
  }

 private:
  std::mt19937_64 rng_;
  PromptShape shape_;
  std::uint64_t counter_ = 0;
};

}  // namespace kvtest

#endif  // KVROUTE_TESTS_RELIABILITY_MEMORY_BOUND_HPP_
