// One client request forwarded to the workers (see proxy_call.hpp).
#include "http_router/proxy_call.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>

#include "http_router/cache_feedback.hpp"
#include "http_router/fast_body.hpp"
#include "http_router/headers.hpp"
#include "http_router/log.hpp"

namespace kvexample {
namespace {

bool keeps_cache_state(kvroute::AnyPolicy& p) {
  return p.get<kvroute::CacheAware>() != nullptr || p.get<kvroute::LeastPrefill>() != nullptr;
}

}  // namespace

ProxyCall::ProxyCall(RouterContext& ctx, std::shared_ptr<Session> session, ProxyRequest req)
    : ctx_(ctx),
      session_(std::move(session)),
      req_(std::move(req)),
      feedback_(keeps_cache_state(ctx.fleet.router().policy())),
      attempts_(ctx.retry),
      deadline_(session_->executor()),
      backoff_(session_->executor()) {}

void ProxyCall::start() {
  session_->on_client_gone([self = shared_from_this()] { self->client_gone(); });
  deadline_.expires_after(std::chrono::seconds(ctx_.flags.request_timeout_secs));
  deadline_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec) self->deadline_passed();
  });
  attempt();
}

kvroute::Selection ProxyCall::any_available(std::span<const kvroute::WorkerId> avoid) const {
  static std::atomic<unsigned> turn{0};
  auto snap = ctx_.fleet.router().workers().snapshot();
  std::vector<const kvroute::Worker*> ok;
  for (const kvroute::Worker& w : snap->workers()) {
    if (w.available() && std::find(avoid.begin(), avoid.end(), w.id) == avoid.end()) {
      ok.push_back(&w);
    }
  }
  if (ok.empty()) return {};
  const kvroute::Worker* w = ok[turn.fetch_add(1, std::memory_order_relaxed) % ok.size()];
  return kvroute::Selection{snap, kvroute::Decision::pick(w, kvroute::Branch::kRoundRobin)};
}

// Chooses this attempt's worker and takes its breaker permit; false if none.
bool ProxyCall::select() {
  auto& router = ctx_.fleet.router();
  std::vector<kvroute::Header> headers;  // x-smg-routing-key and the like
  for (const auto& f : *req_.upstream) headers.push_back({f.name_string(), f.value()});
  const kvroute::RequestView view{.text = req_.text, .headers = headers, .model = req_.model};
  std::vector<kvroute::WorkerId> avoid(attempts_.excluded().begin(), attempts_.excluded().end());
  for (int tries = 0; tries < 8; ++tries) {
    kvroute::Selection s;
    if (req_.route_by_policy) {
      const auto t0 = std::chrono::steady_clock::now();
      s = router.select(view, avoid);
      if (!s && !avoid.empty()) s = router.select(view);  // every worker failed it once
      ctx_.stats.routing.record(s.decision, std::chrono::steady_clock::now() - t0);
    } else {
      s = any_available(avoid);
      if (!s && !avoid.empty()) s = any_available({});
    }
    if (!s) return false;
    const kvroute::CircuitBreaker::Permit permit = ctx_.fleet.breakers().acquire(s.worker().id);
    std::shared_ptr<WorkerInfo> w = permit ? ctx_.fleet.find(s.worker().id) : nullptr;
    if (w == nullptr) {  // half-open and saturated, or removed meanwhile
      if (permit) ctx_.fleet.breakers().record(s.worker().id, permit, true);
      avoid.push_back(s.worker().id);
      continue;
    }
    sel_ = std::move(s);
    permit_ = permit;
    worker_ = std::move(w);
    return true;
  }
  return false;
}

void ProxyCall::attempt() {
  if (finished_) return;
  if (!select()) {
    if (attempts_.failures() > 0) return reply_failure();
    finish();
    Response res =
        json_error(http::status::service_unavailable, "no available worker", "service_unavailable");
    add_reply_headers(res, false);
    return session_->reply(std::move(res));
  }
  auto& policy = ctx_.fleet.router().policy();
  const std::string_view routing_key = (*req_.upstream)[kvroute::kRoutingKeyHeader];
  guard_ = ctx_.fleet.router().dispatch(
      sel_, {.tokens = predicted_tokens(policy, req_.text, req_.model, sel_),
             .routing_key = routing_key});
  mode_ = Mode::kCollect;
  status_ = 0;
  up_headers_.clear();
  body_.clear();
  log_debug("request {} -> {}", req_.request_id, worker_->address.url);
  exchange_ = std::make_shared<Exchange>(*ctx_.pools[session_->lane()], worker_->address,
                                         req_.upstream, shared_from_this());
  exchange_->start();
}

