// GET /metrics (see metrics_page.hpp).
#include "http_router/metrics_page.hpp"

#include <fmt/core.h>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "kvroute/detail/utf8.hpp"

namespace kvexample {

std::string model_label(std::string_view model) {
  constexpr std::size_t kMax = 128;
  if (model.size() <= kMax) return std::string(model);
  std::size_t cut = 100;
  while (cut > 0 && (static_cast<unsigned char>(model[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("{}...#{:016x}", model.substr(0, cut), std::hash<std::string_view>{}(model));
}

void MetricsPage::render_async(net::any_io_executor reply_on,
                               std::function<void(std::string)> done) {
  net::post(pool_, [this, reply_on = std::move(reply_on), done = std::move(done)]() mutable {
    std::string text = render();
    net::post(reply_on, [done = std::move(done), text = std::move(text)]() mutable {
      done(std::move(text));
    });
  });
}

std::string MetricsPage::render() const {
  if (test_delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(test_delay_ms_));
  kvroute::MetricsRegistry live;
  render_workers(live);
  render_models(live);
  for (const auto& section : sections_) section(live);
  live.gauge("kvroute_router_connections", "Open client connections.")
      .set(static_cast<double>(server_.connections.load()));
  live.gauge("kvroute_router_requests_in_flight", "Requests being handled.")
      .set(static_cast<double>(server_.requests.load()));
  return registry_.render() + live.render();
}

void MetricsPage::render_workers(kvroute::MetricsRegistry& live) const {
  auto& router = fleet_.router();
  auto snap = router.workers().snapshot();
  const kvroute::LoadTracker& load = router.load();
  std::size_t n = 0;
  for (const auto& w : fleet_.list()) {
    const kvroute::Worker* kw = snap->find(w->id);
    if (kw == nullptr) continue;
    ++n;
    const kvroute::MetricsRegistry::Labels l = {{"worker", w->address.url}};
    live.gauge("smg_worker_requests_active", "Requests in flight per worker.", l)
        .set(static_cast<double>(load.in_flight(w->id)));
    live.gauge("kvroute_worker_tokens_active", "Tokens carried by the requests in flight.", l)
        .set(static_cast<double>(load.in_flight_tokens(w->id)));
    live.gauge("kvroute_worker_processed", "Requests ever dispatched to the worker.", l)
        .set(static_cast<double>(load.processed(w->id)));
    live.gauge("smg_worker_health", "1 if the worker is healthy.", l).set(kw->healthy ? 1.0 : 0.0);
    live.gauge("smg_worker_cb_state", "Circuit state: 0 closed, 1 open, 2 half-open.", l)
        .set(static_cast<double>(fleet_.breakers().state(w->id)));
    live.counter("kvroute_worker_failures_total",
                 "Attempts that failed at the worker (transport errors and 5xx).", l)
        .advance_to(w->failures.load());
  }
  live.gauge("kvroute_router_workers", "Workers routed to.").set(static_cast<double>(n));
}

void MetricsPage::render_models(kvroute::MetricsRegistry& live) const {
  auto& policy = fleet_.router().policy();
  std::vector<std::string> models;
  std::uint64_t dropped = 0;
  std::function<std::shared_ptr<kvroute::ApproxRadixTree>(const std::string&)> tree_of;
  if (auto* ca = policy.get<kvroute::CacheAware>()) {
    models = ca->models();
    dropped = ca->dropped_models();
    tree_of = [ca](const std::string& m) { return ca->shared_tree(m); };
  } else if (auto* lp = policy.get<kvroute::LeastPrefill>()) {
    models = lp->models();
    dropped = lp->dropped_models();
    tree_of = [lp](const std::string& m) { return lp->shared_tree(m); };
  } else {
    return;
  }
  for (const std::string& m : models) {
    const std::shared_ptr<kvroute::ApproxRadixTree> t = tree_of(m);
    if (t == nullptr) continue;  // dropped since
    const kvroute::RadixTreeStats st = t->stats();
    const kvroute::MetricsRegistry::Labels l = {{"model", model_label(m)}};
    live.gauge("kvroute_tree_nodes", "Nodes in the model's tree.", l)
        .set(static_cast<double>(st.nodes));
    live.gauge("kvroute_tree_bytes", "Bytes held by the model's tree.", l)
        .set(static_cast<double>(st.bytes));
    live.gauge("kvroute_tree_chars", "Distinct characters stored in the model's tree.", l)
        .set(static_cast<double>(st.units));
    live.counter("kvroute_tree_evicted_chars_total",
                 "Characters evicted from (or dropped by feedback or removal in) the tree.", l)
        .advance_to(st.removed_units);
  }
  live.gauge("kvroute_router_models", "Model trees kept (at most --max-models).")
      .set(static_cast<double>(models.size()));
  live.counter("kvroute_router_models_dropped_total",
               "Model trees dropped to stay within --max-models.")
      .advance_to(dropped);
}

}  // namespace kvexample
