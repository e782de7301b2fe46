// libFuzzer target: kvroute::parse_policy_flags on any argument list (the
// input split at NUL or newline bytes), checked as policy_flags_driver.hpp
// says: errors are InvalidArgument naming what was typed, never raw bytes
// or an exception; a config that parses validates, builds its policy,
// routes, and renders back to the same flags. Any failed check prints the
// arguments and aborts.
//
//   cmake --preset fuzz && cmake --build --preset fuzz
//   ./build/fuzz/tests/fuzz/kvroute_policy_flags_fuzz -max_total_time=60
//       -dict=tests/fuzz/policy_flags.dict /tmp/flags tests/fuzz/corpus/policy_flags
#include <cstddef>
#include <cstdint>

#include "fuzz/policy_flags_driver.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return kvfuzz::abort_on_failure(kvfuzz::run_policy_flags(data, size));
}
