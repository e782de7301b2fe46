// One client connection (see session.hpp).
#include "http_router/session.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <vector>

#include "http_router/log.hpp"

namespace kvexample {
namespace {

// The idle read's buffer: a typical request arrives in one read, and an
// idle connection holds this much.
constexpr std::size_t kFirstRead = 4096;
constexpr std::size_t kLingerBytes = 1 << 20;  // read and dropped after a refusal
constexpr auto kLingerTime = std::chrono::seconds(2);

bool has_control_char(std::string_view v) {
  for (char c : v) {
    if (c == '\0' || c == '\r' || c == '\n') return true;
  }
  return false;
}

bool is_http_error(const error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_target).category();
}

// The peer closed or reset the connection (not worth a reply).
bool is_disconnect(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == http::error::partial_message ||
         ec == net::error::eof || ec == net::error::connection_reset ||
         ec == net::error::broken_pipe || ec == net::error::bad_descriptor;
}

}  // namespace

void SessionList::start_sweeping() {
  timer_.expires_after(kSweep);
  timer_.async_wait([this](error_code ec) {
    if (!ec) sweep();
  });
}

void SessionList::sweep() {
  const auto now = std::chrono::steady_clock::now();
  const std::vector<Session*> all(sessions_.begin(), sessions_.end());
  int expiries = kExpiriesPerSweep;
  for (Session* s : all) s->tick(now, &expiries);
  start_sweeping();
}

void SessionList::drain_all() {
  draining_ = true;
  const std::vector<Session*> all(sessions_.begin(), sessions_.end());
  for (Session* s : all) s->drain();
}

Session::Session(tcp::socket socket, unsigned lane, Handler& handler, const ServerLimits& limits,
                 ServerCounters& counters, SessionList& list)
    : socket_(std::move(socket)),
      lane_(lane),
      handler_(handler),
      limits_(limits),
      counters_(counters),
      list_(list),
      draining_(list.draining()) {
  counters_.connections.fetch_add(1, std::memory_order_relaxed);
  counters_.accepted.fetch_add(1, std::memory_order_relaxed);
  list_.add(this);
}

Session::~Session() {
  if (in_request_) counters_.requests.fetch_sub(1, std::memory_order_relaxed);
  counters_.connections.fetch_sub(1, std::memory_order_relaxed);
  list_.remove(this);
}

void Session::start() { await_request(); }

void Session::set_deadline(std::chrono::steady_clock::duration d, bool for_read) {
  deadline_ = std::chrono::steady_clock::now() + d;
  deadline_for_read_ = for_read;
  timed_out_ = false;
}

// Clears the read deadline; true if the sweep had cancelled the read.
bool Session::read_timed_out(error_code ec) {
  clear_deadline();
  return timed_out_ && ec == net::error::operation_aborted;
}

void Session::tick(std::chrono::steady_clock::time_point now, int* expiries) {
  if (state_ == State::kClosed) return;
  if (now >= deadline_ && *expiries > 0) {
    --*expiries;
    clear_deadline();
    if (!deadline_for_read_) return close();  // a client that does not read its reply
    timed_out_ = true;
    error_code ignored;
    socket_.cancel(ignored);
    return;
  }
  if (state_ == State::kHandling && in_request_ && !watch_started_ && !gone_) {
    watch_started_ = true;
    start_watch();
  }
}

void Session::await_request() {
  if (draining_ || state_ == State::kClosed) return close();
  if (buffer_.size() > 0) return read_head();  // pipelined
  state_ = State::kIdle;
  if (buffer_.capacity() > kFirstRead) buffer_.shrink_to_fit();
  set_deadline(limits_.keep_alive, true);
  socket_.async_read_some(
      buffer_.prepare(kFirstRead),
      [self = shared_from_this()](error_code ec, std::size_t n) { self->on_first_bytes(ec, n); });
}

