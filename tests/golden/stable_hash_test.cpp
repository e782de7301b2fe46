// Golden values for everything kvroute hashes across process boundaries:
// XXH64 itself, the ring positions of workers and keys, and the key -> worker
// assignments they produce. Every expected value below was computed outside
// kvroute (xxh64sum, and a script that builds the 150-points-per-URL ring
// from xxh64sum outputs), so a change to the hash, the ring labels, the
// virtual-node count or the walk shows up here even when every other test
// still passes. Changing one of these values means every router replica and
// every existing session moves: it is a breaking change.
#include "kvroute/detail/stable_hash.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvroute/detail/hash_ring.hpp"
#include "kvroute/policies/consistent_hashing.hpp"
#include "kvroute/policies/prefix_hash.hpp"
#include "support/cluster.hpp"

using kvroute::detail::HashRing;
using kvroute::detail::Xxh64;
using kvroute::detail::xxh64;
using kvtest::Cluster;

namespace {

// 132 bytes: four full 32-byte stripes plus a 4-byte tail.
std::string long_input() {
  std::string s;
  for (int i = 0; i < 12; ++i) {
    s += "kvroute-";
    s += static_cast<char>('0' + i / 10);
    s += static_cast<char>('0' + i % 10);
    s += ';';
  }
  return s;
}

// Bytes 0x00..0x63.
std::string byte_ramp() {
  std::string s;
  for (int i = 0; i < 100; ++i) s.push_back(static_cast<char>(i));
  return s;
}

}  // namespace

TEST_CASE("golden: xxh64 of short inputs", "[golden][stable_hash]") {
  CHECK(xxh64("") == 0xef46db3751d8e999ull);
  CHECK(xxh64("a") == 0xd24ec4f1a98c6e5bull);
  CHECK(xxh64("abc") == 0x44bc2cf5ad770999ull);
  CHECK(xxh64("http://w0:8000#0") == 0x2de8d52af3a0696full);
  CHECK(xxh64("user-0") == 0x7c1b2034a0684560ull);
  CHECK(xxh64("session-17") == 0x98b95c0bd70f58b3ull);
}

TEST_CASE("golden: xxh64 of inputs longer than one 32-byte stripe", "[golden][stable_hash]") {
  // 43 bytes: one stripe plus an 8-, a 2- and a 1-byte tail.
  CHECK(xxh64("The quick brown fox jumps over the lazy dog") == 0x0b242d361fda71bcull);
  CHECK(xxh64(byte_ramp()) == 0x6ac1e58032166597ull);  // bytes >= 0x80 absent, 0x00 present
  const std::string s = long_input();
  REQUIRE(s.size() == 132);
  CHECK(xxh64(s) == 0x98e620f8ee079f85ull);
}

TEST_CASE("golden: streaming in any chunking equals one-shot", "[golden][stable_hash]") {
  const std::string s = long_input();
  for (std::size_t chunk : {1u, 3u, 4u, 7u, 8u, 31u, 32u, 33u, 64u, 131u}) {
    Xxh64 h;
    for (std::size_t i = 0; i < s.size(); i += chunk) {
      h.update(std::string_view(s).substr(i, chunk));
    }
    INFO("chunk " << chunk);
    CHECK(h.digest() == 0x98e620f8ee079f85ull);
  }
  // Empty updates change nothing, and digest() does not consume the state.
  Xxh64 h;
  h.update(std::string_view{});
  h.update(std::string_view(s).substr(0, 40));
  h.update(std::string_view{});
  const std::uint64_t mid = h.digest();
  CHECK(mid == h.digest());
  CHECK(mid == xxh64(std::string_view(s).substr(0, 40)));
  h.update(std::string_view(s).substr(40));
  CHECK(h.digest() == 0x98e620f8ee079f85ull);
}

TEST_CASE("golden: update_u32 feeds little-endian bytes", "[golden][stable_hash]") {
  {
    Xxh64 h;
    h.update_u32(1);
    h.update_u32(2);
    h.update_u32(3);
    CHECK(h.digest() == 0xb5148cb100a911fcull);  // bytes 01 00 00 00 02 00 ...
  }
  {
    Xxh64 h;
    h.update_u32(0x12345678u);
    CHECK(h.digest() == 0xeb518304fec02e06ull);  // bytes 78 56 34 12
    CHECK(h.digest() == xxh64(std::string_view("\x78\x56\x34\x12", 4)));
  }
}

