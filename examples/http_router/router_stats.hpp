// -----------------------------------------------------------------------------
// File: http_router/router_stats.hpp
// -----------------------------------------------------------------------------
//
// The router's counters that live as long as the process: kvroute's
// RouterMetrics (decisions per branch, select_worker latency, retries) and
// the router's own, every one created at start with a fixed label set, so
// that the request path only increments atomics (never takes the
// registry's lock) and the series are bounded. Series that follow workers
// or models are not here: metrics_page.cpp renders them from live state at
// each scrape, so that they leave /metrics with their worker or model.
//
// Thread safety: thread-safe (atomics).

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_ROUTER_STATS_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_ROUTER_STATS_HPP_

#include <array>
#include <string_view>

#include "kvroute/metrics.hpp"

namespace kvexample {

class RouterStats {
 public:
  RouterStats(kvroute::MetricsRegistry& registry, std::string_view policy);

  // Counts a request the server refused (session.hpp's reasons; others as
  // "other").
  void rejected(std::string_view reason) noexcept;

  kvroute::RouterMetrics routing;
  kvroute::Counter& truncated_streams;    // streams ended by an error event
  kvroute::Counter& client_disconnects;   // clients gone before their reply ended
  kvroute::Counter& request_timeouts;     // requests over --request-timeout-secs
  kvroute::Counter& malformed_responses;  // worker bodies with unreadable usage
  kvroute::Counter& bad_requests;         // 400s for the body (JSON, field types)

 private:
  static constexpr std::array<std::string_view, 8> kReasons = {
      "payload_too_large", "header_too_large", "too_many_headers", "bad_header_value",
      "header_timeout",    "body_timeout",     "bad_request",      "other"};
  std::array<kvroute::Counter*, kReasons.size()> rejected_{};
};

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_ROUTER_STATS_HPP_