void ProxyCall::on_head(const http::response_header<>& head) {
  if (finished_) return;
  status_ = static_cast<int>(head.result_int());
  for (const auto& f : head) {
    if (forward_to_client(f.name_string())) up_headers_.emplace_back(f.name_string(), f.value());
  }
  mode_ = status_ >= 400                 ? Mode::kCollectError
          : req_.stream && status_ < 300 ? Mode::kRelay
                                         : Mode::kCollect;
  exchange_->read_more();
}

void ProxyCall::on_data(std::string_view data) {
  if (finished_) return;
  if (mode_ == Mode::kRelay) return relay(data);
  if (body_.size() + data.size() > ctx_.flags.max_payload_size) {
    // Too large on any worker: not a retry, and not the worker's failure.
    log_warning("request {}: the reply from {} is larger than --max-payload-size", req_.request_id,
                worker_->address.url);
    ctx_.fleet.breakers().record(worker_->id, permit_, true);
    end_attempt();
    finish();
    return session_->reply(json_error(http::status::bad_gateway,
                                      "the worker's reply is larger than --max-payload-size",
                                      "upstream_error"));
  }
  body_.append(data);
  exchange_->read_more();
}

void ProxyCall::on_end() {
  if (finished_) return;
  ctx_.fleet.breakers().record(worker_->id, permit_, status_ < 500);
  ctx_.fleet.note_breaker(*worker_);
  if (mode_ == Mode::kRelay) return end_relay();
  if (mode_ == Mode::kCollectError) return failed(status_, "");
  reply_collected();
}

void ProxyCall::on_fail(error_code ec, bool /*started*/) {
  if (finished_) return;
  ctx_.fleet.breakers().record(worker_->id, permit_, false);
  ctx_.fleet.note_breaker(*worker_);
  if (mode_ == Mode::kRelay && started_) {
    worker_->failures.fetch_add(1, std::memory_order_relaxed);
    log_warning("request {}: the stream from {} broke off ({}); ending it with an error event",
                req_.request_id, worker_->address.url, ec.message());
    return truncate("the worker's stream broke off", "upstream_error", 502);
  }
  failed(0, ec.message());
}

// A worker failed this attempt: retry elsewhere, or reply the failure.
void ProxyCall::failed(int status, std::string what) {
  if (status == 0 || status >= 500) worker_->failures.fetch_add(1, std::memory_order_relaxed);
  const std::string url = worker_->address.url;
  failed_status_ = status;
  failed_what_ = status == 0 ? "a worker failed: " + what : fmt::format("answered {}", status);
  failed_body_ = std::move(body_);
  failed_headers_ = std::move(up_headers_);
  const kvroute::WorkerId id = worker_->id;
  end_attempt();
  std::chrono::nanoseconds delay{};
  if (!attempts_.failed(id, status, &delay)) {
    if (kvroute::retryable_status(status) && ctx_.retry.max_attempts > 1) {
      ctx_.stats.routing.record_retries_exhausted();
      log_warning("request {}: no attempt left after {} {}", req_.request_id, url, failed_what_);
    }
    return reply_failure();
  }
  ctx_.stats.routing.record_retry();
  log_info("request {}: {} {}; retrying elsewhere in {} ms", req_.request_id, url, failed_what_,
           std::chrono::duration_cast<std::chrono::milliseconds>(delay).count());
  backoff_.expires_after(delay);
  backoff_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec) self->attempt();
  });
}

void ProxyCall::reply_failure() {
  finish();
  Response res;
  if (failed_status_ == 0) {
    res = json_error(http::status::bad_gateway, failed_what_, "upstream_error");
  } else {  // the worker's own error reply, status and all
    res.result(static_cast<unsigned>(failed_status_));
    for (const auto& [name, value] : failed_headers_) res.insert(name, value);
    res.body() = std::move(failed_body_);
    res.prepare_payload();
  }
  add_reply_headers(res, false);
  session_->reply(std::move(res));
}

