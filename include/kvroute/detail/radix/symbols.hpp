// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/symbols.hpp
// -----------------------------------------------------------------------------
//
// Not API. What the radix tree compares and counts:
//   * RadixSymbolTraits<Symbol>: what a "unit" is. For `char` a unit is one
//     Unicode code point of UTF-8 text, read as detail/utf8.hpp reads it
//     (each byte of an invalid sequence is a unit of its own); for an
//     integral token type a unit is one token.
//   * common_prefix_bytes: the byte comparison every match and insert runs.
//
// Thread safety: pure functions.

#ifndef KVROUTE_DETAIL_RADIX_SYMBOLS_HPP_
#define KVROUTE_DETAIL_RADIX_SYMBOLS_HPP_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kvroute/config.hpp"
#include "kvroute/detail/utf8.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

template <class Symbol>
struct RadixSymbolTraits;

// Text: units are code points; child keys are the first code point's bytes
// packed into 32 bits (distinct characters, and a lone invalid byte versus a
// well-formed sequence that starts with it, always get distinct keys).
template <>
struct RadixSymbolTraits<char> {
  using Sequence = std::string_view;
  using Fragment = std::string;
  using Key = std::uint32_t;

  // Requires n > 0.
  static Key key(const char* p, std::size_t n) noexcept {
    const std::size_t len = utf8_char_length(p, p + n);
    Key k = 0;
    for (std::size_t i = 0; i < len; ++i) {
      k |= static_cast<Key>(static_cast<unsigned char>(p[i])) << (8 * i);
    }
    return k;
  }

  // Code points (detail/utf8.hpp). The unmatched tail of every match and
  // the text of every new leaf are counted here.
  static std::size_t count(const char* p, std::size_t n) noexcept {
    return utf8_count(std::string_view(p, n));
  }

  // The longest prefix, in bytes, that ends on a character boundary of both
  // `a` and `b`, given that their first `common` bytes are equal. A byte
  // mismatch inside a multi-byte character counts only whole characters.
  static std::size_t boundary(const char* a, std::size_t na, const char* b, std::size_t nb,
                              std::size_t common) noexcept {
    return std::min(utf8_floor_boundary(std::string_view(a, na), common),
                    utf8_floor_boundary(std::string_view(b, nb), common));
  }
};

// Tokens: one symbol is one unit.
template <class Symbol>
requires(std::is_integral_v<Symbol> && !std::is_same_v<Symbol, char> &&
         !std::is_same_v<Symbol, bool>) struct RadixSymbolTraits<Symbol> {
  using Sequence = std::span<const Symbol>;
  using Fragment = std::vector<Symbol>;
  using Key = Symbol;

  static Key key(const Symbol* p, std::size_t) noexcept { return p[0]; }
  static std::size_t count(const Symbol*, std::size_t n) noexcept { return n; }
  static std::size_t boundary(const Symbol*, std::size_t, const Symbol*, std::size_t,
                              std::size_t common) noexcept {
    return common;
  }
};

// Returns the number of leading bytes on which `a` and `b` agree, comparing
// at most `n`. An equal run (the common case: a whole fragment matches) costs
// one memcmp; a mismatch is located 256 bytes at a time with memcmp, then one
// word at a time. Complexity: O(position of the first difference).
inline std::size_t common_prefix_bytes(const void* a, const void* b, std::size_t n) noexcept {
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  if (n == 0 || std::memcmp(pa, pb, n) == 0) return n;
  std::size_t i = 0;
  constexpr std::size_t kChunk = 256;
  while (n - i >= kChunk && std::memcmp(pa + i, pb + i, kChunk) == 0) i += kChunk;
  while (n - i >= 8) {
    std::uint64_t x;
    std::uint64_t y;
    std::memcpy(&x, pa + i, 8);
    std::memcpy(&y, pb + i, 8);
    if (x != y) {
      const std::uint64_t d = x ^ y;
      if constexpr (std::endian::native == std::endian::little) {
        return i + static_cast<std::size_t>(std::countr_zero(d) >> 3);
      } else {
        return i + static_cast<std::size_t>(std::countl_zero(d) >> 3);
      }
    }
    i += 8;
  }
  while (i < n && pa[i] == pb[i]) ++i;
  return i;
}

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_SYMBOLS_HPP_
