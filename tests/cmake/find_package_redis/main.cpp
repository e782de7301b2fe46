// Builds against an installed kvroute::redis and checks a configuration
// error, without needing a Redis server.
#include <cstdio>

#include "kvroute/sync/redis/replicator.hpp"

int main() {
  kvroute::sync::RedisReplicatorOptions o;
  o.replica = "consumer";
  o.url = "redis://localhost:0";
  const absl::Status s = o.validate();
  std::printf("%s\n", std::string(s.message()).c_str());
  return s.ok() ? 1 : 0;
}
