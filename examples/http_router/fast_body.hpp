// -----------------------------------------------------------------------------
// File: http_router/fast_body.hpp
// -----------------------------------------------------------------------------
//
// Fast paths, with simdjson, for the two bodies the router reads on most
// requests: a client's chat completion whose fields the router reads are
// plain (`model` a string, `stream` a boolean, `messages` an array of
// objects whose `content` is a string or null and whose
// `reasoning_content` is a string or null), and a worker's whole reply,
// for its cached-token report. simdjson validates the whole document as
// nlohmann does but parses many times faster, and parsing the bodies is
// the largest single part of the router's own work per request
// (docs/router.md, "Overhead").
//
// Each answers only where the full path would give the same answer (for a
// request: nlohmann's parse, check_body and routing_text accept the body
// and give the same routing text, model and stream flag; for a reply:
// worker_report.hpp's reported_cache and malformed_report). For anything
// else (invalid JSON, another path, content parts, a field of another
// type, a key given twice, a body over kFastBodyMaxBytes) it gives nullopt
// and the caller takes the full path, which says what is wrong.
// tests/fuzz/request_text_fuzz.cpp checks that agreement on every input it
// makes.
//
// Thread safety: one simdjson parser per thread. Its buffers grow to the
// largest body it read and stay, hence the size limit: at most about 4 MB
// per I/O thread.
//
// Example:
//
//   if (auto fast = fast_chat_body(path, req.body())) use(fast->text);
//   else full_path(nlohmann::json::parse(req.body(), nullptr, false));
//   if (auto fast = fast_reply_report(reply_body)) use(fast->report);

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_FAST_BODY_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_FAST_BODY_HPP_

#include <simdjson.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "http_router/request_text.hpp"
#include "http_router/worker_report.hpp"

namespace kvexample {

// Larger bodies take the full path: the parser keeps buffers as large as
// the largest body it read, and a large body's cost is not the parse's.
inline constexpr std::size_t kFastBodyMaxBytes = std::size_t{1} << 20;

// What reported_cache and malformed_report say of a worker's reply.
struct FastReport {
  std::optional<CacheReport> report;
  bool malformed = false;
};

struct FastChat {
  std::string text;   // routing_text's
  std::string model;  // "" when absent
  bool stream = false;
};

namespace fast_body_detail {

// `body` parsed by the thread's parser (in a copy padded as simdjson
// needs), or nullopt. Valid until the thread's next parse.
inline std::optional<simdjson::dom::element> parse(std::string_view body) {
  if (body.size() > kFastBodyMaxBytes) return std::nullopt;
  thread_local simdjson::dom::parser parser;
  thread_local std::string padded;
  padded.reserve(body.size() + simdjson::SIMDJSON_PADDING);
  padded.assign(body);
  simdjson::dom::element root;
  if (parser.parse(padded).get(root) != simdjson::SUCCESS) return std::nullopt;
  return root;
}

// A field of an object the full path reads: absent, or present once.
struct Field {
  bool present = false;
  simdjson::dom::element value{};
};

template <std::size_t N>
using Names = std::array<std::string_view, N>;
template <std::size_t N>
using Fields = std::array<Field, N>;

// The fields `names` of `v`, none when `v` is not an object (as nlohmann's
// contains() finds none there); nullopt when one of them is given twice
// (nlohmann keeps the last of a repeated key, a lookup here would find the
// first, so a repeat is the full path's to read).
template <std::size_t N>
std::optional<Fields<N>> fields_of(const simdjson::dom::element& v, const Names<N>& names) {
  Fields<N> out{};
  simdjson::dom::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) return out;
  for (const simdjson::dom::key_value_pair field : obj) {
    for (std::size_t i = 0; i < N; ++i) {
      if (field.key != names[i]) continue;
      if (out[i].present) return std::nullopt;
      out[i] = {true, field.value};
    }
  }
  return out;
}

// A string or null field of a chat body: its text ("" when absent or
// null), or false for another type.
inline bool string_or_null(const Field& f, std::string_view& out) {
  if (!f.present || f.value.is_null()) return true;
  return f.value.get_string().get(out) == simdjson::SUCCESS;
}

// One message's text into `out`, as routing_text joins it: content, then
// reasoning_content. False where the full path must decide.
inline bool message(const simdjson::dom::element& m, std::string& out) {
  if (!m.is_object()) return false;
  const auto f = fields_of(m, Names<2>{"content", "reasoning_content"});
  std::string_view content, reasoning;
  if (!f || !string_or_null((*f)[0], content) || !string_or_null((*f)[1], reasoning)) {
    return false;
  }
  join(out, content);
  join(out, reasoning);
  return true;
}

// worker_report_detail::count's rule: a non-negative integer up to
// worker_report_detail::kMaxCount.
inline std::optional<long long> count(const Field& f) {
  if (!f.present) return std::nullopt;
  std::uint64_t u = 0;
  if (f.value.get_uint64().get(u) == simdjson::SUCCESS && u <= worker_report_detail::kMaxCount) {
    return static_cast<long long>(u);
  }
  return std::nullopt;
}

}  // namespace fast_body_detail

