// -----------------------------------------------------------------------------
// File: python/src/bindings.hpp
// -----------------------------------------------------------------------------
//
// What the module's source files share: the Python Router's state, absl
// errors as Python exceptions, and the function each file binds its part
// with (module.cpp calls them in order).
//
// Thread safety: the functions here run with the GIL held.

#ifndef KVROUTE_PYTHON_BINDINGS_HPP_
#define KVROUTE_PYTHON_BINDINGS_HPP_

#include <pybind11/pybind11.h>

#include <memory>

#include "absl/status/status.h"
#include "core.hpp"

namespace kvroute_py {

// The state of a Python `kvroute.Router`. Selections and dispatches share
// the core, so a load guard outlives the Router object that made it.
struct PyRouter {
  std::shared_ptr<RouterCore> core;
};

// Raises `s` as a Python exception carrying s.message(): KeyError for
// NotFound (an unknown URL), RuntimeError for ResourceExhausted, ValueError
// for the configuration errors (every other code).
[[noreturn]] void throw_status(const absl::Status& s);

void bind_handles(pybind11::module_& m);  // selection.cpp
void bind_router(pybind11::module_& m);   // router.cpp
void bind_sim(pybind11::module_& m);      // sim.cpp
void bind_bench(pybind11::module_& m);    // bench.cpp

}  // namespace kvroute_py

#endif  // KVROUTE_PYTHON_BINDINGS_HPP_
