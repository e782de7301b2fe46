// -----------------------------------------------------------------------------
// File: kvroute/detail/sync/tree_snapshot.hpp
// -----------------------------------------------------------------------------
//
// Not API. The body of a tree policy's snapshot (sync/snapshot.hpp has the
// layout): encode_tree_body() writes one model's tree from its export
// (ApproxRadixTree::export_nodes), decode_tree() validates a whole snapshot
// into a TreeSnapshotView, and apply_tree() merges a validated view into a
// tree.
//
// Restoring replays inserts: each (node, worker) claim becomes an insert of
// the node's path under the worker, in ascending order of the claims'
// recency (an ancestor before its descendants on a tie). An insert stamps
// its whole path, so after the replay every claim's recency is a fresh
// stamp in the order the snapshot had: the restored tree evicts in the
// same order as the saved one, and its claims are newer than any the tree
// held before.
//
// Thread safety: encode and apply run alongside the tree's other users;
// decode is a pure function.

#ifndef KVROUTE_DETAIL_SYNC_TREE_SNAPSHOT_HPP_
#define KVROUTE_DETAIL_SYNC_TREE_SNAPSHOT_HPP_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kvroute/config.hpp"
#include "kvroute/detail/sync/codec.hpp"
#include "kvroute/detail/sync/snapshot_frame.hpp"
#include "kvroute/radix_tree.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {

// What a restore did.
struct RestoreResult {
  std::string model{};
  // Tree policies: claims (a worker holding a node) replayed; manual: keys
  // whose candidates were merged.
  std::size_t restored = 0;
  // Claims or candidates skipped because they name a worker unknown here
  // (no worker with that URL, or one of another model).
  std::size_t skipped = 0;
  // URLs in the snapshot's table that name no worker here.
  std::size_t unknown_workers = 0;
  // Claims whose insert ran out of memory (the tree stays consistent).
  std::size_t failed = 0;
};

}  // namespace sync

