// -----------------------------------------------------------------------------
// File: kvroute/worker_set.hpp
// -----------------------------------------------------------------------------
//
// The worker model. A `Worker` is one inference server: a stable `WorkerId`
// (assigned here, never reused, never a position in a list), a URL, the model
// it serves and its health. A `WorkerSet` holds the current workers and
// publishes each change as a new immutable `WorkerSnapshot`; selections read a
// snapshot, so they always see one consistent membership even while other
// threads add, remove or re-flag workers.
//
// A snapshot also groups workers by model (`ModelGroup`): the members of a
// model are the workers that declared it plus the workers whose model is
// empty (they serve any model, as the gateway's single-model deployments
// do). A request with an empty model may go to any worker. Each group keeps
// its healthy members precomputed, so a selection filters nothing.
//
// Thread safety: `WorkerSet` is thread-safe. `WorkerSnapshot` and
// `ModelGroup` are immutable and may be read from any number of threads.
// Writers are serialised and O(number of workers) each; use the batch `add`
// to register many workers at once.
//
// Example:
//
//   kvroute::WorkerSet workers;
//   kvroute::WorkerId a = *workers.add({.url = "http://10.0.0.1:30000"});
//   kvroute::WorkerId b = *workers.add({.url = "http://10.0.0.2:30000"});
//   workers.set_healthy(b, false).IgnoreError();
//   auto snap = workers.snapshot();
//   const kvroute::ModelGroup& g = snap->group("");   // every worker
//   // g.members().size() == 2, g.available().size() == 1 (only `a`)

#ifndef KVROUTE_WORKER_SET_HPP_
#define KVROUTE_WORKER_SET_HPP_

#include <algorithm>
#include <compare>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kvroute/config.hpp"
#include "kvroute/detail/ascii.hpp"
#include "kvroute/detail/hash_ring.hpp"
#include "kvroute/detail/mutex.hpp"

KVROUTE_NAMESPACE_BEGIN

// A worker's stable identity. Ids are assigned by `WorkerSet::add` in
// increasing order from 0 and are never reused, so an id held across a
// removal can never name a different worker.
struct WorkerId {
  static constexpr std::uint32_t kInvalidValue = 0xFFFFFFFFu;
  std::uint32_t value = kInvalidValue;

  constexpr bool valid() const noexcept { return value != kInvalidValue; }
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads defaulted <=>
  friend constexpr auto operator<=>(WorkerId, WorkerId) = default;
  template <class H>
  friend H AbslHashValue(H h, WorkerId id) {
    return H::combine(std::move(h), id.value);
  }
};

// How many ids one `WorkerSet` hands out over its lifetime.
inline constexpr std::uint32_t kMaxWorkerIds = 1u << 24;

// Limits on configuration strings, so a typo cannot create a 1 GB URL.
inline constexpr std::size_t kMaxWorkerUrlBytes = 4096;
inline constexpr std::size_t kMaxModelBytes = 1024;

struct Worker {
  WorkerId id{};
  std::string url{};
  std::string model{};        // empty: serves every model
  bool healthy = true;        // the host's health checks
  bool circuit_open = false;  // a circuit breaker keeps it out (circuit_breaker.hpp)

  // Eligible for selection: healthy and not held out by its breaker.
  constexpr bool available() const noexcept { return healthy && !circuit_open; }
};

// What a host supplies to register a worker.
struct WorkerSpec {
  std::string url{};
  std::string model{};
  bool healthy = true;
};

// The workers of one model inside a snapshot.
class ModelGroup {
 public:
  // The model name ("" for the all-workers group).
  std::string_view model() const noexcept { return model_; }

  // Every member, healthy or not, in ascending id order.
  std::span<const Worker* const> members() const noexcept { return members_; }

  // The available members (healthy, circuit not open), in ascending id
  // order: the workers a selection may choose.
  std::span<const Worker* const> available() const noexcept { return available_; }
  // The name before 0.2 (it also meant "circuit not open"); removed in the
  // next release.
  [[deprecated("use available()")]] std::span<const Worker* const> healthy() const noexcept {
    return available_;
  }

  // Changes when the set of members changes, and only then (not on health
  // flips). Policies that keep per-membership state compare it.
  std::uint64_t membership_version() const noexcept { return version_; }

  // The consistent-hash ring over `members()` (point i names members()[i]),
  // built on the first call and shared by later snapshots while membership
  // is unchanged. Complexity: O(1) after the first call; the first call
  // allocates 150 points per member.
  const detail::HashRing& ring() const {
    std::call_once(ring_->once, [this] {
      std::vector<std::string_view> urls;
      urls.reserve(members_.size());
      for (const Worker* w : members_) urls.push_back(w->url);
      ring_->ring = std::make_unique<detail::HashRing>(urls);
    });
    return *ring_->ring;
  }

