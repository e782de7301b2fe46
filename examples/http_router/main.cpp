// -----------------------------------------------------------------------------
// File: http_router/main.cpp
// -----------------------------------------------------------------------------
//
// kvroute_http_router: a reverse proxy in front of SGLang-style workers that
// routes with kvroute, on Boost.Beast/Asio. kvroute itself has no
// networking; this program is where the sockets live. docs/router.md is its
// manual; --help lists the flags.
//
//   kvroute_http_router --worker-urls http://127.0.0.1:30001 http://127.0.0.1:30002
//       --policy cache_aware --port 30000
//
// `--mock-worker` runs the program as a test worker instead (mock_worker.hpp).
// Either mode prints "<what> listening on HOST:PORT" on stdout once it
// listens (--port 0 picks a free port), and exits 0 after SIGTERM.
//
// Process-wide setup here: the open-file limit is raised to its hard limit
// (every connection is a descriptor, and thousands of idle keep-alive
// connections are normal for a router); everything else is in app.cpp.

#include <sys/resource.h>

#include <cstdio>
#include <string>

#include "http_router/app.hpp"
#include "http_router/flags.hpp"
#include "http_router/log.hpp"

namespace {

void raise_open_file_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return;
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<kvexample::Flags> flags = kvexample::parse_flags(argc, argv);
  if (!flags.ok()) {
    if (absl::IsCancelled(flags.status())) {  // --help
      std::fputs(std::string(flags.status().message()).c_str(), stdout);
      return 0;
    }
    std::fprintf(stderr, "kvroute_http_router: %s\n",
                 std::string(flags.status().message()).c_str());
    return 2;
  }
  kvexample::set_log_level(flags->log_level);
  raise_open_file_limit();
  return flags->mock_worker ? kvexample::run_mock_worker(*flags) : kvexample::run_router(*flags);
}
