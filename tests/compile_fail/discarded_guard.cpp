// build error: a LoadGuard holds the request's load until it is released or
// destroyed, so one dropped where it is made ends the load at once.
// LoadGuard and every function returning one are [[nodiscard]]; the ctest
// that builds this file (with -Werror) passes only if the compiler rejects
// the discarded result ("nodiscard" or "unused-result" in its message).
#include <kvroute/policies/round_robin.hpp>
#include <kvroute/router.hpp>

int main() {
  kvroute::Router<kvroute::RoundRobin> router;
  router.add_worker({.url = "http://127.0.0.1:1"}).IgnoreError();
  const kvroute::Selection s = router.select({});
  router.dispatch(s);
  return 0;
}
