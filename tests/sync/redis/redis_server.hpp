// A redis-server of the test's own: started on a unix socket in a fresh
// temporary directory with persistence off, stopped (killed) at the end.
// kill() and start() again reuse the socket, as an operator restarting
// Redis does. `command` talks to it directly (to plant entries, to make it
// hang with DEBUG SLEEP).
#ifndef KVROUTE_TESTS_SYNC_REDIS_REDIS_SERVER_HPP_
#define KVROUTE_TESTS_SYNC_REDIS_REDIS_SERVER_HPP_

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

namespace kvroute_test {

// The redis-server binary: on PATH, else /usr/bin's; empty when absent.
inline std::string find_redis_server() {
  if (const char* path = std::getenv("PATH")) {
    std::string_view rest = path;
    while (!rest.empty()) {
      const std::size_t colon = rest.find(':');
      const std::filesystem::path dir(std::string(rest.substr(0, colon)));
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
      const std::filesystem::path p = dir / "redis-server";
      if (!dir.empty() && ::access(p.c_str(), X_OK) == 0) return p.string();
    }
  }
  return ::access("/usr/bin/redis-server", X_OK) == 0 ? "/usr/bin/redis-server" : "";
}

// Polls `done` every 20 ms for up to `limit`; whether it came true.
inline bool eventually(const std::function<bool()>& done,
                       std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

class RedisServer {
 public:
  // `extra`: more redis-server arguments ("--stream-node-max-entries", "4");
  // `password`: what command() authenticates with (for "--requirepass").
  explicit RedisServer(std::vector<std::string> extra = {}, std::string password = {})
      : extra_(std::move(extra)), password_(std::move(password)) {
    binary_ = find_redis_server();
    if (binary_.empty()) return;
    std::string tmpl = (std::filesystem::temp_directory_path() / "kvroute-redis-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    dir_ = tmpl;
    socket_ = dir_ + "/redis.sock";
    start();
  }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;
  ~RedisServer() {
    kill();
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }

  // False when redis-server is not installed: the caller skips (and says so).
  bool available() const { return !binary_.empty(); }
  std::string url() const { return "unix://" + socket_; }

  void start() {
    std::vector<std::string> args = {binary_,
                                     "--port",
                                     "0",
                                     "--unixsocket",
                                     socket_,
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--dir",
                                     dir_,
                                     "--enable-debug-command",
                                     "local",
                                     "--logfile",
                                     dir_ + "/redis.log"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;  // built before fork: the child only execs
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    // Up when it answers PING on its socket (NOAUTH is an answer).
    REQUIRE(eventually([this] { return command({"PING"}) != "(no reply)"; }));
  }

  // SIGKILL: as abrupt as a crash; the data goes (persistence is off).
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  // One command on a fresh connection; the reply's text (or the error's,
  // or "(nil)", "(integer) N", "(array N)"; "(no reply)" when the server
  // is away). Asserts nothing, so that any thread may call it.
  std::string command(std::initializer_list<std::string_view> args) const {
    return with_reply(args, [](const redisReply* r) {
      if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ||
          r->type == REDIS_REPLY_ERROR) {
        return std::string(r->str, r->len);
      }
      if (r->type == REDIS_REPLY_INTEGER) return "(integer) " + std::to_string(r->integer);
      if (r->type == REDIS_REPLY_ARRAY) return "(array " + std::to_string(r->elements) + ")";
      return std::string("(nil)");
    });
  }

  // The id of the last entry of a stream; empty when it has none.
  std::string last_entry_id(std::string_view key) const {
    return with_reply({"XREVRANGE", key, "+", "-", "COUNT", "1"}, [](const redisReply* r) {
      if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) return std::string();
      const redisReply* e = r->element[0];
      if (e->type != REDIS_REPLY_ARRAY || e->elements == 0) return std::string();
      return std::string(e->element[0]->str, e->element[0]->len);
    });
  }

 private:
  std::string with_reply(std::initializer_list<std::string_view> args,
                         const std::function<std::string(const redisReply*)>& read) const {
    redisContext* c = redisConnectUnix(socket_.c_str());
    if (c == nullptr || c->err != 0) {
      if (c != nullptr) redisFree(c);
      return "(no reply)";
    }
    if (!password_.empty()) {
      auto* auth = static_cast<redisReply*>(redisCommand(c, "AUTH %s", password_.c_str()));
      if (auth != nullptr) freeReplyObject(auth);
    }
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    std::string out = r != nullptr ? read(r) : "(no reply)";
    if (r != nullptr) freeReplyObject(r);
    redisFree(c);
    return out;
  }

  std::vector<std::string> extra_;
  std::string password_;
  std::string binary_;
  std::string dir_;
  std::string socket_;
  pid_t pid_ = -1;
};

}  // namespace kvroute_test

// Skips the rest of the test case, saying why, when redis-server is absent.
#define KVROUTE_REQUIRE_REDIS(server)                                                       \
  if (!(server).available()) {                                                              \
    WARN("redis-server not found (PATH, /usr/bin): skipped; apt-get install redis-server"); \
    return;                                                                                 \
  }

#endif  // KVROUTE_TESTS_SYNC_REDIS_REDIS_SERVER_HPP_
