// -----------------------------------------------------------------------------
// File: http_router/e2e/e2e_support.hpp
// -----------------------------------------------------------------------------
//
// What the end-to-end tests of kvroute_http_router share: the program run as
// real processes (mock workers and routers on 127.0.0.1, free ports), an
// HTTP client with timeouts (Beast on a private io_context), raw sockets for
// what a well-behaved client would never send, and readers for /metrics and
// /proc. Every process a test starts, it stops; every wait is bounded.
//
// Thread safety: one test thread; Process and HttpClient are not shared.

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_E2E_E2E_SUPPORT_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_E2E_E2E_SUPPORT_HPP_

#include <sys/types.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "http_router/net.hpp"

namespace kve2e {

namespace net = kvexample::net;
namespace beast = kvexample::beast;
namespace http = kvexample::http;
using namespace std::chrono_literals;

// The program under test ($KVROUTE_HTTP_ROUTER).
std::string router_binary();

// A child process whose stdout announces "... listening on HOST:PORT"
// (a "metrics ..." line first when it has a metrics port). Its stderr goes
// to a file the test can read.
class Process {
 public:
  explicit Process(std::vector<std::string> args);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_ > 0 ? metrics_port_ : port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  // Everything written to stderr so far.
  std::string log() const;
  void signal(int sig);
  // The exit status once it exits within `timeout` (WEXITSTATUS, or 128 +
  // signal), else nullopt.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
  // SIGTERM, then SIGKILL after 10 s; returns the exit status.
  int stop();

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  std::string log_path_;
};

std::unique_ptr<Process> mock(std::vector<std::string> extra = {});
std::unique_ptr<Process> router(const std::vector<std::unique_ptr<Process>>& workers,
                                std::vector<std::string> extra = {});

struct Reply {
  int status = 0;  // 0: no reply (connection failed, timed out)
  std::string body;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string error;
  std::string header(const std::string& name) const;
};

using Headers = std::vector<std::pair<std::string, std::string>>;

// An HTTP/1.1 client on one keep-alive connection (reconnecting when the
// server closed it).
class HttpClient {
 public:
  explicit HttpClient(int port) : port_(port), stream_(ioc_) {}

  Reply get(const std::string& target, Headers h = {}, std::chrono::milliseconds t = 10s) {
    return request(http::verb::get, target, "", std::move(h), t);
  }
  Reply post(const std::string& target, const std::string& body, Headers h = {},
             std::chrono::milliseconds t = 10s) {
    return request(http::verb::post, target, body, std::move(h), t);
  }
  Reply request(http::verb method, const std::string& target, const std::string& body, Headers h,
                std::chrono::milliseconds timeout);

  // A streamed POST: sends it and reads the head and at least one piece of
  // body (or the whole reply when it is short).
  Reply start_stream(const std::string& target, const std::string& body,
                     std::chrono::milliseconds timeout = 10s);
  // More of the streamed body (empty at its end or on timeout); `*done` set
  // when the reply ended.
  std::string read_more(std::chrono::milliseconds timeout, bool* done);
  void close();

 private:
  bool connect(std::chrono::milliseconds timeout);
  template <class Start>
  kvexample::error_code run(Start&& start, std::chrono::milliseconds timeout);

  int port_;
  net::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  bool connected_ = false;
  std::optional<http::response_parser<http::buffer_body>> stream_parser_;
};

// Raw sockets (blocking, with timeouts) for bytes no client library sends.
int raw_connect(int port, std::chrono::milliseconds timeout = 2s);
bool raw_send(int fd, const std::string& data);
// Reads until the peer closes or `timeout` passes.
std::string raw_read_all(int fd, std::chrono::milliseconds timeout);

// The value of the series `series` (name{labels} exactly as rendered), or
// nullopt when /metrics text has no such line.
std::optional<double> metric(const std::string& text, const std::string& series);
// How many lines of `text` start with `prefix`.
int count_lines(const std::string& text, const std::string& prefix);

// Resident set size of a process, in KB (from /proc).
long rss_kb(pid_t pid);
// Raises this process's open-file limit to its hard limit; returns it.
long raise_open_file_limit();

// GET /metrics of a router (on its metrics port), and GET /mock/stats of a
// mock worker.
std::string metrics_of(const Process& p);
std::string mock_stats_text(const Process& p);

// Polls f() every 20 ms until it holds or `timeout` passes; its last value.
template <class F>
bool eventually(F f, std::chrono::milliseconds timeout = 5s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return f();
}

// A chat body in the OpenAI shape.
std::string chat_body(const std::string& model, const std::string& content, bool stream = false);

}  // namespace kve2e

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_E2E_E2E_SUPPORT_HPP_
