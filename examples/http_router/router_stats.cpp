// The router's process-long counters (see router_stats.hpp).
#include "http_router/router_stats.hpp"

#include <string>

namespace kvexample {

RouterStats::RouterStats(kvroute::MetricsRegistry& registry, std::string_view policy)
    : routing(registry, policy),
      truncated_streams(registry.counter(
          "kvroute_router_truncated_streams_total",
          "Streamed replies ended by an error event (no [DONE]) after the worker failed or the "
          "request timed out.")),
      client_disconnects(registry.counter("kvroute_router_client_disconnects_total",
                                          "Clients that hung up before their reply ended.")),
      request_timeouts(registry.counter("kvroute_router_request_timeouts_total",
                                        "Requests that ran over --request-timeout-secs.")),
      malformed_responses(
          registry.counter("kvroute_router_malformed_responses_total",
                           "Worker responses whose usage or meta_info could not be read.")),
      bad_requests(registry.counter("kvroute_router_bad_requests_total",
                                    "Requests refused for their body (JSON or a field's type).")) {
  for (std::size_t i = 0; i < kReasons.size(); ++i) {
    rejected_[i] = &registry.counter("kvroute_router_rejected_requests_total",
                                     "Requests refused by the server's limits, by reason.",
                                     {{"reason", std::string(kReasons[i])}});
  }
}

void RouterStats::rejected(std::string_view reason) noexcept {
  for (std::size_t i = 0; i + 1 < kReasons.size(); ++i) {
    if (kReasons[i] == reason) return rejected_[i]->inc();
  }
  rejected_.back()->inc();
}

}  // namespace kvexample
