// -----------------------------------------------------------------------------
// File: kvroute/fmt.hpp
// -----------------------------------------------------------------------------
//
// Opt-in `fmt::formatter` specialisations for kvroute's value types, for
// hosts that log with fmt (or spdlog). This is the only kvroute header that
// needs fmt; link fmt::fmt yourself when you include it. kvroute never
// forces fmt's header-only mode.
//
// Thread safety: formatting reads values only.
//
// Example:
//
//   #include <kvroute/fmt.hpp>
//   fmt::print("{} -> {}\n", decision, decision.id());
//   // "routing_key_hit -> worker 3"  /  "no worker (no_healthy_workers)"

#ifndef KVROUTE_FMT_HPP_
#define KVROUTE_FMT_HPP_

#include <fmt/format.h>

#include <string_view>

#include "kvroute/decision.hpp"
#include "kvroute/policy_config.hpp"
#include "kvroute/worker_set.hpp"

template <>
struct fmt::formatter<kvroute::WorkerId> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(kvroute::WorkerId id, Ctx& ctx) const -> decltype(ctx.out()) {
    if (!id.valid()) return fmt::format_to(ctx.out(), "worker (invalid)");
    return fmt::format_to(ctx.out(), "worker {}", id.value);
  }
};

template <>
struct fmt::formatter<kvroute::Branch> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(kvroute::Branch b, Ctx& ctx) const -> decltype(ctx.out()) {
    return fmt::formatter<std::string_view>::format(kvroute::to_string(b), ctx);
  }
};

template <>
struct fmt::formatter<kvroute::NoWorker> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(kvroute::NoWorker r, Ctx& ctx) const -> decltype(ctx.out()) {
    return fmt::formatter<std::string_view>::format(kvroute::to_string(r), ctx);
  }
};

template <>
struct fmt::formatter<kvroute::PolicyKind> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(kvroute::PolicyKind k, Ctx& ctx) const -> decltype(ctx.out()) {
    return fmt::formatter<std::string_view>::format(kvroute::to_string(k), ctx);
  }
};

template <>
struct fmt::formatter<kvroute::Decision> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(const kvroute::Decision& d, Ctx& ctx) const -> decltype(ctx.out()) {
    if (!d) {
      return fmt::format_to(ctx.out(), "no worker ({})", d.branch_name());
    }
    return fmt::format_to(ctx.out(), "{} {} ({})", d.worker->id, d.worker->url, d.branch_name());
  }
};

#endif  // KVROUTE_FMT_HPP_
