// The mock worker (see mock_worker.hpp).
#include "http_router/mock_worker.hpp"

#include <fmt/core.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <utility>

#include "http_router/request_text.hpp"
#include "kvroute/detail/utf8.hpp"

namespace kvexample {
namespace {

using nlohmann::json;

constexpr int kCharsPerToken = 4;

bool is_generation_path(std::string_view p) {
  return p == "/generate" || p == "/v1/chat/completions" || p == "/v1/completions";
}

// One SSE event of a streamed reply's content.
std::string content_event(std::string_view path) {
  if (path == "/v1/chat/completions") {
    return "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\n";
  }
  if (path == "/v1/completions") return "data: {\"choices\":[{\"index\":0,\"text\":\"ok\"}]}\n\n";
  return "data: {\"text\":\"ok\"}\n\n";
}

std::string count(long long v, bool as_string) {
  return as_string ? fmt::format("\"{}\"", v) : std::to_string(v);
}

// A streamed reply: content chunks (each after --mock-chunk-delay-ms), the
// usage event, [DONE]. In cut mode the connection drops after the first.
struct MockStream : std::enable_shared_from_this<MockStream> {
  MockStream(std::shared_ptr<Session> session, int chunks, int delay_ms, bool cut_short)
      : s(std::move(session)),
        timer(s->executor()),
        left(chunks),
        delay(delay_ms),
        cut(cut_short) {}

  void start() {
    s->on_client_gone([self = shared_from_this()] { self->gone(); });
    next();
  }
  void gone() {
    if (finished) return;
    finished = true;
    cancelled->fetch_add(1);
    timer.cancel();
    s->abort();
  }
  void next() {
    if (finished) return;
    if (left == 0) {
      finished = true;
      s->end_stream(usage_event + "data: [DONE]\n\n");
      return;
    }
    if (delay <= 0) return emit();
    timer.expires_after(std::chrono::milliseconds(delay));
    timer.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->emit();
    });
  }
  void emit() {
    if (finished) return;
    --left;
    auto done = [self = shared_from_this()](bool ok) {
      if (!ok) return self->gone();
      if (self->cut) {
        self->finished = true;
        return self->s->abort();
      }
      self->next();
    };
    if (!started) {
      started = true;
      StreamHead head{http::status::ok, 11};
      head.set(http::field::content_type, "text/event-stream");
      head.set("X-Mock-Worker", port);
      s->begin_stream(std::move(head), content_event(path), std::move(done));
      return;
    }
    s->write_chunk(content_event(path), std::move(done));
  }

  std::shared_ptr<Session> s;
  net::steady_timer timer;
  int left;
  const int delay;
  const bool cut;
  bool started = false;
  bool finished = false;
  std::string path, port, usage_event;
  std::shared_ptr<std::atomic<std::uint64_t>> cancelled;
};

}  // namespace

MockWorker::MockWorker(const MockFlags& flags)
    : flags_(flags),
      mode_(flags.mode),
      cache_(kvroute::ApproxRadixTree::Options{.tenant_budget = flags.cache_chars}),
      cancelled_(std::make_shared<std::atomic<std::uint64_t>>(0)) {}

Response MockWorker::tagged(Response res) const {
  res.set("X-Mock-Worker", port_);
  return res;
}

void MockWorker::handle(const std::shared_ptr<Session>& s, Request req) {
  const std::string path(req.target());
  const unsigned v = req.version();
  if (req.method() == http::verb::post && is_generation_path(path)) return generate(s, req);
  if (req.method() == http::verb::get && path == "/health") {
    if (mode_.load() == MockMode::kUnhealthy) {
      return s->reply(text_reply("unhealthy", "text/plain", v, http::status::service_unavailable));
    }
    return s->reply(tagged(text_reply("ok", "text/plain", v)));
  }
  if (req.method() == http::verb::get && path == "/v1/models") {
    const json models = {
        {"object", "list"},
        {"data", {{{"id", flags_.model}, {"object", "model"}, {"owned_by", "kvroute"}}}}};
    return s->reply(tagged(text_reply(models.dump(), "application/json", v)));
  }
  if (req.method() == http::verb::get && path == "/mock/stats") {
    return s->reply(text_reply(stats(), "application/json", v));
  }
  if (req.method() == http::verb::post && path == "/mock/mode") return set_mode(s, req);
  s->reply(json_error(http::status::not_found, "no such endpoint", "not_found", v));
}

