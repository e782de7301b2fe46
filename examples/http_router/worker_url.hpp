// -----------------------------------------------------------------------------
// File: http_router/worker_url.hpp
// -----------------------------------------------------------------------------
//
// Worker URLs, checked when they are given (at start or through POST
// /workers), so that a typo is an error naming the URL rather than a worker
// that fails every request. Accepted: http://HOST[:PORT][/], HOST a name, an
// IPv4 address or a bracketed IPv6 address, PORT 1-65535 (80 when absent).
// The canonical form, which names the worker everywhere (metrics, logs,
// /workers), has no trailing slash and always a port.
//
// Thread safety: pure functions.
//
// Example:
//
//   absl::StatusOr<WorkerAddress> a = parse_worker_url("http://10.0.0.1:30001/");
//   // a->url == "http://10.0.0.1:30001", a->host == "10.0.0.1", a->port == 30001

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_WORKER_URL_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_WORKER_URL_HPP_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "kvroute/detail/ascii.hpp"

namespace kvexample {

struct WorkerAddress {
  std::string url;   // canonical: http://host:port
  std::string host;  // without brackets for IPv6
  std::uint16_t port = 80;
  std::string host_header;  // what goes in Host: host:port (brackets kept)
};

inline absl::StatusOr<WorkerAddress> parse_worker_url(std::string_view raw) {
  const std::string shown = absl::CHexEscape(absl::string_view(raw.data(), raw.size()));
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker URL '", shown, "': ", absl::string_view(why.data(), why.size())));
  };
  constexpr std::string_view kScheme = "http://";
  if (raw.size() >= 8 && kvroute::detail::ascii_iequals(raw.substr(0, 8), "https://")) {
    return bad("https is not supported (put a TLS terminator in front of the worker)");
  }
  if (raw.size() < kScheme.size() || !kvroute::detail::ascii_iequals(raw.substr(0, 7), kScheme)) {
    return bad("must start with http://");
  }
  std::string_view rest = raw.substr(kScheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find_first_of("/?#@ \t\r\n") != std::string_view::npos) {
    return bad("only http://host[:port] is accepted (no path, query or user)");
  }
  WorkerAddress a;
  std::string_view port_text;
  if (!rest.empty() && rest.front() == '[') {  // [IPv6]:port
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in the host");
    a.host = std::string(rest.substr(1, close - 1));
    a.host_header = std::string(rest.substr(0, close + 1));
    rest.remove_prefix(close + 1);
    if (!rest.empty() && rest.front() != ':') return bad("expected ':' after ']'");
    if (!rest.empty()) port_text = rest.substr(1);
  } else {
    const std::size_t colon = rest.find(':');
    a.host = std::string(rest.substr(0, colon));
    a.host_header = a.host;
    if (colon != std::string_view::npos) port_text = rest.substr(colon + 1);
  }
  if (a.host.empty()) return bad("no host");
  for (char c : a.host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == ':' || c == '_';
    if (!ok) return bad("the host has a character a host name cannot have");
  }
  if (!port_text.empty() || rest.find(':') != std::string_view::npos) {
    std::uint32_t port = 0;
    if (port_text.empty() || port_text.size() > 5) return bad("the port must be 1-65535");
    for (char c : port_text) {
      if (c < '0' || c > '9') return bad("the port must be 1-65535");
      port = port * 10 + static_cast<std::uint32_t>(c - '0');
    }
    if (port == 0 || port > 65535) return bad("the port must be 1-65535");
    a.port = static_cast<std::uint16_t>(port);
  }
  a.host_header = absl::StrCat(a.host_header, ":", a.port);
  a.url = absl::StrCat("http://", a.host_header);
  return a;
}

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_WORKER_URL_HPP_
