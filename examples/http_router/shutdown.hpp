// -----------------------------------------------------------------------------
// File: http_router/shutdown.hpp
// -----------------------------------------------------------------------------
//
// Graceful shutdown on SIGTERM (or SIGINT): stop accepting connections,
// close every idle connection (and each busy one once its reply is done),
// let the requests in flight finish for up to the grace period, then report
// done; the program then exits 0. A second signal ends the grace at once.
//
// Thread safety: arm() before the lanes run; wait() from the main thread.
//
// Example:
//
//   Shutdown shutdown(io, {&server}, std::chrono::seconds(30), [] { ... });
//   shutdown.arm();
//   io.start();
//   shutdown.wait();   // returns once drained (or the grace ran out)

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_SHUTDOWN_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_SHUTDOWN_HPP_

#include <chrono>
#include <functional>
#include <future>
#include <vector>

#include "http_router/http_server.hpp"
#include "http_router/io_threads.hpp"

namespace kvexample {

class Shutdown {
 public:
  // `first` runs on lane 0 when the signal arrives, before the drain.
  Shutdown(IoThreads& io, std::vector<HttpServer*> servers, std::chrono::seconds grace,
           std::function<void()> first);

  void arm();
  void wait() { done_.get_future().wait(); }

 private:
  void begin(int signal);
  void poll();
  std::int64_t in_flight() const;

  std::vector<HttpServer*> servers_;
  const std::chrono::seconds grace_;
  std::function<void()> first_;
  net::signal_set signals_;
  net::steady_timer poll_;
  std::chrono::steady_clock::time_point deadline_{};
  bool begun_ = false;
  bool finished_ = false;
  std::promise<void> done_;
};

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_SHUTDOWN_HPP_
