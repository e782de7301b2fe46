// -----------------------------------------------------------------------------
// File: http_router/io_threads.hpp
// -----------------------------------------------------------------------------
//
// The program's I/O threads: one io_context per thread ("lane"), each run by
// exactly one thread. A client connection and everything its requests do
// (the upstream connections, timers, retries) live on one lane, so no
// connection's state is ever touched by two threads and no strand is
// needed; what lanes share (the router, breakers, metrics) is thread-safe.
// New connections are dealt to the lanes in turn.
//
// Thread safety: context(), size() and next_lane() from any thread; start,
// stop and join from the owning thread.
//
// Example:
//
//   IoThreads io(2);
//   net::post(io.context(io.next_lane()), [] { /* runs on that lane */ });
//   io.start();
//   ...
//   io.stop();
//   io.join();

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_IO_THREADS_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_IO_THREADS_HPP_

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "http_router/net.hpp"

namespace kvexample {

class IoThreads {
 public:
  // `n` lanes (at least 1).
  explicit IoThreads(unsigned n);
  ~IoThreads();
  IoThreads(const IoThreads&) = delete;
  IoThreads& operator=(const IoThreads&) = delete;

  unsigned size() const noexcept { return static_cast<unsigned>(lanes_.size()); }
  net::io_context& context(unsigned lane) noexcept { return *lanes_[lane]; }
  // The lane for the next new connection (round robin).
  unsigned next_lane() noexcept;

  // Runs every lane on a thread of its own.
  void start();
  // Stops every lane (pending handlers are abandoned).
  void stop();
  void join();

 private:
  using Guard = net::executor_work_guard<net::io_context::executor_type>;
  std::vector<std::unique_ptr<net::io_context>> lanes_;
  std::vector<Guard> guards_;
  std::vector<std::thread> threads_;
  std::atomic<unsigned> next_{0};
};

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_IO_THREADS_HPP_
