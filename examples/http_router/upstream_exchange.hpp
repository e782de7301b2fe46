// -----------------------------------------------------------------------------
// File: http_router/upstream_exchange.hpp
// -----------------------------------------------------------------------------
//
// One request to one worker and its response, read piece by piece so that a
// streamed response is relayed as it comes and a buffered one is gathered:
// the sink hears of the head, of each piece of body (and asks for the next
// one when it is ready: a slow client slows the read from the worker instead
// of filling memory), then of the end or of a failure. A pooled connection
// that turns out closed before any byte of response (the worker's idle
// timeout) is replaced by a fresh one once, silently: it says nothing about
// the worker. cancel() drops the connection (so the worker sees the request
// abandoned) and silences the sink.
//
// Thread safety: an exchange lives on its lane; every call from that lane.
//
// Example:
//
//   auto ex = std::make_shared<Exchange>(pool, address, request, sink);
//   ex->start();          // sink->on_head(...); sink calls ex->read_more() ...

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_UPSTREAM_EXCHANGE_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_UPSTREAM_EXCHANGE_HPP_

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string_view>

#include "http_router/net.hpp"
#include "http_router/upstream_pool.hpp"

namespace kvexample {

class ExchangeSink {
 public:
  virtual ~ExchangeSink() = default;
  // The response head arrived; call read_more() for the body.
  virtual void on_head(const http::response_header<>& head) = 0;
  // A piece of body; call read_more() for the next.
  virtual void on_data(std::string_view data) = 0;
  // The body ended cleanly.
  virtual void on_end() = 0;
  // The exchange failed (connect, write, read, a truncated body). `started`:
  // some of the response had arrived.
  virtual void on_fail(error_code ec, bool started) = 0;
};

class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  static constexpr auto kConnectTimeout = std::chrono::seconds(5);

  Exchange(UpstreamPool& pool, WorkerAddress address, std::shared_ptr<Request> request,
           std::shared_ptr<ExchangeSink> sink)
      : pool_(pool),
        address_(std::move(address)),
        request_(std::move(request)),
        sink_(std::move(sink)) {}

  void start();
  void read_more();
  void cancel();

 private:
  void connect();
  void send();
  void on_sent(error_code ec);
  void on_head(error_code ec);
  void on_body(error_code ec);
  void finish();
  void fail(error_code ec);

  UpstreamPool& pool_;
  const WorkerAddress address_;
  std::shared_ptr<Request> request_;
  std::shared_ptr<ExchangeSink> sink_;  // null once finished or cancelled
  std::unique_ptr<UpstreamConn> conn_;
  std::optional<http::response_parser<http::buffer_body>> parser_;
  std::array<char, 16384> buf_{};
  bool replaced_stale_ = false;
};

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_UPSTREAM_EXCHANGE_HPP_
