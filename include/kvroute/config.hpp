// -----------------------------------------------------------------------------
// File: kvroute/config.hpp
// -----------------------------------------------------------------------------
//
// Build-configuration macros shared by every kvroute header: the C++20 check,
// the versioned inline namespace, assertions and branch hints. Not API beyond
// the macros documented here.
//
// Thread safety: not applicable (macros only).
//
// Example:
//
//   #include <kvroute/config.hpp>
//   KVROUTE_NAMESPACE_BEGIN
//   // ... kvroute::v0 declarations ...
//   KVROUTE_NAMESPACE_END

#ifndef KVROUTE_CONFIG_HPP_
#define KVROUTE_CONFIG_HPP_

#if (defined(_MSVC_LANG) ? _MSVC_LANG : __cplusplus) < 202002L
#error "kvroute requires C++20 (-std=c++20 or later)"
#endif

#include <cassert>

// Every declaration lives in `kvroute::v0`, an inline namespace, so that two
// kvroute versions linked into one server get different mangled names instead
// of silently violating the one-definition rule.
#define KVROUTE_NAMESPACE_BEGIN \
  namespace kvroute {           \
  inline namespace v0 {
#define KVROUTE_NAMESPACE_END \
  }                           \
  }

// Programmer errors and invariants; compiled out with NDEBUG like assert().
#define KVROUTE_ASSERT(cond, msg) assert((cond) && (msg))

#if defined(__GNUC__) || defined(__clang__)
#define KVROUTE_NOINLINE __attribute__((noinline))
// For a hot helper split out of a loop only to keep functions short: the
// loop stays what it was.
#define KVROUTE_ALWAYS_INLINE __attribute__((always_inline))
#define KVROUTE_LIKELY(x) __builtin_expect(!!(x), 1)
#define KVROUTE_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define KVROUTE_NOINLINE
#define KVROUTE_ALWAYS_INLINE
#define KVROUTE_LIKELY(x) (x)
#define KVROUTE_UNLIKELY(x) (x)
#endif

// 1 in a ThreadSanitizer build (GCC's -fsanitize=thread or clang's). GCC
// cannot instrument a standalone std::atomic_thread_fence there (an error
// under -Werror), so the few places that need one say what stands in.
#if defined(__SANITIZE_THREAD__)
#define KVROUTE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KVROUTE_TSAN 1
#endif
#endif
#ifndef KVROUTE_TSAN
#define KVROUTE_TSAN 0
#endif

// 1 in an AddressSanitizer build. The radix tree's own allocator hands its
// blocks to malloc there, so that AddressSanitizer sees every fragment and
// block the tree frees (detail/radix/arena.hpp).
#if defined(__SANITIZE_ADDRESS__)
#define KVROUTE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVROUTE_ASAN 1
#endif
#endif
#ifndef KVROUTE_ASAN
#define KVROUTE_ASAN 0
#endif

#endif  // KVROUTE_CONFIG_HPP_