void ProxyCall::reply_collected() {
  if (feedback_) {
    FastReport got;
    if (std::optional<FastReport> fast = fast_reply_report(body_)) {
      got = *fast;
    } else {  // the full path
      const nlohmann::json j = nlohmann::json::parse(body_, nullptr, false);
      got = {reported_cache(j), malformed_report(j)};
    }
    if (got.report) {
      feed_back(*got.report);
    } else if (got.malformed) {
      ctx_.stats.malformed_responses.inc();
    }
  }
  Response res;
  res.result(static_cast<unsigned>(status_));
  for (const auto& [name, value] : up_headers_) res.insert(name, value);
  add_reply_headers(res, true);
  res.body() = std::move(body_);
  res.prepare_payload();
  end_attempt();
  finish();
  session_->reply(std::move(res));
}

void ProxyCall::relay(std::string_view data) {
  tail_.append(data);
  writing_ = true;
  auto done = [self = shared_from_this()](bool ok) {
    self->writing_ = false;
    if (self->end_pending_) {
      self->end_pending_ = false;
      return self->session_->end_stream(std::move(self->pending_last_));
    }
    if (self->finished_) return;
    if (!ok) return self->client_gone();
    self->exchange_->read_more();
  };
  if (started_) return session_->write_chunk(std::string(data), std::move(done));
  started_ = true;
  guard_.release_tokens();  // the first bytes: prefill is over
  StreamHead head;
  head.result(static_cast<unsigned>(status_));
  for (const auto& [name, value] : up_headers_) head.insert(name, value);
  add_reply_headers(head, true);
  session_->begin_stream(std::move(head), std::string(data), std::move(done));
}

void ProxyCall::end_relay() {
  if (feedback_) {
    bool malformed = false;
    if (auto r = tail_.report(&malformed)) feed_back(*r);
    if (malformed) ctx_.stats.malformed_responses.inc();
  }
  end_attempt();
  finish();
  if (started_) return session_->end_stream("");
  // The worker sent an empty stream: still a whole (empty) reply.
  started_ = true;
  StreamHead head;
  head.result(static_cast<unsigned>(status_));
  for (const auto& [name, value] : up_headers_) head.insert(name, value);
  add_reply_headers(head, true);
  session_->begin_stream(std::move(head), "", [s = session_](bool ok) {
    if (ok) s->end_stream("");
  });
}

void ProxyCall::truncate(std::string_view message, std::string_view type, int code) {
  ctx_.stats.truncated_streams.inc();
  end_attempt();
  finish();
  end_stream_after_write(sse_error_event(message, type, code));
}

void ProxyCall::end_stream_after_write(std::string last) {
  if (!writing_) return session_->end_stream(std::move(last));
  end_pending_ = true;
  pending_last_ = std::move(last);
}

void ProxyCall::feed_back(const CacheReport& r) {
  kvexample::feed_back(ctx_.fleet.router().policy(), req_.text, req_.model, sel_, r, &guard_);
}

void ProxyCall::client_gone() {
  if (finished_) return;
  ctx_.stats.client_disconnects.inc();
  log_debug("request {}: the client hung up; cancelling it", req_.request_id);
  // Not the worker's failure: a half-open probe is released as a success
  // (the worker was answering), any other permit records nothing.
  if (exchange_ && permit_.probe) ctx_.fleet.breakers().record(worker_->id, permit_, true);
  end_attempt();
  finish();
  session_->abort();
}

void ProxyCall::deadline_passed() {
  if (finished_) return;
  ctx_.stats.request_timeouts.inc();
  log_warning("request {} ran over --request-timeout-secs ({} s)", req_.request_id,
              ctx_.flags.request_timeout_secs);
  if (exchange_ && permit_.probe) ctx_.fleet.breakers().record(worker_->id, permit_, false);
  if (started_) return truncate("the request timed out", "timeout", 504);
  end_attempt();
  finish();
  Response res =
      json_error(http::status::gateway_timeout,
                 fmt::format("the request took longer than {} s (--request-timeout-secs)",
                             ctx_.flags.request_timeout_secs),
                 "timeout");
  add_reply_headers(res, false);
  session_->reply(std::move(res));
}

void ProxyCall::end_attempt() {
  if (exchange_ != nullptr) {
    exchange_->cancel();
    exchange_.reset();
  }
  guard_.release();
}

void ProxyCall::finish() {
  finished_ = true;
  deadline_.cancel();
  backoff_.cancel();
}

template <class Message>
void ProxyCall::add_reply_headers(Message& m, bool name_worker) const {
  m.set("x-request-id", req_.request_id);
  if (name_worker && worker_ != nullptr) m.set("x-kvroute-worker", worker_->address.url);
}

}  // namespace kvexample