 private:
  friend class WorkerSnapshot;
  struct RingCache {
    std::once_flag once;
    std::unique_ptr<detail::HashRing> ring;
  };

  std::string model_;
  std::vector<const Worker*> members_;
  std::vector<const Worker*> available_;
  std::uint64_t version_ = 0;
  std::shared_ptr<RingCache> ring_ = std::make_shared<RingCache>();
};

// One immutable membership view.
class WorkerSnapshot {
  struct Passkey {};

 public:
  // Builds a snapshot over `workers` (any order). `previous` may be null; when
  // given, groups whose membership is unchanged keep their version and ring.
  // Use WorkerSet rather than calling this directly.
  WorkerSnapshot(Passkey, std::vector<Worker> workers, std::uint64_t generation,
                 const WorkerSnapshot* previous)
      : generation_(generation), workers_(std::move(workers)) {
    std::sort(workers_.begin(), workers_.end(),
              [](const Worker& a, const Worker& b) { return a.id < b.id; });
    by_url_.reserve(workers_.size());
    for (std::uint32_t i = 0; i < workers_.size(); ++i) {
      by_url_.emplace(workers_[i].url, i);
    }
    all_.model_.clear();
    wildcard_.model_.clear();
    for (const Worker& w : workers_) {
      all_.members_.push_back(&w);
      if (w.model.empty()) wildcard_.members_.push_back(&w);
    }
    for (const Worker& w : workers_) {
      if (w.model.empty()) continue;
      auto [it, inserted] = by_model_.try_emplace(w.model);
      if (inserted) {
        it->second = std::make_unique<ModelGroup>();
        it->second->model_ = w.model;
      }
    }
    // Model members: that model's workers merged with the wildcard ones,
    // keeping ascending id order.
    for (auto& [model, group] : by_model_) {
      for (const Worker& w : workers_) {
        if (w.model.empty() || w.model == model) group->members_.push_back(&w);
      }
    }
    finish(all_, previous ? &previous->all_ : nullptr);
    finish(wildcard_, previous ? &previous->wildcard_ : nullptr);
    for (auto& [model, group] : by_model_) {
      const ModelGroup* prev = nullptr;
      if (previous != nullptr) {
        auto it = previous->by_model_.find(absl::string_view(model));
        if (it != previous->by_model_.end()) prev = it->second.get();
      }
      finish(*group, prev);
    }
  }

  WorkerSnapshot(const WorkerSnapshot&) = delete;
  WorkerSnapshot& operator=(const WorkerSnapshot&) = delete;

  // Increases with every published change.
  std::uint64_t generation() const noexcept { return generation_; }

  // Every worker, in ascending id order.
  std::span<const Worker> workers() const noexcept { return workers_; }
  std::size_t size() const noexcept { return workers_.size(); }
  bool empty() const noexcept { return workers_.empty(); }

  // Returns the worker with `id`, or null. Complexity: O(log n).
  const Worker* find(WorkerId id) const noexcept {
    auto it = std::lower_bound(workers_.begin(), workers_.end(), id,
                               [](const Worker& w, WorkerId v) { return w.id < v; });
    return (it != workers_.end() && it->id == id) ? &*it : nullptr;
  }

  // Returns the worker whose URL is exactly `url`, or null. Complexity: O(1).
  const Worker* find_url(std::string_view url) const noexcept {
    auto it = by_url_.find(absl::string_view(url.data(), url.size()));
    return it == by_url_.end() ? nullptr : &workers_[it->second];
  }

  // Calls f(const ModelGroup&) for each group a request can meet: every
  // worker's (model ""), each declared model's, and the model-less workers'
  // (what a request for an undeclared model meets) when there are any.
  template <class F>
  void for_each_group(F&& f) const {
    f(all_);
    for (const auto& [model, group] : by_model_) f(*group);
    if (!wildcard_.members_.empty()) f(wildcard_);
  }

  // Returns the group that serves `model`: every worker for "", else the
  // workers of that model plus the model-less ones (only the model-less ones
  // when no worker declared `model`). Never allocates.
  const ModelGroup& group(std::string_view model) const noexcept {
    if (model.empty()) return all_;
    auto it = by_model_.find(absl::string_view(model.data(), model.size()));
    return it == by_model_.end() ? wildcard_ : *it->second;
  }

 private:
  friend class WorkerSet;

