// -----------------------------------------------------------------------------
// File: http_router/health_checker.hpp
// -----------------------------------------------------------------------------
//
// Active health checks, with the gateway's flags and defaults: every
// --health-check-interval-secs (60) each worker gets a GET of
// --health-check-endpoint (/health) on a fresh connection, which must
// answer 2xx within --health-check-timeout-secs (5). A healthy worker turns
// unhealthy after --health-failure-threshold (3) failed checks in a row, an
// unhealthy one healthy again after --health-success-threshold (2) passed
// ones; each turn is one log line. Workers start healthy (as in the
// gateway). Health is apart from the circuit breaker: either keeps a worker
// out of selection.
//
// Thread safety: runs on one lane; start() and stop() from any thread (they
// post to it).

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_HEALTH_CHECKER_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_HEALTH_CHECKER_HPP_

#include <memory>

#include "http_router/flags.hpp"
#include "http_router/fleet.hpp"
#include "http_router/net.hpp"

namespace kvexample {

class HealthChecker {
 public:
  HealthChecker(net::io_context& lane, Fleet& fleet, const Flags& flags)
      : lane_(lane), fleet_(fleet), flags_(flags), timer_(lane) {}

  void start();
  void stop();

 private:
  void tick();
  void check(const std::shared_ptr<WorkerInfo>& w);
  void result(const std::shared_ptr<WorkerInfo>& w, bool ok, const std::string& why);

  net::io_context& lane_;
  Fleet& fleet_;
  const Flags& flags_;
  net::steady_timer timer_;
  bool stopped_ = false;
};

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_HEALTH_CHECKER_HPP_
