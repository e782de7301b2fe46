// The listening socket and its accept loop (see http_server.hpp).
#include "http_router/http_server.hpp"

#include "absl/strings/str_cat.h"
#include "http_router/log.hpp"

namespace kvexample {

HttpServer::HttpServer(IoThreads& io, Handler& handler, ServerLimits limits)
    : io_(io), handler_(handler), limits_(limits), acceptor_(io.context(0)), pause_(io.context(0)) {
  for (unsigned i = 0; i < io.size(); ++i) {
    sessions_.push_back(std::make_unique<SessionList>(io.context(i)));
  }
}

absl::StatusOr<std::uint16_t> HttpServer::listen(const std::string& host, int port) {
  error_code ec;
  const net::ip::address addr = net::ip::make_address(host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--host: '", host, "' is not an address"));
  const tcp::endpoint ep(addr, static_cast<std::uint16_t>(port));
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", host, ":", port, ": ", ec.message()));
  }
  const std::uint16_t bound = acceptor_.local_endpoint().port();
  net::post(io_.context(0), [this] { accept(); });
  for (unsigned i = 0; i < io_.size(); ++i) {
    net::post(io_.context(i), [list = sessions_[i].get()] { list->start_sweeping(); });
  }
  return bound;
}

void HttpServer::accept() {
  if (!acceptor_.is_open()) return;
  const unsigned lane = io_.next_lane();
  acceptor_.async_accept(io_.context(lane), [this, lane](error_code ec, tcp::socket socket) {
    on_accept(lane, ec, std::move(socket));
  });
}

void HttpServer::on_accept(unsigned lane, error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {
    // EMFILE/ENFILE and the like: pause rather than spin on the error.
    const auto now = std::chrono::steady_clock::now();
    if (now - last_fd_warning_ > std::chrono::seconds(1)) {
      last_fd_warning_ = now;
      log_warning("accept failed ({}); pausing new connections for 100 ms", ec.message());
    }
    pause_.expires_after(std::chrono::milliseconds(100));
    pause_.async_wait([this](error_code) { accept(); });
    return;
  }
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  SessionList& list = *sessions_[lane];
  net::post(io_.context(lane), [this, lane, &list, s = std::move(socket)]() mutable {
    std::make_shared<Session>(std::move(s), lane, handler_, limits_, counters_, list)->start();
  });
  accept();
}

void HttpServer::stop_accepting() {
  net::post(io_.context(0), [this] {
    error_code ignored;
    acceptor_.close(ignored);
    pause_.cancel();
  });
}

void HttpServer::drain() {
  for (unsigned i = 0; i < io_.size(); ++i) {
    net::post(io_.context(i), [list = sessions_[i].get()] { list->drain_all(); });
  }
}

}  // namespace kvexample
