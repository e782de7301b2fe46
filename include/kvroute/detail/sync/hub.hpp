// -----------------------------------------------------------------------------
// File: kvroute/detail/sync/hub.hpp
// -----------------------------------------------------------------------------
//
// Not API. `detail::SyncHub`: what a tree policy (cache_aware,
// least_prefill) keeps to share its state with other replicas
// (sync/change.hpp): the sink it emits to, the RemoteIndex of each model
// with what came from elsewhere, and the URLs of its workers (changes name
// workers by URL). The policies call it at four points:
//
//   * before a selection reads the tree: fold in what other replicas placed
//     that this text reaches (RemoteIndex::take_deepest, then inserts of
//     the request's own prefix under the workers named there);
//   * after the text is inserted under the chosen worker: emit the keys of
//     the chunks the tree did not know before (from the last known one);
//   * when feedback drops a claim (report_cached): emit a Forget for the
//     chunks the server no longer had;
//   * when a worker is removed: emit WorkerGone.
//
// With no sink and nothing received, each point is one relaxed atomic load.
//
// Thread safety: thread-safe.

#ifndef KVROUTE_DETAIL_SYNC_HUB_HPP_
#define KVROUTE_DETAIL_SYNC_HUB_HPP_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "kvroute/config.hpp"
#include "kvroute/detail/ascii.hpp"
#include "kvroute/detail/model_trees.hpp"
#include "kvroute/detail/mutex.hpp"
#include "kvroute/radix_tree.hpp"
#include "kvroute/sync/change.hpp"
#include "kvroute/sync/chunk_key.hpp"
#include "kvroute/sync/remote_index.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

class SyncHub {
 public:
  explicit SyncHub(std::size_t max_remote_keys) noexcept : max_remote_keys_(max_remote_keys) {}
  SyncHub(const SyncHub&) = delete;
  SyncHub& operator=(const SyncHub&) = delete;

  void set_sink(sync::StateSink* sink) noexcept { sink_.store(sink, std::memory_order_release); }
  sync::StateSink* sink() const noexcept { return sink_.load(std::memory_order_acquire); }

  // Whether a selection has anything to do here.
  bool active() const noexcept { return sink() != nullptr || receiving(); }
  // Whether a placement from another replica (or another source) was ever
  // applied here: the tree no longer learns from this policy's own
  // selections alone.
  bool receiving() const noexcept { return receiving_.load(std::memory_order_relaxed); }

  // Before a selection reads `tree`: folds in the deepest prefix of the
  // text that other replicas placed and this tree has not seen yet.
  void fold_remote(std::string_view model, sync::TextChunks& chunks,
                   ApproxRadixTree& tree) noexcept {
    if (!receiving_.load(std::memory_order_relaxed) || chunks.size() == 0) return;
    sync::RemoteIndex* index = find_index(model);
    if (index == nullptr || index->empty()) return;
    sync::RemoteIndex::Taken holders;
    const std::ptrdiff_t i = index->take_deepest(chunks, 0, &holders);
    if (i < 0) return;
    const std::string_view prefix =
        utf8_cut(chunks.text().substr(0, (static_cast<std::size_t>(i) + 1) * sync::kChunkBytes));
    for (std::uint32_t w : holders) (void)tree.insert(prefix, w);
  }

  // After a selection inserted the text under `worker`: emits the chunks
  // from the one holding byte `known` of the text (what the tree matched
  // before the insert) to the last whole chunk. Nothing when `worker`
  // already held every whole chunk (`held_all`): the tree learnt that from
  // a placement that was emitted then, here or on another replica, so a
  // request that only repeats known text costs nothing to share.
  void emit_placed(std::string_view model, std::string_view worker, sync::TextChunks& chunks,
                   std::size_t known, bool held_all = false) noexcept {
    sync::StateSink* s = sink();
    if (s == nullptr || chunks.size() == 0 || held_all) return;
    const std::size_t first = std::min(known / sync::kChunkBytes, chunks.size() - 1);
    if (!chunks.compute_from(first)) return;
    s->placed(model, worker, static_cast<std::uint32_t>(first), chunks.keys_from(first));
  }

  // Feedback: `worker` no longer holds `text` past byte `kept`. The other
  // replicas forget the text's chunks past `kept` on that worker, the ones
  // this request brought included: its next placement says where the text
  // went.
  void emit_forgot(std::string_view model, std::string_view worker, std::string_view text,
                   std::size_t kept) noexcept {
    sync::StateSink* s = sink();
    if (s == nullptr) return;
    sync::TextChunks chunks(text);
    const std::size_t first = kept / sync::kChunkBytes;
    if (first >= chunks.size() || !chunks.compute_from(first)) return;
    s->forgot(model, worker, static_cast<std::uint32_t>(first), chunks.keys_from(first));
  }

