// -----------------------------------------------------------------------------
// File: kvroute/detail/sync/manual_snapshot.hpp
// -----------------------------------------------------------------------------
//
// Not API. The body of manual's snapshot (sync/snapshot.hpp has the
// layout): per routing key of one model, the key, how long before the save
// it was last used, its candidate list's epoch and its candidates (worker
// URL index and pin stamp), so that a restore merges them into the live
// lists exactly as pins from another replica merge (detail/pin_list.hpp).
// ManualBodyWriter writes it; decode_manual() validates a whole snapshot.
//
// Thread safety: values and pure functions.

#ifndef KVROUTE_DETAIL_SYNC_MANUAL_SNAPSHOT_HPP_
#define KVROUTE_DETAIL_SYNC_MANUAL_SNAPSHOT_HPP_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kvroute/config.hpp"
#include "kvroute/detail/pin_list.hpp"
#include "kvroute/detail/sync/codec.hpp"
#include "kvroute/detail/sync/snapshot_frame.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

inline std::uint64_t zigzag(std::int64_t v) noexcept {
  return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}
inline std::int64_t unzigzag(std::uint64_t v) noexcept {
  return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
}

// Writes entries; may throw std::bad_alloc.
class ManualBodyWriter {
 public:
  struct Candidate {
    std::string_view url{};
    std::int64_t stamp = 0;
  };

  void add(std::string_view key, std::uint64_t age_ns, std::int64_t epoch, const Candidate* cands,
           std::size_t n) {
    Writer w(entries_);
    w.str(key);
    w.varint(age_ns);
    w.varint(zigzag(epoch));
    w.varint(n);
    for (std::size_t i = 0; i < n; ++i) {
      auto [it, fresh] =
          index_.try_emplace(std::string(cands[i].url), static_cast<std::uint32_t>(urls_.size()));
      if (fresh) urls_.push_back(it->first);
      w.varint(it->second);
      w.varint(zigzag(cands[i].stamp));
    }
    ++count_;
  }

  const std::vector<std::string>& urls() const noexcept { return urls_; }
  std::string body() const {
    std::string out;
    out.reserve(entries_.size() + 10);
    Writer(out).varint(count_);
    out += entries_;
    return out;
  }

 private:
  std::string entries_;
  std::uint64_t count_ = 0;
  std::vector<std::string> urls_;
  absl::flat_hash_map<std::string, std::uint32_t> index_;
};

// A validated manual snapshot; views into the snapshot's bytes.
struct ManualSnapshotView {
  struct Candidate {
    std::uint32_t worker = 0;  // index into frame.urls
    std::int64_t stamp = 0;
  };
  struct Entry {
    std::string_view key{};
    std::uint64_t age_ns = 0;
    std::int64_t epoch = 0;
    std::uint32_t first = 0;  // into candidates
    std::uint32_t count = 0;
  };
  SnapshotFrame frame{};
  std::vector<Entry> entries{};
  std::vector<Candidate> candidates{};
};

// key length, age, epoch, candidate count.
inline constexpr std::size_t kMinEntryBytes = 4;

inline absl::Status decode_manual_entry(SnapshotReader& r, ManualSnapshotView& v, std::uint64_t i) {
  ManualSnapshotView::Entry e;
  std::uint64_t epoch = 0, n = 0;
  if (!r.str(e.key, r.remaining())) return r.fail(absl::StrCat("entry ", i, ": bad key"));
  if (!r.varint(e.age_ns) || !r.varint(epoch)) {
    return r.fail(absl::StrCat("entry ", i, ": bad age or epoch"));
  }
  e.epoch = unzigzag(epoch);
  if (!r.count(n, PinList::kMax) || n == 0) {
    return r.fail(absl::StrCat("entry ", i, ": bad candidate count (1 to ", PinList::kMax, ")"));
  }
  e.first = static_cast<std::uint32_t>(v.candidates.size());
  e.count = static_cast<std::uint32_t>(n);
  for (std::uint64_t k = 0; k < n; ++k) {
    std::uint64_t worker = 0, stamp = 0;
    if (v.frame.urls.empty() || !r.count(worker, v.frame.urls.size() - 1)) {
      return r.fail(absl::StrCat("entry ", i, ": candidate ", k, " names no worker of the table"));
    }
    if (!r.varint(stamp))
      return r.fail(absl::StrCat("entry ", i, ": candidate ", k, ": bad stamp"));
    const std::int64_t s = unzigzag(stamp);
    if (s < e.epoch) {
      return r.fail(absl::StrCat("entry ", i, ": candidate ", k, " is older than the epoch"));
    }
    v.candidates.push_back({static_cast<std::uint32_t>(worker), s});
  }
  v.entries.push_back(e);
  return absl::OkStatus();
}

// Validates the whole snapshot; nothing is applied anywhere.
inline absl::StatusOr<ManualSnapshotView> decode_manual(std::string_view bytes) {
  absl::StatusOr<SnapshotFrame> frame = decode_frame(bytes, sync::SnapshotKind::kManual);
  if (!frame.ok()) return frame.status();
  ManualSnapshotView v;
  v.frame = *std::move(frame);
  SnapshotReader r(v.frame.body, v.frame.body_offset);
  std::uint64_t n = 0;
  if (!r.count(n, r.remaining() / kMinEntryBytes)) {
    return snapshot_error("bad entry count (more than the bytes can hold)", v.frame.body_offset);
  }
  v.entries.reserve(static_cast<std::size_t>(n));
  for (std::uint64_t i = 0; i < n; ++i) {
    if (absl::Status s = decode_manual_entry(r, v, i); !s.ok()) return s;
  }
  if (r.remaining() != 0) return r.fail(absl::StrCat(r.remaining(), " bytes after the last entry"));
  return v;
}

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_SYNC_MANUAL_SNAPSHOT_HPP_
