// -----------------------------------------------------------------------------
// File: http_router/worker_report.hpp
// -----------------------------------------------------------------------------
//
// What a worker reported about a request's prompt cache, read from its
// response body: SGLang's meta_info.{cached_tokens, prompt_tokens} or the
// OpenAI-style usage.{prompt_tokens_details.cached_tokens, prompt_tokens}.
// A worker's body is untrusted input like a client's: any field of the
// wrong type (a count sent as a string, a negative count) means "no
// report", never an exception.
//
// Thread safety: pure functions; never throws (fuzzed by
// tests/fuzz/request_text_fuzz.cpp).
//
// Example:
//
//   if (auto r = reported_cache(json::parse(body, nullptr, false))) {
//     feed_back(r->cached, r->prompt);
//   }

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_WORKER_REPORT_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_WORKER_REPORT_HPP_

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace kvexample {

struct CacheReport {
  long long cached = 0;  // tokens the worker had cached, >= 0
  long long prompt = 0;  // prompt tokens, >= cached (0 when not reported)
};

namespace worker_report_detail {

// The largest count a report may give (fast_body.hpp's reply path reads
// counts with the same bound).
inline constexpr unsigned long long kMaxCount = 1ULL << 62;

// obj[key] as a non-negative integer, if it is one.
inline std::optional<long long> count(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key)) return std::nullopt;
  const nlohmann::json& v = obj[key];
  if (v.is_number_unsigned()) {
    const auto u = v.get<unsigned long long>();
    if (u > kMaxCount) return std::nullopt;
    return static_cast<long long>(u);
  }
  if (v.is_number_integer() && v.get<long long>() >= 0) return v.get<long long>();
  return std::nullopt;
}

inline std::optional<CacheReport> make(std::optional<long long> cached,
                                       std::optional<long long> prompt) {
  if (!cached) return std::nullopt;
  CacheReport r{*cached, prompt.value_or(0)};
  if (prompt && r.prompt < r.cached) return std::nullopt;  // inconsistent
  return r;
}

}  // namespace worker_report_detail

// The cached and prompt token counts `body` reports, or nullopt when it
// reports none (or reports them with the wrong types).
inline std::optional<CacheReport> reported_cache(const nlohmann::json& body) {
  using worker_report_detail::count;
  if (!body.is_object()) return std::nullopt;
  if (body.contains("meta_info")) {
    const nlohmann::json& m = body["meta_info"];
    if (auto r = worker_report_detail::make(count(m, "cached_tokens"), count(m, "prompt_tokens"))) {
      return r;
    }
  }
  if (body.contains("usage")) {
    const nlohmann::json& u = body["usage"];
    if (u.is_object() && u.contains("prompt_tokens_details")) {
      return worker_report_detail::make(count(u["prompt_tokens_details"], "cached_tokens"),
                                        count(u, "prompt_tokens"));
    }
  }
  return std::nullopt;
}

// Whether `body` carries usage or meta_info that reported_cache could not
// read (counts of the wrong type): a malformed worker response, for metrics.
inline bool malformed_report(const nlohmann::json& body) {
  if (!body.is_object() || reported_cache(body)) return false;
  return (body.contains("meta_info") && body["meta_info"].is_object() &&
          body["meta_info"].contains("cached_tokens")) ||
         (body.contains("usage") && body["usage"].is_object() &&
          body["usage"].contains("prompt_tokens_details"));
}

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_WORKER_REPORT_HPP_
