// build error: `Thrower::choose` is not noexcept, so Thrower does not model
// kvroute::Policy and select_worker's constraint rejects it. The ctest that
// builds this file passes only if the compiler says "constraints not
// satisfied" (gcc) or "not satisfied" (clang).
#include <kvroute/policies/round_robin.hpp>
#include <kvroute/select_worker.hpp>

struct Thrower {
  std::string_view name() const noexcept { return "thrower"; }
  kvroute::Decision choose(const kvroute::RequestView&, const kvroute::ClusterView&) { return {}; }
};

int main() {
  kvroute::WorkerSet workers;
  kvroute::LoadTracker load;
  Thrower t;
  auto snap = workers.snapshot();
  return kvroute::select_worker(t, {}, *snap, load) ? 0 : 1;
}