TEST_CASE("golden: ring lookups over http://w0..w3:8000", "[golden][hash_ring]") {
  const std::vector<std::string_view> urls = {"http://w0:8000", "http://w1:8000",
                                              "http://w2:8000", "http://w3:8000"};
  const HashRing ring(urls);
  REQUIRE(ring.size() == 4 * HashRing::kVirtualNodes);
  const auto any = [](std::uint32_t) { return true; };

  CHECK(HashRing::position("user-0") == 0x7c1b2034a0684560ull);

  // Owners of "user-0".."user-19", and their owners with w1 skipped.
  const std::vector<std::int64_t> owners = {3, 1, 0, 2, 1, 3, 3, 1, 0, 1,
                                            1, 3, 3, 1, 1, 0, 3, 3, 3, 2};
  const std::vector<std::int64_t> owners_w1_skipped = {3, 2, 0, 2, 2, 3, 3, 3, 0, 0,
                                                       3, 3, 3, 0, 2, 0, 3, 3, 3, 2};
  for (std::size_t i = 0; i < owners.size(); ++i) {
    const std::string key = "user-" + std::to_string(i);
    INFO(key);
    CHECK(ring.walk(HashRing::position(key), any) == owners[i]);
    CHECK(ring.walk(HashRing::position(key),
                    [](std::uint32_t m) { return m != 1; }) == owners_w1_skipped[i]);
  }

  // A point's own position belongs to it (lower bound, ">="), and positions
  // past the last point (0xff67d80f56c2dfd4, w1) wrap to the first
  // (0x010d4fdfd662a536, w0).
  CHECK(ring.walk(xxh64("http://w2:8000#7"), any) == 2);
  CHECK(ring.walk(0xff67d80f56c2dfd4ull, any) == 1);
  CHECK(ring.walk(0xff67d80f56c2dfd5ull, any) == 0);
  CHECK(ring.walk(0xffffffffffffffffull, any) == 0);
  CHECK(ring.walk(0, any) == 0);
  // The two points after 0x010d4fdfd662a536 belong to w0 and then w2.
  CHECK(ring.walk(0x010d4fdfd662a537ull, any) == 0);
  CHECK(ring.walk(0x01562cceae9c5c7aull, any) == 2);
}

TEST_CASE("golden: consistent_hashing sends user-k where the ring says", "[golden][consistent_hashing]") {
  Cluster c(4);  // http://w0..w3:8000, ids 0..3
  kvroute::ConsistentHashing p;
  const std::vector<int> owners = {3, 1, 0, 2, 1, 3, 3, 1, 0, 1,
                                   1, 3, 3, 1, 1, 0, 3, 3, 3, 2};
  for (std::size_t i = 0; i < owners.size(); ++i) {
    const std::string key = "user-" + std::to_string(i);
    const kvroute::Header h[] = {{"x-smg-routing-key", key}};
    INFO(key);
    CHECK(c.pick(p, {.headers = h}) == owners[i]);
  }
}

TEST_CASE("golden: prefix_hash ring positions", "[golden][prefix_hash]") {
  kvroute::PrefixHash p;
  const std::vector<std::uint32_t> t123 = {1, 2, 3};
  CHECK(p.position({.tokens = t123}) == 0xb5148cb100a911fcull);
  // Only the first 256 of 300 ids count.
  std::vector<std::uint32_t> t300;
  for (std::uint32_t i = 1000; i < 1300; ++i) t300.push_back(i);
  CHECK(p.position({.tokens = t300}) == 0x7d0ab32cbd84f373ull);
  // Text: the first N code points' bytes.
  kvroute::PrefixHash p5({.prefix_token_count = 5});
  CHECK(p5.position({.text = "h\xc3\xa9llo w\xc3\xb6rld"}) == 0x3bd06310388ebbe4ull);
  kvroute::PrefixHash p4({.prefix_token_count = 4});
  CHECK(p4.position({.text = "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c and more"}) ==
        0x6d23312e4459e566ull);  // "你好世界"
  // And the worker that position lands on among w0..w3.
  Cluster c(4);
  CHECK(c.pick(p, {.tokens = t123}) == 0);
}
