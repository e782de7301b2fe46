// kvroute.Router: a RouterCore (core.hpp) behind Python arguments. Every
// call that does kvroute work releases the GIL; argument conversion, which
// touches Python objects, happens before.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "handles.hpp"

namespace py = pybind11;

namespace kvroute_py {

void throw_status(const absl::Status& s) {
  const std::string msg(s.message());
  if (absl::IsNotFound(s)) throw py::key_error(msg);
  if (absl::IsResourceExhausted(s)) throw std::runtime_error(msg);
  throw py::value_error(msg);
}

namespace {

// Router(flags, **options) as argv: the flags first, then each option as
// --name=value (underscores as dashes), so an option overrides a flag.
std::vector<std::string> argv_of(py::handle flags, const py::kwargs& options) {
  std::vector<std::string> args;
  if (PyUnicode_Check(flags.ptr())) {
    throw py::type_error("flags must be a list of strings such as ['--policy', 'round_robin']");
  }
  for (py::handle f : flags) args.emplace_back(bytes_of(f, "each flag"));
  for (auto [key, value] : options) {
    std::string name = py::str(key);
    for (char& c : name) c = c == '_' ? '-' : c;
    args.push_back("--" + name + "=" + std::string(py::str(value)));
  }
  return args;
}

std::shared_ptr<RouterCore> make_core(const std::vector<std::string>& args,
                                      std::vector<std::string>* unparsed) {
  const std::vector<std::string_view> views(args.begin(), args.end());
  absl::StatusOr<std::shared_ptr<RouterCore>> core = RouterCore::make(views, unparsed);
  if (!core.ok()) throw_status(core.status());
  return *std::move(core);
}

// One worker spec from a URL string or a {"url", "model", "healthy"} mapping.
kvroute::WorkerSpec spec_of(py::handle w) {
  if (PyUnicode_Check(w.ptr())) return {.url = std::string(bytes_of(w, "a worker url"))};
  if (!py::isinstance<py::dict>(w)) {
    throw py::type_error(
        "a worker is a URL string or a dict {'url': ..., 'model': ..., "
        "'healthy': ...}, not " +
        std::string(py::repr(w)));
  }
  const auto d = py::reinterpret_borrow<py::dict>(w);
  for (auto [key, value] : d) {
    const std::string k = py::str(key);
    if (k != "url" && k != "model" && k != "healthy") {
      throw py::type_error("a worker dict has keys url, model and healthy, not '" + k + "'");
    }
  }
  if (!d.contains("url")) throw py::type_error("a worker dict needs a 'url'");
  kvroute::WorkerSpec spec{.url = std::string(bytes_of(d["url"], "a worker url"))};
  if (d.contains("model")) spec.model = std::string(bytes_of(d["model"], "a worker model"));
  if (d.contains("healthy")) spec.healthy = py::cast<bool>(d["healthy"]);
  return spec;
}

void add_workers(RouterCore& core, py::handle workers) {
  if (workers.is_none()) return;
  if (PyUnicode_Check(workers.ptr())) {
    throw py::type_error("workers must be a list of URLs, not one string");
  }
  std::vector<kvroute::WorkerSpec> specs;
  for (py::handle w : workers) specs.push_back(spec_of(w));
  absl::Status s;
  {
    py::gil_scoped_release nogil;
    s = core.add_workers(specs);
  }
  if (!s.ok()) throw_status(s);
}

std::int64_t prompt_tokens_of(const py::object& n) {
  if (n.is_none()) return -1;
  const auto v = py::cast<std::int64_t>(n);
  if (v < 0) throw py::value_error("prompt_tokens: " + std::to_string(v) + " is negative");
  return v;
}

PySelection& own(const PyRouter& r, PySelection& s) {
  if (s.core != r.core) throw py::value_error("this selection was made by another Router");
  return s;
}

std::unique_ptr<PySelection> select(const PyRouter& r, const py::object& text,
                                    const py::object& tokens, const py::object& headers,
                                    const py::object& model, const py::object& exclude) {
  auto s = std::make_unique<PySelection>(
      PySelection{r.core, OwnedRequest(text, tokens, headers, model), {}, {}, false});
  std::vector<std::string> avoid;
  if (!exclude.is_none()) {
    if (PyUnicode_Check(exclude.ptr())) {
      throw py::type_error("exclude must be a list of URLs, not one string");
    }
    for (py::handle u : exclude) avoid.emplace_back(bytes_of(u, "an excluded url"));
  }
  py::gil_scoped_release nogil;
  s->selection = r.core->select(s->request.view(), avoid);
  return s;
}

PyDispatch dispatch(const PyRouter& r, PySelection& s, const py::object& prompt_tokens) {
  own(r, s);
  if (s.dispatched) {
    throw py::value_error(
        "this selection was dispatched already; select again for another attempt");
  }
  const std::int64_t prompt = prompt_tokens_of(prompt_tokens);
  auto box = std::make_shared<GuardBox>();
  box->core = r.core;
  box->snapshot = s.selection.snapshot;
  box->worker = s.selection.decision.worker;
  box->guard = r.core->dispatch(s.request.view(), s.selection, prompt);
  s.dispatch = box;
  s.dispatched = true;
  return PyDispatch{std::move(box)};
}

std::uint64_t report_cached(const PyRouter& r, PySelection& s, std::int64_t cached_tokens,
                            const py::object& prompt_tokens) {
  own(r, s);
  if (cached_tokens < 0) {
    throw py::value_error("cached_tokens: " + std::to_string(cached_tokens) + " is negative");
  }
  const std::int64_t prompt = prompt_tokens_of(prompt_tokens);
  const std::shared_ptr<GuardBox> box = s.dispatch.lock();
  py::gil_scoped_release nogil;
  const auto cached = static_cast<std::uint64_t>(cached_tokens);
  if (box == nullptr) {
    return r.core->report_cached(s.request.view(), s.selection, cached, prompt, nullptr);
  }
  const std::lock_guard<std::mutex> lock(box->mu);
  return r.core->report_cached(s.request.view(), s.selection, cached, prompt, &box->guard);
}

std::vector<WorkerInfo> workers(const PyRouter& r) {
  const auto snap = r.core->snapshot();
  const kvroute::LoadTracker& load = r.core->load();
  std::vector<WorkerInfo> out;
  for (const kvroute::Worker& w : snap->workers()) {
    out.push_back({w.url, w.model, w.healthy, load.in_flight(w.id), load.in_flight_tokens(w.id),
                   load.processed(w.id)});
  }
  return out;
}

py::dict config(const PyRouter& r) {
  py::dict d;
  for (const ConfigField& f : config_fields(r.core->config())) {
    std::visit([&](const auto& v) { d[py::str(std::string(f.name))] = v; }, f.value);
  }
  return d;
}

template <class F>
void without_gil(F&& f) {
  absl::Status s;
  {
    py::gil_scoped_release nogil;
    s = f();
  }
  if (!s.ok()) throw_status(s);
}

constexpr const char* kRouterDoc = R"doc(
A kvroute router: one routing policy over a set of workers named by URL.

Router(flags=(), *, workers=None, **options)

The policy and its settings come from the gateway's flags (sgl-model-gateway's
names: ``["--policy", "cache_aware", "--cache-threshold", "0.3"]``), from
keyword options named like the flags (``policy="cache_aware",
cache_threshold=0.3``; an option overrides a flag), or both. Policies:
kvroute.POLICIES. Options: policy, cache_threshold, balance_abs_threshold,
balance_rel_threshold, eviction_interval, max_tree_size, max_idle_secs,
assignment_mode, prefix_token_count, prefix_hash_load_factor,
bucket_adjust_interval_secs, bounded_load_factor, queue_weight,
chars_per_token, seed; ``Router().config`` shows the defaults. A bad flag or
value raises ValueError with kvroute's message, which names the flag and the
value: ``cache_threshold (--cache-threshold): 2 is outside [0, 1]``.

``workers`` is a list of URLs (or dicts with url, model, healthy).

The loop, from any number of threads (kvroute releases the GIL):

