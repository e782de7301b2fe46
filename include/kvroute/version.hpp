// -----------------------------------------------------------------------------
// File: kvroute/version.hpp
// -----------------------------------------------------------------------------
//
// The library version. CMake reads these three lines to set the project
// version, so the header is the single source of truth.
//
// Thread safety: not applicable (constants only).
//
// Example:
//
//   static_assert(KVROUTE_VERSION_MAJOR == 0);
//   std::string_view v = kvroute::kVersionString;  // "0.2.0"

#ifndef KVROUTE_VERSION_HPP_
#define KVROUTE_VERSION_HPP_

#include <string_view>

#include "kvroute/config.hpp"

#define KVROUTE_VERSION_MAJOR 0
#define KVROUTE_VERSION_MINOR 2
#define KVROUTE_VERSION_PATCH 0

KVROUTE_NAMESPACE_BEGIN

inline constexpr int kVersionMajor = KVROUTE_VERSION_MAJOR;
inline constexpr int kVersionMinor = KVROUTE_VERSION_MINOR;
inline constexpr int kVersionPatch = KVROUTE_VERSION_PATCH;
inline constexpr std::string_view kVersionString = "0.2.0";

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_VERSION_HPP_
