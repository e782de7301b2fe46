"""Routing from many Python threads at once: the GIL is released in kvroute."""

import os
import threading
import time

import kvroute
import pytest
from conftest import URLS

THREADS = 8


def run_threads(target, n):
    errors = []
    start = threading.Barrier(n)

    def body(i):
        try:
            start.wait()
            target(i)
        except BaseException as e:  # noqa: B036 - reported below
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]


@pytest.mark.parametrize("policy", kvroute.POLICIES)
def test_eight_threads_route_while_workers_come_and_go(policy):
    r = kvroute.Router(policy=policy, workers=URLS)
    churn_urls = [f"http://10.0.1.{i}:30000" for i in range(6)]
    universe = set(URLS) | set(churn_urls)
    done = threading.Event()
    seen = [set() for _ in range(THREADS)]

    def route(i):
        for k in range(400):
            text = f"system prompt {k % 3}. " * 10 + f"thread {i} turn {k}"
            s = r.select(text, headers={"x-smg-routing-key": f"user-{k % 11}"})
            assert s, s.branch  # URLS[0] stays healthy throughout
            assert s.url in universe
            seen[i].add(s.url)
            with r.dispatch(s, prompt_tokens=len(text) // 4):
                r.report_cached(s, k % 7, prompt_tokens=len(text) // 4)

    def churn():
        k = 0
        while not done.is_set():
            url = churn_urls[k % len(churn_urls)]
            if url in r:
                r.remove_worker(url)
            else:
                r.add_worker(url)
            r.set_healthy(URLS[1 + k % 3], k % 2 == 0)
            k += 1
            time.sleep(0.0005)

    churner = threading.Thread(target=churn)
    churner.start()
    try:
        run_threads(route, THREADS)
    finally:
        done.set()
        churner.join(timeout=60)
    # Every load ended, on the workers still registered and the ones removed.
    assert all(w.in_flight == 0 and w.in_flight_tokens == 0 for w in r.workers())
    assert sum(w.processed for w in r.workers()) > 0
    assert set().union(*seen) <= universe
    assert "kvroute_policy_branch_total" in r.metrics()


def coverage_while(call):
    """The share of `call`'s duration in which the main thread ran Python."""
    window = {}

    def worker():
        window["begin"] = time.perf_counter()
        call()
        window["end"] = time.perf_counter()

    t = threading.Thread(target=worker)
    stamps = []
    t.start()
    while t.is_alive():
        stamps.append(time.perf_counter())
    t.join()
    inside = [x for x in stamps if window["begin"] <= x <= window["end"]]
    span = window["end"] - window["begin"]
    return (inside[-1] - inside[0]) / span if len(inside) > 1 else 0.0


def test_select_releases_the_gil():
    r = kvroute.Router(policy="cache_aware", workers=URLS)
    big = os.urandom(24 << 20).hex()  # 48 MB of new text: a long insert
    assert coverage_while(lambda: r.select(big)) > 0.5


def test_simulate_releases_the_gil():
    assert coverage_while(
        lambda: kvroute.simulate("chat", n=1500, policies=["cache_aware", "least_prefill"])) > 0.5
