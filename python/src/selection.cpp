// kvroute.Selection, kvroute.Dispatch and kvroute.Worker; see handles.hpp.
#include <pybind11/pybind11.h>

#include <string>

#include "bindings.hpp"
#include "handles.hpp"

namespace py = pybind11;

namespace kvroute_py {

namespace {

py::object url_or_none(const kvroute::Selection& s) {
  if (!s) return py::none();
  return py::str(s.worker().url);
}

std::string selection_repr(const PySelection& p) {
  const kvroute::Selection& s = p.selection;
  const std::string branch(s.decision.branch_name());
  if (!s) {
    return "<kvroute.Selection no worker, branch='" + branch + "', reason='" +
           std::string(kvroute::to_string(s.decision.reason())) + "'>";
  }
  return "<kvroute.Selection url='" + s.worker().url + "', branch='" + branch +
         "', claimed=" + std::to_string(s.decision.claimed) + ">";
}

void bind_selection(py::module_& m) {
  py::class_<PySelection>(m, "Selection", R"doc(
One routing decision, returned by Router.select().

A Selection is true when a worker was chosen and false when none could be
("no worker" is a value, not an exception): then ``url`` is None and
``branch`` and ``reason`` say why. It keeps the request it was made for, so
Router.dispatch() and Router.report_cached() take the selection alone.
)doc")
      .def("__bool__", [](const PySelection& p) { return static_cast<bool>(p.selection); })
      .def_property_readonly(
          "url", [](const PySelection& p) { return url_or_none(p.selection); },
          "The chosen worker's URL, or None when no worker was chosen.")
      .def_property_readonly(
          "model",
          [](const PySelection& p) -> py::object {
            if (!p.selection) return py::none();
            return py::str(p.selection.worker().model);
          },
          "The chosen worker's model ('' for a worker that serves every model), or None.")
      .def_property_readonly(
          "branch",
          [](const PySelection& p) { return std::string(p.selection.decision.branch_name()); },
          "The decision branch the policy took, as kvroute's metrics name it: 'cache_hit', "
          "'cache_miss', 'imbalanced', 'least_prefill', 'routing_key_hit', 'round_robin', "
          "'no_workers', ... (kvroute.BRANCHES lists them).")
      .def_property_readonly(
          "reason",
          [](const PySelection& p) {
            return std::string(kvroute::to_string(p.selection.decision.reason()));
          },
          "'none' when a worker was chosen; otherwise why not: 'no_workers' (none serves the "
          "model), 'no_healthy_workers' or 'policy_miss' (the policy declined, e.g. a strict "
          "x-smg-target-worker miss).")
      .def_property_readonly(
          "claimed", [](const PySelection& p) { return p.selection.decision.claimed; },
          "How many characters of the request text the policy's tree claims the chosen worker "
          "already holds (cache_aware and least_prefill; 0 for the other policies). Compare "
          "it with the server's cached tokens times chars_per_token.")
      .def_property_readonly(
          "dispatched", [](const PySelection& p) { return p.dispatched; },
          "True once Router.dispatch() was called with this selection.")
      .def("__repr__", &selection_repr);
}

std::string dispatch_repr(const PyDispatch& d) {
  GuardBox& b = *d.box;
  if (b.worker == nullptr) return "<kvroute.Dispatch no worker>";
  const std::lock_guard<std::mutex> lock(b.mu);
  return "<kvroute.Dispatch url='" + b.worker->url + "'" + (b.guard.active() ? "" : ", released") +
         ">";
}

void bind_dispatch(py::module_& m) {
  py::class_<PyDispatch>(m, "Dispatch", R"doc(
One request in flight on its worker: the load the policies see.

Made by Router.dispatch(). Use it as a context manager: leaving the ``with``
block ends the load on every path (return, exception, cancellation), like a
C++ LoadGuard. release() ends it earlier; the load also ends when the object
is garbage-collected. A Dispatch of a selection without a worker does
nothing.

    with router.dispatch(selection):
        response = forward(selection.url, request)
)doc")
      .def("__enter__", [](py::object self) { return self; })
      .def(
          "__exit__",
          [](PyDispatch& d, py::handle, py::handle, py::handle) {
            d.box->release();
            return false;
          },
          py::arg("exc_type"), py::arg("exc"), py::arg("tb"),
          "Ends the load; exceptions propagate.")
      .def(
          "release", [](PyDispatch& d) { d.box->release(); },
          "Ends the request's load now. Idempotent.")
      .def(
          "release_tokens",
          [](PyDispatch& d) {
            const std::lock_guard<std::mutex> lock(d.box->mu);
            d.box->guard.release_tokens();
          },
          "Ends only the token load (least_prefill's queued prefill work), keeping the request "
          "in flight: call it when the first token arrives. Idempotent.")
      .def(
          "set_tokens",
          [](PyDispatch& d, std::int64_t tokens) {
            if (tokens < 0) throw py::value_error("tokens: " + std::to_string(tokens) + " < 0");
            const std::lock_guard<std::mutex> lock(d.box->mu);
            d.box->guard.set_tokens(tokens);
          },
          py::arg("tokens"),
          "Replaces the token load this request carries (its uncached prompt tokens).")
      .def_property_readonly(
          "active",
          [](PyDispatch& d) {
            const std::lock_guard<std::mutex> lock(d.box->mu);
            return d.box->guard.active();
          },
          "True until the load ends.")
      .def_property_readonly(
          "tokens",
          [](PyDispatch& d) {
            const std::lock_guard<std::mutex> lock(d.box->mu);
            return d.box->guard.tokens();
          },
          "The tokens this request adds to its worker's queued work (0 when released, and "
          "for every policy but least_prefill).")
      .def_property_readonly(
          "url",
          [](const PyDispatch& d) -> py::object {
            if (d.box->worker == nullptr) return py::none();
            return py::str(d.box->worker->url);
          },
          "The worker's URL, or None.")
      .def("__repr__", &dispatch_repr);
}

void bind_worker(py::module_& m) {
  py::class_<WorkerInfo>(m, "Worker", R"doc(
A worker as Router.workers() saw it: registration and load, copied (it does
not change afterwards).
)doc")
      .def_readonly("url", &WorkerInfo::url)
      .def_readonly("model", &WorkerInfo::model, "'' when it serves every model.")
      .def_readonly("healthy", &WorkerInfo::healthy)
      .def_readonly("in_flight", &WorkerInfo::in_flight, "Requests dispatched and not ended.")
      .def_readonly("in_flight_tokens", &WorkerInfo::in_flight_tokens,
                    "Tokens those requests carry (least_prefill's queued work).")
      .def_readonly("processed", &WorkerInfo::processed, "Requests ever dispatched to it.")
      .def("__repr__", [](const WorkerInfo& w) {
        return "<kvroute.Worker url='" + w.url + "'" +
               (w.model.empty() ? "" : ", model='" + w.model + "'") +
               (w.healthy ? "" : ", unhealthy") + ", in_flight=" + std::to_string(w.in_flight) +
               ">";
      });
}

}  // namespace

void bind_handles(py::module_& m) {
  bind_selection(m);
  bind_dispatch(m);
  bind_worker(m);
}

}  // namespace kvroute_py
