// -----------------------------------------------------------------------------
// File: python/src/handles.hpp
// -----------------------------------------------------------------------------
//
// The objects a Python Router hands out: `PySelection` (kvroute.Selection:
// one decision with the request it was made for), `PyDispatch`
// (kvroute.Dispatch: a load guard as a context manager) and `WorkerInfo`
// (kvroute.Worker: one worker's registration and load, copied).
//
// A Selection remembers its Dispatch weakly, so that report_cached can pass
// least_prefill the request's guard, while the Dispatch alone keeps the load:
// dropping it ends the load as a C++ LoadGuard's destructor does. The guard
// sits behind a mutex because report_cached adjusts it with the GIL released
// while another thread may be leaving the `with` block.
//
// Thread safety: PySelection and PyDispatch are touched with the GIL held,
// except GuardBox::guard, which is touched under GuardBox::mu.

#ifndef KVROUTE_PYTHON_HANDLES_HPP_
#define KVROUTE_PYTHON_HANDLES_HPP_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "core.hpp"
#include "request.hpp"

namespace kvroute_py {

struct GuardBox {
  // Declared first, destroyed last: the guard points into the core.
  std::shared_ptr<RouterCore> core;
  // The chosen worker (null for none), valid while `snapshot` lives.
  std::shared_ptr<const kvroute::WorkerSnapshot> snapshot;
  const kvroute::Worker* worker = nullptr;
  std::mutex mu;
  kvroute::LoadGuard guard;  // under mu

  void release() noexcept {
    const std::lock_guard<std::mutex> lock(mu);
    guard.release();
  }
};

struct PySelection {
  std::shared_ptr<RouterCore> core;
  OwnedRequest request;
  kvroute::Selection selection;
  std::weak_ptr<GuardBox> dispatch;  // set by Router.dispatch
  bool dispatched = false;
};

struct PyDispatch {
  std::shared_ptr<GuardBox> box;
};

struct WorkerInfo {
  std::string url;
  std::string model;
  bool healthy = true;
  std::int64_t in_flight = 0;
  std::int64_t in_flight_tokens = 0;
  std::uint64_t processed = 0;
};

}  // namespace kvroute_py

#endif  // KVROUTE_PYTHON_HANDLES_HPP_
