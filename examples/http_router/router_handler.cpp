// The router's request dispatch (see router_handler.hpp).
#include "http_router/router_handler.hpp"

#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "http_router/admin.hpp"
#include "http_router/body_check.hpp"
#include "http_router/fast_body.hpp"
#include "http_router/headers.hpp"
#include "http_router/log.hpp"
#include "http_router/proxy_call.hpp"
#include "http_router/request_text.hpp"

namespace kvexample {
namespace {

bool is_generation_path(std::string_view p) {
  return p == "/generate" || p == "/v1/chat/completions" || p == "/v1/completions";
}

void reply_400(RouterContext& ctx, const std::shared_ptr<Session>& s, const Request& req,
               const std::string& message, const std::string& request_id) {
  ctx.stats.bad_requests.inc();
  Response res =
      json_error(http::status::bad_request, message, "invalid_request_error", req.version());
  res.set("x-request-id", request_id);
  s->reply(std::move(res));
}

}  // namespace

void serve_metrics(MetricsPage& page, const std::shared_ptr<Session>& s, const Request& req) {
  page.render_async(s->executor(), [s, v = req.version()](std::string text) {
    s->reply(text_reply(std::move(text), "text/plain; version=0.0.4", v));
  });
}

void RouterHandler::handle(const std::shared_ptr<Session>& s, Request req) {
  const std::string_view target = req.target();
  const std::string path(target.substr(0, target.find('?')));  // outlives moves of req
  const http::verb m = req.method();
  if (is_generation_path(path)) {
    if (m == http::verb::post) return generate(s, std::move(req), path);
  } else if (path == "/v1/models") {
    if (m == http::verb::get) return list_models(s, std::move(req));
  } else if (path == "/health" || path == "/liveness" || path == "/readiness") {
    if (m == http::verb::get) return serve_probe(ctx_, s, req, path);
  } else if (path == "/workers" || path.rfind("/workers/", 0) == 0) {
    return serve_workers(ctx_, s, req);
  } else if (path == "/metrics" && metrics_ != nullptr) {
    if (m == http::verb::get) return serve_metrics(*metrics_, s, req);
  } else {
    return s->reply(
        json_error(http::status::not_found, "no such endpoint", "not_found", req.version()));
  }
  s->reply(json_error(http::status::method_not_allowed, "method not allowed for this endpoint",
                      "invalid_request_error", req.version()));
}

void RouterHandler::generate(const std::shared_ptr<Session>& s, Request req,
                             std::string_view path) {
  ProxyRequest p;
  p.request_id = request_id_for(req, ctx_.flags.request_id_headers);
  if (std::optional<FastChat> fast = fast_chat_body(path, req.body())) {
    p.text = std::move(fast->text);
    p.model = std::move(fast->model);
    p.stream = fast->stream;
  } else {  // the full path: every shape, and the errors that name a field
    const nlohmann::json body = nlohmann::json::parse(req.body(), nullptr, false);
    if (body.is_discarded()) return reply_400(ctx_, s, req, "body: not valid JSON", p.request_id);
    if (auto err = check_body(path, body)) {
      return reply_400(ctx_, s, req, err->message(), p.request_id);
    }
    p.text = routing_text(path, body);
    if (body.contains("model")) p.model = body["model"].get<std::string>();
    p.stream = body.contains("stream") && body["stream"].get<bool>();
  }
  prepare_for_worker(req, p.request_id);
  p.upstream = std::make_shared<Request>(std::move(req));
  log_debug("request {} {} model '{}' stream {}", p.request_id, path, p.model, p.stream);
  std::make_shared<ProxyCall>(ctx_, s, std::move(p))->start();
}

void RouterHandler::list_models(const std::shared_ptr<Session>& s, Request req) {
  ProxyRequest p;
  p.request_id = request_id_for(req, ctx_.flags.request_id_headers);
  prepare_for_worker(req, p.request_id);
  p.upstream = std::make_shared<Request>(std::move(req));
  p.route_by_policy = false;
  std::make_shared<ProxyCall>(ctx_, s, std::move(p))->start();
}

void MetricsHandler::handle(const std::shared_ptr<Session>& s, Request req) {
  const std::string_view target = req.target();
  if (target.substr(0, target.find('?')) == "/metrics" && req.method() == http::verb::get) {
    return serve_metrics(page_, s, req);
  }
  s->reply(
      json_error(http::status::not_found, "only GET /metrics here", "not_found", req.version()));
}

}  // namespace kvexample