namespace detail {

inline constexpr std::uint32_t kNoSnapshotWorker = 0xFFFFFFFFu;

// A worker of `model` here named `url`, or null. A tree for model "" (the
// requests that name none) serves every worker.
inline const Worker* snapshot_worker(const WorkerSnapshot& workers, std::string_view url,
                                     std::string_view model) noexcept {
  const Worker* w = workers.find_url(url);
  if (w == nullptr || (!model.empty() && !w->model.empty() && w->model != model)) return nullptr;
  return w;
}

// Writes the tree's export as a body: a node count, then each node in
// pre-order as depth, fragment and its claims (URL index, recency). The
// URL table gets the URL of every tenant that is a worker of `workers`;
// other tenants (workers removed since) are left out.
inline absl::StatusOr<std::string> encode_tree_body(const ApproxRadixTree& tree,
                                                    const WorkerSnapshot& workers,
                                                    std::vector<std::string>& urls) {
  std::string nodes_out;
  Writer w(nodes_out);
  absl::flat_hash_map<TenantId, std::uint32_t> index;
  const auto url_index = [&](TenantId t) {
    auto [it, fresh] = index.try_emplace(t, kNoSnapshotWorker);
    if (fresh) {
      if (const Worker* wk = workers.find(WorkerId{t})) {
        it->second = static_cast<std::uint32_t>(urls.size());
        urls.push_back(wk->url);
      }
    }
    return it->second;
  };
  std::uint64_t count = 0;
  bool oom = false;
  const ExportStatus st = tree.export_nodes(
      [&](std::size_t depth, std::string_view frag, const RadixCandidates& holders) noexcept {
        try {
          std::size_t known = 0;
          for (RadixCandidate c : holders) known += url_index(c.tenant) != kNoSnapshotWorker;
          w.varint(depth);
          w.str(frag);
          w.varint(known);
          for (RadixCandidate c : holders) {
            const std::uint32_t i = url_index(c.tenant);
            if (i == kNoSnapshotWorker) continue;
            w.varint(i);
            w.varint(c.recency);
          }
          ++count;
          return true;
        } catch (const std::bad_alloc&) {
          oom = true;
          return false;
        }
      });
  if (st == ExportStatus::kBusy) {
    return absl::UnavailableError("kvroute snapshot: the tree has no reader slot free; retry");
  }
  if (oom || st != ExportStatus::kDone) {
    return absl::ResourceExhaustedError("kvroute snapshot: out of memory while saving");
  }
  std::string body;
  body.reserve(nodes_out.size() + 10);
  Writer(body).varint(count);
  body += nodes_out;
  return body;
}

// A validated tree snapshot; views into the snapshot's bytes.
struct TreeSnapshotView {
  struct Node {
    std::uint32_t parent = 0;
    std::uint64_t path_len = 0;  // symbols from the root to the end of `fragment`
    std::string_view fragment{};
    std::uint32_t first_claim = 0;  // its claims: claims[first_claim, + claims)
    std::uint32_t claims = 0;
  };
  struct Claim {
    std::uint32_t node = 0;
    std::uint32_t worker = 0;  // index into frame.urls
    std::uint64_t recency = 0;
  };
  SnapshotFrame frame{};
  std::vector<Node> nodes{};  // pre-order; nodes[0] is the root
  std::vector<Claim> claims{};
  std::uint64_t longest_path = 0;
};

// The least bytes a node takes: depth, fragment length, claim count.
inline constexpr std::size_t kMinNodeBytes = 3;

inline absl::Status decode_tree_node(SnapshotReader& r, TreeSnapshotView& v,
                                     std::vector<std::uint32_t>& path, std::uint64_t i) {
  std::uint64_t depth = 0, n = 0;
  std::string_view frag;
  if (!r.count(depth, path.size())) {
    return r.fail(absl::StrCat("node ", i, ": bad depth (deeper than its parent's + 1)"));
  }
  if ((i == 0) != (depth == 0))
    return r.fail(absl::StrCat("node ", i, ": only the root has depth 0"));
  if (!r.str(frag, r.remaining())) return r.fail(absl::StrCat("node ", i, ": bad fragment"));
  if (depth > 0 && frag.empty()) return r.fail(absl::StrCat("node ", i, ": empty fragment"));
  if (depth == 0 && !frag.empty()) return r.fail("the root has a fragment");
  path.resize(static_cast<std::size_t>(depth));
  const std::uint32_t parent = depth == 0 ? 0 : path.back();
  const std::uint64_t plen = (depth == 0 ? 0 : v.nodes[parent].path_len) + frag.size();
  const auto self = static_cast<std::uint32_t>(v.nodes.size());
  v.nodes.push_back({parent, plen, frag, static_cast<std::uint32_t>(v.claims.size()), 0});
  v.longest_path = std::max(v.longest_path, plen);
  path.push_back(self);
  if (!r.count(n, v.frame.urls.size())) {
    return r.fail(absl::StrCat("node ", i, ": bad claim count (more than workers)"));
  }
  v.nodes.back().claims = static_cast<std::uint32_t>(n);
  for (std::uint64_t k = 0; k < n; ++k) {
    std::uint64_t worker = 0, recency = 0;
    if (!r.count(worker, v.frame.urls.size() - 1)) {
      return r.fail(absl::StrCat("node ", i, ": claim ", k, " names no worker of the table"));
    }
    if (!r.count(recency, ~RadixClaim::kEnded)) {
      return r.fail(absl::StrCat("node ", i, ": claim ", k, " has a bad recency"));
    }
    v.claims.push_back({self, static_cast<std::uint32_t>(worker), recency});
  }
  return absl::OkStatus();
}

// Validates the whole snapshot; nothing is applied anywhere.
inline absl::StatusOr<TreeSnapshotView> decode_tree(std::string_view bytes,
                                                    sync::SnapshotKind expected) {
  absl::StatusOr<SnapshotFrame> frame = decode_frame(bytes, expected);
  if (!frame.ok()) return frame.status();
  TreeSnapshotView v;
  v.frame = *std::move(frame);
  SnapshotReader r(v.frame.body, v.frame.body_offset);
  std::uint64_t n = 0;
  if (!r.count(n, r.remaining() / kMinNodeBytes) || n == 0) {
    return snapshot_error("bad node count (none, or more than the bytes can hold)",
                          v.frame.body_offset);
  }
  v.nodes.reserve(static_cast<std::size_t>(n));
  std::vector<std::uint32_t> path;  // the latest node at each depth
  path.reserve(64);
  for (std::uint64_t i = 0; i < n; ++i) {
    if (absl::Status s = decode_tree_node(r, v, path, i); !s.ok()) return s;
  }
  if (r.remaining() != 0) return r.fail(absl::StrCat(r.remaining(), " bytes after the last node"));
  return v;
}

// The claims that need no insert of their own: an insert stamps its whole
// path, so a claim whose worker holds a child node with the same recency
// (the stamp that last used it went on into that child) is restored by
// the child's insert, and a root claim (a registration) by any insert of
// its worker.
inline std::vector<bool> implied_claims(const TreeSnapshotView& v) {
  std::vector<bool> implied(v.claims.size(), false);
  for (const TreeSnapshotView::Claim& c : v.claims) {
    if (c.node == 0) continue;
    const TreeSnapshotView::Node& p = v.nodes[v.nodes[c.node].parent];
    for (std::uint32_t k = p.first_claim; k < p.first_claim + p.claims; ++k) {
      const TreeSnapshotView::Claim& up = v.claims[k];
      if (up.worker == c.worker && (up.node == 0 || up.recency == c.recency)) implied[k] = true;
    }
  }
  return implied;
}

// Merges a validated snapshot into `tree`, naming workers through
// `workers`. Allocates everything before the first insert; may throw
// std::bad_alloc before it.
inline sync::RestoreResult apply_tree(const TreeSnapshotView& v, ApproxRadixTree& tree,
                                      const WorkerSnapshot& workers) {
  sync::RestoreResult res;
  res.model.assign(v.frame.model);
  std::vector<std::uint32_t> ids(v.frame.urls.size(), kNoSnapshotWorker);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const Worker* w = snapshot_worker(workers, v.frame.urls[i], v.frame.model);
    if (w != nullptr) {
      ids[i] = w->id.value;
    } else {
      ++res.unknown_workers;
    }
  }
  const std::vector<bool> implied = implied_claims(v);
  std::vector<std::uint32_t> order;
  order.reserve(v.claims.size());
  for (std::uint32_t i = 0; i < v.claims.size(); ++i) {
    if (ids[v.claims[i].worker] == kNoSnapshotWorker) {
      ++res.skipped;
    } else {
      ++res.restored;
      if (!implied[i]) order.push_back(i);
    }
  }
  // Claims are in pre-order, so a stable sort by recency puts an ancestor
  // before its descendants among equal recencies.
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return v.claims[a].recency < v.claims[b].recency;
  });
  std::string text(static_cast<std::size_t>(v.longest_path), '\0');
  for (std::uint32_t ci : order) {
    const TreeSnapshotView::Claim& c = v.claims[ci];
    auto pos = static_cast<std::size_t>(v.nodes[c.node].path_len);
    const std::size_t len = pos;
    for (std::uint32_t n = c.node; n != 0; n = v.nodes[n].parent) {
      const std::string_view f = v.nodes[n].fragment;
      pos -= f.size();
      std::memcpy(text.data() + pos, f.data(), f.size());
    }
    const InsertResult r = tree.insert(std::string_view(text.data(), len), ids[c.worker]);
    if (!r.ok()) ++res.failed;
  }
  return res;
}

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_SYNC_TREE_SNAPSHOT_HPP_
