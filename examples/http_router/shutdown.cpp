// Graceful shutdown on SIGTERM (see shutdown.hpp).
#include "http_router/shutdown.hpp"

#include <csignal>

#include "http_router/log.hpp"

namespace kvexample {

Shutdown::Shutdown(IoThreads& io, std::vector<HttpServer*> servers, std::chrono::seconds grace,
                   std::function<void()> first)
    : servers_(std::move(servers)),
      grace_(grace),
      first_(std::move(first)),
      signals_(io.context(0), SIGTERM, SIGINT),
      poll_(io.context(0)) {}

void Shutdown::arm() {
  signals_.async_wait([this](error_code ec, int signal) {
    if (!ec) begin(signal);
  });
}

std::int64_t Shutdown::in_flight() const {
  std::int64_t n = 0;
  for (const HttpServer* s : servers_) n += s->counters().requests.load();
  return n;
}

void Shutdown::begin(int signal) {
  if (finished_) return;
  if (begun_) {  // a second signal: no more grace
    log_warning("second signal: exiting with {} requests in flight", in_flight());
    finished_ = true;
    done_.set_value();
    return;
  }
  begun_ = true;
  arm();  // for a second signal
  log_info("signal {}: shutting down; {} requests in flight, up to {} s to finish", signal,
           in_flight(), grace_.count());
  if (first_) first_();
  for (HttpServer* s : servers_) {
    s->stop_accepting();
    s->drain();
  }
  deadline_ = std::chrono::steady_clock::now() + grace_;
  poll();
}

void Shutdown::poll() {
  if (finished_) return;
  const std::int64_t n = in_flight();
  if (n == 0 || std::chrono::steady_clock::now() >= deadline_) {
    if (n > 0) log_warning("grace period over: exiting with {} requests in flight", n);
    log_info("shut down");
    finished_ = true;
    done_.set_value();
    return;
  }
  poll_.expires_after(std::chrono::milliseconds(20));
  poll_.async_wait([this](error_code ec) {
    if (!ec) poll();
  });
}

}  // namespace kvexample
