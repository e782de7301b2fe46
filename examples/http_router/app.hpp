// -----------------------------------------------------------------------------
// File: http_router/app.hpp
// -----------------------------------------------------------------------------
//
// The two programs in kvroute_http_router, wired from their parts: the
// router (workers, I/O lanes and connection pools, the server, /metrics,
// health checks, breaker upkeep, shutdown) and the mock worker. Each runs
// until SIGTERM and a graceful drain, then exits the process with 0 (the
// process exits without destructors: every lane has stopped, and tearing
// down I/O objects whose handlers still hold each other gains nothing).
// Start-up errors (a port in use, a duplicate worker) return 2.
//
// Thread safety: called once, from main.

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_APP_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_APP_HPP_

#include "http_router/flags.hpp"

namespace kvexample {

int run_router(const Flags& flags);
int run_mock_worker(const Flags& flags);

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_APP_HPP_
