// -----------------------------------------------------------------------------
// File: http_router/upstream_pool.hpp
// -----------------------------------------------------------------------------
//
// Keep-alive connections to the workers, one pool per lane: a request takes
// the most recently returned idle connection to its worker (or opens one),
// and gives it back when the response ended cleanly with keep-alive. Every
// connection has TCP_NODELAY: a request is one write, and Nagle's algorithm
// would otherwise hold its tail until the worker's delayed ACK (tens of ms
// per request on a reused connection). Idle connections older than
// kMaxIdle are dropped; at most kMaxIdlePerWorker are kept per worker.
//
// Thread safety: a pool belongs to its lane; call it from that lane only.
//
// Example:
//
//   std::unique_ptr<UpstreamConn> c = pool.take(address.url);
//   if (!c) pool.connect(address, 5s, [](error_code ec, std::unique_ptr<UpstreamConn> c) {...});
//   ...
//   pool.give(address.url, std::move(c));   // after a clean keep-alive response

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_UPSTREAM_POOL_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_UPSTREAM_POOL_HPP_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "http_router/net.hpp"
#include "http_router/worker_url.hpp"

namespace kvexample {

struct UpstreamConn {
  explicit UpstreamConn(const net::any_io_executor& ex) : stream(ex) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  std::chrono::steady_clock::time_point idle_since{};
  bool reused = false;  // taken from the pool (it may have been closed by the worker)
};

class UpstreamPool {
 public:
  static constexpr std::size_t kMaxIdlePerWorker = 512;
  static constexpr std::chrono::seconds kMaxIdle{30};

  using Connected = std::function<void(error_code, std::unique_ptr<UpstreamConn>)>;

  explicit UpstreamPool(net::io_context& ctx) : ctx_(ctx) {}

  // An idle connection to `url`, or null.
  std::unique_ptr<UpstreamConn> take(const std::string& url);
  // Returns a connection whose last response ended cleanly with keep-alive.
  void give(const std::string& url, std::unique_ptr<UpstreamConn> conn);
  // Drops every idle connection to `url` (a removed worker).
  void forget(const std::string& url) { idle_.erase(url); }
  // Opens a connection (resolving a host name first) within `timeout`.
  void connect(const WorkerAddress& a, std::chrono::steady_clock::duration timeout, Connected done);

 private:
  void prune(std::chrono::steady_clock::time_point now);

  net::io_context& ctx_;
  absl::flat_hash_map<std::string, std::vector<std::unique_ptr<UpstreamConn>>> idle_;
  std::chrono::steady_clock::time_point last_prune_ = std::chrono::steady_clock::now();
};

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_UPSTREAM_POOL_HPP_
