// Routes a few requests through two kvroute policies: round_robin, chosen at
// compile time, and consistent_hashing, chosen at runtime from the gateway's
// flags, which keeps each session on one worker.
#include <kvroute/kvroute.hpp>

#include <fmt/core.h>

#include <string_view>
#include <vector>

template <class P>
bool add_workers(kvroute::Router<P>& router) {
  for (const char* url :
       {"http://10.0.0.1:30000", "http://10.0.0.2:30000", "http://10.0.0.3:30000"}) {
    if (auto id = router.add_worker({.url = url}); !id.ok()) {
      fmt::print(stderr, "{}\n", id.status().ToString());
      return false;
    }
  }
  return true;
}

template <class P>
void route(kvroute::Router<P>& router, std::string_view session, std::string_view prompt) {
  const kvroute::Header headers[] = {{"x-smg-routing-key", session}};
  kvroute::Selection s = router.select({.text = prompt, .headers = headers});
  if (!s) {
    fmt::print("no worker: {}\n", kvroute::to_string(s.decision.branch));
    return;
  }
  kvroute::LoadGuard guard = router.dispatch(s);  // held while in flight
  fmt::print("  {:<9} {:<18} -> {} ({})\n", session, prompt, s.worker().url,
             kvroute::to_string(s.decision.branch));
}  // the guard ends the request's load here

int main() {
  kvroute::Router<kvroute::RoundRobin> round_robin;

  const std::vector<std::string_view> flags = {"--policy", "consistent_hashing"};
  absl::StatusOr<kvroute::PolicyConfig> config = kvroute::parse_policy_flags(flags);
  if (!config.ok()) return fmt::print(stderr, "{}\n", config.status().ToString()), 1;
  absl::StatusOr<kvroute::AnyPolicy> policy = kvroute::make_policy(*config);
  if (!policy.ok()) return fmt::print(stderr, "{}\n", policy.status().ToString()), 1;
  kvroute::Router<kvroute::AnyPolicy> sticky(*std::move(policy));

  if (!add_workers(round_robin) || !add_workers(sticky)) return 1;
  auto chat = [](auto& router, std::string_view name) {
    fmt::print("{}:\n", name);
    route(router, "alice", "Hello!");
    route(router, "bob", "Hi there.");
    route(router, "alice", "Tell me more.");
    route(router, "bob", "Thanks!");
  };
  chat(round_robin, "round_robin");
  chat(sticky, "consistent_hashing");
  return 0;
}
