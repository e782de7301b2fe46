"""Every policy from Python: each one's own rule, seen through the binding."""

import kvroute
import pytest
from conftest import URLS, in_flight

KEY = "x-smg-routing-key"


@pytest.mark.parametrize("policy", kvroute.POLICIES)
def test_every_policy_routes_to_a_registered_worker(make_router, policy):
    r = make_router(policy)
    assert r.policy == policy
    for i in range(50):
        s = r.select(f"prompt {i % 7} " * 20, headers={KEY: f"user-{i % 5}"})
        assert s and s.url in URLS and s.branch in kvroute.BRANCHES
        with r.dispatch(s):
            assert in_flight(r)[s.url] == 1


def test_all_nine_policies_are_listed():
    assert set(kvroute.POLICIES) == {
        "cache_aware", "round_robin", "random", "power_of_two", "prefix_hash", "manual",
        "bucket", "consistent_hashing", "least_prefill"}


def test_round_robin_cycles_in_registration_order(make_router):
    r = make_router("round_robin")
    assert [r.select("x").url for _ in range(8)] == URLS + URLS


def test_random_is_seeded_and_covers_every_worker(make_router):
    a, b = make_router("random", seed=5), make_router("random", seed=5)
    seq = [a.select("x").url for _ in range(64)]
    assert seq == [b.select("x").url for _ in range(64)]
    assert set(seq) == set(URLS)
    assert {r.branch for r in [a.select("x")]} == {"random"}


def test_power_of_two_avoids_the_loaded_worker(make_router):
    r = make_router("power_of_two", workers=URLS[:2])
    held = r.dispatch(r.select("x"))
    for _ in range(10):
        assert r.select("y").url != held.url
    held.release()


def test_consistent_hashing_keys_and_target_worker(make_router):
    r = make_router("consistent_hashing")
    homes = {k: r.select("x", headers={KEY: k}).url for k in ("a", "b", "c", "d", "e")}
    for k, url in homes.items():
        s = r.select("other text", headers={KEY: k})
        assert (s.url, s.branch) == (url, "routing_key_hit")
    s = r.select("x", headers={"x-smg-target-worker": URLS[2]})
    assert (s.url, s.branch) == (URLS[2], "target_worker_hit")
    miss = r.select("x", headers={"x-smg-target-worker": "http://gone:1"})
    assert not miss and (miss.branch, miss.reason) == ("target_worker_miss", "policy_miss")
    assert r.select("x").branch == "random_fallback"


def test_prefix_hash_follows_the_prefix(make_router):
    r = make_router("prefix_hash", prefix_token_count=16)
    base = "a shared prefix of more than sixteen characters"
    s = r.select(base + " one")
    assert s.branch == "ring_hit"
    assert all(r.select(base + f" {i}").url == s.url for i in range(10))


def test_manual_pins_a_routing_key(make_router):
    r = make_router("manual")
    first = r.select("x", headers={KEY: "session-1"})
    assert first.branch == "vacant"
    again = r.select("y", headers={KEY: "session-1"})
    assert (again.url, again.branch) == (first.url, "occupied_hit")
    r.set_healthy(first.url, False)
    moved = r.select("z", headers={KEY: "session-1"})
    assert moved.branch == "occupied_miss" and moved.url != first.url
    assert r.select("no key").branch == "no_routing_id"


def test_bucket_places_by_length(make_router):
    r = make_router("bucket", workers=URLS[:3])
    short, long = r.select("x" * 10), r.select("x" * 3000)
    assert (short.url, short.branch) == (URLS[0], "bucket_hit")
    assert (long.url, long.branch) == (URLS[2], "bucket_hit")


def test_cache_aware_hits_and_feedback_drops_stale_claims(make_router):
    r = make_router("cache_aware")
    history = "You are a helpful assistant. " * 20
    first = r.select(history)
    assert first.branch == "cache_miss" and first.claimed == 0
    second = r.select(history + "and a follow-up question")
    assert (second.url, second.branch) == (first.url, "cache_hit")
    assert second.claimed == len(history)


def test_cache_aware_feedback_drops_what_the_server_evicted(make_router):
    # One worker, so that every text lands on it. The tree keeps recency in
    # steps of 64 requests and feedback spares the missing entry's own step:
    # the old conversation goes in an older step.
    r = make_router("cache_aware", workers=URLS[:1])
    old = "an older conversation: " + "o" * 400
    text = "this conversation: " + "t" * 400
    r.select(old)
    for i in range(70):
        r.select(f"filler {i}")
    r.select(text)
    s = r.select(text)
    assert s.claimed == len(text)
    assert r.report_cached(s, 105, prompt_tokens=105) == 0  # all cached: nothing to take back
    assert r.report_cached(s, 0, prompt_tokens=105) > 0  # none cached: older claims go
    assert r.select(old).claimed < len(old)


def test_cache_aware_report_of_a_full_hit_changes_nothing(make_router):
    r = make_router("cache_aware")
    text = "system prompt " * 40
    r.select(text)
    s = r.select(text + "more")
    assert r.report_cached(s, s.claimed // 4) == 0


def test_least_prefill_dispatches_its_predicted_tokens(make_router):
    r = make_router("least_prefill")
    text = "z" * 4000  # 1000 tokens at 4 characters a token
    s = r.select(text)
    assert r.predicted_tokens(s) == 1000
    assert r.predicted_tokens(s, prompt_tokens=900) == 900
    with r.dispatch(s, prompt_tokens=900) as d:
        assert d.tokens == 900
        w = {w.url: w for w in r.workers()}[s.url]
        assert w.in_flight_tokens == 900
        # The server had 600 cached: the queued work is the other 300.
        r.report_cached(s, 600, prompt_tokens=900)
        assert d.tokens == 300
        d.release_tokens()
        assert d.tokens == 0 and d.active
    assert not d.active
    again = r.select(text + "more")
    assert again.url == s.url and again.branch == "cache_hit" and again.claimed == 4000
    assert r.predicted_tokens(again) == 1


def test_least_prefill_spreads_queued_work(make_router):
    r = make_router("least_prefill", workers=URLS[:2])
    held = [r.dispatch(r.select(f"{i} " + "q" * 8000)) for i in range(4)]
    assert sorted(in_flight(r).values()) == [2, 2]
    for d in held:
        d.release()


def test_other_policies_ignore_feedback(make_router):
    r = make_router("round_robin")
    s = r.select("x" * 100)
    with r.dispatch(s) as d:
        assert d.tokens == 0
        assert r.report_cached(s, 10) == 0
    assert r.predicted_tokens(s) == 0
