// Routes a few requests through two kvroute policies.
#include <kvroute/kvroute.hpp>

#include <fmt/core.h>

int main() {
  kvroute::Router<kvroute::RoundRobin> router;
  for (const char* url : {"http://10.0.0.1:30000", "http://10.0.0.2:30000"}) {
    if (auto id = router.add_worker({.url = url}); !id.ok()) {
      fmt::print(stderr, "{}\n", id.status().ToString());
      return 1;
    }
  }
  for (const char* prompt : {"Hello!", "Tell me a story.", "Hello again!"}) {
    kvroute::Selection s = router.select({.text = prompt});
    if (!s) {
      fmt::print("no worker: {}\n", kvroute::to_string(s.decision.branch));
      continue;
    }
    kvroute::LoadGuard guard = router.dispatch(s);  // held while in flight
    fmt::print("{:<20} -> {} ({})\n", prompt, s.worker().url,
               kvroute::to_string(s.decision.branch));
  }
  return 0;
}
