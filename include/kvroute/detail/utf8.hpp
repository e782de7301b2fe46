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

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

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

// Returns the number of characters in `s`. Complexity: O(bytes), with an
// eight-bytes-at-a-time path for ASCII runs.
inline std::size_t utf8_count(std::string_view s) noexcept {
  const char* p = s.data();
  const char* const end = p + s.size();
  std::size_t n = 0;
  while (p < end) {
    if (end - p >= 8 && utf8_ascii8(p)) {
      p += 8;
      n += 8;
      continue;
    }
    p += utf8_char_length(p, end);
    ++n;
  }
  return n;
}

// Returns the byte length of the first `chars` characters of `s` (all of `s`
// when it is shorter).
inline std::size_t utf8_prefix_bytes(std::string_view s, std::size_t chars) noexcept {
  const char* p = s.data();
  const char* const end = p + s.size();
  while (chars > 0 && p < end) {
    if (chars >= 8 && end - p >= 8 && utf8_ascii8(p)) {
      p += 8;
      chars -= 8;
      continue;
    }
    p += utf8_char_length(p, end);
    --chars;
  }
  return static_cast<std::size_t>(p - s.data());
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

// Returns true when `s` is well-formed UTF-8.
inline bool utf8_valid(std::string_view s) noexcept {
  const char* p = s.data();
  const char* const end = p + s.size();
  while (p < end) {
    if (end - p >= 8 && utf8_ascii8(p)) {
      p += 8;
      continue;
    }
    const auto b0 = static_cast<unsigned char>(*p);
    const std::size_t len = utf8_char_length(p, end);
    if (len == 1 && b0 >= 0x80u) return false;
    p += len;
  }
  return true;
}

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_UTF8_HPP_
