// -----------------------------------------------------------------------------
// File: http_router/fleet.hpp
// -----------------------------------------------------------------------------
//
// The workers behind the router: kvroute's Router (worker set, load, policy)
// and Breakers, plus what the program keeps per worker beside them (its
// parsed address, its failure count, its health-check streaks). Workers are
// added and removed at runtime (POST/DELETE /workers); a removed worker's
// state goes with it (its metrics series included) once the requests still
// using it end. State changes are logged on one line each: a worker added,
// removed, marked unhealthy or healthy, a circuit opening, half-opening or
// closing.
//
// Thread safety: thread-safe. The worker table is under a mutex held for a
// lookup or a copy; kvroute's pieces are thread-safe on their own.
//
// Example:
//
//   Fleet fleet(*kvroute::make_policy(flags.policy), breaker_options);
//   fleet.add(*parse_worker_url("http://127.0.0.1:30001"));
//   std::shared_ptr<WorkerInfo> w = fleet.find(selection.worker().id);

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_FLEET_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_FLEET_HPP_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "http_router/worker_url.hpp"
#include "kvroute/kvroute.hpp"

namespace kvexample {

struct WorkerInfo {
  WorkerInfo(WorkerAddress a, kvroute::WorkerId i) : address(std::move(a)), id(i) {}
  const WorkerAddress address;
  const kvroute::WorkerId id;
  std::atomic<std::uint64_t> failures{0};  // attempts that failed at this worker
  // The breaker state last logged (CircuitBreaker::State as int).
  std::atomic<int> logged_breaker{0};
  // Health checks (the checker's lane only).
  bool check_running = false;
  std::uint32_t failed_checks = 0;
  std::uint32_t passed_checks = 0;
};

class Fleet {
 public:
  Fleet(kvroute::AnyPolicy policy, kvroute::CircuitBreaker::Options breaker);
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  // Adds a worker (healthy). AlreadyExists when its URL is already there.
  absl::StatusOr<std::shared_ptr<WorkerInfo>> add(const WorkerAddress& address);
  // Removes the worker with this canonical URL. NotFound when absent.
  absl::Status remove(const std::string& url);
  // Called after a removal with the URL (e.g. to drop pooled connections).
  void on_removed(std::function<void(const std::string&)> f) { on_removed_ = std::move(f); }

  std::shared_ptr<WorkerInfo> find(kvroute::WorkerId id) const;
  std::vector<std::shared_ptr<WorkerInfo>> list() const;

  // Health from the checker: logs a change.
  void set_healthy(const WorkerInfo& w, bool healthy, std::string_view why);
  // Logs the worker's breaker state if it changed since last logged.
  void note_breaker(WorkerInfo& w);
  // Lets open circuits whose timeout passed back in (as half-open) and logs
  // transitions; call every second or so.
  void refresh_breakers();

  kvroute::Router<kvroute::AnyPolicy>& router() noexcept { return router_; }
  kvroute::Breakers& breakers() noexcept { return breakers_; }

 private:
  kvroute::Router<kvroute::AnyPolicy> router_;
  kvroute::Breakers breakers_;
  mutable std::mutex mu_;
  absl::flat_hash_map<std::uint32_t, std::shared_ptr<WorkerInfo>> by_id_;
  std::function<void(const std::string&)> on_removed_;
};

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_FLEET_HPP_
