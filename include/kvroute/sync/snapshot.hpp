// -----------------------------------------------------------------------------
// File: kvroute/sync/snapshot.hpp
// -----------------------------------------------------------------------------
//
// Snapshots of a policy's routing state, one model at a time, for a replica
// that starts (or falls too far behind) to catch up with the others, and
// for a restart to start warm. The policies that keep state have
//
//   std::vector<std::string> models() const;
//   absl::StatusOr<std::string> save_state(std::string_view model,
//                                          const WorkerSnapshot& workers) const;
//   absl::StatusOr<sync::RestoreResult> restore_state(std::string_view bytes,
//                                                     const WorkerSnapshot& workers);
//
// cache_aware and least_prefill save a model's radix tree, manual its sticky
// table (bucket is not saved: its state follows from loads). Workers are
// named by URL, through `workers`: a saved claim of a worker `workers` does
// not have is left out, and a restored one naming a URL this process has no
// worker for (of the snapshot's model) is skipped and counted.
//
// Restoring MERGES the snapshot into the current state; it never clears
// what is there, and emits nothing to the policy's state sink. Tree policies replay each claim as
// an insert, oldest recency first, so the restored claims keep the saved LRU order and count as
// more recent than what the tree held (detail/sync/tree_snapshot.hpp). Manual merges each key's
// saved candidates (URL, pin stamp) and list epoch as pins from another replica merge
// (detail/pin_list.hpp), so a restore is idempotent and agrees with the replicas' own pins; a key's
// last access becomes now - its age at the save (the later of that and
// the live entry's).
//
// Layout, all integers little-endian or LEB128 varints:
//
//   "KVRSNAP\0"  version:u8 (1)  kind:u8 (SnapshotKind)  model:str
//   urls:varint  url:str*  body  checksum:u64
//   tree body   = nodes:varint  node*      (pre-order, the root first)
//     node      = depth:varint  fragment:str  claims:varint  claim*
//     claim     = url index:varint  recency:varint
//   manual body = entries:varint  entry*
//     entry     = key:str  age_ns:varint  epoch:zigzag  candidates:varint
//                 (url index:varint  stamp:zigzag)*
//   str         = length:varint  bytes
//
// A node's depth is its parent's + 1, so its text is the fragments of the
// latest node at each lower depth and its own: text that many paths share
// (a system prompt) is stored once. checksum is detail::checksum64 of every
// byte before it.
//
// Decoding validates the whole snapshot before anything changes: another
// magic (foreign bytes), a truncated or corrupt snapshot (checksum, bad
// counts, indices or lengths, trailing bytes) are InvalidArgument, another
// format version or a snapshot of another policy FailedPrecondition; each
// message says what is wrong and at which byte. Allocations are bounded by
// the snapshot's size.
//
// Saving runs alongside routing (ApproxRadixTree::export_nodes): the
// snapshot is a valid one of a state the tree passed through, node by node.
//
// Thread safety: thread-safe, as the policies are.
//
// Example (one snapshot per model):
//
//   for (const std::string& m : policy.models()) {
//     absl::StatusOr<std::string> bytes = policy.save_state(m, *snapshot);
//     if (bytes.ok()) store(m, *bytes);
//   }
//   // ... in the new process, once its workers are added:
//   absl::StatusOr<kvroute::sync::RestoreResult> r = policy.restore_state(bytes, *snapshot);

#ifndef KVROUTE_SYNC_SNAPSHOT_HPP_
#define KVROUTE_SYNC_SNAPSHOT_HPP_

#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kvroute/config.hpp"
#include "kvroute/detail/model_trees.hpp"
#include "kvroute/detail/sync/snapshot_frame.hpp"
#include "kvroute/detail/sync/tree_snapshot.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

inline absl::Status snapshot_out_of_memory() {
  return absl::ResourceExhaustedError("kvroute snapshot: out of memory");
}

// cache_aware's and least_prefill's save_state.
inline absl::StatusOr<std::string> save_model_tree(sync::SnapshotKind kind, const ModelTrees& trees,
                                                   std::string_view model,
                                                   const WorkerSnapshot& workers) noexcept {
  const TreeRef tree = trees.find(model);
  if (!tree) {
    return absl::NotFoundError(absl::StrCat("kvroute snapshot: no tree for model \"",
                                            absl::string_view(model.data(), model.size()), "\""));
  }
  try {
    std::vector<std::string> urls;
    absl::StatusOr<std::string> body = encode_tree_body(*tree.get(), workers, urls);
    if (!body.ok()) return body.status();
    return encode_frame(kind, model, urls, *body);
  } catch (const std::bad_alloc&) {
    return snapshot_out_of_memory();
  }
}

// cache_aware's and least_prefill's restore_state.
inline absl::StatusOr<sync::RestoreResult> restore_model_tree(
    sync::SnapshotKind kind, ModelTrees& trees, std::string_view bytes,
    const WorkerSnapshot& workers) noexcept {
  try {
    absl::StatusOr<TreeSnapshotView> v = decode_tree(bytes, kind);
    if (!v.ok()) return v.status();
    const TreeRef tree = trees.get_or_create(v->frame.model);
    if (!tree) return snapshot_out_of_memory();
    return apply_tree(*v, *tree.get(), workers);
  } catch (const std::bad_alloc&) {
    return snapshot_out_of_memory();
  }
}

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_SNAPSHOT_HPP_
