// -----------------------------------------------------------------------------
// File: kvroute/sync/change.hpp
// -----------------------------------------------------------------------------
//
// The state changes a tree policy (cache_aware, least_prefill) shares with
// other router replicas, and `StateSink`, where it hands them over. Nothing
// here sends anything: the host decides how changes travel (the Redis
// transport, sync/redis/, is one way) and applies what comes from elsewhere
// with the policy's apply_change().
//
//   * Placement: a worker was sent a text. The text travels as the keys of
//     its 128-byte chunks (chunk_key.hpp), from chunk `first` on: the
//     chunks before it were already in the sender's tree, so every replica
//     that follows the same stream knows them already. `first` is the last
//     chunk the sender already knew (so that a text sent again, to another
//     worker, still names that worker for its deepest known chunk).
//     Or, while texts travel (the policies' sync_text_share), as the text
//     itself from chunk `first` on, with the key of chunk first - 1 as its
//     `anchor`: a receiver that holds a text with that chunk
//     (sync/text_store.hpp) puts the two together and inserts the whole
//     text into its tree at once, instead of learning it when a request
//     there reaches it (docs/replicas.md says why that matters).
//   * Forget: a worker's server reported that it no longer holds the chunks
//     `first`.. of a text it was credited with (report_cached).
//   * Cut: feedback found a worker's server short of a claim, and the
//     replica dropped the worker's claims as old as that one or older (the
//     cut by recency, feedback.hpp); the others drop theirs from as far
//     back in their own trees. It counts in tree stamps, not in time: the
//     replicas' trees take the same placements in about the same order
//     when texts travel, so `back` stamps before now is about the same
//     placement in each. Applied only by a tree that learns placements as
//     they are made (texts travel, detail/sync/hub.hpp); on one that learns
//     them later, by folding, the recency order is not the server's.
//   * WorkerGone: a worker left a replica's fleet, or its cache was cleared:
//     what is known of its cache is void everywhere.
//   * Pin: manual's sticky table: a routing key was pinned to a worker
//     (policies/manual.hpp says how replicas agree on the order).
//
// Workers are named by URL, never by WorkerId: ids are local to each
// replica's WorkerSet. A change does not say which router made it, or that
// a router made it at all: an adapter can turn an engine's KV events
// (BlockStored, BlockRemoved, AllBlocksCleared) into Placement, Forget and
// WorkerGone from a source of its own. `KeyScheme` leaves room for keys
// that are not kvroute's text chunks (an engine's token-block hashes); a
// receiver ignores schemes it does not know.
//
// Applying a change twice, or changes in another order, leaves the same
// state: placements add holders, forgets and removals take them away,
// nothing counts.
//
// Thread safety: values; a StateSink is called from any selecting thread.

#ifndef KVROUTE_SYNC_CHANGE_HPP_
#define KVROUTE_SYNC_CHANGE_HPP_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kvroute/config.hpp"
#include "kvroute/sync/chunk_key.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {

enum class KeyScheme : std::uint8_t {
  kTextChunks = 1,  // chunk_key.hpp: 128-byte chunks of the request text
};

// Chunks `first`, first + 1, ... of a text, for one worker of one model:
// as their keys, or (`text` not empty; `keys` then empty) as the text's
// bytes from chunk `first` to its end, the bytes after its last whole
// chunk included. `anchor`: with a text and first > 0, the key of chunk
// first - 1, where the text before `text` ends.
struct Placement {
  std::string model{};
  std::string worker{};  // URL
  std::uint32_t first = 0;
  std::vector<std::uint64_t> keys{};
  KeyScheme scheme = KeyScheme::kTextChunks;
  std::string text{};
  std::uint64_t anchor = 0;
};

struct Forget {
  std::string model{};
  std::string worker{};  // URL
  std::uint32_t first = 0;
  std::vector<std::uint64_t> keys{};
  KeyScheme scheme = KeyScheme::kTextChunks;
};

// Claims of `worker` placed `back` tree stamps or more before the change
// are gone.
struct Cut {
  std::string model{};
  std::string worker{};  // URL
  std::uint64_t back = 0;
};

// Every model.
struct WorkerGone {
  std::string worker{};  // URL
};

// A routing key pinned to a worker at `stamp` (the pinning replica's clock,
// nanoseconds). `reset`: the key was new (or had expired) there, so pins
// older than this one no longer count.
struct Pin {
  std::string model{};
  std::string key{};
  std::string worker{};  // URL
  std::int64_t stamp = 0;
  bool reset = false;
};

using Change = std::variant<Placement, Forget, WorkerGone, Pin, Cut>;

// Where a policy hands its changes over (set_state_sink). Called on the
// select_worker path and from report_cached: an implementation must not
// block, throw, or grow without bound (sync::Outbox keeps a bounded buffer
// and counts what it drops). The views are valid for the call only.
class StateSink {
 public:
  virtual ~StateSink() = default;
  virtual void placed(std::string_view model, std::string_view worker, std::uint32_t first,
                      std::span<const std::uint64_t> keys) noexcept = 0;
  // A placement whose text travels (Placement::text). This default gives
  // placed() the keys of the text's whole chunks instead, for a sink that
  // carries keys only (and nothing when memory runs out).
  virtual void placed_text(std::string_view model, std::string_view worker, std::uint32_t first,
                           std::uint64_t anchor, std::string_view text) noexcept;
  virtual void forgot(std::string_view model, std::string_view worker, std::uint32_t first,
                      std::span<const std::uint64_t> keys) noexcept = 0;
  virtual void worker_gone(std::string_view worker) noexcept = 0;
  // A Cut. This default drops it, for a sink that carries keys only.
  virtual void cut(std::string_view /*model*/, std::string_view /*worker*/,
                   std::uint64_t /*back*/) noexcept {}
  virtual void pinned(std::string_view model, std::string_view key, std::string_view worker,
                      std::int64_t stamp, bool reset) noexcept = 0;
};

// What applying a change did.
enum class Applied : std::uint8_t {
  kApplied,
  kUnknownWorker,  // no worker with that URL here (for its model): ignored
  kUnknownScheme,  // keys this build does not read: ignored
  kOutOfMemory,    // part applied
  kNotShared,      // this policy keeps no state to share (AnyPolicy)
};

inline void StateSink::placed_text(std::string_view model, std::string_view worker,
                                   std::uint32_t first, std::uint64_t /*anchor*/,
                                   std::string_view text) noexcept {
  std::vector<std::uint64_t> keys;
  if (append_chunk_keys(text, first, &keys)) placed(model, worker, first, keys);
}

}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_CHANGE_HPP_
