"""Router.dispatch: the load lasts as long as the Dispatch, and ends on every path."""

import gc

import kvroute
import pytest
from conftest import URLS, in_flight

IDLE = {u: 0 for u in URLS}


def loaded(router, url):
    return {**IDLE, url: 1} == in_flight(router)


def test_the_with_block_holds_the_load(make_router):
    r = make_router("round_robin")
    s = r.select("x")
    with r.dispatch(s) as d:
        assert loaded(r, s.url) and d.active and d.url == s.url and s.dispatched
    assert in_flight(r) == IDLE and not d.active
    assert r.workers()[URLS.index(s.url)].processed == 1


def test_an_exception_in_the_block_ends_the_load_and_propagates(make_router):
    r = make_router("cache_aware")
    s = r.select("a prompt")
    with pytest.raises(ConnectionError, match="worker went away"):
        with r.dispatch(s):
            assert loaded(r, s.url)
            raise ConnectionError("worker went away")
    assert in_flight(r) == IDLE


def test_return_break_and_generator_close_end_the_load(make_router):
    r = make_router("least_prefill")

    def forward():
        s = r.select("x" * 400)
        with r.dispatch(s) as d:
            return d

    assert not forward().active and in_flight(r) == IDLE
    for _ in range(3):
        with r.dispatch(r.select("y")):
            break
    assert in_flight(r) == IDLE

    def stream():
        with r.dispatch(r.select("z")):
            yield "first token"
            yield "second token"

    g = stream()
    assert next(g) == "first token" and sum(in_flight(r).values()) == 1
    g.close()  # the client disconnected
    assert in_flight(r) == IDLE
    w = r.workers()
    assert sum(x.in_flight_tokens for x in w) == 0


def test_release_is_idempotent_and_exit_after_release_is_harmless(make_router):
    r = make_router("round_robin")
    with r.dispatch(r.select("x")) as d:
        d.release()
        assert in_flight(r) == IDLE
        d.release()
    assert in_flight(r) == IDLE and "released" in repr(d)


def test_a_dispatch_dropped_without_with_ends_its_load_when_collected(make_router):
    r = make_router("round_robin")
    s = r.select("x")
    d = r.dispatch(s)
    assert loaded(r, s.url)
    del d
    gc.collect()
    assert in_flight(r) == IDLE
    # The selection alone does not hold the load (it remembers its dispatch weakly).
    assert s.dispatched


def test_a_selection_without_a_worker_dispatches_to_nothing():
    r = kvroute.Router(policy="round_robin")
    s = r.select("x")
    with r.dispatch(s) as d:
        assert not d.active and d.url is None and d.tokens == 0
    assert repr(d) == "<kvroute.Dispatch no worker>"


def test_the_load_outlives_the_router_object(make_router):
    r = make_router("least_prefill")
    s = r.select("x" * 1000)
    d = r.dispatch(s)
    del r
    gc.collect()
    assert d.active and d.tokens == 250
    d.release()
    assert not d.active


def test_loads_steer_the_next_selection(make_router):
    # cache_aware's balance test reads the loads dispatch raises.
    r = make_router("cache_aware", workers=URLS[:2], balance_abs_threshold=2,
                    balance_rel_threshold=1.0)
    text = "one conversation " * 20
    home = r.select(text).url
    held = []
    for _ in range(3):
        s = r.select(text)
        assert s.url == home and s.branch == "cache_hit"
        held.append(r.dispatch(s))
    s = r.select(text)
    assert (s.branch, s.url != home) == ("imbalanced", True)
    for d in held:
        d.release()
    assert r.select(text).branch == "cache_hit"
