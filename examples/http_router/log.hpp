// -----------------------------------------------------------------------------
// File: http_router/log.hpp
// -----------------------------------------------------------------------------
//
// One-line logs on stderr, for what an operator needs to follow: worker
// state changes, breaker transitions, retries, limits hit, shutdown. A line
// is "2025-01-31T12:00:00.123Z INFO message". Requests are logged one line
// each only at debug level; the default level (info) logs events, not
// traffic.
//
// Thread safety: thread-safe; each line is one write under a mutex, so lines
// from different threads never interleave.
//
// Example:
//
//   kvexample::set_log_level(kvexample::LogLevel::kInfo);
//   kvexample::log_info("worker {} is unhealthy after {} failed checks", url, n);

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_LOG_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_LOG_HPP_

#include <fmt/core.h>

#include <optional>
#include <string_view>
#include <utility>

namespace kvexample {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kCritical = 4 };

// "debug", "info", "warning" (or "warn"), "error", "critical"; nullopt else.
std::optional<LogLevel> parse_log_level(std::string_view name);
void set_log_level(LogLevel level);
bool log_enabled(LogLevel level);
// Writes one line (a newline in `message` is written as "\n").
void log_line(LogLevel level, std::string_view message);

template <class... Args>
void log_at(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (log_enabled(level)) log_line(level, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void log_debug(fmt::format_string<Args...> f, Args&&... args) {
  log_at(LogLevel::kDebug, f, std::forward<Args>(args)...);
}
template <class... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
  log_at(LogLevel::kInfo, f, std::forward<Args>(args)...);
}
template <class... Args>
void log_warning(fmt::format_string<Args...> f, Args&&... args) {
  log_at(LogLevel::kWarning, f, std::forward<Args>(args)...);
}
template <class... Args>
void log_error(fmt::format_string<Args...> f, Args&&... args) {
  log_at(LogLevel::kError, f, std::forward<Args>(args)...);
}

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_LOG_HPP_
