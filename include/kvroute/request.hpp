// -----------------------------------------------------------------------------
// File: kvroute/request.hpp
// -----------------------------------------------------------------------------
//
// `RequestView`, what a policy may look at in a request: its routing text
// (the gateway's "request text": chat messages joined, a prompt, and so on;
// it may be empty), optional token ids, the HTTP headers and the model id.
// A view owns nothing; the host keeps the bytes alive for the call.
//
// Header names compare case-insensitively (ASCII), as HTTP requires. Values
// are opaque bytes: kvroute hashes or compares them but never parses them, so
// control bytes or invalid UTF-8 in a value are routed like any other key.
//
// Thread safety: a view is a value; reading one from several threads is safe.
//
// Example:
//
//   kvroute::Header headers[] = {{"X-SMG-Routing-Key", "user-42"}};
//   kvroute::RequestView req{.text = "You are a helpful assistant. Hi!",
//                            .headers = headers,
//                            .model = "llama-3"};
//   auto key = req.header("x-smg-routing-key");   // "user-42"

#ifndef KVROUTE_REQUEST_HPP_
#define KVROUTE_REQUEST_HPP_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "kvroute/config.hpp"
#include "kvroute/detail/ascii.hpp"

KVROUTE_NAMESPACE_BEGIN

struct Header {
  std::string_view name{};
  std::string_view value{};
};

// The header names the policies read, lowercase.
inline constexpr std::string_view kTargetWorkerHeader = "x-smg-target-worker";
inline constexpr std::string_view kRoutingKeyHeader = "x-smg-routing-key";

struct RequestView {
  // Routing text, counted in Unicode code points by the text policies.
  std::string_view text{};
  // Token ids, when the host has tokenised the prompt; empty otherwise.
  std::span<const std::uint32_t> tokens{};
  std::span<const Header> headers{};
  // Model id; empty means "any worker".
  std::string_view model{};

  // Returns the value of the first header named `name` (ASCII
  // case-insensitive), or nullopt when there is none. An empty value is
  // returned as an empty string_view, distinct from absence.
  // Complexity: O(number of headers). Never allocates.
  std::optional<std::string_view> header(std::string_view name) const noexcept {
    for (const Header& h : headers) {
      if (detail::ascii_iequals(h.name, name)) return h.value;
    }
    return std::nullopt;
  }
};

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_REQUEST_HPP_
