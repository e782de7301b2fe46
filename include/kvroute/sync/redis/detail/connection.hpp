// -----------------------------------------------------------------------------
// File: kvroute/sync/redis/detail/connection.hpp
// -----------------------------------------------------------------------------
//
// Not API. `Connection`: one blocking hiredis connection, with a timeout on
// connecting and on every reply, AUTH and SELECT done on open, and
// interrupt(), which another thread calls to make a command that waits on
// a hung server return at once (it shuts the socket down; the connection is
// then dead and is closed by its owner). command() sends and waits; send()
// and receive() split it, for a caller that polls fd() in between.
//
// A failed command is Unavailable when the connection is lost (closed,
// timed out, protocol error: hiredis's context is unusable after it) and
// the connection is closed; an error reply from Redis (wrong type, unknown
// command) is FailedPrecondition and leaves the connection open.
//
// Writing to a socket the server closed raises SIGPIPE, whose default
// action ends the process: the owning thread blocks it (block_sigpipe) and
// discards the pending signal after a failed command (drain_sigpipe), so
// that the host's signal handling is left alone.
//
// Thread safety: thread-compatible, except interrupt(), which any thread
// may call at any time.

#ifndef KVROUTE_SYNC_REDIS_DETAIL_CONNECTION_HPP_
#define KVROUTE_SYNC_REDIS_DETAIL_CONNECTION_HPP_

#include <hiredis/hiredis.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kvroute/config.hpp"
#include "kvroute/sync/redis/detail/reply.hpp"
#include "kvroute/sync/redis/options.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {
namespace redis_detail {

// Blocks SIGPIPE for the calling thread, so that a write to a closed
// socket fails with EPIPE instead.
inline void block_sigpipe() noexcept {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// Discards a SIGPIPE pending for the calling thread (it is blocked).
inline void drain_sigpipe() noexcept {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  sigset_t pending;
  sigemptyset(&pending);
  if (sigpending(&pending) != 0 || sigismember(&pending, SIGPIPE) != 1) return;
  const timespec zero{0, 0};
  while (sigtimedwait(&set, nullptr, &zero) == SIGPIPE) {
  }
}

inline timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(d.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((d.count() % 1000) * 1000);
  return tv;
}

class Connection {
 public:
  Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() { close(); }

  bool is_open() const noexcept { return ctx_ != nullptr; }

  // Connects (closing any connection first), then AUTH and SELECT as the
  // address asks. Unavailable with the reason when it cannot.
  absl::Status open(const RedisAddress& a, std::chrono::milliseconds connect_timeout,
                    std::chrono::milliseconds command_timeout) {
    close();
    const timeval ct = to_timeval(connect_timeout);
    redisContext* c = a.kind == RedisAddress::Kind::kUnix
                          ? redisConnectUnixWithTimeout(a.path.c_str(), ct)
                          : redisConnectWithTimeout(a.host.c_str(), a.port, ct);
    if (c == nullptr) return absl::UnavailableError("connect: out of memory");
    if (c->err != 0) {
      absl::Status s =
          absl::UnavailableError(absl::StrCat("connect ", a.to_string(), ": ", c->errstr));
      redisFree(c);
      return s;
    }
    if (a.kind == RedisAddress::Kind::kTcp) redisEnableKeepAlive(c);
    redisSetTimeout(c, to_timeval(command_timeout));
    {
      std::lock_guard<std::mutex> lock(fd_mu_);
      ctx_ = c;
      fd_ = c->fd;
    }
    if (absl::Status s = handshake(a); !s.ok()) {
      close();
      return absl::UnavailableError(absl::StrCat(a.to_string(), ": ", s.message()));
    }
    return absl::OkStatus();
  }

  void close() noexcept {
    std::lock_guard<std::mutex> lock(fd_mu_);
    if (ctx_ != nullptr) redisFree(ctx_);
    ctx_ = nullptr;
    fd_ = -1;
  }

  // Any thread: a command waiting on the server returns now, failed.
  void interrupt() noexcept {
    std::lock_guard<std::mutex> lock(fd_mu_);
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }

  // Sends one command and waits for its reply.
  absl::StatusOr<Reply> command(std::span<const std::string_view> args) {
    if (absl::Status s = send(args); !s.ok()) return s;
    return receive(args.empty() ? std::string_view() : args[0]);
  }

  absl::StatusOr<Reply> command(std::initializer_list<std::string_view> args) {
    return command(std::span<const std::string_view>(args.begin(), args.size()));
  }

  // Sends one command without waiting for its reply: receive() takes it,
  // once fd() is readable (poll) or blocking up to the command timeout.
  absl::Status send(std::span<const std::string_view> args) {
    if (ctx_ == nullptr) return absl::UnavailableError("not connected");
    const std::string_view name = args.empty() ? std::string_view() : args[0];
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    argv.reserve(args.size());
    lens.reserve(args.size());
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(ctx_, static_cast<int>(args.size()), argv.data(), lens.data()) !=
        REDIS_OK) {
      return lost(name);
    }
    int done = 0;
    while (done == 0) {
      if (redisBufferWrite(ctx_, &done) != REDIS_OK) return lost(name);
    }
    return absl::OkStatus();
  }

  // The reply to the oldest command sent and not yet received.
  absl::StatusOr<Reply> receive(std::string_view name) {
    if (ctx_ == nullptr) return absl::UnavailableError("not connected");
    void* raw = nullptr;
    if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) return lost(name);
    Reply r(static_cast<redisReply*>(raw));
    if (r->type == REDIS_REPLY_ERROR) {
      return absl::FailedPreconditionError(
          absl::StrCat(av(name), ": ", av(text_of_error(r.get()))));
    }
    return r;
  }

  // The socket, to poll for a reply; -1 when closed.
  int fd() const noexcept { return ctx_ != nullptr ? ctx_->fd : -1; }

 private:
  // The connection is unusable after an I/O or protocol error: closes it.
  absl::Status lost(std::string_view name) {
    const bool timed_out = ctx_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
    absl::Status s = absl::UnavailableError(absl::StrCat(
        av(name), ": ", timed_out ? "no reply within the command timeout" : ctx_->errstr));
    close();
    drain_sigpipe();
    return s;
  }

  static std::string_view text_of_error(const redisReply* r) { return {r->str, r->len}; }

  absl::Status handshake(const RedisAddress& a) {
    if (!a.password.empty()) {
      absl::StatusOr<Reply> r =
          a.user.empty() ? command({"AUTH", a.password}) : command({"AUTH", a.user, a.password});
      if (!r.ok()) return r.status();
    }
    if (a.db != 0) {
      const std::string db = absl::StrCat(a.db);
      if (absl::StatusOr<Reply> r = command({"SELECT", db}); !r.ok()) return r.status();
    }
    return absl::OkStatus();
  }

  redisContext* ctx_ = nullptr;
  std::mutex fd_mu_;  // guards fd_ against interrupt() racing close()
  int fd_ = -1;
};

}  // namespace redis_detail
}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_REDIS_DETAIL_CONNECTION_HPP_
