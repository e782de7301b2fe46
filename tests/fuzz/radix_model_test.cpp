// The reference model of the radix tree (fuzz/radix_model.hpp) on its own,
// and the differential driver (fuzz/radix_tree_driver.hpp) on a few thousand
// deterministic pseudo-random inputs, so the differential check runs in
// every build, not only under libFuzzer.
#include "fuzz/radix_model.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fuzz/radix_tree_driver.hpp"

namespace {

TEST_CASE("model: characters follow kvroute's UTF-8 reading") {
  using kvfuzz::units;
  CHECK(units(std::string("abc")) == 3);
  CHECK(units(std::string("\xC3\xA9")) == 1);      // é
  CHECK(units(std::string("\xC3")) == 1);          // truncated lead
  CHECK(units(std::string("\xE0\xA0\x41")) == 3);  // bad continuation: 3 bad bytes
  CHECK(units(std::string("\xED\xA0\x80")) == 3);  // surrogate: 3 bad bytes
  CHECK(units(std::string("\xF0\x9F\xA4\x96")) == 1);
  CHECK(units(std::string(3, '\0')) == 3);
}

TEST_CASE("model: common prefixes end on a boundary of both strings") {
  using kvfuzz::lcp_units;
  const std::string e = "\xC3\xA9";
  CHECK(lcp_units(std::string("abcd"), std::string("abxy")) == 2);
  CHECK(lcp_units("a" + e + "b", "a" + e + "c") == 2);
  CHECK(lcp_units(std::string("a\xC3\xA9"), std::string("a\xC3\xA8")) == 1);
  // "\xC3" alone is a character, but not a prefix of "é".
  CHECK(lcp_units(std::string("\xC3"), e) == 0);
  CHECK(lcp_units(std::string("\xE0\xA0\x41"), std::string("\xE0\xA0")) == 2);
  CHECK(lcp_units(std::vector<std::uint32_t>{1, 2, 3}, std::vector<std::uint32_t>{1, 2, 4}) == 2);
}

TEST_CASE("model: a tenant's size counts distinct characters on its paths") {
  kvfuzz::RadixModel<char> m;
  m.insert("hello", 0, 1);
  m.insert("help", 0, 2);
  m.insert("\xC3\xA9t\xC3\xA9", 0, 3);
  m.insert("", 1, 4);
  CHECK(m.size(0) == 5 + 1 + 3);
  CHECK(m.size(1) == 0);
  CHECK(m.registered(1));
  CHECK(m.tenant_lcp(0, "helium") == 3);
  m.remove(0);
  CHECK_FALSE(m.registered(0));
}

TEST_CASE("model: the tree agrees with it on hand-picked operation sequences") {
  // Text tree, no budget: inserts, matches, evictions.
  const std::vector<std::vector<std::uint8_t>> inputs = {
      {0, 0, 0x0C, 0, 1, 2, 1, 0, 0x07, 0, 3, 2, 4, 2, 0x01, 0, 4, 1, 3, 0x01, 0, 3, 1},
      {1, 0, 0x0E, 5, 6, 0, 1, 0, 0x0E, 5, 6, 1, 2, 2, 0x0E, 5, 6, 2, 1, 4, 1, 6, 0},
      {0x22, 0, 0x0E, 4, 4, 4, 4, 4, 4, 4, 0, 0x0E, 0, 0, 0, 0, 0, 0, 0, 2, 0x0E, 4, 4, 4},
      // The first, with recency in steps of 2 stamps.
      {0x80, 0, 0x0C, 0, 1, 2, 1, 0, 0x07, 0, 3, 2, 4, 2, 0x01, 0, 4, 1, 3, 0x01, 0, 3, 1},
  };
  for (const auto& in : inputs) {
    INFO(kvfuzz::run_radix_tree(in.data(), in.size()));
    CHECK(kvfuzz::run_radix_tree(in.data(), in.size()).empty());
  }
}

TEST_CASE("model: the tree agrees with it on random operation sequences") {
  std::mt19937_64 rng(20261201);
  for (int i = 0; i < 1500; ++i) {
    std::vector<std::uint8_t> in(16 + rng() % 400);
    for (auto& b : in) b = static_cast<std::uint8_t>(rng());
    const std::string failure = kvfuzz::run_radix_tree(in.data(), in.size());
    if (!failure.empty()) {
      FAIL_CHECK("input " << i << ":\n" << failure);
      break;
    }
  }
}

}  // namespace
