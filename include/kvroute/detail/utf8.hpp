// -----------------------------------------------------------------------------
// File: kvroute/detail/utf8.hpp
// -----------------------------------------------------------------------------
//
// Not API. Counting and slicing text in Unicode code points, the unit in which
// the reference design measures match rates, tree sizes and budgets.
//
// Invalid UTF-8 has one defined reading everywhere in kvroute: each byte that
// does not start a well-formed sequence (a stray continuation byte, a lead
// byte without enough continuation bytes, an overlong form, a surrogate or a
// value above U+10FFFF) counts as one character of its own, the way a decoder
// that substitutes U+FFFD per bad byte would count it. Valid text counts
// exactly as Rust's `str::chars().count()` does.
//
// Thread safety: pure functions.

#ifndef KVROUTE_DETAIL_UTF8_HPP_
#define KVROUTE_DETAIL_UTF8_HPP_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kvroute/config.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

inline constexpr bool is_utf8_continuation(unsigned char c) noexcept {
  return (c & 0xC0u) == 0x80u;
}

// Returns the byte length (1 to 4) of the character that starts at `p`,
// reading no byte at or past `end`. Requires p < end.
inline std::size_t utf8_char_length(const char* p, const char* end) noexcept {
  const auto b0 = static_cast<unsigned char>(p[0]);
  if (b0 < 0x80u) return 1;
  std::size_t len;
  unsigned char lo = 0x80u;  // allowed range of the second byte
  unsigned char hi = 0xBFu;
  if (b0 >= 0xC2u && b0 <= 0xDFu) {
    len = 2;
  } else if (b0 >= 0xE0u && b0 <= 0xEFu) {
    len = 3;
    if (b0 == 0xE0u) lo = 0xA0u;  // overlong
    if (b0 == 0xEDu) hi = 0x9Fu;  // surrogates
  } else if (b0 >= 0xF0u && b0 <= 0xF4u) {
    len = 4;
    if (b0 == 0xF0u) lo = 0x90u;  // overlong
    if (b0 == 0xF4u) hi = 0x8Fu;  // above U+10FFFF
  } else {
    return 1;  // continuation byte, C0/C1 or F5..FF: one bad byte
  }
  if (static_cast<std::size_t>(end - p) < len) return 1;
  const auto b1 = static_cast<unsigned char>(p[1]);
  if (b1 < lo || b1 > hi) return 1;
  for (std::size_t i = 2; i < len; ++i) {
    if (!is_utf8_continuation(static_cast<unsigned char>(p[i]))) return 1;
  }
  return len;
}

// True when the 8 bytes at p are all ASCII.
inline bool utf8_ascii8(const char* p) noexcept {
  std::uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return (w & 0x8080808080808080ull) == 0;
}

// The length of the longest all-ASCII prefix of p[0, n), eight bytes at a
// time: the portable form of ascii_prefix (and its reference in tests).
inline std::size_t ascii_prefix_words(const char* p, std::size_t n) noexcept {
  std::size_t i = 0;
  while (n - i >= 32) {
    std::uint64_t w[4];
    std::memcpy(w, p + i, sizeof w);
    if (((w[0] | w[1] | w[2] | w[3]) & 0x8080808080808080ull) != 0) break;
    i += 32;
  }
  while (n - i >= 8 && utf8_ascii8(p + i)) i += 8;
  while (i < n && static_cast<unsigned char>(p[i]) < 0x80u) ++i;
  return i;
}

// The length of the longest all-ASCII prefix of p[0, n). Where SSE2 is
// there (every x86-64), 64 bytes a step and the first high bit found by its
// byte mask: the counting of every request's new text runs through here.
inline std::size_t ascii_prefix(const char* p, std::size_t n) noexcept {
#if defined(__SSE2__)
  std::size_t i = 0;
  const auto load = [p](std::size_t at) noexcept {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + at));
  };
  while (n - i >= 64) {
    const __m128i any =
        _mm_or_si128(_mm_or_si128(load(i), load(i + 16)), _mm_or_si128(load(i + 32), load(i + 48)));
    if (_mm_movemask_epi8(any) != 0) break;
    i += 64;
  }
  while (n - i >= 16) {
    const auto high = static_cast<unsigned>(_mm_movemask_epi8(load(i)));
    if (high != 0) return i + static_cast<std::size_t>(std::countr_zero(high));
    i += 16;
  }
  while (i < n && static_cast<unsigned char>(p[i]) < 0x80u) ++i;
  return i;
#else
  return ascii_prefix_words(p, n);
#endif
}

// Returns the number of characters in `s`. Complexity: O(bytes); ASCII runs
// (one character a byte) go by AsciiPrefix, the rest a character at a time.
template <std::size_t (*AsciiPrefix)(const char*, std::size_t) noexcept>
std::size_t utf8_count_by(std::string_view s) noexcept {
  const char* const p = s.data();
  const std::size_t n = s.size();
  std::size_t i = 0;
  std::size_t chars = 0;
  while (i < n) {
    const std::size_t ascii = AsciiPrefix(p + i, n - i);
    i += ascii;
    chars += ascii;
    // A run of non-ASCII characters (or bad bytes), one at a time.
    while (i < n && static_cast<unsigned char>(p[i]) >= 0x80u) {
      i += utf8_char_length(p + i, p + n);
      ++chars;
    }
  }
  return chars;
}

inline std::size_t utf8_count(std::string_view s) noexcept {
  return utf8_count_by<ascii_prefix>(s);
}

// Returns the byte length of the first `chars` characters of `s` (all of `s`
// when it is shorter).
inline std::size_t utf8_prefix_bytes(std::string_view s, std::size_t chars) noexcept {
  const char* const p = s.data();
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (chars > 0 && i < n) {
    const std::size_t ascii = ascii_prefix(p + i, std::min(chars, n - i));
    i += ascii;
    chars -= ascii;
    if (chars > 0 && i < n) {  // p[i] starts a non-ASCII character (or is a bad byte)
      i += utf8_char_length(p + i, p + n);
      --chars;
    }
  }
  return i;
}

// Returns the largest character boundary of `s` that is <= `pos`
// (requires pos <= s.size()). Characters are read as utf8_char_length does.
inline std::size_t utf8_floor_boundary(std::string_view s, std::size_t pos) noexcept {
  if (pos == 0 || pos >= s.size()) return pos;
  const char* base = s.data();
  std::size_t lead = pos;
  // A character is at most 4 bytes, so its lead is at most 3 bytes back.
  for (int back = 0;
       back < 3 && lead > 0 && is_utf8_continuation(static_cast<unsigned char>(base[lead]));
       ++back) {
    --lead;
  }
  if (lead == pos) return pos;
  const std::size_t len = utf8_char_length(base + lead, base + s.size());
  return lead + len > pos ? lead : pos;
}

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_UTF8_HPP_
