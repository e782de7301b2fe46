// One-line logs on stderr (see log.hpp).
#include "http_router/log.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

#include "kvroute/detail/ascii.hpp"

namespace kvexample {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_write_mu;

std::string_view level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARN";
    case LogLevel::kError:
      return "ERROR";
    case LogLevel::kCritical:
      return "CRIT";
  }
  return "?";
}

// UTC with milliseconds: 2025-01-31T12:00:00.123Z.
std::string timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03}Z", buf, ms);
}

}  // namespace

std::optional<LogLevel> parse_log_level(std::string_view name) {
  using kvroute::detail::ascii_iequals;
  if (ascii_iequals(name, "debug")) return LogLevel::kDebug;
  if (ascii_iequals(name, "info")) return LogLevel::kInfo;
  if (ascii_iequals(name, "warning") || ascii_iequals(name, "warn")) return LogLevel::kWarning;
  if (ascii_iequals(name, "error")) return LogLevel::kError;
  if (ascii_iequals(name, "critical")) return LogLevel::kCritical;
  return std::nullopt;
}

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool log_enabled(LogLevel level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void log_line(LogLevel level, std::string_view message) {
  std::string line = fmt::format("{} {} ", timestamp(), level_name(level));
  for (char c : message) {
    if (c == '\n') {
      line += "\\n";
    } else {
      line.push_back(c);
    }
  }
  line.push_back('\n');
  std::lock_guard<std::mutex> lock(g_write_mu);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace kvexample