void Session::on_first_bytes(error_code ec, std::size_t n) {
  read_timed_out(ec);
  if (ec || state_ == State::kClosed) return close();  // idle timeout, hang-up, drain
  buffer_.commit(n);
  read_head();
}

void Session::read_head() {
  state_ = State::kHead;
  parser_.emplace();
  parser_->header_limit(limits_.max_header_bytes);
  parser_->body_limit(limits_.max_body);
  set_deadline(limits_.header_timeout, true);
  http::async_read_header(
      socket_, buffer_, *parser_,
      [self = shared_from_this()](error_code ec, std::size_t) { self->on_head(ec); });
}

void Session::on_head(error_code ec) {
  const bool timed_out = read_timed_out(ec);
  if (state_ == State::kClosed) return;
  if (timed_out) {
    return reject(http::status::request_timeout,
                  fmt::format("the request head did not arrive within {} s (--header-timeout-secs)",
                              limits_.header_timeout.count()),
                  "header_timeout");
  }
  if (ec == http::error::body_limit) {  // a Content-Length over the limit
    return reject(
        http::status::payload_too_large,
        fmt::format("the body is larger than {} bytes (--max-payload-size)", limits_.max_body),
        "payload_too_large");
  }
  if (ec == http::error::header_limit) {
    return reject(http::status::request_header_fields_too_large,
                  fmt::format("the request head is larger than {} bytes (--max-header-bytes)",
                              limits_.max_header_bytes),
                  "header_too_large");
  }
  if (ec && is_http_error(ec) && !is_disconnect(ec)) {
    return reject(http::status::bad_request, "malformed request head", "bad_request");
  }
  if (ec) return close();
  if (auto refusal = check_head()) {
    return reject(refusal->status, refusal->message, refusal->reason);
  }
  const auto& req = parser_->get();
  version_ = req.version();
  if (beast::iequals(req[http::field::expect], "100-continue")) {
    auto cont =
        std::make_shared<http::response<http::empty_body>>(http::status::continue_, req.version());
    set_deadline(limits_.write_timeout, false);
    http::async_write(socket_, *cont,
                      [self = shared_from_this(), cont](error_code wec, std::size_t) {
                        if (wec) return self->close();
                        self->read_body();
                      });
    return;
  }
  read_body();
}

// The limits a head can break once read: header count, control characters
// in values. (Beast's parser refuses a Content-Length over the body limit as
// it reads the head.)
std::optional<Session::Refusal> Session::check_head() {
  const auto& req = parser_->get();
  std::size_t count = 0;
  for (const auto& field : req) {
    ++count;
    if (has_control_char(field.value())) {
      return Refusal{http::status::bad_request,
                     fmt::format("header '{}' has a CR, LF or NUL in its value",
                                 std::string_view(field.name_string())),
                     "bad_header_value"};
    }
  }
  if (count > limits_.max_header_count) {
    return Refusal{
        http::status::request_header_fields_too_large,
        fmt::format("more than {} header fields (--max-header-count)", limits_.max_header_count),
        "too_many_headers"};
  }
  return std::nullopt;
}

void Session::read_body() {
  state_ = State::kBody;
  set_deadline(limits_.body_timeout, true);
  http::async_read(socket_, buffer_, *parser_,
                   [self = shared_from_this()](error_code ec, std::size_t) { self->on_body(ec); });
}

void Session::on_body(error_code ec) {
  const bool timed_out = read_timed_out(ec);
  if (state_ == State::kClosed) return;
  if (timed_out) {
    return reject(http::status::request_timeout,
                  fmt::format("the request body did not arrive within {} s (--body-timeout-secs)",
                              limits_.body_timeout.count()),
                  "body_timeout");
  }
  if (ec == http::error::body_limit) {
    return reject(
        http::status::payload_too_large,
        fmt::format("the body is larger than {} bytes (--max-payload-size)", limits_.max_body),
        "payload_too_large");
  }
  if (ec && is_http_error(ec) && !is_disconnect(ec)) {
    return reject(http::status::bad_request, "malformed request body", "bad_request");
  }
  if (ec) return close();
  dispatch();
}

