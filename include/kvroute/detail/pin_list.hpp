// -----------------------------------------------------------------------------
// File: kvroute/detail/pin_list.hpp
// -----------------------------------------------------------------------------
//
// Not API. `PinList`: the candidate workers manual keeps for one routing key,
// as a value that router replicas can merge (sync::Pin) and agree on, in
// whatever order and however often pins arrive.
//
// Each candidate carries the stamp of the pin that named it and a hash of
// the worker's URL; the list is ordered by (stamp, hash), oldest first, and
// keeps the kMax newest. A reset pin (the key was new, or had expired, where
// it was pinned) moves the list's epoch up to its stamp, and pins older than
// the epoch no longer count. A worker pinned twice keeps its newest stamp.
// The result depends only on the set of pins merged: replicas that merged
// the same pins, in any order, with duplicates, hold the same list. Stamps
// need not come from one clock for that; they decide which pin is newest,
// so replicas on machines whose clocks disagree still agree, on an order
// that may not be the order in time.
//
// Thread safety: a value; the owner locks.

#ifndef KVROUTE_DETAIL_PIN_LIST_HPP_
#define KVROUTE_DETAIL_PIN_LIST_HPP_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "kvroute/config.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

struct PinList {
  static constexpr std::size_t kMax = 2;

  struct Candidate {
    WorkerId id{};
    std::int64_t stamp = 0;
    std::uint64_t url_hash = 0;
  };

  std::array<Candidate, kMax> at{};
  std::uint8_t count = 0;
  std::int64_t epoch = std::numeric_limits<std::int64_t>::min();

  // Merges a pin; false when it is older than the epoch (ignored).
  bool merge(WorkerId id, std::int64_t stamp, std::uint64_t url_hash, bool reset) noexcept {
    if (stamp < epoch) return false;
    if (reset) raise_epoch(stamp);
    for (std::uint8_t i = 0; i < count; ++i) {
      if (at[i].id == id) {
        if (stamp <= at[i].stamp) return true;
        remove_at(i);
        break;
      }
    }
    insert({id, stamp, url_hash});
    return true;
  }

  // Moves the epoch up to `stamp`, dropping the candidates older than it:
  // a reset pin's effect without its worker, which is how a snapshot
  // carries a list whose reset pin's candidate was since replaced.
  void raise_epoch(std::int64_t stamp) noexcept {
    if (stamp <= epoch) return;
    epoch = stamp;
    std::uint8_t kept = 0;
    for (std::uint8_t i = 0; i < count; ++i) {
      if (at[i].stamp >= epoch) at[kept++] = at[i];
    }
    count = kept;
  }

  // A stamp newer than every pin here, at least `now`; saturates at the
  // largest stamp (a clock at the end of int64 time), where a pin may not
  // be newer than those here: see pin_newest.
  std::int64_t next_stamp(std::int64_t now) const noexcept {
    std::int64_t s = std::max(now, epoch);
    if (count > 0 && at[count - 1].stamp >= s) {
      s = at[count - 1].stamp == std::numeric_limits<std::int64_t>::max() ? at[count - 1].stamp
                                                                          : at[count - 1].stamp + 1;
    }
    return s;
  }

  // Merges a local pin and makes sure it is held: when its stamp could not
  // be newer than those here (saturated), the list restarts from it alone.
  void pin_newest(WorkerId id, std::int64_t stamp, std::uint64_t url_hash, bool reset) noexcept {
    if (merge(id, stamp, url_hash, reset) && holds(id)) return;
    *this = PinList{};
    merge(id, stamp, url_hash, /*reset=*/true);
  }

  bool holds(WorkerId id) const noexcept {
    return std::any_of(at.begin(), at.begin() + count,
                       [id](const Candidate& c) { return c.id == id; });
  }

  void remove(WorkerId id) noexcept {
    for (std::uint8_t i = 0; i < count; ++i) {
      if (at[i].id == id) {
        remove_at(i);
        return;
      }
    }
  }

 private:
  static bool older(const Candidate& a, const Candidate& b) noexcept {
    return a.stamp != b.stamp ? a.stamp < b.stamp : a.url_hash < b.url_hash;
  }
  void remove_at(std::uint8_t i) noexcept {
    for (std::uint8_t j = i; j + 1 < count; ++j) at[j] = at[j + 1];
    at[--count] = Candidate{};
  }
  // In (stamp, hash) order; when full, the oldest goes (which may be `c`).
  void insert(const Candidate& c) noexcept {
    if (count == kMax) {
      if (older(c, at[0])) return;
      remove_at(0);
    }
    std::uint8_t i = count;
    while (i > 0 && older(c, at[i - 1])) {
      at[i] = at[i - 1];
      --i;
    }
    at[i] = c;
    ++count;
  }
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_PIN_LIST_HPP_
