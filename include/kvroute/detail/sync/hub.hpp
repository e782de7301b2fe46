// -----------------------------------------------------------------------------
// File: kvroute/detail/sync/hub.hpp
// -----------------------------------------------------------------------------
//
// Not API. `detail::SyncHub`: what a tree policy (cache_aware,
// least_prefill) keeps to share its state with other replicas
// (sync/change.hpp): the sink it emits to, the RemoteIndex of each model
// with what came from elsewhere as keys, the TextStore of each model with
// recent texts (when texts travel), and the URLs of its workers (changes
// name workers by URL). The policies call it at four points:
//
//   * before a selection reads the tree: fold in what other replicas placed
//     that this text reaches (RemoteIndex::take_deepest, then inserts of
//     the request's own prefix under the workers named there);
//   * after the text is inserted under the chosen worker: emit the chunks
//     the tree did not know before (from the last known one), as the text
//     itself while the requests that extend known text add at most
//     `text_share` of their bytes (text_mode), as keys otherwise;
//   * when feedback drops a claim (report_cached): emit a Forget for the
//     chunks the server no longer had or, from least_prefill when the tree
//     is eager (below), a Cut for the claims as old as the one found short;
//   * when a worker is removed: emit WorkerGone.
//
// A text sent is kept in the store, where later placements find the prefix
// they extend (on the sender: whether the others hold it; on a receiver:
// its bytes). The host keeps it there when it has drained the sink, on its
// transport's thread (note_sent); until a host first does, the selection
// that sends it does.
//
// A placement with text is applied at once: the text it extends, found by
// its anchor in the store, and its own bytes are inserted into the tree
// under its worker. When the store lacks that prefix (it was dropped, or
// the placement came before the one it extends), its chunks' keys go to
// the RemoteIndex as a placement without text would.
//
// The tree is eager while it learns other replicas' placements as they
// are made: texts travel, and nine in ten of the last placements applied
// here (over about the last thousand) came whole. Only then is its recency
// order close enough to each server's LRU order for a feedback cut by
// recency (feedback.hpp) to mean what it says, here or sent as a Cut.
//
// With no sink and nothing received, each point is one relaxed atomic load.
//
// Thread safety: thread-safe.

#ifndef KVROUTE_DETAIL_SYNC_HUB_HPP_
#define KVROUTE_DETAIL_SYNC_HUB_HPP_

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
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
#include "kvroute/sync/text_store.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

class SyncHub {
 public:
  // `text_share` outside [0, 1] is taken as the nearest end (NaN as 0).
  explicit SyncHub(std::size_t max_remote_keys, double text_share = 0,
                   std::size_t max_text_bytes = std::size_t{1} << 29) noexcept
      : max_remote_keys_(max_remote_keys),
        max_text_bytes_(max_text_bytes),
        text_share_(text_share > 0 ? std::min(text_share, 1.0) : 0.0),
        texting_(text_share_ > 0) {}
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
  // Whether the tree learns other replicas' placements as they are made
  // (the header says when).
  bool eager() const noexcept {
    if (!texting_.load(std::memory_order_relaxed)) return false;
    const std::uint64_t whole = recent_whole_.load(std::memory_order_relaxed);
    const std::uint64_t keyed = recent_keyed_.load(std::memory_order_relaxed);
    return keyed * 10 <= whole + keyed;
  }

  // Before a selection reads `tree`: folds in the deepest prefix of the
  // text that other replicas placed and this tree has not seen yet.
  void fold_remote(std::string_view model, sync::TextChunks& chunks,
                   ApproxRadixTree& tree) noexcept {
    if (!receiving_.load(std::memory_order_relaxed) || chunks.size() == 0) return;
    ModelState* m = find_state(model);
    if (m == nullptr || m->index.empty()) return;
    sync::RemoteIndex::Taken holders;
    const std::ptrdiff_t i = m->index.take_deepest(chunks, 0, &holders);
    if (i < 0) return;
    const std::string_view prefix =
        utf8_cut(chunks.text().substr(0, (static_cast<std::size_t>(i) + 1) * sync::kChunkBytes));
    for (std::uint32_t w : holders) (void)tree.insert(prefix, w);
  }

