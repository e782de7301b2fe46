// libFuzzer target: Router<AnyPolicy> with every policy, driven through
// worker changes, selections, dispatches, guard releases, report_cached,
// clock jumps and maintenance, with its invariants checked after every step
// (router_driver.hpp says which). Any failed check prints the operations
// that led to it and aborts.
//
//   cmake --preset fuzz && cmake --build --preset fuzz
//   ./build/fuzz/tests/fuzz/kvroute_router_fuzz -max_total_time=60 /tmp/router
//   tests/fuzz/corpus/router
#include <cstddef>
#include <cstdint>

#include "fuzz/router_driver.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return kvfuzz::abort_on_failure(kvfuzz::run_router(data, size));
}