  // A worker was removed from this replica's set.
  void emit_worker_gone(WorkerId id) noexcept {
    sync::StateSink* s = sink();
    if (s == nullptr) return;
    std::string url;
    {
      MutexLock lock(&mu_);
      auto it = urls_.find(id.value);
      if (it == urls_.end()) return;
      url = it->second;  // small: the sink copies it anyway
    }
    s->worker_gone(url);
  }

  // Keeps the URL of every worker, for emit_worker_gone. Allocates.
  void workers_changed(const WorkerSnapshot& snapshot) noexcept {
    MutexLock lock(&mu_);
    try {
      for (const Worker& w : snapshot.workers()) urls_[w.id.value] = w.url;
    } catch (...) {
    }
  }

  // Applies a change from another replica (or another source of state).
  sync::Applied apply(const sync::Change& change, const WorkerSnapshot& snapshot,
                      ModelTrees& trees) noexcept {
    if (const auto* gone = std::get_if<sync::WorkerGone>(&change)) {
      const Worker* w = snapshot.find_url(gone->worker);
      if (w == nullptr) return sync::Applied::kUnknownWorker;
      trees.for_each([id = w->id.value](ApproxRadixTree& t) { t.remove_tenant(id); });
      MutexLock lock(&mu_);
      for (auto& [model, index] : indexes_) index->remove_worker(w->id.value);
      return sync::Applied::kApplied;
    }
    if (const auto* p = std::get_if<sync::Placement>(&change))
      return apply_keys(*p, true, snapshot);
    if (const auto* f = std::get_if<sync::Forget>(&change)) return apply_keys(*f, false, snapshot);
    return sync::Applied::kNotShared;  // a Pin: manual's
  }

  // Keys held from other replicas, over every model.
  std::size_t remote_keys() const noexcept {
    MutexLock lock(&mu_);
    std::size_t n = 0;
    for (const auto& [model, index] : indexes_) n += index->size();
    return n;
  }

 private:
  // Backs `s` off to a UTF-8 character boundary, so that the tree never
  // sees a character cut in two.
  static std::string_view utf8_cut(std::string_view s) noexcept {
    std::size_t n = s.size();
    std::size_t back = 0;
    while (n > 0 && back < 4 && (static_cast<unsigned char>(s[n - 1]) & 0xC0) == 0x80) {
      --n;
      ++back;
    }
    // A lead byte whose sequence was cut goes too.
    if (n > 0 && static_cast<unsigned char>(s[n - 1]) >= 0xC0) {
      const auto lead = static_cast<unsigned char>(s[n - 1]);
      const std::size_t len = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
      if (back + 1 < len) return s.substr(0, n - 1);
    }
    return s;
  }

  // A placement (`add`) or a forget of chunk keys, for one worker.
  template <class Keys>
  sync::Applied apply_keys(const Keys& c, bool add, const WorkerSnapshot& snapshot) noexcept {
    if (c.scheme != sync::KeyScheme::kTextChunks) return sync::Applied::kUnknownScheme;
    const Worker* w = snapshot.find_url(c.worker);
    if (w == nullptr || (!w->model.empty() && w->model != c.model)) {
      return sync::Applied::kUnknownWorker;
    }
    sync::RemoteIndex* index = index_for(c.model);
    if (index == nullptr) return sync::Applied::kOutOfMemory;
    if (!add) {
      index->remove(w->id.value, c.keys);
      return sync::Applied::kApplied;
    }
    if (!index->add(w->id.value, c.keys)) return sync::Applied::kOutOfMemory;
    receiving_.store(true, std::memory_order_relaxed);
    return sync::Applied::kApplied;
  }

  sync::RemoteIndex* find_index(std::string_view model) const noexcept {
    ReaderMutexLock lock(&mu_);
    auto it = indexes_.find(to_absl(model));
    return it == indexes_.end() ? nullptr : it->second.get();
  }

  sync::RemoteIndex* index_for(std::string_view model) noexcept {
    if (sync::RemoteIndex* i = find_index(model)) return i;
    MutexLock lock(&mu_);
    try {
      auto [it, inserted] = indexes_.try_emplace(std::string(model), nullptr);
      if (inserted) it->second = std::make_unique<sync::RemoteIndex>(max_remote_keys_);
      return it->second.get();
    } catch (...) {
      return nullptr;
    }
  }

  const std::size_t max_remote_keys_;
  std::atomic<sync::StateSink*> sink_{nullptr};
  std::atomic<bool> receiving_{false};
  mutable Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<sync::RemoteIndex>> indexes_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::uint32_t, std::string> urls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_SYNC_HUB_HPP_