  // After a selection inserted the text under `worker`: emits the chunks
  // from the one holding byte `known` of the text (what the tree matched
  // before the insert) to the last whole chunk: as text in text_mode()
  // (then the bytes after the last whole chunk travel too), as keys
  // otherwise. Nothing when `worker` already held every whole chunk
  // (`held_all`): the tree learnt that from a placement that was emitted
  // then, here or on another replica, so a request that only repeats known
  // text costs nothing to share.
  void emit_placed(std::string_view model, std::string_view worker, sync::TextChunks& chunks,
                   std::size_t known, bool held_all = false) noexcept {
    sync::StateSink* s = sink();
    if (s == nullptr) return;
    if (chunks.size() == 0 || held_all) {
      if (text_share_ > 0) (void)text_mode(chunks.text().size(), 0, held_all);
      return;
    }
    const std::size_t first = std::min(known / sync::kChunkBytes, chunks.size() - 1);
    if (text_share_ > 0 && text_mode(chunks.text().size(),
                                     chunks.text().size() - first * sync::kChunkBytes, first > 0)) {
      emit_text(*s, model, worker, chunks, first);
      return;
    }
    if (!chunks.compute_from(first)) return;
    s->placed(model, worker, static_cast<std::uint32_t>(first), chunks.keys_from(first));
  }

  // What the sink sent, once the host drained it: the texts of placements
  // that carried text are kept in the store, as a receiver keeps them,
  // instead of on the selection's path. From the first call on,
  // emit_placed leaves that to this call. The copies and the indexing of
  // each new chunk are most of what a placement with text costs, and the
  // store needs a sent text only once another replica extends it, which
  // comes after the transport has sent it.
  void note_sent(std::span<const sync::Change> changes) noexcept {
    noted_.store(true, std::memory_order_relaxed);
    for (const sync::Change& c : changes) {
      const auto* p = std::get_if<sync::Placement>(&c);
      if (p == nullptr || p->text.empty() || p->scheme != sync::KeyScheme::kTextChunks) continue;
      ModelState* m = state_for(p->model);
      std::string whole;
      if (m == nullptr || !whole_text(*m, *p, &whole)) continue;
      sync::TextChunks chunks(whole);
      (void)m->texts.add(chunks, p->first);
    }
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

  // Feedback cut `worker`'s claims from `back` stamps before the tree's
  // now() on: the others cut theirs alike, when this tree is eager.
  // Returns whether a Cut was emitted.
  bool emit_cut(std::string_view model, std::string_view worker, std::uint64_t back) noexcept {
    sync::StateSink* s = sink();
    if (s == nullptr || !eager()) return false;
    s->cut(model, worker, back);
    return true;
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
      for (auto& [model, state] : models_) state->index.remove_worker(w->id.value);
      return sync::Applied::kApplied;
    }
    if (const auto* p = std::get_if<sync::Placement>(&change)) {
      return p->text.empty() ? apply_keys(*p, true, snapshot) : apply_text(*p, snapshot, trees);
    }
    if (const auto* c = std::get_if<sync::Cut>(&change)) return apply_cut(*c, snapshot, trees);
    if (const auto* f = std::get_if<sync::Forget>(&change)) return apply_keys(*f, false, snapshot);
    return sync::Applied::kNotShared;  // a Pin: manual's
  }

  // Keys held from other replicas, over every model.
  std::size_t remote_keys() const noexcept {
    MutexLock lock(&mu_);
    std::size_t n = 0;
    for (const auto& [model, state] : models_) n += state->index.size();
    return n;
  }

