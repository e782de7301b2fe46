// Active health checks (see health_checker.hpp).
#include "http_router/health_checker.hpp"

#include <fmt/core.h>

#include <chrono>
#include <functional>
#include <string>

#include "http_router/log.hpp"

namespace kvexample {
namespace {

// One check: connect, GET, read the status, all within one deadline.
struct Probe : std::enable_shared_from_this<Probe> {
  using Done = std::function<void(bool ok, std::string why)>;

  Probe(net::io_context& ctx, Done d) : stream(ctx), resolver(ctx), done(std::move(d)) {}

  void run(const WorkerAddress& a, const std::string& path, std::chrono::seconds timeout) {
    req = {http::verb::get, path, 11};
    req.set(http::field::host, a.host_header);
    req.keep_alive(false);
    stream.expires_after(timeout);
    resolver.async_resolve(
        a.host, std::to_string(a.port),
        [self = shared_from_this()](error_code ec, const tcp::resolver::results_type& r) {
          if (ec) return self->finish(false, ec.message());
          self->stream.async_connect(r, [self](error_code cec, const tcp::endpoint&) {
            if (cec) return self->finish(false, cec.message());
            self->send();
          });
        });
  }
  void send() {
    http::async_write(stream, req, [self = shared_from_this()](error_code ec, std::size_t) {
      if (ec) return self->finish(false, ec.message());
      http::async_read(self->stream, self->buffer, self->res, [self](error_code rec, std::size_t) {
        if (rec) return self->finish(false, rec.message());
        const unsigned s = self->res.result_int();
        self->finish(s >= 200 && s < 300, fmt::format("HTTP {}", s));
      });
    });
  }
  void finish(bool ok, std::string why) {
    error_code ignored;
    stream.socket().close(ignored);
    done(ok, std::move(why));
  }

  beast::tcp_stream stream;
  tcp::resolver resolver;
  beast::flat_buffer buffer;
  http::request<http::empty_body> req;
  http::response<http::string_body> res;
  Done done;
};

}  // namespace

void HealthChecker::start() {
  net::post(lane_, [this] {
    stopped_ = false;
    tick();
  });
}

void HealthChecker::stop() {
  net::post(lane_, [this] {
    stopped_ = true;
    timer_.cancel();
  });
}

void HealthChecker::tick() {
  if (stopped_) return;
  for (const auto& w : fleet_.list()) {
    if (!w->check_running) check(w);
  }
  timer_.expires_after(std::chrono::seconds(flags_.health_check_interval_secs));
  timer_.async_wait([this](error_code ec) {
    if (!ec) tick();
  });
}

void HealthChecker::check(const std::shared_ptr<WorkerInfo>& w) {
  w->check_running = true;
  auto probe = std::make_shared<Probe>(lane_, [this, w](bool ok, std::string why) {
    w->check_running = false;
    result(w, ok, why);
  });
  probe->run(w->address, flags_.health_check_endpoint,
             std::chrono::seconds(flags_.health_check_timeout_secs));
}

void HealthChecker::result(const std::shared_ptr<WorkerInfo>& w, bool ok, const std::string& why) {
  if (stopped_ || fleet_.find(w->id) == nullptr) return;  // stopping, or removed meanwhile
  if (ok) {
    w->failed_checks = 0;
    if (++w->passed_checks >= flags_.health_success_threshold) {
      fleet_.set_healthy(*w, true, fmt::format("{} passed checks", w->passed_checks));
    }
    return;
  }
  w->passed_checks = 0;
  ++w->failed_checks;
  log_debug("health check of {} failed: {}", w->address.url, why);
  if (w->failed_checks >= flags_.health_failure_threshold) {
    fleet_.set_healthy(*w, false, fmt::format("{} failed checks, last: {}", w->failed_checks, why));
  }
}

}  // namespace kvexample
