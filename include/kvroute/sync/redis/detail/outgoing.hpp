// -----------------------------------------------------------------------------
// File: kvroute/sync/redis/detail/outgoing.hpp
// -----------------------------------------------------------------------------
//
// Not API. Turns what the Outbox held into stream entries: one batch per
// model (placements, forgets, pins) and one for the fleet stream (worker
// removals), each split so that no entry carries more than
// kMaxChangesPerEntry changes (an entry is one Redis value: a bounded one
// keeps a reader's reply bounded too). Changes keep the order they were
// emitted in within their stream.
//
// Thread safety: pure functions.

#ifndef KVROUTE_SYNC_REDIS_DETAIL_OUTGOING_HPP_
#define KVROUTE_SYNC_REDIS_DETAIL_OUTGOING_HPP_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "kvroute/config.hpp"
#include "kvroute/sync/change.hpp"
#include "kvroute/sync/wire.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {
namespace redis_detail {

inline constexpr std::size_t kMaxChangesPerEntry = 4096;

// One entry to XADD.
struct Outgoing {
  bool fleet = false;
  std::string model{};  // when !fleet
  std::string bytes{};  // encoded Batch
  std::size_t changes = 0;
};

// The stream a change belongs to: its model's, or the fleet's (nullptr).
inline const std::string* model_of(const Change& c) {
  return std::visit(
      [](const auto& x) -> const std::string* {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, WorkerGone>) {
          return nullptr;
        } else {
          return &x.model;
        }
      },
      c);
}

// Appends to `out` the entries carrying `changes` (emptied), numbering the
// batches from `seq` on.
inline void make_entries(std::vector<Change>& changes, std::string_view source, std::uint64_t& seq,
                         std::int64_t sent_ns, std::deque<Outgoing>& out) {
  // Stream order: first seen first; the fleet's stream is keyed by nullptr.
  struct Group {
    bool fleet;
    std::string model;
    std::vector<Change*> members;
  };
  std::vector<Group> groups;
  absl::flat_hash_map<std::string_view, std::size_t> index;
  std::size_t fleet_group = SIZE_MAX;
  for (Change& c : changes) {
    const std::string* model = model_of(c);
    std::size_t& g =
        model == nullptr ? fleet_group : index.try_emplace(*model, SIZE_MAX).first->second;
    if (g == SIZE_MAX) {
      g = groups.size();
      groups.push_back({model == nullptr, model == nullptr ? std::string() : *model, {}});
    }
    groups[g].members.push_back(&c);
  }
  for (Group& group : groups) {
    const std::vector<Change*>& members = group.members;
    for (std::size_t at = 0; at < members.size(); at += kMaxChangesPerEntry) {
      Batch b{.source = std::string(source), .seq = seq++, .sent_ns = sent_ns};
      const std::size_t end = std::min(members.size(), at + kMaxChangesPerEntry);
      b.changes.reserve(end - at);
      for (std::size_t i = at; i < end; ++i) b.changes.push_back(std::move(*members[i]));
      Outgoing e{.fleet = group.fleet,
                 .model = group.model,
                 .bytes = encode(b),
                 .changes = b.changes.size()};
      out.push_back(std::move(e));
    }
  }
  changes.clear();
}

}  // namespace redis_detail
}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_REDIS_DETAIL_OUTGOING_HPP_