    s = router.select(prompt, headers={"x-smg-routing-key": user})
    if not s:                         # no worker: a value, not an exception
        return reply(503, s.branch)
    with router.dispatch(s):          # the load lasts as long as the block
        response = forward(s.url, request)
    router.report_cached(s, response.cached_tokens)   # optional feedback
)doc";

using RouterClass = py::class_<PyRouter>;

// Construction and the policy's settings.
void bind_construction(RouterClass& c) {
  c.def(
      py::init([](const py::iterable& flags, const py::object& workers, const py::kwargs& options) {
        auto r = std::make_unique<PyRouter>(PyRouter{make_core(argv_of(flags, options), nullptr)});
        add_workers(*r->core, workers);
        return r;
      }),
      py::arg("flags") = py::tuple(), py::kw_only(), py::arg("workers") = py::none());
  c.def_static(
      "from_args",
      [](const py::iterable& args) {
        std::vector<std::string> unparsed;
        PyRouter r{make_core(argv_of(args, py::kwargs()), &unparsed)};
        return py::make_tuple(py::cast(std::move(r)), py::cast(unparsed));
      },
      py::arg("args"),
      "Builds a Router from a launcher's whole argument list: returns (router, rest), rest "
      "holding the arguments that are not policy flags, in order.");
  c.def_property_readonly(
      "policy", [](const PyRouter& r) { return std::string(r.core->policy_name()); },
      "The policy's name, e.g. 'cache_aware'.");
  c.def_property_readonly("config", &config,
                          "The policy settings as a dict of options (Router(**router.config) "
                          "builds the same policy).");
}