// What reported_cache and malformed_report give for a worker's whole
// reply, or nullopt where the full path must decide.
inline std::optional<FastReport> fast_reply_report(std::string_view body) {
  namespace d = fast_body_detail;
  const std::optional<simdjson::dom::element> root = d::parse(body);
  if (!root) return std::nullopt;
  const auto f = d::fields_of(*root, d::Names<2>{"meta_info", "usage"});
  if (!f) return std::nullopt;
  const auto& [meta_info, usage] = *f;
  FastReport out;
  bool claimed = false;  // malformed_report's condition: a report that could not be read
  if (meta_info.present) {
    const auto m = d::fields_of(meta_info.value, d::Names<2>{"cached_tokens", "prompt_tokens"});
    if (!m) return std::nullopt;
    claimed = (*m)[0].present;
    out.report = worker_report_detail::make(d::count((*m)[0]), d::count((*m)[1]));
  }
  if (!out.report && usage.present) {
    const auto u = d::fields_of(usage.value, d::Names<2>{"prompt_tokens_details", "prompt_tokens"});
    if (!u) return std::nullopt;
    if ((*u)[0].present) {
      claimed = true;
      const auto c = d::fields_of((*u)[0].value, d::Names<1>{"cached_tokens"});
      if (!c) return std::nullopt;
      out.report = worker_report_detail::make(d::count((*c)[0]), d::count((*u)[1]));
    }
  }
  out.malformed = !out.report && claimed;
  return out;
}

// The routing text, model and stream flag of a chat completion's `body`,
// or nullopt where the full path must decide (see the header comment).
inline std::optional<FastChat> fast_chat_body(std::string_view path, std::string_view body) {
  namespace d = fast_body_detail;
  if (path != "/v1/chat/completions") return std::nullopt;
  const std::optional<simdjson::dom::element> root = d::parse(body);
  if (!root || !root->is_object()) return std::nullopt;
  const auto f = d::fields_of(*root, d::Names<3>{"model", "stream", "messages"});
  if (!f) return std::nullopt;
  const auto& [model, stream, messages] = *f;
  FastChat out;
  if (model.present) {
    std::string_view name;
    if (model.value.get_string().get(name) != simdjson::SUCCESS) return std::nullopt;
    out.model = name;
  }
  if (stream.present && stream.value.get_bool().get(out.stream) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  if (messages.present) {
    simdjson::dom::array list;
    if (messages.value.get_array().get(list) != simdjson::SUCCESS) return std::nullopt;
    for (const simdjson::dom::element m : list) {
      if (!d::message(m, out.text)) return std::nullopt;
    }
  }
  return out;
}

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_FAST_BODY_HPP_