  // Placements with text applied whole, and those whose prefix was not in
  // the store (applied as keys).
  std::uint64_t texts_applied() const noexcept {
    return texts_applied_.load(std::memory_order_relaxed);
  }
  std::uint64_t texts_unanchored() const noexcept {
    return texts_unanchored_.load(std::memory_order_relaxed);
  }

 private:
  // What the hub keeps per model.
  struct ModelState {
    ModelState(std::string model, std::size_t max_keys, std::size_t max_text_bytes) noexcept
        : name(std::move(model)), index(max_keys), texts(max_text_bytes) {}

    // Whether a text whose last whole chunk has key `key` was sent or
    // applied whole lately (note_tail).
    bool tail_known(std::uint64_t key) const noexcept {
      return key != 0 && tails[key % kTails].load(std::memory_order_relaxed) == key;
    }
    void note_tail(std::uint64_t key) noexcept {
      tails[key % kTails].store(key, std::memory_order_relaxed);
    }

    const std::string name;
    sync::RemoteIndex index;
    sync::TextStore texts;
    // The keys of the last whole chunks of texts sent or applied whole
    // lately, one slot per key (a newer one takes the slot): a session's
    // next turn finds the text it extends here without a lock, even before
    // the host noted the turn before (note_sent). A text not here is looked
    // up in the store. 32 KiB per model that texts reach.
    static constexpr std::size_t kTails = 4096;
    std::array<std::atomic<std::uint64_t>, kTails> tails{};
  };

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

  // The worker named by `url` here, when it serves `model` (or every
  // model); null otherwise.
  static const Worker* worker_of(std::string_view url, std::string_view model,
                                 const WorkerSnapshot& snapshot) noexcept {
    const Worker* w = snapshot.find_url(url);
    if (w == nullptr || (!w->model.empty() && w->model != model)) return nullptr;
    return w;
  }

  // A placement (`add`) or a forget of chunk keys, for one worker.
  template <class Keys>
  sync::Applied apply_keys(const Keys& c, bool add, const WorkerSnapshot& snapshot) noexcept {
    if (c.scheme != sync::KeyScheme::kTextChunks) return sync::Applied::kUnknownScheme;
    const Worker* w = worker_of(c.worker, c.model, snapshot);
    if (w == nullptr) return sync::Applied::kUnknownWorker;
    ModelState* m = state_for(c.model);
    if (m == nullptr) return sync::Applied::kOutOfMemory;
    if (!add) {
      m->index.remove(w->id.value, c.keys);
      return sync::Applied::kApplied;
    }
    if (!m->index.add(w->id.value, c.keys)) return sync::Applied::kOutOfMemory;
    receiving_.store(true, std::memory_order_relaxed);
    count_placement(false);
    return sync::Applied::kApplied;
  }

  // Counts a placement applied whole or as keys, for eager(): halves both
  // counts every kWindow placements, so that the last ones weigh most.
  // Relaxed: a racing update may be lost.
  void count_placement(bool whole) noexcept {
    constexpr std::uint64_t kWindow = 1024;
    std::atomic<std::uint64_t>& c = whole ? recent_whole_ : recent_keyed_;
    c.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t w = recent_whole_.load(std::memory_order_relaxed);
    const std::uint64_t k = recent_keyed_.load(std::memory_order_relaxed);
    if (w + k >= kWindow) {
      recent_whole_.store(w / 2, std::memory_order_relaxed);
      recent_keyed_.store(k / 2, std::memory_order_relaxed);
    }
  }

  // A Cut: the worker's claims from `back` stamps before now() on, in an
  // eager tree; nothing in another (the header says why).
  sync::Applied apply_cut(const sync::Cut& c, const WorkerSnapshot& snapshot,
                          ModelTrees& trees) noexcept {
    const Worker* w = worker_of(c.worker, c.model, snapshot);
    if (w == nullptr) return sync::Applied::kUnknownWorker;
    if (!eager()) return sync::Applied::kApplied;
    const TreeRef tree = trees.find(c.model);
    if (!tree) return sync::Applied::kApplied;
    const std::uint64_t now = tree->now();
    if (now > c.back) (void)tree->drop_older_than(w->id.value, now - c.back);
    return sync::Applied::kApplied;
  }

