// Test support: counts operator new calls on this thread while
// kvtest::counting is set, so a test can assert that a steady-state path does
// not allocate. Replaces the global operator new: include it in exactly one
// translation unit of a test executable.
//
// Under AddressSanitizer the replacement is left out (ASan owns operator new
// and reports memory a replacement frees as mismatched); the count then
// stays 0 and the allocation checks are made by the other builds.
#ifndef KVROUTE_TESTS_SUPPORT_ALLOC_COUNTER_HPP_
#define KVROUTE_TESTS_SUPPORT_ALLOC_COUNTER_HPP_

#include <cstddef>
#include <cstdlib>
#include <new>

namespace kvtest {
inline thread_local bool counting = false;
inline thread_local std::size_t allocations = 0;
}  // namespace kvtest

#if defined(__SANITIZE_ADDRESS__)
#define KVTEST_REPLACE_NEW 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVTEST_REPLACE_NEW 0
#endif
#endif
#ifndef KVTEST_REPLACE_NEW
#define KVTEST_REPLACE_NEW 1
#endif

#if KVTEST_REPLACE_NEW
// Out of line, or gcc -O2 warns that inlined callers pair new with free.
[[gnu::noinline]] void* operator new(std::size_t n) {
  if (kvtest::counting) ++kvtest::allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif

#endif  // KVROUTE_TESTS_SUPPORT_ALLOC_COUNTER_HPP_
