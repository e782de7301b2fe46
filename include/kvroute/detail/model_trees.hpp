// -----------------------------------------------------------------------------
// File: kvroute/detail/model_trees.hpp
// -----------------------------------------------------------------------------
//
// Not API. `ModelTrees`: the per-model radix trees of the tree-keeping
// policies (cache_aware, least_prefill) and the bookkeeping they share:
//   * a tree per request model, created when a worker of the model
//     registers (create_for) or on the model's first request;
//   * every removed worker remembered (ids are never reused; 4 bytes each)
//     and removed again from every tree on each sweep, because a selection
//     still running on an older snapshot may insert for it after its removal
//     and after any number of sweeps;
//   * the sweep (every tree to the per-worker budget) every eviction
//     interval, run by the first selection after it on the injectable clock,
//     or by maintain();
//   * with Options::max_models, at most that many trees: creating one more
//     drops the least recently used model's tree, so that requests naming
//     ever new models cannot grow memory without bound.
//
// Thread safety: thread-safe. Lookups take a shared lock for the map only,
// and trees are used without it. Without max_models a tree lives as long as
// this object; with it, a dropped tree lives until the last TreeRef to it
// goes (a lookup then also copies a shared_ptr and stamps the model's use,
// two atomic writes that unbounded lookups skip).

#ifndef KVROUTE_DETAIL_MODEL_TREES_HPP_
#define KVROUTE_DETAIL_MODEL_TREES_HPP_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "kvroute/clock.hpp"
#include "kvroute/config.hpp"
#include "kvroute/detail/ascii.hpp"
#include "kvroute/detail/mutex.hpp"
#include "kvroute/radix_tree.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

// A tree in use, and what keeps it alive when trees can be dropped.
class TreeRef {
 public:
  TreeRef() noexcept = default;
  TreeRef(ApproxRadixTree* tree, std::shared_ptr<ApproxRadixTree> keep) noexcept
      : tree_(tree), keep_(std::move(keep)) {}
  ApproxRadixTree* get() const noexcept { return tree_; }
  ApproxRadixTree* operator->() const noexcept { return tree_; }
  explicit operator bool() const noexcept { return tree_ != nullptr; }

 private:
  ApproxRadixTree* tree_ = nullptr;
  std::shared_ptr<ApproxRadixTree> keep_;  // empty while trees are never dropped
};

class ModelTrees {
 public:
  struct Options {
    // Characters per worker per tree.
    std::uint64_t max_tree_size = std::uint64_t{1} << 26;
    // Evict on the insert that crosses the budget, as well as on sweeps.
    bool reactive_eviction = true;
    // <= 0: no periodic sweep (maintain() still sweeps).
    std::chrono::nanoseconds eviction_interval = std::chrono::seconds(120);
    const Clock* clock = &Clock::steady();
    // ApproxRadixTree::Options::recency_shift of every tree.
    unsigned recency_shift = 0;
    // Most trees kept at once (least recently used dropped); 0: no limit.
    std::uint64_t max_models = 0;
  };

  explicit ModelTrees(Options o) noexcept
      : opt_(o),
        clock_(o.clock != nullptr ? o.clock : &Clock::steady()),
        next_sweep_ns_(sat_add(clock_->now().count(), o.eviction_interval.count())) {}

  ModelTrees(const ModelTrees&) = delete;
  ModelTrees& operator=(const ModelTrees&) = delete;

  // The model's tree, or null before it is created (or after it was
  // dropped).
  TreeRef find(std::string_view model) const noexcept {
    ReaderMutexLock lock(&mu_);
    auto it = trees_.find(to_absl(model));
    return it == trees_.end() ? TreeRef{} : use(it->second);
  }

  // The model's tree as a shared_ptr (null as for find()), for a host that
  // keeps it beyond a call.
  std::shared_ptr<ApproxRadixTree> find_shared(std::string_view model) const noexcept {
    ReaderMutexLock lock(&mu_);
    auto it = trees_.find(to_absl(model));
    return it == trees_.end() ? nullptr : it->second.tree;
  }

  // The model's tree, created on first sight; null only when out of memory.
  // Creating a tree beyond max_models drops the least recently used one.
  TreeRef get_or_create(std::string_view model) noexcept {
    if (TreeRef t = find(model)) return t;
    std::shared_ptr<ApproxRadixTree> victim;  // destroyed after the unlock
    try {
      auto fresh = std::make_shared<ApproxRadixTree>(ApproxRadixTree::Options{
          .tenant_budget = opt_.reactive_eviction ? budget() : kUnlimitedBudget,
          .recency_shift = opt_.recency_shift});
      MutexLock lock(&mu_);
      auto [it, inserted] = trees_.try_emplace(std::string(model));
      if (!inserted) return use(it->second);
      it->second.tree = std::move(fresh);
      TreeRef ref = use(it->second);
      if (opt_.max_models > 0 && trees_.size() > opt_.max_models) victim = drop_lru(it->first);
      return ref;
    } catch (...) {
      return {};
    }
  }

