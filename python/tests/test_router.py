"""kvroute.Router: construction, workers by URL, select's arguments, metrics."""

import kvroute
import pytest
from conftest import URLS, in_flight


def test_options_map_onto_the_gateways_flags():
    r = kvroute.Router(policy="least_prefill", cache_threshold=0.5, queue_weight=0.75,
                       eviction_interval_secs=30, max_tree_size=1000, seed=9)
    assert r.policy == "least_prefill"
    c = r.config
    assert (c["cache_threshold"], c["queue_weight"], c["eviction_interval"]) == (0.5, 0.75, 30)
    assert (c["max_tree_size"], c["seed"]) == (1000, 9)


def test_defaults_are_the_gateways():
    c = kvroute.Router().config
    assert c["policy"] == "cache_aware"
    assert c["cache_threshold"] == 0.3
    assert c["balance_abs_threshold"] == 64
    assert c["balance_rel_threshold"] == 1.5
    assert c["eviction_interval"] == 120
    assert c["max_tree_size"] == 1 << 26


def test_flags_and_options_together_the_option_wins():
    r = kvroute.Router(["--policy", "round_robin", "--router-cache-threshold=0.9"],
                       cache_threshold=0.2)
    assert r.policy == "round_robin"
    assert r.config["cache_threshold"] == 0.2


def test_config_round_trips():
    a = kvroute.Router(policy="manual", assignment_mode="min_group", max_idle_secs=60)
    b = kvroute.Router(**a.config)
    assert b.config == a.config


def test_from_args_keeps_what_is_not_a_policy_flag():
    r, rest = kvroute.Router.from_args(
        ["--model-path", "m", "--policy", "power_of_two", "--port=3000", "--dp", "4"])
    assert r.policy == "power_of_two"
    assert rest == ["--model-path", "m", "--port=3000", "--dp", "4"]


def test_workers_by_url(urls):
    r = kvroute.Router(policy="round_robin")
    assert len(r) == 0
    r.add_worker(urls[0])
    r.add_workers(urls[1:3])
    r.add_workers([{"url": urls[3], "model": "llama", "healthy": False}])
    assert [w.url for w in r.workers()] == urls
    assert len(r) == 4 and urls[2] in r and "http://nope" not in r and 42 not in r
    w3 = r.workers()[3]
    assert (w3.model, w3.healthy, w3.in_flight, w3.processed) == ("llama", False, 0, 0)
    r.remove_worker(urls[0])
    assert urls[0] not in r and len(r) == 3
    r.set_healthy(urls[3])
    assert r.workers()[-1].healthy


def test_unhealthy_and_removed_workers_are_never_chosen(make_router, urls):
    r = make_router("round_robin")
    r.set_healthy(urls[0], False)
    r.remove_worker(urls[1])
    chosen = {r.select(f"request {i}").url for i in range(20)}
    assert chosen == {urls[2], urls[3]}


def test_no_worker_is_a_falsy_value_not_an_exception(urls):
    r = kvroute.Router(policy="cache_aware")
    s = r.select("hello")
    assert not s and s.url is None and s.model is None
    assert (s.branch, s.reason) == ("no_workers", "no_workers")
    r.add_worker(urls[0], healthy=False)
    s = r.select("hello")
    assert not s and (s.branch, s.reason) == ("no_healthy_workers", "no_healthy_workers")
    assert "no worker" in repr(s)


def test_model_filter(urls):
    r = kvroute.Router(policy="round_robin", workers=[
        {"url": urls[0], "model": "llama"}, {"url": urls[1], "model": "qwen"}, urls[2]])
    assert {r.select("x", model="llama").url for _ in range(6)} == {urls[0], urls[2]}
    assert {r.select("x", model="mistral").url for _ in range(6)} == {urls[2]}
    assert r.select("x", model="llama").model in ("llama", "")


def test_exclude_avoids_urls_for_a_retry(make_router, urls):
    r = make_router("random")
    for i in range(20):
        assert r.select(f"r{i}", exclude=urls[:3]).url == urls[3]
    assert not r.select("r", exclude=urls)


def test_select_takes_str_bytes_tokens_and_header_pairs(make_router):
    r = make_router("consistent_hashing")
    a = r.select("héllo", headers={"X-SMG-Routing-Key": "user-1"})
    b = r.select("héllo".encode(), headers=[(b"x-smg-routing-key", b"user-1")])
    assert a.url == b.url and a.branch == b.branch == "routing_key_hit"
    import array
    p = make_router("prefix_hash")
    ids = list(range(300))
    assert p.select(tokens=ids).url == p.select(tokens=array.array("I", ids)).url
    assert p.select(tokens=ids).url == p.select(tokens=tuple(ids)).url


def test_selection_and_router_repr(make_router):
    r = make_router("round_robin")
    s = r.select("x")
    assert "url='http://10.0.0." in repr(s) and "branch='round_robin'" in repr(s)
    assert repr(r) == "<kvroute.Router policy='round_robin', workers=4>"


def test_metrics_is_prometheus_text_of_this_router(make_router):
    r = make_router("cache_aware")
    for i in range(3):
        with r.dispatch(r.select("the same prompt, longer than a few characters")):
            pass
    text = r.metrics()
    assert '# TYPE kvroute_policy_branch_total counter' in text
    assert 'kvroute_policy_branch_total{policy="cache_aware",branch="cache_hit"} 2' in text
    assert 'kvroute_policy_branch_total{policy="cache_aware",branch="cache_miss"} 1' in text
    assert f'smg_worker_requests_active{{worker="{URLS[0]}"}} 0' in text
    assert 'kvroute_worker_processed{worker=' in text
    assert 'kvroute_tree_chars{model=""}' in text
    assert 'kvroute_select_worker_duration_seconds_count{policy="cache_aware"} 3' in text


def test_maintain_runs(make_router):
    r = make_router("manual", max_idle_secs=1)
    r.select("x", headers={"x-smg-routing-key": "k"})
    r.maintain()
    assert in_flight(r) == {u: 0 for u in URLS}


def test_help_explains():
    assert "cache_threshold (--cache-threshold)" in kvroute.Router.__doc__
    for name in ("select", "dispatch", "report_cached", "metrics", "add_worker", "remove_worker",
                 "set_healthy", "workers", "maintain", "predicted_tokens", "from_args"):
        doc = getattr(kvroute.Router, name).__doc__
        assert doc and len(doc) > 60, name
    for cls in (kvroute.Selection, kvroute.Dispatch, kvroute.Worker):
        assert cls.__doc__ and cls.__module__ == "kvroute"
    assert "Returns {" in kvroute.simulate.__doc__
    assert "Router" in kvroute.__doc__