  // A placement with text: the whole text into the tree when its prefix is
  // in the store, its chunks' keys into the RemoteIndex when not.
  sync::Applied apply_text(const sync::Placement& p, const WorkerSnapshot& snapshot,
                           ModelTrees& trees) noexcept {
    if (p.scheme != sync::KeyScheme::kTextChunks) return sync::Applied::kUnknownScheme;
    const Worker* w = worker_of(p.worker, p.model, snapshot);
    if (w == nullptr) return sync::Applied::kUnknownWorker;
    ModelState* m = state_for(p.model);
    if (m == nullptr) return sync::Applied::kOutOfMemory;
    receiving_.store(true, std::memory_order_relaxed);
    texting_.store(true, std::memory_order_relaxed);
    std::string whole;
    if (!whole_text(*m, p, &whole)) {
      texts_unanchored_.fetch_add(1, std::memory_order_relaxed);
      sync::Placement keys{.model = p.model, .worker = p.worker, .first = p.first};
      if (!sync::append_chunk_keys(p.text, p.first, &keys.keys)) {
        return sync::Applied::kOutOfMemory;
      }
      return apply_keys(keys, true, snapshot);
    }
    const TreeRef tree = trees.get_or_create(p.model);
    if (!tree || !tree->insert(whole, w->id.value).ok()) return sync::Applied::kOutOfMemory;
    sync::TextChunks chunks(whole);
    (void)m->texts.add(chunks, p.first);
    if (chunks.size() > 0) m->note_tail(chunks.key_at(chunks.size() - 1));
    texts_applied_.fetch_add(1, std::memory_order_relaxed);
    count_placement(true);
    return sync::Applied::kApplied;
  }

  // emit_placed's text: from chunk `first` when a text sent or applied
  // whole here lately ends there or the store holds one that does (it
  // keeps only texts sent whole, so the others hold it too), else from the
  // deepest chunk the store holds; the rest of the prefix travels too. Two
  // keys in the usual case (the anchor and the last chunk), each hashed
  // once, where keys would take one per chunk.
  void emit_text(sync::StateSink& s, std::string_view model, std::string_view worker,
                 sync::TextChunks& chunks, std::size_t first) noexcept {
    ModelState* m = state_for(model);
    std::size_t from = 0;
    std::uint64_t anchor = 0;  // the key of chunk from - 1, hashed once
    if (m != nullptr) {
      if (first > 0) {
        anchor = chunks.key_at(first - 1);
        from = first;
        if (!m->tail_known(anchor) && !m->texts.contains(anchor, first)) {
          from = m->texts.deepest(chunks, first - 1);
          anchor = from > 0 ? chunks.key_at(from - 1) : 0;
        }
      }
      m->note_tail(chunks.key_at(chunks.size() - 1));
      // Kept here until the host notes what it sent (note_sent), which
      // keeps it on the transport's thread instead. Never waits for the
      // store: a text not kept here costs at most a later placement that
      // extends it, once the tail table has forgotten it, its prefix sent
      // again.
      if (!noted_.load(std::memory_order_relaxed)) (void)m->texts.try_add(chunks, from);
    }
    s.placed_text(model, worker, static_cast<std::uint32_t>(from), anchor,
                  chunks.text().substr(from * sync::kChunkBytes));
  }

  // Puts a placement's text together: the prefix its anchor names, from
  // the store, then its own bytes, into `*whole`. False when the store
  // lacks the prefix or memory runs out.
  static bool whole_text(const ModelState& m, const sync::Placement& p,
                         std::string* whole) noexcept {
    try {
      // Sized once: the prefix and the text are copied once each.
      whole->reserve(whole->size() + std::size_t{p.first} * sync::kChunkBytes + p.text.size());
    } catch (...) {
      return false;
    }
    if (p.first > 0 && !m.texts.prefix(p.anchor, p.first, whole)) return false;
    try {
      whole->append(p.text);
    } catch (...) {
      return false;
    }
    return true;
  }

