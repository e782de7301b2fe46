// -----------------------------------------------------------------------------
// File: http_router/net.hpp
// -----------------------------------------------------------------------------
//
// The names every file of kvroute_http_router shares: Boost.Asio and
// Boost.Beast under short aliases, the request and response types, and the
// JSON error reply. The program is built with Asio's and Beast's separate
// compilation (asio_impl.cpp holds their code once), so that each file
// parses their headers but does not instantiate their implementation.
//
// Thread safety: declarations and pure functions only.

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_NET_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_NET_HPP_

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kvexample {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;
using StreamHead = http::response<http::empty_body>;

// A JSON error reply in the OpenAI shape: {"error": {"message", "type",
// "code"}}. `message` is the router's own text, never an exception's.
inline Response json_error(http::status status, std::string_view message, std::string_view type,
                           unsigned version = 11, bool keep_alive = true) {
  Response res{status, version};
  res.set(http::field::content_type, "application/json");
  nlohmann::json body = {{"error",
                          {{"message", std::string(message)},
                           {"type", std::string(type)},
                           {"code", static_cast<int>(status)}}}};
  // Replace: a message quoting client bytes must not make dump() throw.
  res.body() = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}

// A plain 200 reply with `body` of `content_type`.
inline Response text_reply(std::string body, std::string_view content_type, unsigned version = 11,
                           http::status status = http::status::ok) {
  Response res{status, version};
  res.set(http::field::content_type, content_type);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_NET_HPP_
