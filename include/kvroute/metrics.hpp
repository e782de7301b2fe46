// -----------------------------------------------------------------------------
// File: kvroute/metrics.hpp
// -----------------------------------------------------------------------------
//
// Metrics without networking: `MetricsRegistry` holds counters, gauges and
// histograms and renders them in the Prometheus text exposition format
// (version 0.0.4); the host serves the string wherever it likes.
// `RouterMetrics` feeds the standard set from kvroute's pieces: decisions per
// policy and branch, select_worker latency, retries, and - read from live
// state when rendering - per-worker in-flight load and circuit state, and
// tree characters, nodes and bytes per model.
//
// Names follow the gateway's (smg_*) where it has a counterpart, kvroute_*
// otherwise; the README has the table.
//
// Thread safety: thread-safe. Counter/Gauge/Histogram updates are lock-free
// atomics; creating a metric and rendering take the registry's mutex.
// Metric references stay valid for the registry's lifetime.
//
// Example:
//
//   kvroute::MetricsRegistry registry;
//   kvroute::RouterMetrics metrics(registry, "cache_aware");
//   auto t0 = std::chrono::steady_clock::now();
//   kvroute::Selection s = router.select(req);
//   metrics.record(s.decision, std::chrono::steady_clock::now() - t0);
//   // on GET /metrics:
//   metrics.observe_workers(*router.workers().snapshot(), router.load());
//   std::string body = registry.render();

#ifndef KVROUTE_METRICS_HPP_
#define KVROUTE_METRICS_HPP_

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "kvroute/circuit_breaker.hpp"
#include "kvroute/config.hpp"
#include "kvroute/decision.hpp"
#include "kvroute/detail/ascii.hpp"
#include "kvroute/detail/mutex.hpp"
#include "kvroute/load_tracker.hpp"
#include "kvroute/radix_tree.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN

class Counter {
 public:
  void inc(std::uint64_t n = 1) noexcept { v_.fetch_add(n, std::memory_order_relaxed); }
  // Raises the counter to `total` when that is larger (for a count kept by
  // another component, such as a tree's removed units).
  void advance_to(std::uint64_t total) noexcept {
    std::uint64_t cur = v_.load(std::memory_order_relaxed);
    while (cur < total && !v_.compare_exchange_weak(cur, total, std::memory_order_relaxed)) {
    }
  }
  std::uint64_t value() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
};

class Gauge {
 public:
  void set(double v) noexcept { v_.store(v, std::memory_order_relaxed); }
  void add(double d) noexcept { v_.fetch_add(d, std::memory_order_relaxed); }
  double value() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0.0};
};

// Cumulative buckets with fixed upper bounds, as Prometheus expects.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
    std::sort(bounds_.begin(), bounds_.end());
    counts_ = std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1);
  }
  void observe(double v) noexcept {
    const auto i = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) -
                                            bounds_.begin());
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(v, std::memory_order_relaxed);
  }
  const std::vector<double>& bounds() const noexcept { return bounds_; }
  // Observations <= bounds()[i] (cumulative); i == bounds().size() is +Inf.
  std::uint64_t cumulative(std::size_t i) const noexcept {
    std::uint64_t n = 0;
    for (std::size_t k = 0; k <= i && k <= bounds_.size(); ++k) {
      n += counts_[k].load(std::memory_order_relaxed);
    }
    return n;
  }
  std::uint64_t count() const noexcept { return cumulative(bounds_.size()); }
  double sum() const noexcept { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;
  std::atomic<double> sum_{0.0};
};

class MetricsRegistry {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  // Returns the metric `name` with `labels`, created on first use. A name is
  // one family of one type; asking for it with another type returns a
  // detached metric that is never rendered (a programming error, asserted
  // in debug builds).
  Counter& counter(std::string_view name, std::string_view help, Labels labels = {}) {
    return get<Counter>(Type::kCounter, name, help, std::move(labels), {});
  }
  Gauge& gauge(std::string_view name, std::string_view help, Labels labels = {}) {
    return get<Gauge>(Type::kGauge, name, help, std::move(labels), {});
  }
  Histogram& histogram(std::string_view name, std::string_view help, std::vector<double> bounds,
                       Labels labels = {}) {
    return get<Histogram>(Type::kHistogram, name, help, std::move(labels), std::move(bounds));
  }

