// Test support for the radix tree's tests (tests/radix/*_test.cpp): the
// invariant check every test ends with, and small builders.
#ifndef KVROUTE_TESTS_RADIX_TREE_SUPPORT_HPP_
#define KVROUTE_TESTS_RADIX_TREE_SUPPORT_HPP_

#include <catch2/catch.hpp>

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kvroute/radix_tree.hpp"

KVROUTE_NAMESPACE_BEGIN
inline std::ostream& operator<<(std::ostream& os, const TenantSize& s) {
  return os << "{t" << s.tenant << ": " << s.size << "}";
}
KVROUTE_NAMESPACE_END

namespace kvtest {

// What the slab of nodes and claims holds once it has its first chunk.
inline constexpr std::size_t kFirstSlabChunks = kvroute::detail::RadixSlab::kChunkBytes + 256;

using kvroute::ApproxRadixTree;
using kvroute::kNoTenant;
using kvroute::MatchResult;
using kvroute::TenantId;
using kvroute::TenantMatch;
using kvroute::TenantSize;

inline constexpr TenantId t0 = 0, t1 = 1, t2 = 2, t3 = 3, t4 = 4;

// Maintained sizes equal the recount and every internal invariant holds.
template <class Tree>
void require_consistent(const Tree& tree) {
  INFO(tree.check_invariants());
  REQUIRE(tree.check_invariants().empty());
  REQUIRE(tree.tenant_sizes() == tree.recount_sizes());
}

inline std::vector<TenantSize> sizes(std::initializer_list<TenantSize> s) { return s; }

// Registers `tenants` at the root (each one's state and root claim) and
// returns the tree's bytes then: the base a test measures growth from.
inline std::size_t register_tenants(ApproxRadixTree& tree,
                                    std::initializer_list<TenantId> tenants) {
  for (TenantId t : tenants) tree.insert("", t);
  return tree.stats().bytes;
}

inline std::string prefix_of(std::string_view text, const MatchResult& m) {
  return std::string(text.substr(0, m.matched_symbols));
}

inline std::string prefix_for(ApproxRadixTree& tree, std::string_view text, TenantId t) {
  return std::string(text.substr(0, tree.match_for_tenant(text, t).matched_symbols));
}

inline std::string random_ascii(std::mt19937_64& rng, std::size_t n) {
  static constexpr char kAlpha[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string s(n, ' ');
  for (char& c : s) c = kAlpha[rng() % (sizeof(kAlpha) - 1)];
  return s;
}

template <class F>
void run_threads(int n, F f) {
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) ts.emplace_back(f, i);
  for (auto& t : ts) t.join();
}

}  // namespace kvtest

#endif  // KVROUTE_TESTS_RADIX_TREE_SUPPORT_HPP_
