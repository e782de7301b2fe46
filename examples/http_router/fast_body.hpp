// -----------------------------------------------------------------------------
// File: http_router/fast_body.hpp
// -----------------------------------------------------------------------------
//
// A fast path for the commonest request body: a chat completion whose
// fields the router reads are plain (`model` a string, `stream` a boolean,
// `messages` an array of objects whose `content` is a string or null and
// whose `reasoning_content` is a string or null). It reads them with
// simdjson, which validates the whole document as nlohmann does but parses
// many times faster: with nlohmann alone, parsing the request was about a
// fifth of the router's CPU per request (docs/router.md, "Overhead").
//
// It answers only where the full path (nlohmann's parse, check_body,
// routing_text) would accept the body and give the same routing text,
// model and stream flag; for anything else (invalid JSON, another path,
// content parts, a field of another type, a key given twice, a body over
// kFastBodyMaxBytes) it gives nullopt and the caller takes the full path,
// which says what is wrong. tests/fuzz/request_text_fuzz.cpp checks that
// agreement on every input it makes.
//
// Thread safety: one simdjson parser per thread. Its buffers grow to the
// largest body it read and stay, hence the size limit: at most about 4 MB
// per I/O thread.
//
// Example:
//
//   if (auto fast = fast_chat_body(path, req.body())) use(fast->text);
//   else full_path(nlohmann::json::parse(req.body(), nullptr, false));

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_FAST_BODY_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_FAST_BODY_HPP_

#include <simdjson.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace kvexample {

// Larger bodies take the full path: the parser keeps buffers as large as
// the largest body it read, and a large body's cost is not the parse's.
inline constexpr std::size_t kFastBodyMaxBytes = std::size_t{1} << 20;

struct FastChat {
  std::string text;   // routing_text's
  std::string model;  // "" when absent
  bool stream = false;
};

namespace fast_body_detail {

// Appends `part` to `out` as request_text.hpp's join does.
inline void join(std::string& out, std::string_view part) {
  if (part.empty()) return;
  if (!out.empty()) out.push_back(' ');
  out += part;
}

// A string or null (nullopt: neither, or a key given twice). `seen` tracks
// repeats: nlohmann keeps the last of a repeated key, simdjson's lookups
// the first, so a repeat leaves the answer to the full path.
inline bool string_or_null(const simdjson::dom::element& v, bool& seen, std::string_view& out) {
  if (seen) return false;
  seen = true;
  if (v.is_null()) return true;
  return v.get_string().get(out) == simdjson::SUCCESS;
}

// One message's text into `out`: content, then reasoning_content.
inline bool message(const simdjson::dom::element& m, std::string& out) {
  simdjson::dom::object obj;
  if (m.get_object().get(obj) != simdjson::SUCCESS) return false;
  bool has_content = false, has_reasoning = false;
  std::string_view content, reasoning;
  for (const simdjson::dom::key_value_pair field : obj) {
    if (field.key == "content") {
      if (!string_or_null(field.value, has_content, content)) return false;
    } else if (field.key == "reasoning_content") {
      if (!string_or_null(field.value, has_reasoning, reasoning)) return false;
    }
  }
  join(out, content);
  join(out, reasoning);
  return true;
}

}  // namespace fast_body_detail

// The routing text, model and stream flag of a chat completion's `body`,
// or nullopt where the full path must decide (see the header comment).
inline std::optional<FastChat> fast_chat_body(std::string_view path, std::string_view body) {
  using fast_body_detail::message;
  if (path != "/v1/chat/completions" || body.size() > kFastBodyMaxBytes) return std::nullopt;
  thread_local simdjson::dom::parser parser;
  thread_local std::string padded;
  padded.reserve(body.size() + simdjson::SIMDJSON_PADDING);
  padded.assign(body);
  simdjson::dom::object top;
  if (parser.parse(padded).get_object().get(top) != simdjson::SUCCESS) return std::nullopt;

  FastChat out;
  bool has_model = false, has_stream = false, has_messages = false;
  simdjson::dom::array messages;
  for (const simdjson::dom::key_value_pair field : top) {
    if (field.key == "model") {
      std::string_view model;
      if (has_model || field.value.get_string().get(model) != simdjson::SUCCESS) {
        return std::nullopt;
      }
      has_model = true;
      out.model = model;
    } else if (field.key == "stream") {
      if (has_stream || field.value.get_bool().get(out.stream) != simdjson::SUCCESS) {
        return std::nullopt;
      }
      has_stream = true;
    } else if (field.key == "messages") {
      if (has_messages || field.value.get_array().get(messages) != simdjson::SUCCESS) {
        return std::nullopt;
      }
      has_messages = true;
    }
  }
  if (has_messages) {
    for (const simdjson::dom::element m : messages) {
      if (!message(m, out.text)) return std::nullopt;
    }
  }
  return out;
}

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_FAST_BODY_HPP_
