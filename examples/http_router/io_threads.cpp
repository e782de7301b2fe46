// One io_context per I/O thread (see io_threads.hpp).
#include "http_router/io_threads.hpp"

#include <algorithm>

#include "http_router/log.hpp"

namespace kvexample {

IoThreads::IoThreads(unsigned n) {
  n = std::max(1u, n);
  for (unsigned i = 0; i < n; ++i) {
    lanes_.push_back(std::make_unique<net::io_context>(1));
    guards_.emplace_back(net::make_work_guard(*lanes_.back()));
  }
}

IoThreads::~IoThreads() {
  stop();
  join();
}

unsigned IoThreads::next_lane() noexcept {
  return next_.fetch_add(1, std::memory_order_relaxed) % size();
}

void IoThreads::start() {
  for (auto& lane : lanes_) {
    threads_.emplace_back([ctx = lane.get()] {
      for (;;) {
        try {
          ctx->run();
          return;
        } catch (const std::exception& e) {
          // A handler let an exception out: log it, keep the lane running.
          log_error("uncaught exception on an I/O thread: {}", e.what());
        } catch (...) {
          log_error("uncaught exception on an I/O thread");
        }
      }
    });
  }
}

void IoThreads::stop() {
  for (auto& g : guards_) g.reset();
  for (auto& lane : lanes_) lane->stop();
}

void IoThreads::join() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

}  // namespace kvexample
