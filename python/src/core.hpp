// -----------------------------------------------------------------------------
// File: python/src/core.hpp
// -----------------------------------------------------------------------------
//
// `RouterCore`: everything the Python `kvroute.Router` does, in C++ and
// without Python: a `Router<AnyPolicy>` built from the gateway's flags,
// workers named by URL, selections counted in a `RouterMetrics`, dispatch
// with the token count and routing key each policy needs, cached-token
// feedback and the Prometheus text. The binding (router.cpp) only converts
// arguments and results; the benchmark hook (bench.cpp) calls the same
// `select`, so the two differ by the binding alone.
//
// Thread safety: thread-safe, as Router<AnyPolicy> is. Nothing here touches
// Python, so every call may run with the GIL released.

#ifndef KVROUTE_PYTHON_CORE_HPP_
#define KVROUTE_PYTHON_CORE_HPP_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kvroute/kvroute.hpp"

namespace kvroute_py {

// The PolicyConfig fields by the names Router(**kwargs) takes: each name is
// its flag without the leading "--", dashes as underscores.
struct ConfigField {
  using Value = std::variant<std::string, double, std::uint64_t>;
  std::string_view name;
  Value value;
};
std::vector<ConfigField> config_fields(const kvroute::PolicyConfig& cfg);

class RouterCore {
 public:
  // Parses `flags` (parse_policy_flags) and builds the policy. Flags the
  // parser does not know go to `*unparsed` when it is non-null and are an
  // error otherwise.
  static absl::StatusOr<std::shared_ptr<RouterCore>> make(
      std::span<const std::string_view> flags, std::vector<std::string>* unparsed = nullptr);

  RouterCore(kvroute::PolicyConfig cfg, kvroute::AnyPolicy policy);
  RouterCore(const RouterCore&) = delete;
  RouterCore& operator=(const RouterCore&) = delete;

  std::string_view policy_name() const noexcept { return router_.policy().name(); }
  const kvroute::PolicyConfig& config() const noexcept { return config_; }

  // Workers, by URL. All or none for add_workers.
  absl::Status add_workers(std::span<const kvroute::WorkerSpec> specs);
  absl::Status remove_worker(std::string_view url);
  absl::Status set_healthy(std::string_view url, bool healthy);
  std::shared_ptr<const kvroute::WorkerSnapshot> snapshot() const {
    return router_.workers().snapshot();
  }
  const kvroute::LoadTracker& load() const noexcept { return router_.load(); }

  // One decision, never on a worker whose URL is in `exclude`, counted in
  // the metrics. Never throws (an exclusion list that cannot be allocated
  // is dropped).
  kvroute::Selection select(const kvroute::RequestView& request,
                            std::span<const std::string> exclude = {}) noexcept;

  // The tokens `s` is dispatched with: least_prefill's predicted uncached
  // tokens, 0 for the other policies. `prompt_tokens` < 0: unknown.
  std::int64_t predicted_tokens(const kvroute::RequestView& request, const kvroute::Selection& s,
                                std::int64_t prompt_tokens) const noexcept;

  // Starts `s`'s load, with its predicted tokens and its routing key.
  [[nodiscard]] kvroute::LoadGuard dispatch(const kvroute::RequestView& request,
                                            const kvroute::Selection& s,
                                            std::int64_t prompt_tokens) noexcept;

  // The server found `cached_tokens` of the request's prompt cached
  // (AnyPolicy::report_cached). Returns the characters dropped from the
  // policy's tree.
  std::uint64_t report_cached(const kvroute::RequestView& request, const kvroute::Selection& s,
                              std::uint64_t cached_tokens, std::int64_t prompt_tokens,
                              kvroute::LoadGuard* guard) noexcept;

  void maintain() { router_.maintain(); }

  // The Prometheus text: decisions, select latency, per-worker load and
  // health, and the trees of the workers' models.
  std::string metrics();

  // The router itself, for the benchmark's reference call.
  kvroute::Router<kvroute::AnyPolicy>& router() noexcept { return router_; }

 private:
  absl::StatusOr<kvroute::WorkerId> find(std::string_view url) const;

  const kvroute::PolicyConfig config_;
  kvroute::Router<kvroute::AnyPolicy> router_;
  kvroute::MetricsRegistry registry_;
  kvroute::RouterMetrics metrics_;
};

}  // namespace kvroute_py

#endif  // KVROUTE_PYTHON_CORE_HPP_