// Workers, by URL.
void bind_workers(RouterClass& c) {
  c.def(
      "add_worker",
      [](const PyRouter& r, std::string url, std::string model, bool healthy) {
        kvroute::WorkerSpec spec{
            .url = std::move(url), .model = std::move(model), .healthy = healthy};
        without_gil([&] { return r.core->add_workers({&spec, 1}); });
      },
      py::arg("url"), py::kw_only(), py::arg("model") = "", py::arg("healthy") = true,
      "Registers a worker. model='' serves every model. ValueError for a bad or "
      "already registered URL.");
  c.def(
      "add_workers",
      [](const PyRouter& r, const py::object& workers) { add_workers(*r.core, workers); },
      py::arg("workers"),
      "Registers several workers at once, all or none: URLs, or dicts with url, model and "
      "healthy.");
  c.def(
      "remove_worker",
      [](const PyRouter& r, const std::string& url) {
        without_gil([&] { return r.core->remove_worker(url); });
      },
      py::arg("url"),
      "Removes a worker; its loads in flight end normally. KeyError for an unknown URL.");
  c.def(
      "set_healthy",
      [](const PyRouter& r, const std::string& url, bool healthy) {
        without_gil([&] { return r.core->set_healthy(url, healthy); });
      },
      py::arg("url"), py::arg("healthy") = true,
      "Marks a worker healthy or not (unhealthy workers are never chosen; the policy keeps "
      "their history). KeyError for an unknown URL.");
  c.def("workers", &workers, "The workers, in registration order, with their loads.");
  c.def("__len__", [](const PyRouter& r) { return r.core->snapshot()->size(); });
  c.def(
      "__contains__",
      [](const PyRouter& r, const py::object& url) {
        return PyUnicode_Check(url.ptr()) && r.core->snapshot()->find_url(bytes_of(url, "url"));
      },
      py::arg("url"));
}

// The request loop: select, dispatch, feedback.
void bind_routing(RouterClass& c) {
  c.def("select", &select, py::arg("text") = py::none(), py::kw_only(),
        py::arg("tokens") = py::none(), py::arg("headers") = py::none(),
        py::arg("model") = py::none(), py::arg("exclude") = py::none(), R"doc(
Chooses a worker for one request. Never raises for "no worker": the
Selection is then false, with the branch and reason.

text      the routing text (the chat messages joined, or the prompt): str or
          bytes (UTF-8); what cache_aware, least_prefill, prefix_hash and
          bucket look at
tokens    token ids (prefix_hash hashes them when given)
headers   a dict or (name, value) pairs: x-smg-routing-key (manual,
          consistent_hashing), x-smg-target-worker (consistent_hashing), ...
model     only workers of this model (and model-less ones); None or '': any
exclude   URLs not to choose (a retry after a failure)
)doc");
  c.def("dispatch", &dispatch, py::arg("selection"), py::kw_only(),
        py::arg("prompt_tokens") = py::none(), R"doc(
Starts the selected request's load on its worker and returns the Dispatch
that ends it: use it as ``with router.dispatch(s): ...``. least_prefill
counts the request's predicted uncached tokens (from prompt_tokens when
given, else from the text at chars_per_token). A selection is dispatched
once; ValueError for a second time or another Router's selection.
)doc");
  c.def(
      "predicted_tokens",
      [](const PyRouter& r, PySelection& s, const py::object& prompt_tokens) {
        own(r, s);
        return r.core->predicted_tokens(s.request.view(), s.selection,
                                        prompt_tokens_of(prompt_tokens));
      },
      py::arg("selection"), py::kw_only(), py::arg("prompt_tokens") = py::none(),
      "The uncached tokens least_prefill predicts for the selection on its worker (what "
      "dispatch() counts); 0 for the other policies.");
  c.def("report_cached", &report_cached, py::arg("selection"), py::arg("cached_tokens"),
        py::kw_only(), py::arg("prompt_tokens") = py::none(), R"doc(
Tells the policy how many tokens of the request's prompt the server had
cached (SGLang reports them per request). cache_aware and least_prefill
drop the tree's claims the server has evicted; least_prefill also corrects
the dispatched request's queued work. Other policies ignore it. Returns the
characters dropped from the tree.
)doc");
}

// Periodic work, metrics, repr.
void bind_observability(RouterClass& c) {
  c.def(
      "maintain",
      [](const PyRouter& r) {
        py::gil_scoped_release nogil;
        r.core->maintain();
      },
      "Runs the policy's periodic work now (tree eviction, expiry); selections also run it "
      "when it is due.");
  c.def(
      "metrics",
      [](const PyRouter& r) {
        std::string text;
        {
          py::gil_scoped_release nogil;
          text = r.core->metrics();
        }
        return text;
      },
      "The Prometheus text exposition: decisions per branch, select latency, per-worker load "
      "and health, tree sizes. Serve it from your /metrics endpoint.");
  c.def("__repr__", [](const PyRouter& r) {
    return "<kvroute.Router policy='" + std::string(r.core->policy_name()) +
           "', workers=" + std::to_string(r.core->snapshot()->size()) + ">";
  });
}

}  // namespace

void bind_router(py::module_& m) {
  RouterClass c(m, "Router", kRouterDoc);
  bind_construction(c);
  bind_workers(c);
  bind_routing(c);
  bind_observability(c);
}

}  // namespace kvroute_py
