// End to end on 127.0.0.1: kvroute_http_router under connection load: a
// burst of 2,000 simultaneous connections, and 10,000 idle keep-alive
// connections held while others are served. Prints the router's resident
// memory for both (ctest -V shows it).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "http_router/e2e/e2e_support.hpp"

using kve2e::HttpClient;
using kve2e::mock;
using kve2e::Process;
using kve2e::router;
using namespace std::chrono_literals;

namespace {

struct Conn {
  int fd = -1;
  int state = 0;  // 0 connecting, 1 awaiting the reply, 2 answered, 3 failed
  std::string in;
};

const std::string kHealth = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

// A whole reply in `in`: its status, or 0 while incomplete.
int whole_reply(const std::string& in) {
  const std::size_t end = in.find("\r\n\r\n");
  if (end == std::string::npos) return 0;
  std::size_t length = 0;
  if (const char* cl = strcasestr(in.c_str(), "content-length:")) {
    length = std::strtoul(cl + 15, nullptr, 10);
  }
  if (in.size() < end + 4 + length) return 0;
  return std::atoi(in.c_str() + 9);
}

void on_event(int ep, Conn& c, std::uint32_t events) {
  if (c.state == 0) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0 || (events & (EPOLLERR | EPOLLHUP)) != 0 ||
        send(c.fd, kHealth.data(), kHealth.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(kHealth.size())) {
      c.state = 3;
      return;
    }
    c.state = 1;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &c;
    epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
    return;
  }
  char buf[4096];
  const ssize_t n = recv(c.fd, buf, sizeof buf, 0);
  if (n <= 0) {
    c.state = 3;
    return;
  }
  c.in.append(buf, static_cast<std::size_t>(n));
  if (const int status = whole_reply(c.in); status != 0) {
    c.state = status == 200 ? 2 : 3;
    c.in.clear();
    epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
  }
}

// Opens `n` connections at once, sends GET /health on each and reads every
// reply; returns how many were answered 200. The connections stay open in
// `conns`.
int burst(int port, int n, std::vector<Conn>& conns, std::chrono::seconds timeout) {
  const int ep = epoll_create1(0);
  const std::size_t first = conns.size();
  conns.resize(first + static_cast<std::size_t>(n));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (std::size_t i = first; i < conns.size(); ++i) {
    Conn& c = conns[i];
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (c.fd < 0 ||
        (connect(c.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS)) {
      c.state = 3;
      continue;
    }
    epoll_event ev{};
    ev.events = EPOLLOUT;
    ev.data.ptr = &c;
    epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<epoll_event> events(1024);
  int pending = n;
  while (pending > 0 && std::chrono::steady_clock::now() < deadline) {
    const int k = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 100);
    for (int i = 0; i < k; ++i) {
      Conn& c = *static_cast<Conn*>(events[static_cast<std::size_t>(i)].data.ptr);
      on_event(ep, c, events[static_cast<std::size_t>(i)].events);
      if (c.state >= 2) epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
    }
    pending = 0;
    for (std::size_t i = first; i < conns.size(); ++i) pending += conns[i].state < 2 ? 1 : 0;
  }
  close(ep);
  int ok = 0;
  for (std::size_t i = first; i < conns.size(); ++i) ok += conns[i].state == 2 ? 1 : 0;
  return ok;
}

void close_all(std::vector<Conn>& conns) {
  for (Conn& c : conns) {
    if (c.fd >= 0) close(c.fd);
  }
  conns.clear();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("http_router: 2,000 simultaneous connections, then 10,000 idle keep-alive ones",
          "[http_router][e2e][scale]") {
  const long limit = kve2e::raise_open_file_limit();
  int idle_target = 10000;
  if (limit < idle_target + 200) {
    idle_target = static_cast<int>(limit) - 200;
    WARN("RLIMIT_NOFILE hard limit " << limit << ": holding " << idle_target << " connections");
  }
  std::vector<std::unique_ptr<Process>> workers;
  workers.push_back(mock());
  auto r = router(workers);
  const long rss_start = kve2e::rss_kb(r->pid());

  std::vector<Conn> conns;
  auto t0 = std::chrono::steady_clock::now();
  const int burst_ok = burst(r->port(), 2000, conns, 30s);
  const double burst_s = seconds_since(t0);
  const long rss_burst = kve2e::rss_kb(r->pid());
  CHECK(burst_ok == 2000);
  close_all(conns);

  t0 = std::chrono::steady_clock::now();
  int idle_ok = 0;
  for (int opened = 0; opened < idle_target; opened += 2000) {
    idle_ok += burst(r->port(), std::min(2000, idle_target - opened), conns, 30s);
  }
  const double idle_s = seconds_since(t0);
  CHECK(idle_ok == idle_target);
  std::this_thread::sleep_for(1s);
  const long rss_idle = kve2e::rss_kb(r->pid());
  // Others are served at once meanwhile.
  HttpClient c(r->port());
  const auto q0 = std::chrono::steady_clock::now();
  CHECK(c.post("/generate", R"({"text": "beside ten thousand idle connections"})").status == 200);
  CHECK(c.get("/health").status == 200);
  const double fresh_ms = seconds_since(q0) * 1000;
  CHECK(fresh_ms < 100);
  // The idle connections are still open and usable: a sample asks again.
  int again = 0, tried = 0;
  for (std::size_t i = 0; i < conns.size(); i += conns.size() / 100) {
    ++tried;
    Conn& k = conns[i];
    int flags = fcntl(k.fd, F_GETFL);
    fcntl(k.fd, F_SETFL, flags & ~O_NONBLOCK);
    timeval tv{2, 0};
    setsockopt(k.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (send(k.fd, kHealth.data(), kHealth.size(), MSG_NOSIGNAL) < 0) continue;
    std::string in;
    char buf[1024];
    while (whole_reply(in) == 0) {
      const ssize_t n = recv(k.fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      in.append(buf, static_cast<std::size_t>(n));
    }
    again += whole_reply(in) == 200 ? 1 : 0;
  }
  CHECK(again == tried);
  const std::string text = HttpClient(r->port()).get("/metrics").body;
  CHECK(kve2e::metric(text, "kvroute_router_connections").value_or(0) >= idle_target);
  close_all(conns);
  std::printf(
      "router RSS: %.1f MB at start; %.1f MB after a burst of 2000 connections (answered in "
      "%.2f s); %.1f MB holding %d idle keep-alive connections (opened and answered in %.2f s); "
      "a fresh request beside them took %.1f ms\n",
      static_cast<double>(rss_start) / 1024, static_cast<double>(rss_burst) / 1024, burst_s,
      static_cast<double>(rss_idle) / 1024, idle_target, idle_s, fresh_ms);
  std::fflush(stdout);
  CHECK(r->stop() == 0);
}
