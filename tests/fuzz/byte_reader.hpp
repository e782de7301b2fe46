// The fuzz drivers' view of their input (a byte string read front to back,
// with missing bytes read as 0, so that every byte string is a valid input),
// how they print the bytes they derived from it, and how a target reports a
// driver's failure.
#ifndef KVROUTE_TESTS_FUZZ_BYTE_READER_HPP_
#define KVROUTE_TESTS_FUZZ_BYTE_READER_HPP_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>

namespace kvfuzz {

class ByteReader {
 public:
  ByteReader(const std::uint8_t* p, std::size_t n) : p_(p), n_(n) {}
  bool empty() const { return n_ == 0; }
  std::uint8_t next() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  // `n` bytes, little-endian.
  std::uint64_t next_bytes(int n) {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= std::uint64_t{next()} << (8 * i);
    return v;
  }
  // One element of `table`, chosen by the next byte.
  template <class T, std::size_t N>
  const T& pick(const T (&table)[N]) {
    return table[next() % N];
  }

 private:
  const std::uint8_t* p_;
  std::size_t n_;
};

// `s` in double quotes, printable ASCII as is and every other byte as \xNN.
inline std::string show_bytes(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out + "\"";
}

// A target's LLVMFuzzerTestOneInput returns this of its driver's result:
// 0 for "", else the failure is printed and the process aborts (which
// libFuzzer records as a crash, and fails the corpus replay).
inline int abort_on_failure(const std::string& failure) {
  if (failure.empty()) return 0;
  std::fprintf(stderr, "%s\n", failure.c_str());
  std::abort();
}

}  // namespace kvfuzz

#endif  // KVROUTE_TESTS_FUZZ_BYTE_READER_HPP_
