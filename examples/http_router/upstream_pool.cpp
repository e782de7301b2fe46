// Keep-alive connections to the workers (see upstream_pool.hpp).
#include "http_router/upstream_pool.hpp"

#include <vector>

namespace kvexample {
namespace {

void opened(UpstreamConn& conn) {
  error_code ignored;
  conn.stream.socket().set_option(tcp::no_delay(true), ignored);
  conn.stream.expires_never();
}

}  // namespace

std::unique_ptr<UpstreamConn> UpstreamPool::take(const std::string& url) {
  auto it = idle_.find(url);
  if (it == idle_.end()) return nullptr;
  auto& conns = it->second;
  const auto now = std::chrono::steady_clock::now();
  while (!conns.empty()) {
    std::unique_ptr<UpstreamConn> c = std::move(conns.back());
    conns.pop_back();
    if (now - c->idle_since < kMaxIdle) {
      c->reused = true;
      return c;
    }
  }
  return nullptr;
}

void UpstreamPool::give(const std::string& url, std::unique_ptr<UpstreamConn> conn) {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_prune_ > kMaxIdle) prune(now);
  auto& conns = idle_[url];
  if (conns.size() >= kMaxIdlePerWorker) return;  // closes it
  conn->idle_since = now;
  conns.push_back(std::move(conn));
}

void UpstreamPool::prune(std::chrono::steady_clock::time_point now) {
  last_prune_ = now;
  for (auto it = idle_.begin(); it != idle_.end();) {
    auto& conns = it->second;
    std::erase_if(conns, [now](const auto& c) { return now - c->idle_since >= kMaxIdle; });
    if (conns.empty()) {
      idle_.erase(it++);
    } else {
      ++it;
    }
  }
}

void UpstreamPool::connect(const WorkerAddress& a, std::chrono::steady_clock::duration timeout,
                           Connected done) {
  auto conn = std::make_unique<UpstreamConn>(ctx_.get_executor());
  UpstreamConn* raw = conn.get();
  raw->stream.expires_after(timeout);
  error_code ec;
  const net::ip::address ip = net::ip::make_address(a.host, ec);
  if (!ec) {  // a literal address: no resolver
    raw->stream.async_connect(
        tcp::endpoint(ip, a.port),
        [conn = std::move(conn), done = std::move(done)](error_code cec) mutable {
          if (!cec) opened(*conn);
          done(cec, std::move(conn));
        });
    return;
  }
  auto resolver = std::make_shared<tcp::resolver>(ctx_);
  resolver->async_resolve(a.host, std::to_string(a.port),
                          [resolver, conn = std::move(conn), done = std::move(done)](
                              error_code rec, const tcp::resolver::results_type& results) mutable {
                            if (rec) return done(rec, std::move(conn));
                            UpstreamConn* c = conn.get();
                            c->stream.async_connect(
                                results, [conn = std::move(conn), done = std::move(done)](
                                             error_code cec, const tcp::endpoint&) mutable {
                                  if (!cec) opened(*conn);
                                  done(cec, std::move(conn));
                                });
                          });
}

}  // namespace kvexample
