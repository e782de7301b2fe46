// -----------------------------------------------------------------------------
// File: http_router/router_context.hpp
// -----------------------------------------------------------------------------
//
// What the router's request handling shares: the flags, the workers, the
// counters, the per-lane connection pools and the retry options.
//
// Thread safety: the members are thread-safe, except each pool (its lane's).

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_ROUTER_CONTEXT_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_ROUTER_CONTEXT_HPP_

#include <atomic>
#include <memory>
#include <vector>

#include "http_router/flags.hpp"
#include "http_router/fleet.hpp"
#include "http_router/router_stats.hpp"
#include "http_router/upstream_pool.hpp"
#include "kvroute/retry.hpp"

namespace kvexample {

struct RouterContext {
  const Flags& flags;
  Fleet& fleet;
  RouterStats& stats;
  std::vector<std::unique_ptr<UpstreamPool>>& pools;  // indexed by lane
  kvroute::RetryOptions retry;
  std::atomic<bool> draining{false};
};

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_ROUTER_CONTEXT_HPP_
