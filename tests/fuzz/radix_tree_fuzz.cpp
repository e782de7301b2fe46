// libFuzzer target: differential fuzzing of kvroute::ApproxRadixTree and
// TokenRadixTree against the brute-force model in radix_model.hpp (the
// operations and checks are in radix_tree_driver.hpp). Any mismatch prints
// the operations that led to it and aborts.
//
// Time-boxed run (preset `fuzz`, clang++):
//   cmake --preset fuzz && cmake --build --preset fuzz --target kvroute_radix_tree_fuzz
//   ./build/fuzz/tests/fuzz/kvroute_radix_tree_fuzz -max_total_time=60 tests/fuzz/corpus/radix_tree
// Without -fsanitize=fuzzer the same file links with replay_main.cpp, which
// feeds every corpus file to LLVMFuzzerTestOneInput (an ordinary ctest test).
#include <cstddef>
#include <cstdint>

#include "fuzz/radix_tree_driver.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return kvfuzz::abort_on_failure(kvfuzz::run_radix_tree(data, size));
}
