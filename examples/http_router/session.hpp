// -----------------------------------------------------------------------------
// File: http_router/session.hpp
// -----------------------------------------------------------------------------
//
// One client connection: HTTP/1.1 with keep-alive, on Boost.Beast, reading
// each request in three timed phases so that a slow or silent client costs
// a socket and a few hundred bytes, never a thread:
//
//   idle    waiting for a request's first byte   --keep-alive-timeout-secs
//   head    the rest of the request head         --header-timeout-secs (408)
//   body    the body                             --body-timeout-secs (408)
//
// and enforcing the limits before a request reaches the handler: head size
// (431), header count (431), a header value with CR, LF or NUL (400, never
// forwarded), body size (413, from Content-Length before reading, or as a
// chunked body grows). A refused request gets its JSON error and the
// connection closes (after a bounded lingering read, so the client sees the
// reply rather than a reset).
//
// While the handler works on a request, the session watches the socket for
// the client hanging up (a readable socket with nothing to read) and tells
// the handler (on_client_gone), which can then cancel its upstream work.
// The watch starts at the lane's next sweep (within kSweep), so a request
// answered sooner never pays for it (arming it costs a system call).
//
// Deadlines are not timers: each session keeps one deadline, and a sweep of
// the lane's sessions every kSweep enforces them (a read past its deadline
// is cancelled, so that a 408 can still be written; a write past its
// deadline closes the connection). A request thus arms no timer, and the
// deadlines are kept to within kSweep.
//
// The handler replies exactly once per request: reply() with a whole
// response, or begin_stream(), write_chunk()..., end_stream() for a chunked
// one, or abort() to drop the connection. Every reply write must be taken
// by the client within --write-timeout-secs.
//
// Thread safety: a session lives on one lane (io_threads.hpp); every call
// must come from that lane's thread. Callbacks run on it too.

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_SESSION_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_SESSION_HPP_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "http_router/net.hpp"

namespace kvexample {

struct ServerLimits {
  std::uint64_t max_body = std::uint64_t{512} << 20;
  std::uint32_t max_header_bytes = 16384;
  std::uint32_t max_header_count = 100;
  std::chrono::seconds header_timeout{10};
  std::chrono::seconds body_timeout{60};
  std::chrono::seconds keep_alive{60};
  std::chrono::seconds write_timeout{60};
};

struct ServerCounters {
  std::atomic<std::int64_t> connections{0};  // open client connections
  std::atomic<std::int64_t> requests{0};     // requests being handled
  std::atomic<std::uint64_t> accepted{0};    // connections ever accepted
};

class Session;

// What a server asks of the program behind it.
class Handler {
 public:
  virtual ~Handler() = default;
  // A whole request, on the session's lane. Must lead to exactly one reply.
  virtual void handle(const std::shared_ptr<Session>& session, Request req) = 0;
  // A request the session refused before handing it over (for metrics):
  // payload_too_large, header_too_large, too_many_headers, bad_header_value,
  // header_timeout, body_timeout, bad_request.
  virtual void rejected(std::string_view /*reason*/) noexcept {}
};

// The sessions of one lane: swept every kSweep for their deadlines, and
// reached by shutdown.
class SessionList {
 public:
  static constexpr std::chrono::milliseconds kSweep{100};
  // Deadlines one sweep enforces at most: thousands of slow clients timing
  // out at once are refused over several sweeps, so that their refusals
  // never hold up the lane's other connections.
  static constexpr int kExpiriesPerSweep = 64;

  explicit SessionList(net::io_context& lane) : timer_(lane) {}
  void add(Session* s) { sessions_.insert(s); }
  void remove(Session* s) { sessions_.erase(s); }
  // Starts the sweep (on the lane).
  void start_sweeping();
  // Every session closes once idle (now, when it already is).
  void drain_all();
  bool draining() const noexcept { return draining_; }

 private:
  void sweep();

  std::unordered_set<Session*> sessions_;
  net::steady_timer timer_;
  bool draining_ = false;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  using Done = std::function<void(bool ok)>;

  Session(tcp::socket socket, unsigned lane, Handler& handler, const ServerLimits& limits,
          ServerCounters& counters, SessionList& list);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void start();
  unsigned lane() const noexcept { return lane_; }
  net::any_io_executor executor() { return socket_.get_executor(); }
  // The lane's sweep: enforces the deadline (when `*expiries` allows one
  // more, counting it down), starts the client watch.
  void tick(std::chrono::steady_clock::time_point now, int* expiries);

  // A whole response; the session then reads the next request (or closes).
  void reply(Response res);
  // A chunked response: its head with the first chunk (which may be empty),
  // then chunks, then the end. `done(false)`: the client is gone.
  void begin_stream(StreamHead head, std::string first, Done done);
  void write_chunk(std::string data, Done done);
  void end_stream(std::string last);
  // Drops the connection now (a reply that cannot be completed).
  void abort();

  // Called once, on this lane, if the client hangs up before the reply ends.
  void on_client_gone(std::function<void()> f) { on_gone_ = std::move(f); }
  bool client_gone() const noexcept { return gone_; }

  // Shutdown: close when idle, and after the current reply.
  void drain();

 private:
  enum class State : std::uint8_t { kIdle, kHead, kBody, kHandling, kClosed };

  void await_request();
  void on_first_bytes(error_code ec, std::size_t n);
  void read_head();
  void on_head(error_code ec);
  struct Refusal {
    http::status status;
    std::string message;
    std::string_view reason;
  };
  std::optional<Refusal> check_head();
  void read_body();
  void on_body(error_code ec);
  void dispatch();
  void reject(http::status status, std::string_view message, std::string_view reason);
  void write_reply(bool linger);
  void after_reply(error_code ec, bool keep_alive, bool linger);
  void write_stream_piece(Done done);
  void finish_request();

  void start_watch();
  void on_watch(error_code ec, std::uint64_t generation);
  void stop_watch();
  void client_hung_up();

  void set_deadline(std::chrono::steady_clock::duration d, bool for_read);
  void clear_deadline() { deadline_ = std::chrono::steady_clock::time_point::max(); }
  bool read_timed_out(error_code ec);

  void close();
  void linger_close();
  void on_linger(error_code ec, std::size_t n);

  tcp::socket socket_;
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  bool deadline_for_read_ = true;
  bool timed_out_ = false;  // the sweep cancelled a read
  const unsigned lane_;
  Handler& handler_;
  const ServerLimits& limits_;
  ServerCounters& counters_;
  SessionList& list_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  State state_ = State::kIdle;
  bool keep_alive_ = true;
  bool in_request_ = false;
  bool replied_ = false;
  bool gone_ = false;
  bool draining_ = false;
  unsigned version_ = 11;

  // Reply in flight.
  std::shared_ptr<Response> response_;
  std::shared_ptr<StreamHead> stream_head_;
  std::shared_ptr<http::response_serializer<http::empty_body>> serializer_;
  std::string chunk_;
  std::string tail_;     // end_stream's last data
  bool chunked_ = true;  // false for an HTTP/1.0 client

  // Client watch.
  bool watch_started_ = false;  // for this request
  bool watching_ = false;
  std::uint64_t watch_generation_ = 0;
  std::function<void()> on_gone_;

  std::size_t lingered_ = 0;
};

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_SESSION_HPP_
