// -----------------------------------------------------------------------------
// File: kvroute/detail/sync/codec.hpp
// -----------------------------------------------------------------------------
//
// Not API. The byte-level pieces of kvroute's sync formats (sync/wire.hpp,
// sync/snapshot.hpp): a Writer that appends little-endian integers, LEB128
// varints and length-prefixed strings, a Reader that reads them back and
// fails (never reads past the end) on truncated input, and checksum64, a
// fixed 64-bit hash of bytes that is the same on every platform and
// release.
//
// Thread safety: values.

#ifndef KVROUTE_DETAIL_SYNC_CODEC_HPP_
#define KVROUTE_DETAIL_SYNC_CODEC_HPP_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "kvroute/config.hpp"
#include "kvroute/sync/chunk_key.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

// A checksum, not a cryptographic hash: it catches truncation, corruption
// and foreign bytes, not forgery.
inline std::uint64_t checksum64(std::string_view bytes) noexcept {
  using sync::chunk_detail::fold;
  using sync::chunk_detail::kK;
  using sync::chunk_detail::read64;
  std::uint64_t h = kK[0] ^ (bytes.size() * kK[1]);
  std::size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) h = fold(h ^ read64(bytes.data() + i), kK[2]);
  std::uint64_t tail = 0;
  for (std::size_t j = 0; i + j < bytes.size(); ++j) {
    tail |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i + j])) << (8 * j);
  }
  h = fold(h ^ tail, kK[3]);
  return fold(h, kK[4]);
}

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void u8(std::uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
  void varint(std::uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  void str(std::string_view s) {
    varint(s.size());
    out_.append(s.data(), s.size());
  }
  void raw(std::string_view s) { out_.append(s.data(), s.size()); }

 private:
  std::string& out_;
};

// Every read returns false, and reads nothing more, once the input is
// short or malformed.
class Reader {
 public:
  explicit Reader(std::string_view in) noexcept : in_(in) {}
  bool u8(std::uint8_t& v) noexcept {
    if (in_.empty()) return false;
    v = static_cast<std::uint8_t>(in_[0]);
    in_.remove_prefix(1);
    return true;
  }
  bool u64(std::uint64_t& v) noexcept {
    if (in_.size() < 8) return false;
    v = 0;
    for (int i = 0; i < 8; ++i) {
      v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in_[static_cast<std::size_t>(i)]))
           << (8 * i);
    }
    in_.remove_prefix(8);
    return true;
  }
  bool varint(std::uint64_t& v) noexcept {
    v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
      if (in_.empty()) return false;
      const auto b = static_cast<unsigned char>(in_[0]);
      in_.remove_prefix(1);
      if (shift == 63 && b > 1) return false;  // more than 64 bits
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  // A varint no larger than `max`.
  bool count(std::uint64_t& v, std::uint64_t max) noexcept { return varint(v) && v <= max; }
  bool str(std::string_view& s, std::size_t max_len) noexcept {
    std::uint64_t n = 0;
    if (!count(n, max_len) || n > in_.size()) return false;
    s = in_.substr(0, static_cast<std::size_t>(n));
    in_.remove_prefix(static_cast<std::size_t>(n));
    return true;
  }
  bool raw(std::string_view& s, std::size_t n) noexcept {
    if (n > in_.size()) return false;
    s = in_.substr(0, n);
    in_.remove_prefix(n);
    return true;
  }
  std::size_t remaining() const noexcept { return in_.size(); }
  std::size_t consumed(std::string_view whole) const noexcept { return whole.size() - in_.size(); }

 private:
  std::string_view in_;
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_SYNC_CODEC_HPP_
