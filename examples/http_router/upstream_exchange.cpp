// One request to one worker (see upstream_exchange.hpp).
#include "http_router/upstream_exchange.hpp"

namespace kvexample {
namespace {

// The connection was closed under us (not a reply from the worker).
bool is_closed_connection(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == net::error::eof ||
         ec == net::error::connection_reset || ec == net::error::broken_pipe;
}

}  // namespace

void Exchange::start() {
  conn_ = pool_.take(address_.url);
  if (conn_ == nullptr) return connect();
  send();
}

void Exchange::connect() {
  pool_.connect(address_, kConnectTimeout,
                [self = shared_from_this()](error_code ec, std::unique_ptr<UpstreamConn> c) {
                  self->conn_ = std::move(c);
                  if (self->sink_ == nullptr) return;  // cancelled meanwhile
                  if (ec) return self->fail(ec);
                  self->send();
                });
}

void Exchange::send() {
  request_->set(http::field::host, address_.host_header);
  http::async_write(conn_->stream, *request_,
                    [self = shared_from_this()](error_code ec, std::size_t) { self->on_sent(ec); });
}

void Exchange::on_sent(error_code ec) {
  if (sink_ == nullptr) return;
  if (ec) return fail(ec);
  parser_.emplace();
  parser_->body_limit(boost::none);  // the sink bounds what it keeps
  parser_->header_limit(64 * 1024);
  http::async_read_header(
      conn_->stream, conn_->buffer, *parser_,
      [self = shared_from_this()](error_code rec, std::size_t) { self->on_head(rec); });
}

void Exchange::on_head(error_code ec) {
  if (sink_ == nullptr) return;
  if (ec) return fail(ec);
  std::shared_ptr<ExchangeSink> sink = sink_;
  sink->on_head(parser_->get().base());
}

void Exchange::read_more() {
  if (sink_ == nullptr || !parser_) return;
  if (parser_->is_done()) return finish();
  parser_->get().body().data = buf_.data();
  parser_->get().body().size = buf_.size();
  http::async_read_some(
      conn_->stream, conn_->buffer, *parser_,
      [self = shared_from_this()](error_code ec, std::size_t) { self->on_body(ec); });
}

void Exchange::on_body(error_code ec) {
  if (sink_ == nullptr) return;
  if (ec == http::error::need_buffer) ec = {};
  if (ec) return fail(ec);
  const std::size_t got = buf_.size() - parser_->get().body().size;
  if (got == 0) return read_more();
  std::shared_ptr<ExchangeSink> sink = sink_;
  sink->on_data(std::string_view(buf_.data(), got));
}

void Exchange::finish() {
  const bool reusable = parser_->keep_alive() && conn_->buffer.size() == 0;
  if (reusable) pool_.give(address_.url, std::move(conn_));
  std::shared_ptr<ExchangeSink> sink = std::move(sink_);
  sink->on_end();
}

void Exchange::fail(error_code ec) {
  const bool started = parser_ && parser_->got_some();
  if (conn_ != nullptr && conn_->reused && !started && !replaced_stale_ &&
      is_closed_connection(ec)) {
    // A pooled connection the worker had closed while idle: try a fresh one.
    replaced_stale_ = true;
    parser_.reset();
    conn_.reset();
    return connect();
  }
  if (conn_ != nullptr) {
    error_code ignored;
    conn_->stream.socket().close(ignored);
  }
  std::shared_ptr<ExchangeSink> sink = std::move(sink_);
  sink->on_fail(ec, started);
}

void Exchange::cancel() {
  sink_.reset();
  if (conn_ != nullptr) {
    error_code ignored;
    conn_->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    conn_->stream.socket().close(ignored);
  }
}

}  // namespace kvexample
