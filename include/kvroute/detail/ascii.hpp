// -----------------------------------------------------------------------------
// File: kvroute/detail/ascii.hpp
// -----------------------------------------------------------------------------
//
// Not API. Locale-free ASCII helpers: case-insensitive header-name comparison
// and the control-byte checks used when validating configuration strings;
// and `to_absl`, because with Debian's Abseil absl::string_view is its own
// type rather than std::string_view.
//
// Thread safety: pure functions.

#ifndef KVROUTE_DETAIL_ASCII_HPP_
#define KVROUTE_DETAIL_ASCII_HPP_

#include <string_view>

#include "absl/strings/string_view.h"
#include "kvroute/config.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

inline constexpr char ascii_lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

inline constexpr bool ascii_iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  }
  return true;
}

// True when `s` contains a byte below 0x20 or DEL.
inline constexpr bool has_control_byte(std::string_view s) noexcept {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20u || u == 0x7Fu) return true;
  }
  return false;
}

inline constexpr absl::string_view to_absl(std::string_view s) noexcept {
  return {s.data(), s.size()};
}

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_ASCII_HPP_
