// -----------------------------------------------------------------------------
// File: http_router/headers.hpp
// -----------------------------------------------------------------------------
//
// Which headers cross the router, and the request id. End-to-end headers go
// from the client to the worker and back; hop-by-hop headers (RFC 9110
// 7.6.1) and the ones the router sets itself (Host, Content-Length) stay on
// their hop, and so does Accept-Encoding: the router reads the worker's
// reply (its usage) and asks for it uncompressed. Header values reaching
// here have been checked for CR, LF and NUL by the session.
//
// Request ids: the first of --request-id-headers the client sent with a
// usable value (1-256 visible ASCII characters) is the request's id;
// otherwise one is made up ("chatcmpl-...", "cmpl-...", "gnt-...", "req-..."
// and 24 random letters and digits, as the gateway does). The id goes to the
// worker as x-request-id (with the client's header passed on as it came),
// back to the client as x-request-id, and into the logs.
//
// Thread safety: pure functions (request_id_for uses a thread-local RNG).

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_HEADERS_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_HEADERS_HPP_

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "http_router/net.hpp"
#include "kvroute/detail/ascii.hpp"

namespace kvexample {

inline bool is_hop_by_hop(std::string_view name) {
  using kvroute::detail::ascii_iequals;
  for (std::string_view h :
       {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
        "upgrade", "proxy-authorization", "proxy-authenticate"}) {
    if (ascii_iequals(name, h)) return true;
  }
  return false;
}

// A client header the worker should see.
inline bool forward_to_worker(std::string_view name) {
  using kvroute::detail::ascii_iequals;
  return !is_hop_by_hop(name) && !ascii_iequals(name, "host") &&
         !ascii_iequals(name, "content-length") && !ascii_iequals(name, "expect") &&
         !ascii_iequals(name, "accept-encoding") && !ascii_iequals(name, "x-request-id");
}

// A worker header the client should see.
inline bool forward_to_client(std::string_view name) {
  using kvroute::detail::ascii_iequals;
  return !is_hop_by_hop(name) && !ascii_iequals(name, "content-length") &&
         !ascii_iequals(name, "x-request-id") && !ascii_iequals(name, "x-kvroute-worker");
}

// Turns the client's request into the one a worker gets, in place: only
// end-to-end headers, x-request-id set, HTTP/1.1 with keep-alive, the body's
// length (it was read whole, chunked or not).
inline void prepare_for_worker(Request& req, std::string_view request_id) {
  for (auto it = req.begin(); it != req.end();) {
    it = forward_to_worker(it->name_string()) ? std::next(it) : req.erase(it);
  }
  if (req.method() == http::verb::post && req.find(http::field::content_type) == req.end()) {
    req.set(http::field::content_type, "application/json");
  }
  req.set("x-request-id", request_id);
  req.version(11);
  req.keep_alive(true);
  req.prepare_payload();
}

inline bool usable_request_id(std::string_view v) {
  if (v.empty() || v.size() > 256) return false;
  for (char c : v) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

inline std::string request_id_for(const Request& req, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    auto it = req.find(name);
    if (it != req.end() && usable_request_id(it->value())) return std::string(it->value());
  }
  const std::string_view path = req.target();
  std::string id = path.find("/chat/completions") != std::string_view::npos ? "chatcmpl-"
                   : path.find("/completions") != std::string_view::npos    ? "cmpl-"
                   : path.find("/generate") != std::string_view::npos       ? "gnt-"
                                                                            : "req-";
  static constexpr std::string_view kChars =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<std::size_t> pick(0, kChars.size() - 1);
  for (int i = 0; i < 24; ++i) id.push_back(kChars[pick(rng)]);
  return id;
}

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_HEADERS_HPP_