void MockWorker::set_mode(const std::shared_ptr<Session>& s, const Request& req) {
  const std::optional<MockMode> mode = parse_mock_mode(req.body());
  if (!mode) {
    return s->reply(json_error(http::status::bad_request, "not a mock mode",
                               "invalid_request_error", req.version()));
  }
  mode_.store(*mode);
  s->reply(text_reply("ok", "text/plain", req.version()));
}

std::string MockWorker::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  const json j = {{"requests", requests_.load()},
                  {"cancelled", cancelled_->load()},
                  {"connections", counters_ != nullptr ? counters_->accepted.load() : 0},
                  {"cache_chars", cache_.tenant_size(0)},
                  {"last_request_id", last_request_id_}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

MockWorker::Usage MockWorker::serve_from_cache(const std::string& text) {
  const std::size_t units = kvroute::detail::utf8_count(text);
  const std::size_t matched = cache_.match(text).matched;
  cache_.insert(text, 0);
  return {static_cast<long long>((units + kCharsPerToken - 1) / kCharsPerToken),
          static_cast<long long>(matched / kCharsPerToken)};
}

std::string MockWorker::reply_body(const std::string& path, const Usage& u, bool malformed) const {
  const std::string prompt = count(u.prompt_tokens, malformed);
  const std::string cached = count(u.cached_tokens, malformed);
  if (path == "/generate") {
    return fmt::format(R"({{"text":"ok","meta_info":{{"prompt_tokens":{},"cached_tokens":{}}}}})",
                       prompt, cached);
  }
  const std::string choice =
      path == "/v1/chat/completions"
          ? R"({"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"})"
          : R"({"index":0,"text":"ok","finish_reason":"stop"})";
  return fmt::format(
      R"({{"id":"mock","choices":[{}],"usage":{{"prompt_tokens":{},"completion_tokens":1,)"
      R"("prompt_tokens_details":{{"cached_tokens":{}}}}}}})",
      choice, prompt, cached);
}

void MockWorker::generate(const std::shared_ptr<Session>& s, const Request& req) {
  requests_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_request_id_ = std::string(req["x-request-id"]);
  }
  const MockMode mode = mode_.load();
  const unsigned v = req.version();
  if (mode == MockMode::kReset) return s->abort();
  if (mode == MockMode::kHang) {
    return s->on_client_gone([s, c = cancelled_] {
      c->fetch_add(1);
      s->abort();
    });
  }
  if (mode == MockMode::kError) {
    return s->reply(
        tagged(json_error(http::status::internal_server_error, "mock error", "server_error", v)));
  }
  const json body = json::parse(req.body(), nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return s->reply(json_error(http::status::bad_request, "body is not a JSON object",
                               "invalid_request_error", v));
  }
  const std::string path(req.target());
  const Usage u = serve_from_cache(routing_text(path, body));
  const bool stream = body.contains("stream") && body["stream"] == true;
  if (stream || mode == MockMode::kCut) return this->stream(s, path, u);
  Response res =
      text_reply(reply_body(path, u, mode == MockMode::kMalformed), "application/json", v);
  res.set("X-Mock-Saw-Request-Id", req["x-request-id"]);
  res = tagged(std::move(res));
  if (flags_.service_ms <= 0) return s->reply(std::move(res));
  auto timer = std::make_shared<net::steady_timer>(s->executor());
  timer->expires_after(std::chrono::milliseconds(flags_.service_ms));
  timer->async_wait(
      [s, timer, res = std::move(res)](error_code) mutable { s->reply(std::move(res)); });
}

void MockWorker::stream(const std::shared_ptr<Session>& s, const std::string& path, Usage u) {
  const MockMode mode = mode_.load();
  auto st =
      std::make_shared<MockStream>(s, flags_.chunks, flags_.chunk_delay_ms, mode == MockMode::kCut);
  st->path = path;
  st->port = port_;
  st->cancelled = cancelled_;
  const bool malformed = mode == MockMode::kMalformed;
  if (path == "/generate") {
    st->usage_event = "data: " + reply_body(path, u, malformed) + "\n\n";
  } else {
    st->usage_event = fmt::format(
        R"(data: {{"choices":[],"usage":{{"prompt_tokens":{},"prompt_tokens_details":{{"cached_tokens":{}}}}}}})"
        "\n\n",
        count(u.prompt_tokens, malformed), count(u.cached_tokens, malformed));
  }
  st->start();
}

}  // namespace kvexample
