// -----------------------------------------------------------------------------
// File: http_router/body_check.hpp
// -----------------------------------------------------------------------------
//
// The JSON types the router accepts in the fields it reads from a request
// body (model, stream, and the fields its routing text comes from). A field
// of another type is a 400 that names the field ("messages[2].content:
// expected a string, an array of content parts or null"), never a 500 or an
// exception's text. Fields the router does not read are the worker's to
// check; missing fields are too.
//
// Thread safety: pure functions. Never throws on any JSON value (fuzzed by
// tests/fuzz/request_text_fuzz.cpp).
//
// Example:
//
//   if (auto err = check_body("/v1/chat/completions", body)) {
//     reply_400(err->field + ": " + err->expected);
//   }

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_BODY_CHECK_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_BODY_CHECK_HPP_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace kvexample {

struct FieldError {
  std::string field;     // e.g. "messages[2].content"
  std::string expected;  // e.g. "expected a string or null"
  std::string message() const { return field + ": " + expected; }
};

namespace body_check_detail {

using nlohmann::json;

inline std::optional<FieldError> fail(std::string field, const char* expected) {
  return FieldError{std::move(field), expected};
}

// `x` is an array whose items are integers, or (when `nested`) arrays of
// integers.
inline bool int_array(const json& x, bool nested) {
  if (!x.is_array()) return false;
  for (const json& y : x) {
    if (y.is_number_integer()) continue;
    if (!nested || !int_array(y, false)) return false;
  }
  return true;
}

inline std::optional<FieldError> check_content(const json& c, const std::string& at) {
  if (c.is_string() || c.is_null()) return std::nullopt;
  if (!c.is_array()) return fail(at, "expected a string, an array of content parts or null");
  for (std::size_t k = 0; k < c.size(); ++k) {
    const json& part = c[k];
    const std::string pat = at + "[" + std::to_string(k) + "]";
    if (!part.is_object()) return fail(pat, "expected a content part object");
    if (part.contains("type") && !part["type"].is_string()) {
      return fail(pat + ".type", "expected a string");
    }
    if (part.contains("text") && !part["text"].is_string()) {
      return fail(pat + ".text", "expected a string");
    }
  }
  return std::nullopt;
}

inline std::optional<FieldError> check_messages(const json& body) {
  if (!body.contains("messages")) return std::nullopt;
  const json& ms = body["messages"];
  if (!ms.is_array()) return fail("messages", "expected an array of message objects");
  for (std::size_t i = 0; i < ms.size(); ++i) {
    const json& m = ms[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return fail(at, "expected a message object");
    if (m.contains("content")) {
      if (auto e = check_content(m["content"], at + ".content")) return e;
    }
    if (m.contains("reasoning_content") && !m["reasoning_content"].is_string() &&
        !m["reasoning_content"].is_null()) {
      return fail(at + ".reasoning_content", "expected a string or null");
    }
  }
  return std::nullopt;
}

inline std::optional<FieldError> check_prompt(const json& body) {
  if (!body.contains("prompt")) return std::nullopt;
  const json& p = body["prompt"];
  if (p.is_string()) return std::nullopt;
  const char* expected = "expected a string, an array of strings or of token ids";
  if (!p.is_array()) return fail("prompt", expected);
  for (std::size_t k = 0; k < p.size(); ++k) {
    const json& x = p[k];
    if (x.is_string() || x.is_number_integer() || int_array(x, false)) continue;
    return fail("prompt[" + std::to_string(k) + "]", expected);
  }
  return std::nullopt;
}

inline std::optional<FieldError> check_generate(const json& body) {
  if (body.contains("text")) {
    const json& t = body["text"];
    if (!t.is_string()) {
      if (!t.is_array()) return fail("text", "expected a string or an array of strings");
      for (std::size_t k = 0; k < t.size(); ++k) {
        if (!t[k].is_string()) return fail("text[" + std::to_string(k) + "]", "expected a string");
      }
    }
  }
  if (body.contains("input_ids") && !int_array(body["input_ids"], true)) {
    return fail("input_ids", "expected an array of token ids or of arrays of token ids");
  }
  return std::nullopt;
}

}  // namespace body_check_detail

// The first field of `body` (a request to `path`) the router cannot use, or
// nullopt. A body that is not an object is reported as the field "body".
inline std::optional<FieldError> check_body(std::string_view path, const nlohmann::json& body) {
  using body_check_detail::fail;
  if (!body.is_object()) return fail("body", "expected a JSON object");
  if (body.contains("model") && !body["model"].is_string()) {
    return fail("model", "expected a string");
  }
  if (body.contains("stream") && !body["stream"].is_boolean()) {
    return fail("stream", "expected true or false");
  }
  if (path == "/v1/chat/completions") return body_check_detail::check_messages(body);
  if (path == "/v1/completions") return body_check_detail::check_prompt(body);
  return body_check_detail::check_generate(body);
}

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_BODY_CHECK_HPP_
