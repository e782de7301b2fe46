// -----------------------------------------------------------------------------
// File: http_router/metrics_page.hpp
// -----------------------------------------------------------------------------
//
// GET /metrics: the Prometheus text of the process-long counters
// (router_stats.hpp) followed by series rendered from live state at each
// scrape, in a registry made for that scrape and thrown away after it:
//
//   per worker   smg_worker_requests_active, kvroute_worker_tokens_active,
//                kvroute_worker_processed, smg_worker_health,
//                smg_worker_cb_state, kvroute_worker_failures_total
//   per model    kvroute_tree_nodes, kvroute_tree_bytes, kvroute_tree_chars,
//                kvroute_tree_evicted_chars_total (the --max-models trees)
//   router       kvroute_router_connections, kvroute_router_requests_in_flight,
//                kvroute_router_workers, kvroute_router_models,
//                kvroute_router_models_dropped_total
//   replicas     kvroute_sync_* (replication.hpp), with --redis-url
//
// so a removed worker's or a dropped model's series leave with it, and the
// number of series is bounded by the workers and --max-models. Rendering
// runs on a thread of its own, never on an I/O lane: however long a scrape
// takes, routing goes on (only the per-worker breaker reads take the
// breakers' tiny locks). Model names are client input; one longer than 128
// bytes is shown cut, with a hash to keep it distinct.
//
// Thread safety: thread-safe.

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_METRICS_PAGE_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_METRICS_PAGE_HPP_

#include <functional>
#include <string>
#include <vector>

#include "http_router/fleet.hpp"
#include "http_router/net.hpp"
#include "http_router/session.hpp"
#include "kvroute/metrics.hpp"

namespace kvexample {

class MetricsPage {
 public:
  MetricsPage(Fleet& fleet, const kvroute::MetricsRegistry& registry, const ServerCounters& server,
              int test_delay_ms)
      : fleet_(fleet), registry_(registry), server_(server), test_delay_ms_(test_delay_ms) {}
  ~MetricsPage() { pool_.join(); }
  MetricsPage(const MetricsPage&) = delete;
  MetricsPage& operator=(const MetricsPage&) = delete;

  // Renders on the metrics thread, then calls `done(text)` on `reply_on`.
  void render_async(net::any_io_executor reply_on, std::function<void(std::string)> done);
  std::string render() const;
  // More live series, rendered after the page's own at each scrape (on the
  // metrics thread). Call before the first scrape.
  void add_section(std::function<void(kvroute::MetricsRegistry&)> section) {
    sections_.push_back(std::move(section));
  }

 private:
  void render_workers(kvroute::MetricsRegistry& live) const;
  void render_models(kvroute::MetricsRegistry& live) const;

  Fleet& fleet_;
  const kvroute::MetricsRegistry& registry_;
  const ServerCounters& server_;
  const int test_delay_ms_;
  std::vector<std::function<void(kvroute::MetricsRegistry&)>> sections_;
  net::thread_pool pool_{1};
};

// A model name as a label value: at most 128 bytes (cut at a character
// boundary, with a hash of the whole name appended).
std::string model_label(std::string_view model);

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_METRICS_PAGE_HPP_
