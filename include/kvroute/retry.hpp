// -----------------------------------------------------------------------------
// File: kvroute/retry.hpp
// -----------------------------------------------------------------------------
//
// Retry helpers for a host's request loop: `RetryOptions` (the gateway's
// defaults), `backoff()` and `Attempts`, which tracks one request's attempts
// and the workers that failed it, so that each attempt makes a fresh
// selection that avoids them (Router::select(request, attempts.excluded())).
//
// Counting: `max_attempts` is the number of attempts in total, the first one
// included (the gateway's `max_retries = 5` also means 5 attempts; the name
// here says so). Retryable statuses: 408, 429, 500, 502, 503, 504, and a
// transport failure (no status). Delay before attempt k+1 (k from 0):
// min(initial_backoff x multiplier^k, max_backoff), times (1 + u) with u
// uniform in [-jitter, +jitter]: 50, 75, 112, 168 ms ... without jitter.
//
// Unlike the gateway, a selection that finds no worker is not retried with
// backoff (the gateway retries its own "no available workers" 503, which only
// adds latency when a pool is empty): `Attempts` is told about workers'
// failures, never about the router's.
//
// Thread safety: RetryOptions and backoff() are values and pure functions;
// an Attempts object belongs to one request (thread-compatible).
//
// Example:
//
//   kvroute::Attempts attempts(options);
//   for (;;) {
//     kvroute::Selection s = router.select(req, attempts.excluded());
//     if (!s) s = router.select(req);          // every worker failed once
//     if (!s) return reply_503();
//     int status = forward(s.worker().url);    // 0 for a transport error
//     if (status < 400) return;
//     std::chrono::nanoseconds delay;
//     if (!attempts.failed(s.worker().id, status, &delay)) return reply(status);
//     sleep_for(delay);
//   }

#ifndef KVROUTE_RETRY_HPP_
#define KVROUTE_RETRY_HPP_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kvroute/config.hpp"
#include "kvroute/detail/rng.hpp"
#include "kvroute/worker_set.hpp"

KVROUTE_NAMESPACE_BEGIN

struct RetryOptions {
  std::uint32_t max_attempts = 5;  // in total, the first attempt included
  std::chrono::nanoseconds initial_backoff = std::chrono::milliseconds(50);
  double multiplier = 1.5;
  std::chrono::nanoseconds max_backoff = std::chrono::seconds(30);
  double jitter = 0.2;
  std::uint64_t seed = detail::kDefaultSeed;

  // Returns OK, or InvalidArgument naming the bad field and value.
  absl::Status validate() const {
    auto bad = [](std::string_view field, auto v, std::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("retry ", absl::string_view(field.data(), field.size()), ": ", v, " ",
                       absl::string_view(why.data(), why.size())));
    };
    if (max_attempts < 1 || max_attempts > 100) {
      return bad("max_attempts", max_attempts, "must be in [1, 100]");
    }
    if (initial_backoff.count() < 0) {
      return bad("initial_backoff", initial_backoff.count(), "ns must be >= 0");
    }
    if (!(multiplier >= 1.0) || std::isinf(multiplier)) {
      return bad("multiplier", multiplier, "must be finite and >= 1");
    }
    if (max_backoff < initial_backoff) {
      return bad("max_backoff", max_backoff.count(), "ns must be >= initial_backoff");
    }
    if (!(jitter >= 0.0 && jitter < 1.0)) return bad("jitter", jitter, "must be in [0, 1)");
    return absl::OkStatus();
  }
  // NOLINTNEXTLINE(readability-identifier-naming): the name before 0.2
  [[deprecated("use validate()")]] absl::Status Validate() const { return validate(); }
};

// Whether an upstream HTTP status is worth another attempt (0 = the request
// never got a status: connection refused, reset, timeout).
constexpr bool retryable_status(int status) noexcept {
  switch (status) {
    case 0:
    case 408:
    case 429:
    case 500:
    case 502:
    case 503:
    case 504:
      return true;
    default:
      return false;
  }
}

// The delay before attempt k + 1 (k from 0), with `u` in [-1, 1) scaling the
// jitter (pass 0 for none).
inline std::chrono::nanoseconds backoff(const RetryOptions& o, std::uint32_t k, double u) noexcept {
  const auto max_ns = static_cast<double>(o.max_backoff.count());
  double ns = static_cast<double>(o.initial_backoff.count()) *
              std::pow(o.multiplier, static_cast<double>(k));
  ns = std::min(ns, max_ns);
  ns *= 1.0 + std::clamp(u, -1.0, 1.0) * o.jitter;
  ns = std::max(0.0, std::round(ns));
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::min(ns, 2.0 * max_ns)));
}

// One request's attempts.
class Attempts {
 public:
  // Each request's jitter stream differs (seeded from o.seed and a process-
  // wide counter), so that requests failing together do not retry together.
  explicit Attempts(const RetryOptions& o = {})
      : Attempts(o, detail::splitmix64(o.seed + next_stream())) {}
  Attempts(const RetryOptions& o, std::uint64_t seed) : opt_(o), rng_(seed) {
    excluded_.reserve(opt_.max_attempts);
  }

  // Attempts made so far that failed.
  std::uint32_t failures() const noexcept { return failures_; }

  // Workers that failed this request, for the next selection to avoid.
  std::span<const WorkerId> excluded() const noexcept { return excluded_; }

  // Records that `worker` failed the request with `status` (0 = transport
  // error). Returns true, with the delay to wait in `*delay`, when another
  // attempt should be made: the status is retryable and attempts remain.
  bool failed(WorkerId worker, int status, std::chrono::nanoseconds* delay) noexcept {
    ++failures_;
    if (std::find(excluded_.begin(), excluded_.end(), worker) == excluded_.end() &&
        excluded_.size() < excluded_.capacity()) {
      excluded_.push_back(worker);  // never reallocates: reserved up front
    }
    if (!retryable_status(status) || failures_ >= opt_.max_attempts) return false;
    if (delay != nullptr) {
      *delay = backoff(opt_, failures_ - 1, rng_.unit() * 2.0 - 1.0);
    }
    return true;
  }

 private:
  static std::uint64_t next_stream() noexcept {
    static std::atomic<std::uint64_t> n{0};
    return n.fetch_add(1, std::memory_order_relaxed);
  }

  RetryOptions opt_;
  detail::SharedRng rng_;
  std::uint32_t failures_ = 0;
  std::vector<WorkerId> excluded_;
};

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_RETRY_HPP_
