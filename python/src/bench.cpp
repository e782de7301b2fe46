// kvroute._kvroute._bench_loop: the C++ side of
// python/benchmarks/select_overhead.py. It runs the calls the Python Router
// makes, on the same Router object and the same texts, from one C++ loop, so
// the benchmark can print what a call costs from Python against the same
// call from C++ in one run. Not part of the API.
#include <pybind11/pybind11.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "bindings.hpp"
#include "request.hpp"

namespace py = pybind11;

namespace kvroute_py {

namespace {

// Keeps the compiler from dropping a result.
template <class T>
void keep(const T& v) {
  asm volatile("" : : "r"(&v) : "memory");
}

// Nanoseconds per request of `rounds` x texts.size() calls of `mode`:
//   "select"           RouterCore::select (what Router.select runs)
//   "router_select"    Router<AnyPolicy>::select alone (no metrics)
//   "select_dispatch"  RouterCore::select, dispatch, release (select and
//                      `with router.dispatch(s): pass`)
enum class Mode { kSelect, kRouterSelect, kSelectDispatch };

double loop(RouterCore& core, const std::vector<std::string_view>& texts, int rounds, Mode mode) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < rounds; ++i) {
    for (std::string_view t : texts) {
      const kvroute::RequestView req{.text = t};
      if (mode == Mode::kRouterSelect) {
        const kvroute::Selection s = core.router().select(req);
        keep(s);
      } else {
        const kvroute::Selection s = core.select(req);
        if (mode == Mode::kSelectDispatch) {
          kvroute::LoadGuard g = core.dispatch(req, s, -1);
          g.release();
        }
        keep(s);
      }
    }
  }
  const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - t0;
  return took.count() / (static_cast<double>(rounds) * static_cast<double>(texts.size()));
}

}  // namespace

void bind_bench(py::module_& m) {
  m.def(
      "_bench_loop",
      [](const PyRouter& r, const py::list& texts, int rounds, const std::string& mode) {
        Mode which = Mode::kSelect;
        if (mode == "router_select") {
          which = Mode::kRouterSelect;
        } else if (mode == "select_dispatch") {
          which = Mode::kSelectDispatch;
        } else if (mode != "select") {
          throw py::value_error("mode: '" + mode +
                                "' is not select, router_select or "
                                "select_dispatch");
        }
        if (rounds < 1 || texts.empty()) throw py::value_error("need rounds >= 1 and texts");
        std::vector<std::string_view> views;
        for (py::handle t : texts) views.push_back(bytes_of(t, "each text"));
        py::gil_scoped_release nogil;  // `texts` keeps the strings alive
        return loop(*r.core, views, rounds, which);
      },
      py::arg("router"), py::arg("texts"), py::arg("rounds"), py::arg("mode") = "select",
      "Benchmark hook (python/benchmarks/select_overhead.py): ns per call of the C++ calls "
      "behind Router.select, from C++.");
}

}  // namespace kvroute_py
