// -----------------------------------------------------------------------------
// File: http_router/admin.hpp
// -----------------------------------------------------------------------------
//
// The router's own endpoints (everything but the forwarded ones):
//
//   GET /health      200 while serving, 503 once shutting down
//   GET /liveness    200 while the process runs
//   GET /readiness   200 when a worker is available (healthy, circuit not
//                    open) and the router is not shutting down; else 503
//   GET /workers     the workers: url, healthy, circuit, in_flight, processed
//   POST /workers    {"url": "http://host:port"} (or ?url=): adds one (201;
//                    400 for a bad URL, 409 when already there)
//   DELETE /workers?url=URL  (or /workers/URL, percent-encoded): removes one
//                    (200; 404 when absent)
//
// /workers takes `Authorization: Bearer KEY` when --api-key is set (401
// otherwise; the key is compared in constant time).
//
// Thread safety: called on a session's lane; the state they read is
// thread-safe.

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_ADMIN_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_ADMIN_HPP_

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "http_router/router_context.hpp"
#include "http_router/session.hpp"

namespace kvexample {

// Replies to GET /health, /liveness or /readiness (`path`).
void serve_probe(RouterContext& ctx, const std::shared_ptr<Session>& s, const Request& req,
                 std::string_view path);

// Replies to /workers and /workers/... requests.
void serve_workers(RouterContext& ctx, const std::shared_ptr<Session>& s, const Request& req);

// %XX decoding (and '+' as a space in queries); nullopt for a bad escape.
std::optional<std::string> percent_decode(std::string_view s);

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_ADMIN_HPP_
