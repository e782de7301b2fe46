// kvroute.simulate: the trace simulator of examples/sim (kvroute_sim) from
// Python, returning plain dicts. This file is the only one that knows the
// simulator: the adapter below names every kvsim function, type and field
// the binding uses, so a change in the simulator changes this file alone.
// Built only with nlohmann-json and zlib (the simulator's dependencies);
// without them simulate() raises RuntimeError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bindings.hpp"

#if KVROUTE_PYTHON_SIM
#include "sim/server.hpp"
#include "sim/simulator.hpp"
#include "sim/trace.hpp"
#endif

namespace py = pybind11;

namespace kvroute_py {

#if KVROUTE_PYTHON_SIM
namespace {

// ---- The adapter: simulate()'s arguments in, the simulator's results out.

// What one simulate() call asks for, already checked.
struct SimCall {
  std::string trace;    // a generator name or a path
  std::string jsonl;    // the requests given as a list, as JSONL
  bool listed = false;  // the trace is `jsonl`
  std::size_t n = 0;
  double speed = 1;
  double chars_per_token = 4;
  std::vector<std::string> policies;
  kvsim::SimConfig cfg;
};

using Setter = std::function<void(kvsim::SimConfig&, py::handle)>;
struct SimOption {
  const char* name;
  Setter set;
};

double positive(const char* name, py::handle v, bool zero_ok = false) {
  const auto d = py::cast<double>(v);
  if (!(d > 0 || (zero_ok && d == 0)) || std::isinf(d)) {
    throw py::value_error(std::string(name) + ": " + std::string(py::repr(v)) + " is not a " +
                          (zero_ok ? "non-negative" : "positive") + " number");
  }
  return d;
}

std::int64_t whole(const char* name, py::handle v, std::int64_t lo, std::int64_t hi) {
  const auto i = py::cast<std::int64_t>(v);
  if (i < lo || i > hi) {
    throw py::value_error(std::string(name) + ": " + std::to_string(i) + " is not in [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return i;
}

// The SimConfig fields simulate() takes as keyword options, as kvroute_sim
// takes them as flags.
const std::vector<SimOption>& sim_options() {
  using C = kvsim::SimConfig;
  constexpr std::int64_t kMax = INT64_MAX;
  static const std::vector<SimOption> kOptions = {
      {"servers",
       [](C& c, py::handle v) { c.servers = static_cast<int>(whole("servers", v, 1, 4096)); }},
      {"cache_tokens",
       [](C& c, py::handle v) { c.cache_tokens = whole("cache_tokens", v, 1, kMax); }},
      {"prefill_rate", [](C& c, py::handle v) { c.prefill_rate = positive("prefill_rate", v); }},
      {"tpot", [](C& c, py::handle v) { c.tpot = positive("tpot", v); }},
      {"seed",
       [](C& c, py::handle v) { c.seed = static_cast<std::uint64_t>(whole("seed", v, 0, kMax)); }},
      {"lp_queue_weight",
       [](C& c, py::handle v) { c.lp_queue_weight = positive("lp_queue_weight", v, true); }},
      {"lp_tree_scale",
       [](C& c, py::handle v) { c.lp_tree_scale = positive("lp_tree_scale", v, true); }},
      {"ca_recency_shift",
       [](C& c, py::handle v) {
         c.ca_recency_shift = static_cast<unsigned>(
             whole("ca_recency_shift", v, 0, kvroute::ApproxRadixTree::kMaxRecencyShift));
       }},
      {"ca_feedback_slack_stamps",
       [](C& c, py::handle v) {
         c.ca_feedback_slack_stamps =
             static_cast<std::uint64_t>(whole("ca_feedback_slack_stamps", v, 0, kMax));
       }},
      {"ca_tenant_rule",
       [](C& c, py::handle v) {
         const std::string r = py::str(v);
         if (r == "least_loaded") {
           c.ca_tenant_rule = kvroute::CacheAware::TenantRule::kLeastLoaded;
         } else if (r == "most_recent") {
           c.ca_tenant_rule = kvroute::CacheAware::TenantRule::kMostRecent;
         } else {
           throw py::value_error("ca_tenant_rule: '" + r + "' is not least_loaded or most_recent");
         }
       }},
  };
  return kOptions;
}

std::vector<std::string> policy_names() {
  std::vector<std::string> all = kvsim::all_policy_names();
  for (const std::string& p : kvsim::extra_policy_names()) all.push_back(p);
  return all;
}

std::vector<std::string> generator_names() {
  std::vector<std::string> out;
  for (const kvsim::GenSpec& g : kvsim::kGenerators) out.emplace_back(g.name);
  return out;
}

std::vector<std::string> policies_of(py::handle policies) {
  if (policies.is_none()) return kvsim::all_policy_names();
  if (PyUnicode_Check(policies.ptr())) return {std::string(py::str(policies))};
  const std::vector<std::string> known = policy_names();
  std::vector<std::string> out;
  for (py::handle p : policies) {
    std::string name = py::str(p);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const std::string& k : known) {
        if (!list.empty()) list += ", ";
        list += k;
      }
      throw py::value_error(
          absl::StrCat("policies: '", name, "' is not a simulator policy (expected ", list, ")"));
    }
    out.push_back(std::move(name));
  }
  return out;
}

// A trace argument: a generator name, a path, or a list of request dicts.
void trace_of(py::handle trace, SimCall& call) {
  if (PyUnicode_Check(trace.ptr()) || py::hasattr(trace, "__fspath__")) {
    call.trace = py::str(py::module_::import("os").attr("fspath")(trace));
    if (!kvsim::is_generator(call.trace) && !std::filesystem::exists(call.trace)) {
      PyErr_SetObject(PyExc_FileNotFoundError,
                      py::make_tuple(2,
                                     "no such trace file (and not a built-in generator: "
                                     "chat, agent, batch)",
                                     call.trace)
                          .ptr());
      throw py::error_already_set();
    }
    return;
  }
  call.listed = true;
  const py::object dumps = py::module_::import("json").attr("dumps");
  for (py::handle r : trace) {
    if (!py::isinstance<py::dict>(r)) {
      throw py::type_error("each request is a dict such as {'t': 0.0, 'text': '...'}, not " +
                           std::string(py::repr(r)));
    }
    call.jsonl += std::string(py::str(dumps(r))) + "\n";
  }
}

py::dict result_dict(const kvsim::PolicyResult& p, bool per_request) {
  py::dict branches;
  for (const auto& [k, c] : p.branches) branches[py::str(k)] = c;
  py::dict d;
  d["name"] = p.name;
  d["hit_rate"] = p.hit_rate;
  d["ttft_mean_s"] = p.ttft_mean;
  d["ttft_p50_s"] = p.ttft_p50;
  d["ttft_p99_s"] = p.ttft_p99;
  d["imbalance"] = p.imbalance;
  d["select_us_mean"] = p.select_us_mean;
  d["select_us_p99"] = p.select_us_p99;
  d["branches"] = branches;
  if (per_request) {
    d["ttft_s"] = p.ttft;
    d["server"] = p.server;
    d["cached_tokens"] = p.cached;
    d["claimed_tokens"] = p.claimed;
    py::list branch;
    for (std::string_view b : p.branch) branch.append(py::str(b.data(), b.size()));
    d["branch"] = branch;
    d["prefill_tokens"] = p.prefill_tokens;
  }
  return d;
}

// Loads the trace and runs every policy, without the GIL.
struct SimOutput {
  kvsim::Trace trace;
  double ideal = 0;
  std::vector<kvsim::PolicyResult> results;
};

SimOutput run(const SimCall& call) {
  SimOutput out;
  try {
    out.trace = call.listed
                    ? kvsim::parse_jsonl(call.jsonl, "requests", call.chars_per_token, call.n)
                    : kvsim::load_trace(call.trace, call.n, call.chars_per_token);
  } catch (const kvsim::TraceError& e) {
    throw py::value_error(e.what());
  }
  kvsim::shape(out.trace, call.n, call.speed);
  kvsim::infer_sessions(out.trace);
  if (call.speed != 1) {
    char speed[32];
    std::snprintf(speed, sizeof speed, "%g", call.speed);
    out.trace.name += std::string(" (speed ") + speed + ")";
  }
  out.ideal = kvsim::ideal_hit_rate(out.trace);
  for (const std::string& p : call.policies) {
    out.results.push_back(kvsim::run_policy(out.trace, p, call.cfg));
  }
  return out;
}

py::dict simulate(const py::object& trace, const py::object& policies, std::int64_t n, double speed,
                  double chars_per_token, bool per_request, const py::kwargs& options) {
  SimCall call;
  trace_of(trace, call);
  call.policies = policies_of(policies);
  call.n = static_cast<std::size_t>(whole("n", py::int_(n), 0, INT64_MAX));
  call.speed = positive("speed", py::float_(speed));
  call.chars_per_token = positive("chars_per_token", py::float_(chars_per_token));
  for (auto [key, value] : options) {
    const std::string k = py::str(key);
    const auto& table = sim_options();
    auto it =
        std::find_if(table.begin(), table.end(), [&](const SimOption& o) { return k == o.name; });
    if (it == table.end()) {
      std::string names;
      for (const SimOption& o : table) {
        if (!names.empty()) names += ", ";
        names += o.name;
      }
      throw py::type_error(
          absl::StrCat("simulate() got an unexpected option '", k, "' (options: ", names, ")"));
    }
    it->set(call.cfg, value);
  }
  SimOutput out;
  {
    py::gil_scoped_release nogil;
    out = run(call);
  }
  py::dict per_policy;
  for (const kvsim::PolicyResult& p : out.results)
    per_policy[py::str(p.name)] = result_dict(p, per_request);
  py::dict d;
  d["trace"] = out.trace.name;
  d["servers"] = call.cfg.servers;
  d["requests"] = out.trace.requests.size();
  d["ideal_hit_rate"] = out.ideal;
  d["policies"] = per_policy;
  return d;
}

}  // namespace

#else
namespace {

std::vector<std::string> policy_names() { return {}; }
std::vector<std::string> generator_names() { return {}; }

py::dict simulate(const py::object&, const py::object&, std::int64_t, double, double, bool,
                  const py::kwargs&) {
  throw std::runtime_error(
      "kvroute was built without its simulator (it needs nlohmann-json3-dev and zlib1g-dev: "
      "sh cmake/install-deps.sh)");
}

}  // namespace
#endif  // KVROUTE_PYTHON_SIM

void bind_sim(py::module_& m) {
  m.attr("SIM_POLICIES") = py::tuple(py::cast(policy_names()));
  m.attr("SIM_GENERATORS") = py::tuple(py::cast(generator_names()));
  m.def("simulate", &simulate, py::arg("trace") = "chat", py::kw_only(),
        py::arg("policies") = py::none(), py::arg("n") = 0, py::arg("speed") = 1.0,
        py::arg("chars_per_token") = 4.0, py::arg("per_request") = false, R"doc(
Replays a request trace against simulated inference servers with exact prefix
KV caches, once per routing policy, as kvroute_sim does; returns plain data.

trace            a built-in generator ('chat', 'agent', 'batch'; see
                 kvroute.SIM_GENERATORS), a trace file path (Mooncake JSONL
                 with hash_ids, or JSONL of {"t", "text", "session"?,
                 "output_length"?}; .gz accepted), or a list of such request
                 dicts (errors name them 'requests:K', K counting from 1)
policies         names from kvroute.SIM_POLICIES (default: every kvroute policy
                 plus the references oracle and sticky)
n                keep the first n requests (generators: make n; 0: 2000 /all)
speed            divide arrival times by speed
chars_per_token  characters of routing text per token
per_request      also return per-request lists (ttft_s, server,
                 cached_tokens, claimed_tokens, branch) and per-server
                 prefill_tokens
**options        the server model and policy knobs: servers (8),
                 cache_tokens (1000000), prefill_rate (20000 tokens/s),
                 tpot (0.025 s), seed (1), lp_queue_weight, lp_tree_scale,
                 ca_recency_shift, ca_feedback_slack_stamps, ca_tenant_rule

Returns {"trace", "servers", "requests", "ideal_hit_rate", "policies": {name:
{"hit_rate", "ttft_mean_s", "ttft_p50_s", "ttft_p99_s", "imbalance",
"select_us_mean", "select_us_p99", "branches": {branch: count}, ...}}}.
Bad arguments raise ValueError (TypeError for an unknown option,
FileNotFoundError for a missing file). The GIL is released while it runs.
)doc");
}

}  // namespace kvroute_py
