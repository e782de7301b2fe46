// A consumer of the packaged library: routes one request.
#include <kvroute/kvroute.hpp>

int main() {
  kvroute::Router<kvroute::RoundRobin> router;
  if (!router.add_worker({.url = "http://127.0.0.1:30000"}).ok()) return 1;
  kvroute::Selection s = router.select({.text = "hello"});
  return (s && s.worker().url == "http://127.0.0.1:30000") ? 0 : 2;
}
