// -----------------------------------------------------------------------------
// File: http_router/http_server.hpp
// -----------------------------------------------------------------------------
//
// An HTTP/1.1 server on the I/O lanes: one listening socket with the
// system's full listen backlog (SOMAXCONN, so a burst of thousands of
// connects is queued, not reset), an accept loop on lane 0 that deals each
// connection to the next lane, TCP_NODELAY on every connection (a reply is
// one write; Nagle would hold its last segment for the client's delayed
// ACK), and sessions (session.hpp) that hand whole requests to a Handler.
// Out of file descriptors, the loop pauses and retries instead of spinning.
//
// Thread safety: listen() before IoThreads::start(); stop_accepting() and
// drain() from any thread (they post to the lanes); counters() anywhere.
//
// Example:
//
//   HttpServer server(io, handler, limits);
//   absl::StatusOr<std::uint16_t> port = server.listen("127.0.0.1", 0);
//   io.start();
//   ...
//   server.stop_accepting();
//   server.drain();

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_HTTP_SERVER_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_HTTP_SERVER_HPP_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "http_router/io_threads.hpp"
#include "http_router/session.hpp"

namespace kvexample {

class HttpServer {
 public:
  HttpServer(IoThreads& io, Handler& handler, ServerLimits limits);
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts accepting (once the lanes run); returns the port.
  absl::StatusOr<std::uint16_t> listen(const std::string& host, int port);
  // Closes the listening socket; connections already accepted go on.
  void stop_accepting();
  // Every connection closes as soon as it is idle.
  void drain();
  const ServerCounters& counters() const noexcept { return counters_; }

 private:
  void accept();
  void on_accept(unsigned lane, error_code ec, tcp::socket socket);

  IoThreads& io_;
  Handler& handler_;
  const ServerLimits limits_;
  ServerCounters counters_;
  std::vector<std::unique_ptr<SessionList>> sessions_;  // one per lane
  tcp::acceptor acceptor_;
  net::steady_timer pause_;
  std::chrono::steady_clock::time_point last_fd_warning_{};
};

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_HTTP_SERVER_HPP_