  static std::shared_ptr<const WorkerSnapshot> make(std::vector<Worker> workers,
                                                    std::uint64_t generation,
                                                    const WorkerSnapshot* previous) {
    return std::make_shared<const WorkerSnapshot>(Passkey{}, std::move(workers), generation,
                                                  previous);
  }

  void finish(ModelGroup& g, const ModelGroup* prev) {
    for (const Worker* w : g.members_) {
      if (w->available()) g.available_.push_back(w);
    }
    bool same = prev != nullptr && prev->members_.size() == g.members_.size();
    for (std::size_t i = 0; same && i < g.members_.size(); ++i) {
      same = prev->members_[i]->id == g.members_[i]->id &&
             prev->members_[i]->url == g.members_[i]->url;
    }
    if (same) {
      g.version_ = prev->version_;
      g.ring_ = prev->ring_;
    } else {
      g.version_ = generation_;
    }
  }

  std::uint64_t generation_;
  std::vector<Worker> workers_;
  absl::flat_hash_map<std::string, std::uint32_t> by_url_;
  ModelGroup all_;
  ModelGroup wildcard_;
  absl::flat_hash_map<std::string, std::unique_ptr<ModelGroup>> by_model_;
};

// The mutable set of workers.
class WorkerSet {
 public:
  WorkerSet() : current_(WorkerSnapshot::make({}, 0, nullptr)) {}
  WorkerSet(const WorkerSet&) = delete;
  WorkerSet& operator=(const WorkerSet&) = delete;

  // Registers a worker and publishes a new snapshot.
  // Returns its id, or InvalidArgument (empty or oversized URL, control
  // bytes or spaces in the URL or model), AlreadyExists (the URL is
  // registered) or ResourceExhausted (kMaxWorkerIds ids handed out).
  absl::StatusOr<WorkerId> add(WorkerSpec spec) ABSL_LOCKS_EXCLUDED(write_mu_) {
    auto ids = add(std::span<const WorkerSpec>(&spec, 1));
    if (!ids.ok()) return ids.status();
    return ids->front();
  }