  // The text exposition format, families in creation order.
  std::string render() const {
    detail::MutexLock lock(&mu_);
    std::string out;
    for (const Family& f : families_) {
      absl::StrAppend(&out, "# HELP ", f.name, " ", escape(f.help, false), "\n# TYPE ", f.name, " ",
                      detail::to_absl(type_name(f.type)), "\n");
      for (const Series& s : f.series) {
        switch (f.type) {
          case Type::kCounter:
            absl::StrAppend(&out, f.name, label_text(s.labels, {}), " ",
                            static_cast<const Counter*>(s.metric.get())->value(), "\n");
            break;
          case Type::kGauge:
            absl::StrAppend(&out, f.name, label_text(s.labels, {}), " ",
                            number(static_cast<const Gauge*>(s.metric.get())->value()), "\n");
            break;
          case Type::kHistogram: {
            const auto* h = static_cast<const Histogram*>(s.metric.get());
            for (std::size_t i = 0; i <= h->bounds().size(); ++i) {
              const std::string le = i < h->bounds().size() ? number(h->bounds()[i]) : "+Inf";
              absl::StrAppend(&out, f.name, "_bucket", label_text(s.labels, le), " ",
                              h->cumulative(i), "\n");
            }
            absl::StrAppend(&out, f.name, "_sum", label_text(s.labels, {}), " ", number(h->sum()),
                            "\n", f.name, "_count", label_text(s.labels, {}), " ", h->count(),
                            "\n");
            break;
          }
        }
      }
    }
    return out;
  }

 private:
  enum class Type : std::uint8_t { kCounter, kGauge, kHistogram };
  struct Series {
    Labels labels;
    std::shared_ptr<void> metric;
  };
  struct Family {
    std::string name, help;
    Type type;
    std::vector<Series> series;
  };

  static std::string_view type_name(Type t) {
    return t == Type::kCounter ? "counter" : t == Type::kGauge ? "gauge" : "histogram";
  }
  static std::string number(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    return absl::StrCat(v);
  }
  // Label values escape \ " and newline; HELP text escapes \ and newline.
  static std::string escape(std::string_view s, bool quote) {
    std::string out;
    for (char c : s) {
      if (c == '\\') {
        out += "\\\\";
      } else if (c == '\n') {
        out += "\\n";
      } else if (c == '"' && quote) {
        out += "\\\"";
      } else {
        out += c;
      }
    }
    return out;
  }
  static std::string label_text(const Labels& labels, std::string_view le) {
    if (labels.empty() && le.empty()) return {};
    std::string out = "{";
    bool first = true;
    for (const auto& [k, v] : labels) {
      absl::StrAppend(&out, first ? "" : ",", k, "=\"", escape(v, true), "\"");
      first = false;
    }
    if (!le.empty()) {
      absl::StrAppend(&out, first ? "" : ",", "le=\"", detail::to_absl(le), "\"");
    }
    return out + "}";
  }

  template <class M>
  M& get(Type type, std::string_view name, std::string_view help, Labels labels,
         std::vector<double> bounds) {
    detail::MutexLock lock(&mu_);
    Family* fam = nullptr;
    for (Family& f : families_) {
      if (f.name == name) fam = &f;
    }
    if (fam == nullptr) {
      families_.push_back(Family{std::string(name), std::string(help), type, {}});
      fam = &families_.back();
    }
    if (fam->type != type) {
      KVROUTE_ASSERT(false, "metric requested with two types");
      detached_.push_back(make<M>(std::move(bounds)));
      return *static_cast<M*>(detached_.back().get());
    }
    for (Series& s : fam->series) {
      if (s.labels == labels) return *static_cast<M*>(s.metric.get());
    }
    fam->series.push_back(Series{std::move(labels), make<M>(std::move(bounds))});
    return *static_cast<M*>(fam->series.back().metric.get());
  }
  template <class M>
  static std::shared_ptr<void> make(std::vector<double> bounds) {
    if constexpr (std::is_same_v<M, Histogram>) {
      return std::make_shared<Histogram>(std::move(bounds));
    } else {
      return std::make_shared<M>();
    }
  }

  mutable detail::Mutex mu_;
  // A deque so that Family addresses (and the series vectors' metrics,
  // heap-allocated) stay put as families are added.
  std::deque<Family> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<void>> detached_ ABSL_GUARDED_BY(mu_);
};