  // Whether placements carry text now: while the requests that extend a
  // known prefix add at most text_share of their bytes as new text, over
  // about the last kWindow bytes of such requests (both sums halve past
  // it), and always over the first kSample bytes, too few to judge by. A
  // selection of `routed` bytes whose placement would carry `fresh` bytes
  // counts when it extends what the tree knew (`extends`); a session's
  // first request (nothing known) is all new text on any traffic and says
  // nothing about it. One mode for all placements rather than a budget
  // spent placement by placement: a placement sent as keys makes the
  // receivers learn it by folding, so their trees stop being eager (above)
  // for a while, and a budget that runs dry now and then costs more than
  // its share. Relaxed: a racing update may be lost.
  bool text_mode(std::size_t routed, std::size_t fresh, bool extends) noexcept {
    constexpr std::uint64_t kWindow = std::uint64_t{256} << 20;
    constexpr std::uint64_t kSample = std::uint64_t{4} << 20;
    std::uint64_t r = routed_.load(std::memory_order_relaxed);
    std::uint64_t f = fresh_.load(std::memory_order_relaxed);
    if (extends) {
      r = routed_.fetch_add(routed, std::memory_order_relaxed) + routed;
      f = fresh_.fetch_add(fresh, std::memory_order_relaxed) + fresh;
      if (r > kWindow) {
        routed_.store(r / 2, std::memory_order_relaxed);
        fresh_.store(f / 2, std::memory_order_relaxed);
      }
    }
    return r < kSample || static_cast<double>(f) <= text_share_ * static_cast<double>(r);
  }

  // The state of `model`, or null. The one found last is looked up without
  // the lock (a host serves one model, or a few): states live as long as
  // the hub.
  ModelState* find_state(std::string_view model) const noexcept {
    ModelState* last = last_.load(std::memory_order_acquire);
    if (last != nullptr && last->name == model) return last;
    ReaderMutexLock lock(&mu_);
    auto it = models_.find(to_absl(model));
    if (it == models_.end()) return nullptr;
    last_.store(it->second.get(), std::memory_order_release);
    return it->second.get();
  }

  ModelState* state_for(std::string_view model) noexcept {
    if (ModelState* m = find_state(model)) return m;
    MutexLock lock(&mu_);
    try {
      auto [it, inserted] = models_.try_emplace(std::string(model), nullptr);
      if (inserted) {
        it->second =
            std::make_unique<ModelState>(std::string(model), max_remote_keys_, max_text_bytes_);
      }
      return it->second.get();
    } catch (...) {
      return nullptr;
    }
  }

  const std::size_t max_remote_keys_;
  const std::size_t max_text_bytes_;
  const double text_share_;
  std::atomic<sync::StateSink*> sink_{nullptr};
  std::atomic<bool> receiving_{false};
  // Texts are kept: this replica sends them, or was sent one.
  std::atomic<bool> texting_;
  // The host keeps sent texts (note_sent).
  std::atomic<bool> noted_{false};
  std::atomic<std::uint64_t> routed_{0};  // text_mode()'s sums
  std::atomic<std::uint64_t> fresh_{0};
  std::atomic<std::uint64_t> texts_applied_{0};
  std::atomic<std::uint64_t> texts_unanchored_{0};
  std::atomic<std::uint64_t> recent_whole_{0};
  std::atomic<std::uint64_t> recent_keyed_{0};
  mutable std::atomic<ModelState*> last_{nullptr};  // find_state's
  mutable Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<ModelState>> models_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::uint32_t, std::string> urls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_SYNC_HUB_HPP_
