// -----------------------------------------------------------------------------
// File: http_router/router_handler.hpp
// -----------------------------------------------------------------------------
//
// The router's request dispatch:
//
//   POST /generate, /v1/chat/completions, /v1/completions
//        the body must be a JSON object whose fields the router reads have
//        usable types (body_check.hpp; 400 naming the field otherwise); its
//        routing text, model and stream flag go to a ProxyCall
//   GET  /v1/models        forwarded to any available worker
//   GET  /metrics          (unless --prometheus-port) metrics_page.hpp
//   /health, /liveness, /readiness, /workers   admin.hpp
//
// anything else is 404 (405 for a known path with the wrong method).
// MetricsHandler serves /metrics alone, on --prometheus-port.
//
// Thread safety: handle() runs on every lane at once; the handler is
// stateless past its context.

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_ROUTER_HANDLER_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_ROUTER_HANDLER_HPP_

#include <memory>
#include <string_view>

#include "http_router/metrics_page.hpp"
#include "http_router/router_context.hpp"
#include "http_router/session.hpp"

namespace kvexample {

// Replies to GET /metrics with the page's text.
void serve_metrics(MetricsPage& page, const std::shared_ptr<Session>& s, const Request& req);

class RouterHandler : public Handler {
 public:
  // `metrics`: null when /metrics has a port of its own.
  RouterHandler(RouterContext& ctx, MetricsPage* metrics) : ctx_(ctx), metrics_(metrics) {}
  // Before the server starts: serve /metrics from `page` on the main port.
  void set_metrics(MetricsPage* page) { metrics_ = page; }
  void handle(const std::shared_ptr<Session>& s, Request req) override;
  void rejected(std::string_view reason) noexcept override { ctx_.stats.rejected(reason); }

 private:
  void generate(const std::shared_ptr<Session>& s, Request req, std::string_view path);
  void list_models(const std::shared_ptr<Session>& s, Request req);

  RouterContext& ctx_;
  MetricsPage* metrics_;
};

class MetricsHandler : public Handler {
 public:
  explicit MetricsHandler(MetricsPage& page) : page_(page) {}
  void handle(const std::shared_ptr<Session>& s, Request req) override;

 private:
  MetricsPage& page_;
};

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_ROUTER_HANDLER_HPP_
