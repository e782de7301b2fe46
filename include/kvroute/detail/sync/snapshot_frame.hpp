// -----------------------------------------------------------------------------
// File: kvroute/detail/sync/snapshot_frame.hpp
// -----------------------------------------------------------------------------
//
// Not API. The frame every kvroute snapshot has (sync/snapshot.hpp has the
// layout): a header naming the format version, the policy kind and the
// model, the table of worker URLs the body refers to by index, the body,
// and a checksum64 trailer. encode_frame() wraps a body; decode_frame()
// checks everything but the body and returns it, with a reader that names
// the byte where a body turns out to be malformed.
//
// Thread safety: pure functions.

#ifndef KVROUTE_DETAIL_SYNC_SNAPSHOT_FRAME_HPP_
#define KVROUTE_DETAIL_SYNC_SNAPSHOT_FRAME_HPP_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kvroute/config.hpp"
#include "kvroute/detail/ascii.hpp"
#include "kvroute/detail/sync/codec.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {

// The policy whose state a snapshot holds. The values are part of the
// format: never reuse one.
enum class SnapshotKind : std::uint8_t {
  kCacheAware = 1,
  kLeastPrefill = 2,
  kManual = 3,
};

inline std::string_view to_string(SnapshotKind k) noexcept {
  switch (k) {
    case SnapshotKind::kCacheAware:
      return "cache_aware";
    case SnapshotKind::kLeastPrefill:
      return "least_prefill";
    case SnapshotKind::kManual:
      return "manual";
  }
  return "unknown";
}

inline constexpr std::string_view kSnapshotMagic{"KVRSNAP\0", 8};
inline constexpr std::uint8_t kSnapshotVersion = 1;
// The longest model name or worker URL a snapshot may hold.
inline constexpr std::size_t kMaxSnapshotName = 4096;

}  // namespace sync

namespace detail {

inline absl::Status snapshot_error(std::string_view what, std::size_t at) {
  return absl::InvalidArgumentError(
      absl::StrCat("kvroute snapshot: ", to_absl(what), " (at byte ", at, ")"));
}

// A Reader over a snapshot's body that knows where the body starts, to
// report byte offsets into the whole snapshot.
class SnapshotReader : public Reader {
 public:
  SnapshotReader(std::string_view body, std::size_t offset) noexcept
      : Reader(body), body_(body), offset_(offset) {}
  std::size_t at() const noexcept { return offset_ + consumed(body_); }
  absl::Status fail(std::string_view what) const { return snapshot_error(what, at()); }

 private:
  std::string_view body_;
  std::size_t offset_;
};

struct SnapshotFrame {
  sync::SnapshotKind kind{};
  std::string_view model{};
  std::vector<std::string_view> urls{};  // views into the snapshot's bytes
  std::string_view body{};
  std::size_t body_offset = 0;
};

// magic, version, kind, then the checksum's 8 bytes at least.
inline constexpr std::size_t kSnapshotMinBytes = sync::kSnapshotMagic.size() + 2 + 8;

// The whole snapshot: the header, `urls`, `body`, the checksum.
inline std::string encode_frame(sync::SnapshotKind kind, std::string_view model,
                                const std::vector<std::string>& urls, std::string_view body) {
  std::string out;
  out.reserve(body.size() + 64 + model.size());
  Writer w(out);
  w.raw(sync::kSnapshotMagic);
  w.u8(sync::kSnapshotVersion);
  w.u8(static_cast<std::uint8_t>(kind));
  w.str(model);
  w.varint(urls.size());
  for (const std::string& u : urls) w.str(u);
  w.raw(body);
  w.u64(checksum64(out));
  return out;
}

// Checks the magic, the version, the kind against `expected`, the checksum,
// and reads the model and the URL table: every URL non-empty and distinct.
inline absl::StatusOr<SnapshotFrame> decode_frame(std::string_view bytes,
                                                  sync::SnapshotKind expected) {
  const std::string_view magic = sync::kSnapshotMagic;
  const std::size_t head = std::min(bytes.size(), magic.size());
  if (bytes.substr(0, head) != magic.substr(0, head)) {
    return snapshot_error("not a kvroute snapshot: the magic bytes differ", 0);
  }
  if (bytes.size() < kSnapshotMinBytes) {
    return snapshot_error(absl::StrCat("truncated: ", bytes.size(),
                                       " bytes, a snapshot has at least ", kSnapshotMinBytes),
                          bytes.size());
  }
  const auto version = static_cast<std::uint8_t>(bytes[magic.size()]);
  if (version != sync::kSnapshotVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("kvroute snapshot: format version ", version, ", this build reads version ",
                     sync::kSnapshotVersion, " (at byte ", magic.size(), ")"));
  }
  const auto kind = static_cast<sync::SnapshotKind>(bytes[magic.size() + 1]);
  if (to_string(kind) == "unknown") {
    return snapshot_error(absl::StrCat("unknown policy kind ", static_cast<int>(kind)),
                          magic.size() + 1);
  }
  if (kind != expected) {
    return absl::FailedPreconditionError(
        absl::StrCat("kvroute snapshot: holds the state of policy ", to_absl(to_string(kind)),
                     ", not of this policy, ", to_absl(to_string(expected)), " (at byte ",
                     magic.size() + 1, ")"));
  }
  const std::string_view covered = bytes.substr(0, bytes.size() - 8);
  std::uint64_t sum = 0;
  Reader(bytes.substr(covered.size())).u64(sum);
  if (sum != checksum64(covered)) {
    return snapshot_error("checksum mismatch: the snapshot is truncated or corrupt",
                          covered.size());
  }
  SnapshotFrame f;
  f.kind = kind;
  const std::size_t start = magic.size() + 2;
  SnapshotReader r(covered.substr(start), start);
  std::uint64_t n = 0;
  if (!r.str(f.model, sync::kMaxSnapshotName)) return r.fail("bad model name");
  if (!r.count(n, r.remaining())) return r.fail("bad worker count");
  f.urls.reserve(static_cast<std::size_t>(n));
  absl::flat_hash_set<std::string_view> seen;
  seen.reserve(static_cast<std::size_t>(n));
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string_view url;
    if (!r.str(url, sync::kMaxSnapshotName) || url.empty()) {
      return r.fail(absl::StrCat("bad URL of worker ", i));
    }
    if (!seen.insert(url).second) return r.fail(absl::StrCat("worker ", i, "'s URL is repeated"));
    f.urls.push_back(url);
  }
  f.body_offset = r.at();
  f.body = covered.substr(f.body_offset);
  return f;
}

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_SYNC_SNAPSHOT_FRAME_HPP_
