// The router's own endpoints (see admin.hpp).
#include "http_router/admin.hpp"

#include <nlohmann/json.hpp>

#include "http_router/worker_url.hpp"

namespace kvexample {
namespace {

using nlohmann::json;

Response json_reply(const json& j, const Request& req, http::status st = http::status::ok) {
  return text_reply(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json",
                    req.version(), st);
}

bool authorized(const RouterContext& ctx, const Request& req) {
  const std::string& key = ctx.flags.api_key;
  if (key.empty()) return true;
  const std::string_view given = req[http::field::authorization];
  const std::string expected = "Bearer " + key;
  if (given.size() != expected.size()) return false;
  unsigned char diff = 0;  // constant time over the key's length
  for (std::size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  }
  return diff == 0;
}

// The value of query parameter `name` in `target`, decoded.
std::optional<std::string> query_param(std::string_view target, std::string_view name) {
  const std::size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const std::size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const std::size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name && eq != std::string_view::npos) {
      return percent_decode(pair.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

json describe(RouterContext& ctx, const WorkerInfo& w, const kvroute::WorkerSnapshot& snap) {
  const kvroute::Worker* kw = snap.find(w.id);
  auto& router = ctx.fleet.router();
  return {{"url", w.address.url},
          {"healthy", kw != nullptr && kw->healthy},
          {"circuit", std::string(kvroute::to_string(ctx.fleet.breakers().state(w.id)))},
          {"in_flight", router.load().in_flight(w.id)},
          {"processed", router.load().processed(w.id)}};
}

void add_worker(RouterContext& ctx, const std::shared_ptr<Session>& s, const Request& req) {
  std::optional<std::string> url = query_param(req.target(), "url");
  if (!url) {
    const json body = json::parse(req.body(), nullptr, false);
    if (body.is_object() && body.contains("url") && body["url"].is_string()) {
      url = body["url"].get<std::string>();
    }
  }
  if (!url) {
    return s->reply(json_error(http::status::bad_request,
                               "url: expected {\"url\": \"http://host:port\"} or ?url=",
                               "invalid_request_error", req.version()));
  }
  absl::StatusOr<WorkerAddress> a = parse_worker_url(*url);
  if (!a.ok()) {
    return s->reply(json_error(http::status::bad_request, std::string(a.status().message()),
                               "invalid_request_error", req.version()));
  }
  absl::StatusOr<std::shared_ptr<WorkerInfo>> w = ctx.fleet.add(*a);
  if (!w.ok()) {
    const bool exists = absl::IsAlreadyExists(w.status());
    return s->reply(json_error(exists ? http::status::conflict : http::status::bad_request,
                               std::string(w.status().message()), "invalid_request_error",
                               req.version()));
  }
  auto snap = ctx.fleet.router().workers().snapshot();
  s->reply(json_reply(describe(ctx, **w, *snap), req, http::status::created));
}

void remove_worker(RouterContext& ctx, const std::shared_ptr<Session>& s, const Request& req) {
  const std::string_view target = req.target();
  std::optional<std::string> url = query_param(target, "url");
  if (!url && target.size() > 9 && target.substr(0, 9) == "/workers/") {
    url = percent_decode(target.substr(9, target.find('?') - 9));
  }
  absl::StatusOr<WorkerAddress> a =
      url ? parse_worker_url(*url) : absl::InvalidArgumentError("url: give ?url=URL");
  if (!a.ok()) {
    return s->reply(json_error(http::status::bad_request, std::string(a.status().message()),
                               "invalid_request_error", req.version()));
  }
  if (absl::Status st = ctx.fleet.remove(a->url); !st.ok()) {
    return s->reply(
        json_error(http::status::not_found, std::string(st.message()), "not_found", req.version()));
  }
  s->reply(json_reply({{"removed", a->url}}, req));
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] != '%') {
      out.push_back(s[i]);
    } else {
      if (i + 2 >= s.size()) return std::nullopt;
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      const int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    }
  }
  return out;
}

void serve_probe(RouterContext& ctx, const std::shared_ptr<Session>& s, const Request& req,
                 std::string_view path) {
  const bool draining = ctx.draining.load();
  if (path == "/liveness") return s->reply(json_reply({{"status", "alive"}}, req));
  if (path == "/health") {
    return s->reply(
        draining ? json_reply({{"status", "shutting down"}}, req, http::status::service_unavailable)
                 : json_reply({{"status", "ok"}}, req));
  }
  auto snap = ctx.fleet.router().workers().snapshot();
  std::size_t available = 0;
  for (const kvroute::Worker& w : snap->workers()) available += w.available() ? 1 : 0;
  const bool ready = !draining && available > 0;
  s->reply(json_reply({{"status", ready      ? "ready"
                                  : draining ? "shutting down"
                                             : "no available worker"},
                       {"available_workers", available}},
                      req, ready ? http::status::ok : http::status::service_unavailable));
}

void serve_workers(RouterContext& ctx, const std::shared_ptr<Session>& s, const Request& req) {
  if (!authorized(ctx, req)) {
    Response r =
        json_error(http::status::unauthorized, "a valid 'Authorization: Bearer KEY' is required",
                   "authentication_error", req.version());
    r.set(http::field::www_authenticate, "Bearer");
    return s->reply(std::move(r));
  }
  switch (req.method()) {
    case http::verb::get: {
      auto snap = ctx.fleet.router().workers().snapshot();
      json list = json::array();
      for (const auto& w : ctx.fleet.list()) list.push_back(describe(ctx, *w, *snap));
      return s->reply(json_reply({{"workers", list}}, req));
    }
    case http::verb::post:
      return add_worker(ctx, s, req);
    case http::verb::delete_:
      return remove_worker(ctx, s, req);
    default:
      return s->reply(json_error(http::status::method_not_allowed, "use GET, POST or DELETE",
                                 "invalid_request_error", req.version()));
  }
}

}  // namespace kvexample
