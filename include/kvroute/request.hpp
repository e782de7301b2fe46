// -----------------------------------------------------------------------------
// File: kvroute/request.hpp
// -----------------------------------------------------------------------------
//
// `RequestView`, what a policy may look at in a request: its routing text
// (the gateway's "request text": chat messages joined, a prompt, and so on;
// it may be empty), optional token ids, the HTTP headers and the model id.
//
// Lifetime: `RequestView` and `Header` are views. They own nothing and point
// at bytes the host keeps alive for as long as the view is used: the
// select_worker call, and report_cached or predicted_tokens later with the
// same view. A view built from temporaries dangles at the end of the full
// expression (`Header{"x-smg-routing-key", std::to_string(id)}` does).
// `HeaderList` owns its bytes, for headers built that way.
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
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvroute/config.hpp"
#include "kvroute/detail/ascii.hpp"

KVROUTE_NAMESPACE_BEGIN

// One header, viewed: see "Lifetime" above.
struct Header {
  std::string_view name{};
  std::string_view value{};
};

// Headers that own their bytes, for a host that builds them from
// temporaries. view() gives the Header span a RequestView takes; it stays
// valid until the next add() or the list's destruction.
//
//   kvroute::HeaderList h;
//   h.add("x-smg-routing-key", std::to_string(user_id));
//   router.select({.text = prompt, .headers = h.view()});
class HeaderList {
 public:
  HeaderList() = default;
  HeaderList(const HeaderList&) = delete;
  HeaderList& operator=(const HeaderList&) = delete;
  HeaderList(HeaderList&&) noexcept = default;
  HeaderList& operator=(HeaderList&&) noexcept = default;

  // Copies `name` and `value`. May throw std::bad_alloc.
  void add(std::string_view name, std::string_view value) {
    const std::string& n = bytes_.emplace_back(name);
    const std::string& v = bytes_.emplace_back(value);
    views_.push_back({n, v});
  }
  std::span<const Header> view() const noexcept { return views_; }
  std::size_t size() const noexcept { return views_.size(); }

 private:
  std::deque<std::string> bytes_;  // a deque never moves its elements
  std::vector<Header> views_;
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
