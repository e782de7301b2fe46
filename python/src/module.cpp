// The extension module kvroute._kvroute, which the package kvroute
// (python/kvroute/__init__.py) re-exports.
#include <pybind11/pybind11.h>

#include <string>

#include "bindings.hpp"
#include "kvroute/kvroute.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_kvroute, m) {
  m.doc() = "kvroute's C++ core; use the package kvroute, which re-exports it.";
  m.attr("__version__") = std::to_string(KVROUTE_VERSION_MAJOR) + "." +
                          std::to_string(KVROUTE_VERSION_MINOR) + "." +
                          std::to_string(KVROUTE_VERSION_PATCH);
  py::list policies;
  for (kvroute::PolicyKind k : kvroute::kAllPolicyKinds) {
    policies.append(std::string(kvroute::to_string(k)));
  }
  m.attr("POLICIES") = py::tuple(policies);
  py::list branches;
  for (kvroute::Branch b : kvroute::kAllBranches) {
    if (b != kvroute::Branch::kCustom) branches.append(std::string(kvroute::to_string(b)));
  }
  m.attr("BRANCHES") = py::tuple(branches);
  // The build type and compiler, for benchmark reports.
  m.attr("_build") = KVROUTE_PYTHON_BUILD;
  kvroute_py::bind_handles(m);
  kvroute_py::bind_router(m);
  kvroute_py::bind_sim(m);
  kvroute_py::bind_bench(m);
}
