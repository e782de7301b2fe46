// -----------------------------------------------------------------------------
// File: http_router/proxy_call.hpp
// -----------------------------------------------------------------------------
//
// One client request forwarded to the workers, from selection to the last
// byte of the reply:
//
//   select (avoiding workers that failed it) -> circuit-breaker permit ->
//   load guard -> exchange with the worker -> breaker outcome -> reply,
//   or retry elsewhere with backoff.
//
// The rules it keeps:
//   * Until the first byte of the reply leaves for the client, any worker
//     failure (connection refused or reset, 408/429/5xx, a body cut short) is
//     retried on another worker, streamed or not; a streamed reply is held
//     back until the worker's first piece of body, for that reason.
//   * After it, a failing stream ends with an SSE error event and no [DONE],
//     counted in kvroute_router_truncated_streams_total. The client never
//     gets a 200 around a worker error, nor a silently shortened stream.
//   * A client that hangs up is not a worker failure: the exchange is
//     cancelled (the worker sees its connection close), the breaker records
//     nothing (a half-open probe is released as a success: the worker was
//     answering), the load guard is released.
//   * --request-timeout-secs bounds the whole request: 504 before the first
//     byte, an error event after it; not a worker failure either.
//   * The worker's reported cached tokens go back into the policy.
//
// Thread safety: a call lives on its session's lane.

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_PROXY_CALL_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_PROXY_CALL_HPP_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "http_router/router_context.hpp"
#include "http_router/session.hpp"
#include "http_router/sse.hpp"
#include "http_router/upstream_exchange.hpp"

namespace kvexample {

// What to forward, and how to route it.
struct ProxyRequest {
  // The client's request, made ready for a worker (prepare_for_worker).
  std::shared_ptr<Request> upstream;
  std::string request_id;
  bool route_by_policy = true;  // false: any available worker (GET /v1/models)
  std::string text;             // routing text
  std::string model;
  bool stream = false;
};

class ProxyCall : public ExchangeSink, public std::enable_shared_from_this<ProxyCall> {
 public:
  ProxyCall(RouterContext& ctx, std::shared_ptr<Session> session, ProxyRequest req);
  void start();

  void on_head(const http::response_header<>& head) override;
  void on_data(std::string_view data) override;
  void on_end() override;
  void on_fail(error_code ec, bool started) override;

 private:
  enum class Mode : std::uint8_t { kCollect, kCollectError, kRelay };

  bool select();
  kvroute::Selection any_available(std::span<const kvroute::WorkerId> avoid) const;
  void attempt();
  void failed(int status, std::string what);
  void reply_failure();
  void reply_collected();
  void relay(std::string_view data);
  void end_relay();
  void truncate(std::string_view message, std::string_view type, int code);
  void end_stream_after_write(std::string last);
  void feed_back(const CacheReport& r);
  void client_gone();
  void deadline_passed();
  void end_attempt();
  void finish();
  template <class Message>
  void add_reply_headers(Message& m, bool name_worker) const;

  RouterContext& ctx_;
  std::shared_ptr<Session> session_;
  const ProxyRequest req_;
  const bool feedback_;  // the policy keeps cache state (reads the worker's usage)
  kvroute::Attempts attempts_;
  net::steady_timer deadline_;
  net::steady_timer backoff_;
  bool finished_ = false;

  // The current attempt.
  kvroute::Selection sel_;
  kvroute::CircuitBreaker::Permit permit_;
  kvroute::LoadGuard guard_;
  std::shared_ptr<WorkerInfo> worker_;
  std::shared_ptr<Exchange> exchange_;
  Mode mode_ = Mode::kCollect;
  int status_ = 0;
  std::vector<std::pair<std::string, std::string>> up_headers_;
  std::string body_;
  bool started_ = false;  // the first byte left for the client
  bool writing_ = false;  // a chunk is on its way to the client
  bool end_pending_ = false;
  std::string pending_last_;
  SseTail tail_;

  // The last failure, replied when no attempt is left.
  int failed_status_ = 0;
  std::string failed_what_;
  std::string failed_body_;
  std::vector<std::pair<std::string, std::string>> failed_headers_;
};

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_PROXY_CALL_HPP_
