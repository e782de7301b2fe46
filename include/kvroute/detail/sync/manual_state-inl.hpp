// -----------------------------------------------------------------------------
// File: kvroute/detail/sync/manual_state-inl.hpp
// -----------------------------------------------------------------------------
//
// Not API; part of kvroute/policies/manual.hpp. Manual's snapshots
// (sync/snapshot.hpp): models, save_state, restore_state. The format's
// body is detail/sync/manual_snapshot.hpp.
//
// Thread safety: thread-safe, one shard locked at a time.

#ifndef KVROUTE_DETAIL_SYNC_MANUAL_STATE_INL_HPP_
#define KVROUTE_DETAIL_SYNC_MANUAL_STATE_INL_HPP_

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "kvroute/config.hpp"
#include "kvroute/detail/sync/manual_snapshot.hpp"
#include "kvroute/policies/manual.hpp"  // the class this completes
#include "kvroute/sync/snapshot.hpp"

KVROUTE_NAMESPACE_BEGIN

inline std::vector<std::string> Manual::models() const {
  absl::flat_hash_set<std::string> seen;
  for (const Shard& s : shards_) {
    detail::MutexLock lock(&s.mu);
    for (const auto& [k, e] : s.map) seen.insert(k.model);
  }
  std::vector<std::string> out(seen.begin(), seen.end());
  std::sort(out.begin(), out.end());
  return out;
}

inline absl::StatusOr<std::string> Manual::save_state(
    std::string_view model, const WorkerSnapshot& workers) const noexcept {
  try {
    const std::int64_t now = clock_->now().count();
    detail::ManualBodyWriter out;
    for (const Shard& s : shards_) {
      detail::MutexLock lock(&s.mu);
      for (const auto& [k, e] : s.map) {
        if (k.model != model || expired(e, now)) continue;
        std::array<detail::ManualBodyWriter::Candidate, detail::PinList::kMax> c{};
        std::size_t n = 0;
        for (std::uint8_t i = 0; i < e.pins.count; ++i) {
          if (const Worker* w = workers.find(e.pins.at[i].id))
            c[n++] = {w->url, e.pins.at[i].stamp};
        }
        if (n == 0) continue;
        const std::int64_t age = now > e.last_access_ns ? now - e.last_access_ns : 0;
        out.add(k.key, static_cast<std::uint64_t>(age), e.pins.epoch, c.data(), n);
      }
    }
    return detail::encode_frame(sync::SnapshotKind::kManual, model, out.urls(), out.body());
  } catch (const std::bad_alloc&) {
    return detail::snapshot_out_of_memory();
  }
}

inline absl::StatusOr<sync::RestoreResult> Manual::restore_state(
    std::string_view bytes, const WorkerSnapshot& workers) noexcept {
  try {
    absl::StatusOr<detail::ManualSnapshotView> v = detail::decode_manual(bytes);
    if (!v.ok()) return v.status();
    sync::RestoreResult res;
    res.model.assign(v->frame.model);
    std::vector<const Worker*> known(v->frame.urls.size(), nullptr);
    for (std::size_t i = 0; i < known.size(); ++i) {
      known[i] = detail::snapshot_worker(workers, v->frame.urls[i], v->frame.model);
      if (known[i] == nullptr) ++res.unknown_workers;
    }
    const std::int64_t now = clock_->now().count();
    for (const detail::ManualSnapshotView::Entry& e : v->entries) {
      if (restore_entry(v->frame.model, *v, e, known, now, res)) ++res.restored;
    }
    return res;
  } catch (const std::bad_alloc&) {
    return detail::snapshot_out_of_memory();
  }
}

inline bool Manual::restore_entry(std::string_view model, const detail::ManualSnapshotView& v,
                                  const detail::ManualSnapshotView::Entry& e,
                                  const std::vector<const Worker*>& workers, std::int64_t now,
                                  sync::RestoreResult& res) {
  std::size_t usable = 0;
  for (std::uint32_t i = 0; i < e.count; ++i) {
    usable += workers[v.candidates[e.first + i].worker] != nullptr;
  }
  res.skipped += e.count - usable;
  if (usable == 0) return false;
  const std::int64_t age = static_cast<std::int64_t>(
      std::min<std::uint64_t>(e.age_ns, std::numeric_limits<std::int64_t>::max()));
  const std::int64_t last = now < std::numeric_limits<std::int64_t>::min() + age
                                ? std::numeric_limits<std::int64_t>::min()
                                : now - age;
  const KeyView kv{model, e.key};
  Shard& s = shard_for(KeyHash{}(kv));
  detail::MutexLock lock(&s.mu);
  auto [it, inserted] = s.map.try_emplace(OwnedKey{std::string(model), std::string(e.key)});
  if (inserted) size_.fetch_add(1, std::memory_order_relaxed);
  Entry& en = it->second;
  const bool fresh = inserted || expired(en, now);
  if (fresh) en = Entry{};
  en.pins.raise_epoch(e.epoch);
  for (std::uint32_t i = 0; i < e.count; ++i) {
    const detail::ManualSnapshotView::Candidate& c = v.candidates[e.first + i];
    if (const Worker* w = workers[c.worker]) {
      en.pins.merge(w->id, c.stamp, detail::xxh64(w->url), /*reset=*/false);
    }
  }
  en.last_access_ns = fresh ? last : std::max(en.last_access_ns, last);
  if (en.pins.count == 0) {  // every candidate older than the live list's epoch
    s.map.erase(it);
    size_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_SYNC_MANUAL_STATE_INL_HPP_
