#!/usr/bin/env python3
"""The cost of one kvroute select from Python against the same call from C++.

For each policy, one Router with 8 workers routes the same chat-like texts
(multi-turn histories over shared system prompts, about 2 KB each) two ways,
in alternating rounds of the same process:

  python   router.select(text) in a Python loop (argument conversion, the
           GIL released and taken back, the Selection object)
  c++      the C++ calls behind it (RouterCore::select: Router<AnyPolicy>::
           select and the metrics) in a C++ loop over the same texts, on the
           same Router (kvroute._kvroute._bench_loop)

and prints the best round of each, in nanoseconds per request, and their
difference: the binding's overhead per call. "select+dispatch" adds
`with router.dispatch(s): pass` (C++: dispatch and release). The C++
reference "router only" is Router<AnyPolicy>::select without the metrics.

Use an optimised build of the module, e.g.:

    cmake --preset bench && cmake --build build/bench --target kvroute_python
    PYTHONPATH=build/bench/python /usr/bin/python3 python/benchmarks/select_overhead.py

(or a module installed with pip, which builds in Release).
"""

import argparse
import os
import platform
import random
import statistics
import sys
import time

import kvroute
from kvroute import _kvroute


def chat_texts(n, seed=1):
    """n prompts: growing conversations over four shared system prompts."""
    rng = random.Random(seed)
    words = ["cache", "prefix", "token", "router", "worker", "prefill", "decode", "batch",
             "session", "latency", "memory", "model", "request", "queue", "load", "tree"]
    systems = [f"System {k}: " + " ".join(rng.choice(words) for _ in range(150))
               for k in range(4)]
    texts, live = [], []
    while len(texts) < n:
        if not live or rng.random() < 0.2:
            live.append(rng.choice(systems))
        i = rng.randrange(len(live))
        live[i] += "\nUser: " + " ".join(rng.choice(words) for _ in range(rng.randint(10, 40)))
        if len(live[i]) > 4000:
            live[i] = rng.choice(systems)
        texts.append(live[i])
    return texts


def python_round(router, texts, mode):
    select, dispatch = router.select, router.dispatch
    t0 = time.perf_counter_ns()
    if mode == "select":
        for t in texts:
            select(t)
    else:
        for t in texts:
            with dispatch(select(t)):
                pass
    return (time.perf_counter_ns() - t0) / len(texts)


def measure(policy, texts, rounds, workers):
    router = kvroute.Router(policy=policy,
                            workers=[f"http://10.0.0.{i}:30000" for i in range(workers)])
    for t in texts:  # warm up: the trees hold every text from here on
        router.select(t)
    rows = []
    for mode in ("select", "select+dispatch"):
        cpp_mode = "select" if mode == "select" else "select_dispatch"
        py, cpp = [], []
        for _ in range(rounds):
            py.append(python_round(router, texts, mode))
            cpp.append(_kvroute._bench_loop(router, texts, 1, cpp_mode))
        rows.append((mode, min(py), min(cpp), statistics.median(py), statistics.median(cpp)))
    raw = min(_kvroute._bench_loop(router, texts, 1, "router_select") for _ in range(rounds))
    return rows, raw


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--policies", default="round_robin,cache_aware,least_prefill")
    p.add_argument("--texts", type=int, default=2000, help="texts per round (default 2000)")
    p.add_argument("--rounds", type=int, default=15, help="rounds of each (default 15)")
    p.add_argument("--workers", type=int, default=8)
    args = p.parse_args(argv)
    print(f"kvroute {kvroute.__version__} module build: {_kvroute._build}; "
          f"Python {platform.python_version()} ({sys.executable})")
    print(f"machine: {cpu_name()}, {os.cpu_count()} CPUs, {platform.system()} "
          f"{platform.release()}")
    if "Rel" not in _kvroute._build:
        print("warning: not a Release build of the module; the figures are not representative")
    texts = chat_texts(args.texts)
    print(f"{args.texts} texts of {sum(map(len, texts)) // len(texts)} characters on average, "
          f"{args.workers} workers, best of {args.rounds} rounds (median in brackets), "
          f"ns per request")
    print(f"{'policy':<15}{'call':<17}{'python':>14}{'c++':>14}{'overhead':>14}")
    for policy in args.policies.split(","):
        rows, raw = measure(policy, texts, args.rounds, args.workers)
        for mode, py, cpp, py_med, cpp_med in rows:
            print(f"{policy:<15}{mode:<17}{py:>7.0f} [{py_med:>4.0f}]{cpp:>7.0f} [{cpp_med:>4.0f}]"
                  f"{py - cpp:>7.0f} [{py_med - cpp_med:>4.0f}]")
        print(f"{policy:<15}{'router only':<17}{'':>14}{raw:>7.0f}")


if __name__ == "__main__":
    main()