void Session::dispatch() {
  state_ = State::kHandling;
  in_request_ = true;
  replied_ = false;
  gone_ = false;
  watch_started_ = false;  // the next sweep starts it
  counters_.requests.fetch_add(1, std::memory_order_relaxed);
  keep_alive_ = parser_->keep_alive();
  Request req = parser_->release();
  parser_.reset();
  try {
    handler_.handle(shared_from_this(), std::move(req));
  } catch (...) {
    log_error("a request handler threw; the request is answered 500");
    if (!replied_) {
      reply(json_error(http::status::internal_server_error, "internal error", "internal_error",
                       version_));
    } else {
      abort();
    }
  }
}

void Session::reject(http::status status, std::string_view message, std::string_view reason) {
  handler_.rejected(reason);
  log_debug("refused a request: {} ({})", reason, static_cast<int>(status));
  parser_.reset();
  state_ = State::kHandling;
  replied_ = true;
  response_ = std::make_shared<Response>(
      json_error(status, message, "invalid_request_error", version_, false));
  write_reply(true);
}

void Session::reply(Response res) {
  if (!in_request_ || replied_) return;
  replied_ = true;
  on_gone_ = nullptr;
  stop_watch();
  if (gone_ || state_ == State::kClosed) {
    finish_request();
    return close();
  }
  res.version(version_);
  res.keep_alive(keep_alive_ && !draining_ && res.keep_alive());
  response_ = std::make_shared<Response>(std::move(res));
  write_reply(false);
}

void Session::write_reply(bool linger) {
  set_deadline(limits_.write_timeout, false);
  const bool keep_alive = response_->keep_alive();
  http::async_write(socket_, *response_,
                    [self = shared_from_this(), keep_alive, linger](error_code ec, std::size_t) {
                      self->after_reply(ec, keep_alive, linger);
                    });
}

void Session::after_reply(error_code ec, bool keep_alive, bool linger) {
  clear_deadline();
  response_.reset();
  finish_request();
  if (ec || state_ == State::kClosed) return close();
  if (linger) return linger_close();
  if (!keep_alive) return close();
  await_request();
}

void Session::begin_stream(StreamHead head, std::string first, Done done) {
  if (!in_request_ || replied_ || gone_ || state_ == State::kClosed) {
    net::post(executor(), [done = std::move(done)] { done(false); });
    return;
  }
  replied_ = true;
  head.version(version_);
  // HTTP/1.0 has no chunked encoding: the body then ends with the connection.
  chunked_ = version_ >= 11;
  head.chunked(chunked_);
  head.keep_alive(chunked_ && keep_alive_ && !draining_);
  stream_head_ = std::make_shared<StreamHead>(std::move(head));
  serializer_ = std::make_shared<http::response_serializer<http::empty_body>>(*stream_head_);
  chunk_ = std::move(first);
  set_deadline(limits_.write_timeout, false);
  http::async_write_header(
      socket_, *serializer_,
      [self = shared_from_this(), done = std::move(done)](error_code ec, std::size_t) mutable {
        self->clear_deadline();
        if (ec) {
          self->client_hung_up();
          return done(false);
        }
        if (self->chunk_.empty()) return done(true);
        self->write_stream_piece(std::move(done));
      });
}

void Session::write_chunk(std::string data, Done done) {
  if (!in_request_ || gone_ || state_ == State::kClosed || data.empty()) {
    const bool ok = in_request_ && !gone_ && state_ != State::kClosed;
    net::post(executor(), [done = std::move(done), ok] { done(ok); });
    return;
  }
  chunk_ = std::move(data);
  write_stream_piece(std::move(done));
}

