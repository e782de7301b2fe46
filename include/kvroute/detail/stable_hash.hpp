// -----------------------------------------------------------------------------
// File: kvroute/detail/stable_hash.hpp
// -----------------------------------------------------------------------------
//
// Not API. `Xxh64`, the one hash kvroute uses for anything that must agree
// across processes, restarts, router replicas and platforms: ring positions
// of workers and keys (consistent_hashing, prefix_hash) and prefix
// fingerprints. It is XXH64 as published in the xxHash specification, with
// explicit little-endian reads, so results do not depend on the host's byte
// order. Golden values in tests/golden/stable_hash_test.cpp pin it.
//
// absl::Hash is seeded per process and must never be used for these.
//
// Thread safety: `Xxh64` is thread-compatible; `xxh64()` is a pure function.

#ifndef KVROUTE_DETAIL_STABLE_HASH_HPP_
#define KVROUTE_DETAIL_STABLE_HASH_HPP_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "kvroute/config.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

class Xxh64 {
 public:
  explicit Xxh64(std::uint64_t seed = 0) noexcept
      : v1_(seed + kP1 + kP2), v2_(seed + kP2), v3_(seed), v4_(seed - kP1), seed_(seed) {}

  void update(const void* data, std::size_t len) noexcept {
    if (len == 0) return;  // `data` may then be null, which memcpy forbids
    const auto* p = static_cast<const unsigned char*>(data);
    total_ += len;
    if (buffered_ + len < 32) {
      std::memcpy(buf_ + buffered_, p, len);
      buffered_ += len;
      return;
    }
    if (buffered_ > 0) {
      const std::size_t fill = 32 - buffered_;
      std::memcpy(buf_ + buffered_, p, fill);
      stripe(buf_);
      p += fill;
      len -= fill;
      buffered_ = 0;
    }
    while (len >= 32) {
      stripe(p);
      p += 32;
      len -= 32;
    }
    std::memcpy(buf_, p, len);
    buffered_ = len;
  }

  void update(std::string_view s) noexcept { update(s.data(), s.size()); }

  // Feeds `v` as four little-endian bytes.
  void update_u32(std::uint32_t v) noexcept {
    const unsigned char b[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                                static_cast<unsigned char>(v >> 16),
                                static_cast<unsigned char>(v >> 24)};
    update(b, 4);
  }

  std::uint64_t digest() const noexcept {
    std::uint64_t h;
    if (total_ >= 32) {
      h = rotl(v1_, 1) + rotl(v2_, 7) + rotl(v3_, 12) + rotl(v4_, 18);
      h = merge(h, v1_);
      h = merge(h, v2_);
      h = merge(h, v3_);
      h = merge(h, v4_);
    } else {
      h = seed_ + kP5;
    }
    h += total_;
    const unsigned char* p = buf_;
    std::size_t len = buffered_;
    while (len >= 8) {
      h ^= round(0, read64(p));
      h = rotl(h, 27) * kP1 + kP4;
      p += 8;
      len -= 8;
    }
    if (len >= 4) {
      h ^= static_cast<std::uint64_t>(read32(p)) * kP1;
      h = rotl(h, 23) * kP2 + kP3;
      p += 4;
      len -= 4;
    }
    while (len > 0) {
      h ^= static_cast<std::uint64_t>(*p) * kP5;
      h = rotl(h, 11) * kP1;
      ++p;
      --len;
    }
    h ^= h >> 33;
    h *= kP2;
    h ^= h >> 29;
    h *= kP3;
    h ^= h >> 32;
    return h;
  }

 private:
  static constexpr std::uint64_t kP1 = 0x9E3779B185EBCA87ull;
  static constexpr std::uint64_t kP2 = 0xC2B2AE3D27D4EB4Full;
  static constexpr std::uint64_t kP3 = 0x165667B19E3779F9ull;
  static constexpr std::uint64_t kP4 = 0x85EBCA77C2B2AE63ull;
  static constexpr std::uint64_t kP5 = 0x27D4EB2F165667C5ull;

  static constexpr std::uint64_t rotl(std::uint64_t x, int r) noexcept {
    return (x << r) | (x >> (64 - r));
  }
  static constexpr std::uint64_t round(std::uint64_t acc, std::uint64_t lane) noexcept {
    acc += lane * kP2;
    acc = rotl(acc, 31);
    return acc * kP1;
  }
  static constexpr std::uint64_t merge(std::uint64_t acc, std::uint64_t v) noexcept {
    acc ^= round(0, v);
    return acc * kP1 + kP4;
  }
  static std::uint64_t read64(const unsigned char* p) noexcept {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
  }
  static std::uint32_t read32(const unsigned char* p) noexcept {
    return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
           (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
  }
  void stripe(const unsigned char* p) noexcept {
    v1_ = round(v1_, read64(p));
    v2_ = round(v2_, read64(p + 8));
    v3_ = round(v3_, read64(p + 16));
    v4_ = round(v4_, read64(p + 24));
  }

  std::uint64_t v1_, v2_, v3_, v4_;
  std::uint64_t seed_;
  std::uint64_t total_ = 0;
  unsigned char buf_[32] = {};
  std::size_t buffered_ = 0;
};

// Returns XXH64 of `s` with `seed`.
inline std::uint64_t xxh64(std::string_view s, std::uint64_t seed = 0) noexcept {
  Xxh64 h(seed);
  h.update(s);
  return h.digest();
}

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_STABLE_HASH_HPP_
