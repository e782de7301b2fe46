// The chat fast path (fast_body.hpp): it answers for plain chat bodies with
// what the full path (nlohmann, check_body, routing_text) gives, and leaves
// every other body to the full path.
#include "http_router/fast_body.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "http_router/body_check.hpp"
#include "http_router/request_text.hpp"

namespace {

constexpr std::string_view kChat = "/v1/chat/completions";

// The full path's answer, for comparison.
kvexample::FastChat full_path(std::string_view body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  REQUIRE_FALSE(kvexample::check_body(kChat, j));
  return {.text = kvexample::routing_text(kChat, j),
          .model = j.contains("model") ? j["model"].get<std::string>() : "",
          .stream = j.contains("stream") && j["stream"].get<bool>()};
}

}  // namespace

TEST_CASE("http_router: the chat fast path reads plain bodies as the full path does",
          "[http_router]") {
  for (std::string_view body : {
           R"({"model":"m","messages":[{"role":"user","content":"hello"}]})",
           R"({"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],
               "stream":true,"temperature":0.5,"model":"llama"})",
           R"({"messages":[{"role":"assistant","content":null,"reasoning_content":"think"},
                           {"role":"user","content":"","reasoning_content":null}]})",
           R"({"model":"m\u00e9","messages":[{"content":"caf\u00e9 \"quoted\"\n"}]})",
           R"({"model":"m"})",
           R"({"messages":[]})",
       }) {
    INFO(body);
    const std::optional<kvexample::FastChat> fast = kvexample::fast_chat_body(kChat, body);
    REQUIRE(fast);
    const kvexample::FastChat full = full_path(body);
    CHECK(fast->text == full.text);
    CHECK(fast->model == full.model);
    CHECK(fast->stream == full.stream);
  }
  const auto fast = kvexample::fast_chat_body(
      kChat, R"({"messages":[{"content":"a"},{"content":"b","reasoning_content":"c"}]})");
  REQUIRE(fast);
  CHECK(fast->text == "a b c");
}

TEST_CASE("http_router: the chat fast path leaves every other body to the full path",
          "[http_router]") {
  for (std::string_view body : {
           // not valid JSON, or not an object
           R"({"messages":[)",
           R"([1,2])",
           R"({"model":"m"} x)",
           "",
           R"({"messages":[{"content":"\ud800"}]})",
           "{\"messages\":[{\"content\":\"\x01\"}]}",
           // fields of another type (the full path names them)
           R"({"model":1,"messages":[]})",
           R"({"stream":"yes"})",
           R"({"messages":{}})",
           R"({"messages":[1]})",
           R"({"messages":[{"content":5}]})",
           R"({"messages":[{"content":"a","reasoning_content":[]}]})",
           // content parts: the full path's
           R"({"messages":[{"content":[{"type":"text","text":"a"}]}]})",
           // a key given twice: nlohmann keeps the last, simdjson finds the first
           R"({"model":"a","model":"b"})",
           R"({"messages":[],"messages":[{"content":"x"}]})",
           R"({"messages":[{"content":"a","content":"b"}]})",
       }) {
    INFO(body);
    CHECK_FALSE(kvexample::fast_chat_body(kChat, body));
  }
  // Other paths, and bodies over the size limit.
  CHECK_FALSE(kvexample::fast_chat_body("/generate", R"({"text":"a"})"));
  CHECK_FALSE(kvexample::fast_chat_body("/v1/completions", R"({"prompt":"a"})"));
  const std::string big =
      R"({"messages":[{"content":")" + std::string(kvexample::kFastBodyMaxBytes, 'a') + R"("}]})";
  CHECK_FALSE(kvexample::fast_chat_body(kChat, big));
  CHECK(full_path(big).text.size() == kvexample::kFastBodyMaxBytes);
}