void Session::write_stream_piece(Done done) {
  set_deadline(limits_.write_timeout, false);
  auto after = [self = shared_from_this(), done = std::move(done)](error_code ec, std::size_t) {
    self->clear_deadline();  // waiting for the worker's next piece is not the client's delay
    if (ec) {
      self->client_hung_up();
      return done(false);
    }
    done(true);
  };
  if (chunked_) {
    net::async_write(socket_, http::make_chunk(net::buffer(chunk_)), std::move(after));
  } else {
    net::async_write(socket_, net::buffer(chunk_), std::move(after));
  }
}

void Session::end_stream(std::string last) {
  if (!in_request_) return;
  on_gone_ = nullptr;
  if (gone_ || state_ == State::kClosed) {
    finish_request();
    return close();
  }
  tail_ = std::move(last);
  set_deadline(limits_.write_timeout, false);
  auto after = [self = shared_from_this()](error_code ec, std::size_t) {
    self->stop_watch();
    const bool keep_alive = self->stream_head_ && self->stream_head_->keep_alive();
    self->serializer_.reset();
    self->stream_head_.reset();
    self->tail_.clear();
    self->after_reply(ec, keep_alive, false);
  };
  if (!chunked_) {
    net::async_write(socket_, net::buffer(tail_), std::move(after));
  } else if (tail_.empty()) {
    net::async_write(socket_, http::make_chunk_last(), std::move(after));
  } else {
    net::async_write(
        socket_, beast::buffers_cat(http::make_chunk(net::buffer(tail_)), http::make_chunk_last()),
        std::move(after));
  }
}

void Session::abort() {
  on_gone_ = nullptr;
  finish_request();
  close();
}

void Session::finish_request() {
  if (!in_request_) return;
  in_request_ = false;
  counters_.requests.fetch_sub(1, std::memory_order_relaxed);
}

void Session::start_watch() {
  watching_ = true;
  const std::uint64_t gen = ++watch_generation_;
  socket_.async_wait(tcp::socket::wait_read,
                     [self = shared_from_this(), gen](error_code ec) { self->on_watch(ec, gen); });
}

void Session::on_watch(error_code ec, std::uint64_t generation) {
  if (generation != watch_generation_ || !watching_ || state_ == State::kClosed) return;
  if (ec == net::error::operation_aborted) return;
  if (!ec) {
    char c = 0;
    const ssize_t n = ::recv(socket_.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) {  // the next (pipelined) request, not a hang-up: stop watching
      watching_ = false;
      return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      start_watch();
      return;
    }
  }
  client_hung_up();
}

void Session::stop_watch() {
  if (!watching_) return;
  watching_ = false;
  ++watch_generation_;
  error_code ignored;
  socket_.cancel(ignored);
}

void Session::client_hung_up() {
  if (gone_) return;
  gone_ = true;
  watching_ = false;
  auto f = std::move(on_gone_);
  on_gone_ = nullptr;
  if (f) f();
}

void Session::drain() {
  draining_ = true;
  if (state_ == State::kIdle) close();
}

void Session::close() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  watching_ = false;
  on_gone_ = nullptr;
  clear_deadline();
  error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
}

// After a refusal the request may be partly unread: stop sending, read and
// drop what the client still sends (bounded), then close, so that the client
// reads the refusal instead of a connection reset.
void Session::linger_close() {
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return close();
  lingered_ = 0;
  buffer_.clear();
  set_deadline(kLingerTime, true);
  socket_.async_read_some(
      buffer_.prepare(4096),
      [self = shared_from_this()](error_code rec, std::size_t n) { self->on_linger(rec, n); });
}

void Session::on_linger(error_code ec, std::size_t n) {
  lingered_ += n;
  if (ec || state_ == State::kClosed || lingered_ > kLingerBytes) return close();
  socket_.async_read_some(
      buffer_.prepare(4096),
      [self = shared_from_this()](error_code rec, std::size_t m) { self->on_linger(rec, m); });
}

}  // namespace kvexample