  // Creates the tree of every model `snapshot` has a group for (the
  // policies' on_workers_changed), so that a model's first requests meet a
  // tree that metrics and hosts can already see. Out of memory: created on
  // first request instead.
  void create_for(const WorkerSnapshot& snapshot) noexcept {
    snapshot.for_each_group([this](const ModelGroup& g) { get_or_create(g.model()); });
  }

  // The models that have a tree now.
  std::vector<std::string> models() const {
    ReaderMutexLock lock(&mu_);
    std::vector<std::string> out;
    out.reserve(trees_.size());
    for (const auto& [model, e] : trees_) out.push_back(model);
    return out;
  }

  // Trees dropped so far to keep within max_models.
  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

  // Forgets a removed worker in every tree, now and on every later sweep.
  void on_worker_removed(WorkerId id) noexcept {
    for_each([id](ApproxRadixTree& t) { t.remove_tenant(id.value); });
    MutexLock lock(&mu_);
    try {
      removed_.insert(id.value);
    } catch (...) {
    }
  }

  // Sweeps now: removed workers out of every tree, every tree to budget.
  void maintain() noexcept {
    std::vector<TenantId> removed;
    {
      ReaderMutexLock lock(&mu_);
      try {
        removed.assign(removed_.begin(), removed_.end());
      } catch (...) {
      }
    }
    const std::size_t b = budget();
    for_each([&](ApproxRadixTree& t) {
      for (TenantId id : removed) t.remove_tenant(id);
      t.evict(b);
    });
  }

  // Sweeps when the eviction interval has passed; one caller wins.
  void sweep_if_due() noexcept {
    if (opt_.eviction_interval.count() <= 0) return;
    const std::int64_t now = clock_->now().count();
    std::int64_t due = next_sweep_ns_.load(std::memory_order_relaxed);
    if (now < due) return;
    if (!next_sweep_ns_.compare_exchange_strong(due, sat_add(now, opt_.eviction_interval.count()),
                                                std::memory_order_relaxed)) {
      return;  // another thread sweeps
    }
    maintain();
  }

  // Calls f(tree) for every tree (outside the map's lock).
  template <class F>
  void for_each(F&& f) noexcept {
    std::vector<std::shared_ptr<ApproxRadixTree>> trees;
    {
      ReaderMutexLock lock(&mu_);
      try {
        trees.reserve(trees_.size());
        for (auto& [model, e] : trees_) trees.push_back(e.tree);
      } catch (...) {
        return;
      }
    }
    for (const auto& t : trees) f(*t);
  }

  // The per-worker budget in tree units.
  std::size_t budget() const noexcept {
    return opt_.max_tree_size > std::numeric_limits<std::size_t>::max()
               ? std::numeric_limits<std::size_t>::max()
               : static_cast<std::size_t>(opt_.max_tree_size);
  }

 private:
  struct Entry {
    Entry() = default;
    // Moved only by a rehash, under the exclusive lock: no reader stamps it.
    Entry(Entry&& o) noexcept
        : tree(std::move(o.tree)), last_use(o.last_use.load(std::memory_order_relaxed)) {}
    Entry& operator=(Entry&& o) noexcept {
      tree = std::move(o.tree);
      last_use.store(o.last_use.load(std::memory_order_relaxed), std::memory_order_relaxed);
      return *this;
    }
    std::shared_ptr<ApproxRadixTree> tree;
    mutable std::atomic<std::uint64_t> last_use{0};
  };

  // A reference to e's tree; with max_models, one that keeps it alive and
  // stamps the model's use.
  TreeRef use(const Entry& e) const noexcept {
    if (opt_.max_models == 0) return {e.tree.get(), nullptr};
    e.last_use.store(uses_.fetch_add(1, std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return {e.tree.get(), e.tree};
  }

  // Unlinks the least recently used tree other than `keep`'s and returns it
  // for the caller to release outside the lock.
  std::shared_ptr<ApproxRadixTree> drop_lru(const std::string& keep)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto victim = trees_.end();
    for (auto it = trees_.begin(); it != trees_.end(); ++it) {
      if (it->first == keep) continue;
      if (victim == trees_.end() || it->second.last_use.load(std::memory_order_relaxed) <
                                        victim->second.last_use.load(std::memory_order_relaxed)) {
        victim = it;
      }
    }
    if (victim == trees_.end()) return nullptr;
    std::shared_ptr<ApproxRadixTree> t = std::move(victim->second.tree);
    trees_.erase(victim);
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return t;
  }

  static std::int64_t sat_add(std::int64_t a, std::int64_t b) noexcept {
    if (b <= 0) return std::numeric_limits<std::int64_t>::max();
    return a > std::numeric_limits<std::int64_t>::max() - b
               ? std::numeric_limits<std::int64_t>::max()
               : a + b;
  }

  const Options opt_;
  const Clock* const clock_;
  std::atomic<std::int64_t> next_sweep_ns_;
  mutable std::atomic<std::uint64_t> uses_{0};
  std::atomic<std::uint64_t> dropped_{0};
  mutable Mutex mu_;
  absl::flat_hash_map<std::string, Entry> trees_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<TenantId> removed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_MODEL_TREES_HPP_
