// End-to-end test support (see e2e_support.hpp).
#include "http_router/e2e/e2e_support.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace kve2e {

using kvexample::error_code;
using kvexample::tcp;

std::string router_binary() {
  const char* p = std::getenv("KVROUTE_HTTP_ROUTER");
  if (p == nullptr) throw std::runtime_error("KVROUTE_HTTP_ROUTER is not set");
  return p;
}

namespace {

// One line from `fd` within the deadline (without the newline).
std::optional<std::string> read_line(int fd, std::chrono::steady_clock::time_point deadline) {
  std::string line;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
    char c = 0;
    if (::read(fd, &c, 1) != 1) return std::nullopt;
    if (c == '\n') return line;
    line.push_back(c);
  }
}

}  // namespace

Process::Process(std::vector<std::string> args) {
  char path[] = "/tmp/kvroute_e2e_log_XXXXXX";
  const int log_fd = mkstemp(path);
  log_path_ = path;
  int out[2];
  if (log_fd < 0 || pipe(out) != 0) throw std::runtime_error("cannot make the child's pipes");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {  // the child: async-signal-safe calls only, then exec
    // Dies with the test, even one killed by ctest's timeout.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::close(out[0]);
    ::execve(argv[0], argv.data(), environ);
    ::_exit(127);
  }
  const int rc = pid_ > 0 ? 0 : -1;
  ::close(out[1]);
  ::close(log_fd);
  if (rc != 0) throw std::runtime_error("cannot start " + args[0]);
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  for (;;) {
    std::optional<std::string> line = read_line(out[0], deadline);
    if (!line) {
      ::close(out[0]);
      throw std::runtime_error("the process did not start listening; its log:\n" + log());
    }
    const std::size_t colon = line->rfind(':');
    const int port = colon == std::string::npos ? 0 : std::atoi(line->c_str() + colon + 1);
    if (port <= 0) continue;
    if (line->rfind("metrics", 0) == 0) {
      metrics_port_ = port;
      continue;
    }
    port_ = port;
    break;
  }
  ::close(out[0]);  // the program prints nothing more on stdout
}

Process::~Process() {
  stop();
  ::unlink(log_path_.c_str());
}

std::string Process::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Process::signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

std::optional<int> Process::wait_exit(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(5ms);
  }
}

int Process::stop() {
  if (pid_ <= 0) return 0;
  signal(SIGTERM);
  if (auto st = wait_exit(10s)) return *st;
  signal(SIGKILL);
  return wait_exit(10s).value_or(-1);
}

std::unique_ptr<Process> mock(std::vector<std::string> extra) {
  std::vector<std::string> args = {
      router_binary(), "--mock-worker", "--port", "0", "--threads", "1"};
  for (auto& e : extra) args.push_back(std::move(e));
  return std::make_unique<Process>(std::move(args));
}

std::unique_ptr<Process> router(const std::vector<std::unique_ptr<Process>>& workers,
                                std::vector<std::string> extra) {
  std::vector<std::string> args = {router_binary(), "--port", "0", "--worker-urls"};
  for (const auto& w : workers) args.push_back(w->url());
  for (auto& e : extra) args.push_back(std::move(e));
  return std::make_unique<Process>(std::move(args));
}

std::string Reply::header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

template <class Start>
error_code HttpClient::run(Start&& start, std::chrono::milliseconds timeout) {
  std::optional<error_code> result;
  start([&result](error_code ec, auto&&...) { result = ec; });
  ioc_.restart();
  ioc_.run_for(timeout);
  if (!result) {
    error_code ignored;
    stream_.socket().close(ignored);
    connected_ = false;
    ioc_.restart();
    ioc_.run();
    return net::error::timed_out;
  }
  return *result;
}

bool HttpClient::connect(std::chrono::milliseconds timeout) {
  close();
  const tcp::endpoint ep(net::ip::make_address("127.0.0.1"), static_cast<std::uint16_t>(port_));
  const error_code ec = run([&](auto h) { stream_.async_connect(ep, std::move(h)); }, timeout);
  if (ec) return false;
  error_code ignored;
  stream_.socket().set_option(tcp::no_delay(true), ignored);
  connected_ = true;
  return true;
}

void HttpClient::close() {
  error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
  buffer_.clear();
  stream_parser_.reset();
  connected_ = false;
}

