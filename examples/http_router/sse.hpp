// -----------------------------------------------------------------------------
// File: http_router/sse.hpp
// -----------------------------------------------------------------------------
//
// The router's view of a relayed server-sent-event stream: the tail it keeps
// (the last 64 KB, where the worker's usage event is), the cache report read
// from that tail once the stream ends, and the error event that ends a
// stream the router cannot complete. A broken stream ends with
//
//   data: {"error": {"message": ..., "type": ..., "code": ...}}
//
// and no "data: [DONE]", so that a client cannot mistake it for a whole
// reply (OpenAI's clients raise on an error event).
//
// Thread safety: SseTail is a value; the functions are pure.

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_SSE_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_SSE_HPP_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "http_router/worker_report.hpp"

namespace kvexample {

class SseTail {
 public:
  static constexpr std::size_t kKeep = 64 * 1024;

  void append(std::string_view data) {
    tail_.append(data);
    if (tail_.size() > 2 * kKeep) tail_.erase(0, tail_.size() - kKeep);
  }

  // The cache report of the last data event that has one; `*malformed` is
  // set when an event carries usage the report cannot read.
  std::optional<CacheReport> report(bool* malformed) const {
    for (std::size_t pos = tail_.rfind("data: {"); pos != std::string::npos;
         pos = pos == 0 ? std::string::npos : tail_.rfind("data: {", pos - 1)) {
      const std::size_t end = tail_.find('\n', pos);
      const std::string_view line =
          std::string_view(tail_).substr(pos + 6, end == std::string::npos ? end : end - pos - 6);
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded()) continue;
      if (auto r = reported_cache(j)) return r;
      if (malformed_report(j)) *malformed = true;
    }
    return std::nullopt;
  }

 private:
  std::string tail_;
};

inline std::string sse_error_event(std::string_view message, std::string_view type, int code) {
  const nlohmann::json e = {
      {"error", {{"message", std::string(message)}, {"type", std::string(type)}, {"code", code}}}};
  return "data: " + e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_SSE_HPP_
