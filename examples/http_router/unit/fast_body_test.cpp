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

TEST_CASE("http_router: the reply fast path reads cache reports as worker_report.hpp does",
          "[http_router]") {
  for (
      std::string_view body : {
          R"({"usage":{"prompt_tokens":30,"prompt_tokens_details":{"cached_tokens":12}}})",
          R"({"meta_info":{"cached_tokens":5,"prompt_tokens":9},"usage":{"prompt_tokens":1}})",
          R"({"meta_info":{"cached_tokens":"5"},"usage":{"prompt_tokens_details":{"cached_tokens":2}}})",
          R"({"meta_info":{"cached_tokens":"5"}})",
          R"({"meta_info":{"cached_tokens":9,"prompt_tokens":5}})",
          R"({"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":-1}}})",
          R"({"usage":{"prompt_tokens_details":{"cached_tokens":2.0}}})",
          R"({"usage":{"prompt_tokens_details":null}})",
          R"({"choices":[{"message":{"content":"ok"}}]})",
          R"([1,2])",
      }) {
    INFO(body);
    const std::optional<kvexample::FastReport> fast = kvexample::fast_reply_report(body);
    REQUIRE(fast);
    const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    const std::optional<kvexample::CacheReport> full = kvexample::reported_cache(j);
    REQUIRE(fast->report.has_value() == full.has_value());
    if (full) {
      CHECK(fast->report->cached == full->cached);
      CHECK(fast->report->prompt == full->prompt);
    }
    CHECK(fast->malformed == kvexample::malformed_report(j));
  }
  const auto fast = kvexample::fast_reply_report(
      R"({"usage":{"prompt_tokens":30,"prompt_tokens_details":{"cached_tokens":12}}})");
  REQUIRE(fast);
  REQUIRE(fast->report);
  CHECK(fast->report->cached == 12);
  CHECK(fast->report->prompt == 30);
  CHECK_FALSE(fast->malformed);
}

TEST_CASE("http_router: the reply fast path leaves repeated keys and bad JSON to the full path",
          "[http_router]") {
  for (std::string_view body : {
           R"({"usage":{},"usage":{"prompt_tokens_details":{"cached_tokens":1}}})",
           R"({"meta_info":{"cached_tokens":1,"cached_tokens":2}})",
           R"({"usage":{"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":2}}})",
           R"({"usage":{"prompt_tokens":1,"prompt_tokens":2,"prompt_tokens_details":{}}})",
           R"({"usage":)",
           "\xEF\xBB\xBF{}",  // a byte order mark: nlohmann skips it, simdjson does not
       }) {
    INFO(body);
    CHECK_FALSE(kvexample::fast_reply_report(body));
  }
  CHECK_FALSE(kvexample::fast_reply_report(std::string(kvexample::kFastBodyMaxBytes + 1, ' ')));
}
