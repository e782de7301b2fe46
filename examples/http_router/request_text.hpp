// -----------------------------------------------------------------------------
// File: http_router/request_text.hpp
// -----------------------------------------------------------------------------
//
// Routing text from request bodies, the way sgl-model-gateway extracts it
// (its spec, section 5.2): what kvroute's text policies match on. Fields of
// an unexpected type are skipped here; body_check.hpp rejects them first,
// so that a client learns which field is wrong.
//
// Thread safety: pure functions. Never throws on any JSON value (fuzzed by
// tests/fuzz/request_text_fuzz.cpp).
#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_REQUEST_TEXT_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_REQUEST_TEXT_HPP_

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace kvexample {

// Appends `part` to `out`, space-separated, skipping empty parts.
inline void join(std::string& out, std::string_view part) {
  if (part.empty()) return;
  if (!out.empty()) out.push_back(' ');
  out += part;
}

// The text of a chat message's content: a string, or the text parts of an
// array of parts, space-joined.
inline std::string content_text(const nlohmann::json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (content.is_array()) {
    for (const auto& part : content) {
      // value("type", "") would throw on a non-string type: compare instead.
      if (part.is_object() && part.contains("type") && part["type"] == "text" &&
          part.contains("text") && part["text"].is_string()) {
        join(out, part["text"].get<std::string>());
      }
    }
  }
  return out;
}

// `path` is the request path: /generate, /v1/chat/completions or
// /v1/completions. A body that is not a JSON object gives "".
inline std::string routing_text(std::string_view path, const nlohmann::json& body) {
  std::string out;
  if (!body.is_object()) return out;
  if (path == "/v1/chat/completions") {
    // Every message's text in order: system, user, tool, developer and
    // function contents, assistant content and reasoning_content.
    if (body.contains("messages") && body["messages"].is_array()) {
      for (const auto& m : body["messages"]) {
        if (!m.is_object()) continue;
        if (m.contains("content")) join(out, content_text(m["content"]));
        if (m.contains("reasoning_content") && m["reasoning_content"].is_string()) {
          join(out, m["reasoning_content"].get<std::string>());
        }
      }
    }
  } else if (path == "/v1/completions") {
    if (body.contains("prompt")) {
      const auto& p = body["prompt"];
      if (p.is_string()) {
        out = p.get<std::string>();
      } else if (p.is_array()) {
        for (const auto& x : p) {
          if (x.is_string()) join(out, x.get<std::string>());
        }
      }
    }
  } else {  // /generate
    if (body.contains("text") && body["text"].is_string()) {
      out = body["text"].get<std::string>();
    } else if (body.contains("text") && body["text"].is_array()) {
      for (const auto& x : body["text"]) {
        if (x.is_string()) join(out, x.get<std::string>());
      }
    } else if (body.contains("input_ids") && body["input_ids"].is_array()) {
      // Ids as space-separated decimals; a batch is flattened.
      for (const auto& x : body["input_ids"]) {
        if (x.is_number_integer()) {
          join(out, std::to_string(x.get<long long>()));
        } else if (x.is_array()) {
          for (const auto& y : x) {
            if (y.is_number_integer()) join(out, std::to_string(y.get<long long>()));
          }
        }
      }
    }
  }
  return out;
}

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_REQUEST_TEXT_HPP_
