// libFuzzer target: what kvroute_http_router reads from untrusted bodies
// (examples/http_router/): the routing text and field checks of a client's
// request body, and the cache report and SSE tail of a worker's reply.
// Input: byte 0 picks the path (/generate, /v1/chat/completions,
// /v1/completions); the rest is the body. Checked, besides "never throws,
// never crashes":
//   * a body check_body accepts gives the same routing text after a JSON
//     round trip (the text depends on the body's values, not its spelling);
//   * the routing text is valid UTF-8 and no longer than the body allows;
//   * a cache report has 0 <= cached <= prompt (or no prompt);
//   * the same bytes as a worker's SSE stream give a report with that
//     property too;
//   * where the chat fast path (fast_body.hpp) answers, the full path
//     accepts the body and gives the same routing text, model and stream
//     flag; where the reply fast path answers, the same report and the
//     same verdict on a malformed one.
// Any failure prints what failed and aborts.
//
//   cmake --preset fuzz && cmake --build --preset fuzz --target kvroute_request_text_fuzz
//   ./build/fuzz/tests/fuzz/kvroute_request_text_fuzz -max_total_time=60
//   tests/fuzz/corpus/request_text
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "http_router/body_check.hpp"
#include "http_router/fast_body.hpp"
#include "http_router/request_text.hpp"
#include "http_router/sse.hpp"
#include "http_router/worker_report.hpp"

namespace {

[[noreturn]] void fail(const char* what, std::string_view path, std::string_view body) {
  std::fprintf(stderr, "request_text fuzz: %s\npath %.*s\nbody %.*s\n", what,
               static_cast<int>(path.size()), path.data(), static_cast<int>(body.size()),
               body.data());
  std::abort();
}

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80           ? 1
                          : (c >> 5) == 0x6  ? 2
                          : (c >> 4) == 0xE  ? 3
                          : (c >> 3) == 0x1E ? 4
                                             : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

bool consistent(const std::optional<kvexample::CacheReport>& r) {
  return !r || (r->cached >= 0 && r->prompt >= 0 && (r->prompt == 0 || r->cached <= r->prompt));
}

void check_body_text(std::string_view path, std::string_view raw, const nlohmann::json& body) {
  const std::optional<kvexample::FieldError> err = kvexample::check_body(path, body);
  const std::string text = kvexample::routing_text(path, body);
  if (!valid_utf8(text)) fail("routing text is not valid UTF-8", path, raw);
  if (err) {
    if (err->field.empty() || err->expected.empty()) fail("a field error names nothing", path, raw);
    return;
  }
  const nlohmann::json again = nlohmann::json::parse(body.dump(), nullptr, false);
  if (again.is_discarded()) fail("a parsed body does not parse again", path, raw);
  if (kvexample::routing_text(path, again) != text) fail("routing text changed", path, raw);
  // Ids print at most 20 digits and every part adds at most a space, so the
  // text cannot outgrow the body's own size by more than a few times.
  if (text.size() > 16 * raw.size() + 16) fail("routing text longer than the body", path, raw);
}

// The chat fast path answers only where the full path agrees with it.
void check_fast_path(std::string_view path, std::string_view raw, const nlohmann::json& body) {
  const std::optional<kvexample::FastChat> fast = kvexample::fast_chat_body(path, raw);
  if (!fast) return;
  if (body.is_discarded()) fail("fast path accepts a body that is not valid JSON", path, raw);
  if (kvexample::check_body(path, body)) {
    fail("fast path accepts a body check_body refuses", path, raw);
  }
  if (fast->text != kvexample::routing_text(path, body)) fail("fast path text differs", path, raw);
  const std::string model = body.contains("model") ? body["model"].get<std::string>() : "";
  if (fast->model != model) fail("fast path model differs", path, raw);
  if (fast->stream != (body.contains("stream") && body["stream"].get<bool>())) {
    fail("fast path stream flag differs", path, raw);
  }
}

// So does the reply fast path (`raw` read as a worker's whole reply).
void check_fast_report(std::string_view path, std::string_view raw, const nlohmann::json& body) {
  const std::optional<kvexample::FastReport> fast = kvexample::fast_reply_report(raw);
  if (!fast) return;
  const std::optional<kvexample::CacheReport> full = kvexample::reported_cache(body);
  if (fast->report.has_value() != full.has_value() ||
      (full && (fast->report->cached != full->cached || fast->report->prompt != full->prompt))) {
    fail("reply fast path report differs", path, raw);
  }
  if (fast->malformed != kvexample::malformed_report(body)) {
    fail("reply fast path malformed verdict differs", path, raw);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static constexpr std::string_view kPaths[] = {"/generate", "/v1/chat/completions",
                                                "/v1/completions"};
  const std::string_view path = kPaths[data[0] % 3];
  const std::string_view raw(reinterpret_cast<const char*>(data + 1), size - 1);
  const nlohmann::json body = nlohmann::json::parse(raw, nullptr, false);
  check_fast_path(path, raw, body);
  check_fast_report(path, raw, body);
  if (!body.is_discarded()) {
    check_body_text(path, raw, body);
    if (!consistent(kvexample::reported_cache(body))) fail("cache report out of range", path, raw);
    (void)kvexample::malformed_report(body);
  }
  kvexample::SseTail tail;
  tail.append(raw);
  bool malformed = false;
  if (!consistent(tail.report(&malformed))) fail("SSE cache report out of range", path, raw);
  return 0;
}
