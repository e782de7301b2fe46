// Test support: a small cluster of workers with controllable health and load.
#ifndef KVROUTE_TESTS_SUPPORT_CLUSTER_HPP_
#define KVROUTE_TESTS_SUPPORT_CLUSTER_HPP_

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "kvroute/load_tracker.hpp"
#include "kvroute/policy.hpp"
#include "kvroute/select_worker.hpp"
#include "kvroute/worker_set.hpp"

namespace kvtest {

// Workers "http://w<i>:8000" with ids 0..n-1, all healthy. Not thread-safe
// (select() records snapshots): concurrent tests call select_worker directly.
class Cluster {
 public:
  explicit Cluster(std::size_t n, std::string model = "") {
    for (std::size_t i = 0; i < n; ++i) add(model);
  }

  kvroute::WorkerId add(const std::string& model = "") {
    auto id = workers.add({.url = "http://w" + std::to_string(next_++) + ":8000", .model = model});
    REQUIRE(id.ok());
    ids.push_back(*id);
    return *id;
  }
  void remove(std::size_t i) { REQUIRE(workers.remove(ids.at(i)).ok()); }
  void set_healthy(std::size_t i, bool h) { REQUIRE(workers.set_healthy(ids.at(i), h).ok()); }
  // Sets worker i's in-flight count to exactly `n` (held by guards).
  void set_load(std::size_t i, std::int64_t n) {
    auto& gs = guards_[ids.at(i).value];
    while (static_cast<std::int64_t>(gs.size()) > n) gs.pop_back();
    while (static_cast<std::int64_t>(gs.size()) < n) {
      gs.push_back(load.dispatch(ids.at(i)));
    }
  }
  std::string url(std::size_t i) const {
    return "http://w" + std::to_string(ids.at(i).value) + ":8000";
  }
  // Index (into ids) of the decision's worker, or -1.
  int index_of(const kvroute::Decision& d) const {
    if (!d) return -1;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == d.worker->id) return static_cast<int>(i);
    }
    return -2;
  }

  template <class P>
  kvroute::Decision select(P& p, const kvroute::RequestView& r = {}) {
    auto snap = workers.snapshot();
    snaps_.push_back(snap);  // keep decisions' pointers valid
    return kvroute::select_worker(p, r, *snap, load);
  }
  template <class P>
  int pick(P& p, const kvroute::RequestView& r = {}) {
    return index_of(select(p, r));
  }

  kvroute::WorkerSet workers;
  kvroute::LoadTracker load;
  std::vector<kvroute::WorkerId> ids;

 private:
  std::size_t next_ = 0;
  std::map<std::uint32_t, std::vector<kvroute::LoadGuard>> guards_;
  std::vector<std::shared_ptr<const kvroute::WorkerSnapshot>> snaps_;
};

// The membership churn of the policies' concurrency tests, for a thread of
// its own beside the selecting threads: flips worker 1's health 200 times
// and removes worker 3 half way, telling `p` as a host would. Uses only the
// thread-safe WorkerSet calls (Cluster's helpers REQUIRE, which Catch2 does
// not allow off the main thread).
template <class P>
void churn_membership(Cluster& c, P& p) {
  for (int i = 0; i < 200; ++i) {  // always reaches the removal
    c.workers.set_healthy(c.ids[1], i % 2 == 0).IgnoreError();
    if (i == 100) {
      c.workers.remove(c.ids[3]).IgnoreError();
      p.on_worker_removed(c.ids[3]);
    }
    std::this_thread::yield();
  }
}

}  // namespace kvtest

#endif  // KVROUTE_TESTS_SUPPORT_CLUSTER_HPP_
