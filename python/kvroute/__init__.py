"""kvroute: cache-aware routing of LLM requests to inference servers.

The policies of sgl-model-gateway (the Rust router in front of SGLang
servers) and kvroute's own least_prefill, from Python at C++ speed: a
Router chooses a worker for each request, holds its load while it is in
flight, and learns from the cached tokens the servers report. The GIL is
released while kvroute works, so any number of threads route at once.

    import kvroute

    router = kvroute.Router(policy="cache_aware", workers=[
        "http://10.0.0.1:30000", "http://10.0.0.2:30000"])
    s = router.select(prompt, headers={"x-smg-routing-key": user})
    if s:
        with router.dispatch(s):              # the load ends with the block
            response = forward(s.url, request)
        router.report_cached(s, response.cached_tokens)

Also: kvroute.simulate() replays a trace against simulated servers, once per
policy, and returns each policy's hit rate and time to first token as dicts.

Names: Router, Selection, Dispatch, Worker, simulate, POLICIES, BRANCHES,
SIM_POLICIES, SIM_GENERATORS, __version__. help(kvroute.Router) has the rest.
"""

from ._kvroute import (
    BRANCHES,
    POLICIES,
    SIM_GENERATORS,
    SIM_POLICIES,
    Dispatch,
    Router,
    Selection,
    Worker,
    __version__,
    simulate,
)

__all__ = [
    "BRANCHES",
    "POLICIES",
    "SIM_GENERATORS",
    "SIM_POLICIES",
    "Dispatch",
    "Router",
    "Selection",
    "Worker",
    "__version__",
    "simulate",
]

for _name in ("Dispatch", "Router", "Selection", "Worker"):
    # help() and tracebacks show kvroute.Router, not kvroute._kvroute.Router.
    globals()[_name].__module__ = __name__
simulate.__module__ = __name__
del _name
