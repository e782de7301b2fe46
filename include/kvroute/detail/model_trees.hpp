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
//     or by maintain().
//
// Thread safety: thread-safe. Lookups take a shared lock for the map only;
// trees live as long as this object, so they are used without it.

#ifndef KVROUTE_DETAIL_MODEL_TREES_HPP_
#define KVROUTE_DETAIL_MODEL_TREES_HPP_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
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
  };

  explicit ModelTrees(Options o) noexcept
      : opt_(o),
        clock_(o.clock != nullptr ? o.clock : &Clock::steady()),
        next_sweep_ns_(sat_add(clock_->now().count(), o.eviction_interval.count())) {}

  ModelTrees(const ModelTrees&) = delete;
  ModelTrees& operator=(const ModelTrees&) = delete;

  // The model's tree, or null before it is created.
  ApproxRadixTree* find(std::string_view model) const noexcept {
    ReaderMutexLock lock(&mu_);
    auto it = trees_.find(to_absl(model));
    return it == trees_.end() ? nullptr : it->second.get();
  }

  // The model's tree, created on first sight; null only when out of memory.
  ApproxRadixTree* get_or_create(std::string_view model) noexcept {
    if (ApproxRadixTree* t = find(model)) return t;
    try {
      auto fresh = std::make_unique<ApproxRadixTree>(ApproxRadixTree::Options{
          .tenant_budget = opt_.reactive_eviction ? budget() : kUnlimitedBudget,
          .recency_shift = opt_.recency_shift});
      MutexLock lock(&mu_);
      auto [it, inserted] = trees_.try_emplace(std::string(model), nullptr);
      if (inserted) it->second = std::move(fresh);
      return it->second.get();
    } catch (...) {
      return nullptr;
    }
  }

  // Creates the tree of every model `snapshot` has a group for (the
  // policies' on_workers_changed), so that a model's first requests meet a
  // tree that metrics and hosts can already see. Out of memory: created on
  // first request instead.
  void create_for(const WorkerSnapshot& snapshot) noexcept {
    snapshot.for_each_group([this](const ModelGroup& g) { get_or_create(g.model()); });
  }

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
    std::vector<ApproxRadixTree*> trees;
    {
      ReaderMutexLock lock(&mu_);
      try {
        trees.reserve(trees_.size());
        for (auto& [model, t] : trees_) trees.push_back(t.get());
      } catch (...) {
        return;
      }
    }
    for (ApproxRadixTree* t : trees) f(*t);
  }

  // The per-worker budget in tree units.
  std::size_t budget() const noexcept {
    return opt_.max_tree_size > std::numeric_limits<std::size_t>::max()
               ? std::numeric_limits<std::size_t>::max()
               : static_cast<std::size_t>(opt_.max_tree_size);
  }

 private:
  static std::int64_t sat_add(std::int64_t a, std::int64_t b) noexcept {
    if (b <= 0) return std::numeric_limits<std::int64_t>::max();
    return a > std::numeric_limits<std::int64_t>::max() - b
               ? std::numeric_limits<std::int64_t>::max()
               : a + b;
  }

  const Options opt_;
  const Clock* const clock_;
  std::atomic<std::int64_t> next_sweep_ns_;
  mutable Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<ApproxRadixTree>> trees_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<TenantId> removed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_MODEL_TREES_HPP_