// The standard routing metrics, fed from kvroute's components.
class RouterMetrics {
 public:
  RouterMetrics(MetricsRegistry& registry, std::string_view policy)
      : registry_(registry),
        policy_(policy),
        latency_(registry.histogram(
            "kvroute_select_worker_duration_seconds", "Time spent in select_worker.",
            {1e-7, 2.5e-7, 5e-7, 1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 1e-3, 1e-2},
            {{"policy", policy_}})),
        retries_(registry.counter("smg_worker_retries_total", "Attempts retried on another worker.",
                                  {{"policy", policy_}})),
        exhausted_(registry.counter("smg_worker_retries_exhausted_total",
                                    "Requests that ran out of attempts.", {{"policy", policy_}})) {
    for (std::size_t i = 0; i < kAllBranches.size(); ++i) {
      if (kAllBranches[i] == Branch::kCustom) continue;  // by label (record_custom)
      branches_[i] = &registry.counter(
          "kvroute_policy_branch_total", "Routing decisions by policy and decision branch.",
          {{"policy", policy_}, {"branch", std::string(to_string(kAllBranches[i]))}});
    }
  }

  // Counts one decision and its select_worker time. Never allocates, but
  // for a custom branch's first decision (Decision::custom).
  void record(const Decision& d, std::chrono::nanoseconds took) noexcept {
    if (d.branch == Branch::kCustom) {
      record_custom(d.label);
    } else {
      branches_[static_cast<std::size_t>(d.branch)]->inc();
    }
    latency_.observe(static_cast<double>(took.count()) * 1e-9);
  }
  void record_retry() noexcept { retries_.inc(); }
  void record_retries_exhausted() noexcept { exhausted_.inc(); }

  // Sets the per-worker gauges from live state (call before render()).
  void observe_workers(const WorkerSnapshot& snap, const LoadTracker& load,
                       Breakers* breakers = nullptr) {
    for (const Worker& w : snap.workers()) {
      const MetricsRegistry::Labels l = {{"worker", w.url}};
      registry_.gauge("smg_worker_requests_active", "Requests in flight per worker.", l)
          .set(static_cast<double>(load.in_flight(w.id)));
      registry_
          .gauge("kvroute_worker_tokens_active", "Tokens carried by the requests in flight.", l)
          .set(static_cast<double>(load.in_flight_tokens(w.id)));
      registry_.gauge("kvroute_worker_processed", "Requests ever dispatched to the worker.", l)
          .set(static_cast<double>(load.processed(w.id)));
      registry_.gauge("smg_worker_health", "1 if the worker is healthy.", l)
          .set(w.healthy ? 1.0 : 0.0);
      if (breakers != nullptr) {
        registry_.gauge("smg_worker_cb_state", "Circuit state: 0 closed, 1 open, 2 half-open.", l)
            .set(static_cast<double>(breakers->state(w.id)));
      }
    }
  }

  // Sets the tree gauges of one model's tree (cache_aware's trees).
  void observe_tree(std::string_view model, const ApproxRadixTree& tree) {
    const RadixTreeStats st = tree.stats();
    const MetricsRegistry::Labels l = {{"model", std::string(model)}};
    registry_.gauge("kvroute_tree_nodes", "Nodes in the model's tree.", l)
        .set(static_cast<double>(st.nodes));
    registry_.gauge("kvroute_tree_bytes", "Bytes held by the model's tree.", l)
        .set(static_cast<double>(st.bytes));
    registry_.gauge("kvroute_tree_chars", "Distinct characters stored in the model's tree.", l)
        .set(static_cast<double>(st.units));
    registry_
        .counter("kvroute_tree_evicted_chars_total",
                 "Characters evicted from (or dropped by feedback or removal in) the tree.", l)
        .advance_to(st.removed_units);
  }

 private:
  // A custom branch's counter, labelled with its own name (a policy has a
  // handful, so the map stays small). Out of memory: not counted.
  void record_custom(std::string_view label) noexcept {
    Counter* c = nullptr;
    {
      detail::ReaderMutexLock lock(&custom_mu_);
      if (auto it = custom_.find(absl::string_view(label.data(), label.size()));
          it != custom_.end()) {
        c = it->second;
      }
    }
    if (c == nullptr) {
      try {
        Counter& made = registry_.counter("kvroute_policy_branch_total",
                                          "Routing decisions by policy and decision branch.",
                                          {{"policy", policy_}, {"branch", std::string(label)}});
        detail::MutexLock lock(&custom_mu_);
        c = custom_.try_emplace(std::string(label), &made).first->second;
      } catch (...) {
        return;
      }
    }
    c->inc();
  }

  MetricsRegistry& registry_;
  std::string policy_;
  Histogram& latency_;
  Counter& retries_;
  Counter& exhausted_;
  std::array<Counter*, kAllBranches.size()> branches_{};
  detail::Mutex custom_mu_;
  absl::flat_hash_map<std::string, Counter*> custom_ ABSL_GUARDED_BY(custom_mu_);
};

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_METRICS_HPP_