namespace {

template <class Fields>
void copy_headers(const Fields& fields, Reply& r) {
  for (const auto& f : fields) {
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = std::string(f.value());
  }
}

http::request<http::string_body> make_request(http::verb method, const std::string& target,
                                              const std::string& body, const Headers& h) {
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  bool typed = false;
  for (const auto& [k, v] : h) {
    req.insert(k, v);
    typed = typed || beast::iequals(k, "content-type");
  }
  if (method == http::verb::post && !typed) req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  return req;
}

}  // namespace

Reply HttpClient::request(http::verb method, const std::string& target, const std::string& body,
                          Headers h, std::chrono::milliseconds timeout) {
  Reply r;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = connected_;
    if (!connected_ && !connect(timeout)) {
      r.error = "connect failed";
      return r;
    }
    auto req = make_request(method, target, body, h);
    error_code ec = run([&](auto cb) { http::async_write(stream_, req, std::move(cb)); }, timeout);
    http::response_parser<http::string_body> p;
    p.body_limit(std::uint64_t{1} << 30);
    if (!ec)
      ec = run([&](auto cb) { http::async_read(stream_, buffer_, p, std::move(cb)); }, timeout);
    if (ec) {
      close();
      if (reused && attempt == 0 && ec != net::error::timed_out) continue;  // a stale connection
      r.error = ec.message();
      return r;
    }
    r.status = static_cast<int>(p.get().result_int());
    r.body = p.get().body();
    copy_headers(p.get(), r);
    if (!p.keep_alive()) close();
    return r;
  }
  return r;
}

Reply HttpClient::start_stream(const std::string& target, const std::string& body,
                               std::chrono::milliseconds timeout) {
  Reply r;
  if (!connect(timeout)) {
    r.error = "connect failed";
    return r;
  }
  auto req = make_request(http::verb::post, target, body, {});
  error_code ec = run([&](auto cb) { http::async_write(stream_, req, std::move(cb)); }, timeout);
  stream_parser_.emplace();
  stream_parser_->body_limit(boost::none);
  if (!ec) {
    ec = run(
        [&](auto cb) { http::async_read_header(stream_, buffer_, *stream_parser_, std::move(cb)); },
        timeout);
  }
  if (ec) {
    r.error = ec.message();
    close();
    return r;
  }
  r.status = static_cast<int>(stream_parser_->get().result_int());
  copy_headers(stream_parser_->get(), r);
  bool done = false;
  r.body = read_more(timeout, &done);
  return r;
}

std::string HttpClient::read_more(std::chrono::milliseconds timeout, bool* done) {
  *done = false;
  if (!stream_parser_) {
    *done = true;
    return {};
  }
  std::string out;
  char buf[8192];
  while (!stream_parser_->is_done()) {
    stream_parser_->get().body().data = buf;
    stream_parser_->get().body().size = sizeof buf;
    error_code ec = run(
        [&](auto cb) { http::async_read_some(stream_, buffer_, *stream_parser_, std::move(cb)); },
        timeout);
    if (ec == http::error::need_buffer) ec = {};
    out.append(buf, sizeof buf - stream_parser_->get().body().size);
    if (ec) {
      *done = true;
      return out;
    }
    if (!out.empty()) return out;
  }
  *done = true;
  return out;
}

int raw_connect(int port, std::chrono::milliseconds timeout) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool raw_send(int fd, const std::string& data) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

std::string raw_read_all(int fd, std::chrono::milliseconds timeout) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return out;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return out;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

std::optional<double> metric(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
    }
  }
  return std::nullopt;
}

int count_lines(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

long rss_kb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      long kb = 0;
      in >> kb;
      return kb;
    }
  }
  return -1;
}

long raise_open_file_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return -1;
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
  getrlimit(RLIMIT_NOFILE, &lim);
  return static_cast<long>(lim.rlim_cur);
}

std::string metrics_of(const Process& p) {
  return HttpClient(p.metrics_port()).get("/metrics").body;
}

std::string mock_stats_text(const Process& p) {
  return HttpClient(p.port()).get("/mock/stats").body;
}

std::string chat_body(const std::string& model, const std::string& content, bool stream) {
  const nlohmann::json j = {{"model", model},
                            {"messages", {{{"role", "user"}, {"content", content}}}},
                            {"stream", stream}};
  return j.dump();
}

}  // namespace kve2e