  // Registers several workers at once, all or none, with one snapshot.
  absl::StatusOr<std::vector<WorkerId>> add(std::span<const WorkerSpec> specs)
      ABSL_LOCKS_EXCLUDED(write_mu_) {
    detail::MutexLock write(&write_mu_);
    std::shared_ptr<const WorkerSnapshot> cur = current();
    absl::flat_hash_set<std::string_view> seen;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (absl::Status s = validate(specs[i], i, specs.size()); !s.ok()) return s;
      if (const Worker* w = cur->find_url(specs[i].url); w != nullptr) {
        return absl::AlreadyExistsError(absl::StrCat(
            "worker url: '", specs[i].url, "' is already registered as worker ", w->id.value));
      }
      if (!seen.insert(specs[i].url).second) {
        return absl::AlreadyExistsError(
            absl::StrCat("worker url: '", specs[i].url, "' appears twice in one add"));
      }
    }
    if (specs.size() > kMaxWorkerIds - next_id_) {
      return absl::ResourceExhaustedError(absl::StrCat("worker id: this WorkerSet has handed out ",
                                                       next_id_, " ids and may hand out at most ",
                                                       kMaxWorkerIds));
    }
    std::vector<Worker> next(cur->workers().begin(), cur->workers().end());
    std::vector<WorkerId> ids;
    ids.reserve(specs.size());
    for (const WorkerSpec& s : specs) {
      WorkerId id{next_id_++};
      next.push_back(Worker{id, s.url, s.model, s.healthy, false});
      ids.push_back(id);
    }
    publish(std::move(next), cur.get());
    return ids;
  }

  // Removes a worker and publishes a new snapshot. Snapshots taken earlier
  // still hold it, so a selection in flight completes normally.
  // Returns NotFound for an id that is not registered.
  absl::Status remove(WorkerId id) ABSL_LOCKS_EXCLUDED(write_mu_) {
    detail::MutexLock write(&write_mu_);
    std::shared_ptr<const WorkerSnapshot> cur = current();
    if (cur->find(id) == nullptr) return not_found(id);
    std::vector<Worker> next;
    next.reserve(cur->size() - 1);
    for (const Worker& w : cur->workers()) {
      if (w.id != id) next.push_back(w);
    }
    publish(std::move(next), cur.get());
    return absl::OkStatus();
  }

  // Marks a worker healthy or unhealthy; a no-op when unchanged.
  // Returns NotFound for an id that is not registered.
  absl::Status set_healthy(WorkerId id, bool healthy) ABSL_LOCKS_EXCLUDED(write_mu_) {
    return update(id, [healthy](Worker& w) { w.healthy = healthy; });
  }

  // Holds a worker out of selection (or lets it back in) on behalf of its
  // circuit breaker, independently of its health; a no-op when unchanged.
  // Returns NotFound for an id that is not registered.
  absl::Status set_circuit_open(WorkerId id, bool open) ABSL_LOCKS_EXCLUDED(write_mu_) {
    return update(id, [open](Worker& w) { w.circuit_open = open; });
  }

  // Returns the current snapshot. Never allocates; takes a reader lock for
  // the length of one reference-count increment.
  std::shared_ptr<const WorkerSnapshot> snapshot() const ABSL_LOCKS_EXCLUDED(read_mu_) {
    return current();
  }

 private:
  std::shared_ptr<const WorkerSnapshot> current() const ABSL_LOCKS_EXCLUDED(read_mu_) {
    detail::ReaderMutexLock read(&read_mu_);
    return current_;
  }

  // Applies `change` to worker `id` and publishes, unless nothing changed.
  template <class Change>
  absl::Status update(WorkerId id, Change&& change) ABSL_LOCKS_EXCLUDED(write_mu_) {
    detail::MutexLock write(&write_mu_);
    std::shared_ptr<const WorkerSnapshot> cur = current();
    const Worker* w = cur->find(id);
    if (w == nullptr) return not_found(id);
    Worker changed = *w;
    change(changed);
    if (changed.healthy == w->healthy && changed.circuit_open == w->circuit_open) {
      return absl::OkStatus();
    }
    std::vector<Worker> next(cur->workers().begin(), cur->workers().end());
    for (Worker& x : next) {
      if (x.id == id) x = changed;
    }
    publish(std::move(next), cur.get());
    return absl::OkStatus();
  }

  static absl::Status not_found(WorkerId id) {
    return absl::NotFoundError(absl::StrCat("worker id: ", id.value, " is not registered"));
  }

  static absl::Status validate(const WorkerSpec& s, std::size_t i, std::size_t n) {
    const std::string where =
        n > 1 ? absl::StrCat(" (worker ", i, " of the batch)") : std::string();
    if (s.url.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("worker url: must not be empty", where));
    }
    if (s.url.size() > kMaxWorkerUrlBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "worker url: ", s.url.size(), " bytes exceeds the limit of ", kMaxWorkerUrlBytes, where));
    }
    if (detail::has_control_byte(s.url) || absl::StrContains(s.url, " ")) {
      return absl::InvalidArgumentError(absl::StrCat("worker url: '", absl::CHexEscape(s.url),
                                                     "' contains a space or control byte", where));
    }
    if (s.model.size() > kMaxModelBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "worker model: ", s.model.size(), " bytes exceeds the limit of ", kMaxModelBytes, where));
    }
    if (detail::has_control_byte(s.model)) {
      return absl::InvalidArgumentError(absl::StrCat("worker model: '", absl::CHexEscape(s.model),
                                                     "' contains a control byte", where));
    }
    return absl::OkStatus();
  }

  void publish(std::vector<Worker> workers, const WorkerSnapshot* previous)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_) {
    std::shared_ptr<const WorkerSnapshot> next =
        WorkerSnapshot::make(std::move(workers), ++generation_, previous);
    {
      detail::MutexLock read(&read_mu_);
      current_.swap(next);
    }
    // `next` now holds the old snapshot; it is released here, outside the
    // reader lock, unless a selection still holds it.
  }

  detail::Mutex write_mu_;
  mutable detail::Mutex read_mu_;
  std::shared_ptr<const WorkerSnapshot> current_ ABSL_GUARDED_BY(read_mu_);
  std::uint32_t next_id_ ABSL_GUARDED_BY(write_mu_) = 0;
  std::uint64_t generation_ ABSL_GUARDED_BY(write_mu_) = 0;
};

// The one change a circuit breaker makes to a WorkerSet: holding a worker
// out of selection, or letting it back in (Breakers, circuit_breaker.hpp).
// A narrow handle, so that a Router can lend it without lending the set
// itself (through which a removal would skip the policy's notification).
// Holds a pointer: the set must outlive it. Thread-safe.
class CircuitSwitch {
 public:
  // NOLINTNEXTLINE(google-explicit-constructor): a set is its own switch
  CircuitSwitch(WorkerSet& workers) noexcept : workers_(&workers) {}
  // See WorkerSet::set_circuit_open.
  absl::Status set_circuit_open(WorkerId id, bool open) const {
    return workers_->set_circuit_open(id, open);
  }

 private:
  WorkerSet* workers_;
};

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_WORKER_SET_HPP_
