"""Bad input: a Python exception carrying kvroute's message, and nothing lost."""

import re

import kvroute
import pytest
from conftest import URLS


@pytest.mark.parametrize("kwargs, message", [
    ({"cache_threshold": 2}, "cache_threshold (--cache-threshold): 2 is outside [0, 1]"),
    ({"cache_threshold": "abc"}, "--cache-threshold: 'abc' is not a number"),
    ({"balance_rel_threshold": 0.5},
     "balance_rel_threshold (--balance-rel-threshold): 0.5 must be finite and >= 1"),
    ({"policy": "fastest"}, "--policy: 'fastest' is not a policy (expected one of cache_aware"),
    ({"assignment_mode": "nearest"}, "--assignment-mode: 'nearest' is not an assignment mode"),
    ({"max_tree_size": -1}, "--max-tree-size: '-1' is not a non-negative integer"),
    ({"queue_weight": float("inf")}, "queue_weight (--queue-weight): inf must be finite"),
    ({"prefix_token_count": 0}, "prefix_token_count (--prefix-token-count): 0 must be > 0"),
    ({"no_such_option": 1}, "--no-such-option: unknown flag"),
])
def test_configuration_errors_are_value_errors_naming_flag_and_value(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        kvroute.Router(**kwargs)


def test_flag_list_errors():
    with pytest.raises(ValueError, match=re.escape("--policy: missing value")):
        kvroute.Router(["--policy"])
    with pytest.raises(ValueError, match=re.escape("argument 0: 'policy' is not a --flag")):
        kvroute.Router(["policy", "round_robin"])
    with pytest.raises(TypeError, match="list of strings"):
        kvroute.Router("--policy round_robin")
    with pytest.raises(TypeError, match="each flag must be str or bytes, not int"):
        kvroute.Router(["--seed", 3])


def test_worker_errors_leave_the_workers_as_they_were():
    r = kvroute.Router(policy="round_robin", workers=URLS[:2])
    with pytest.raises(ValueError, match="already registered"):
        r.add_worker(URLS[0])
    with pytest.raises(ValueError, match="appears twice"):
        r.add_workers([URLS[2], URLS[2]])
    with pytest.raises(ValueError, match="worker url"):
        r.add_workers([URLS[3], ""])  # all or none: URLS[3] is not added either
    with pytest.raises(ValueError):
        r.add_worker("http://has space")
    with pytest.raises(KeyError, match="is not registered"):
        r.remove_worker("http://unknown:1")
    with pytest.raises(KeyError):
        r.set_healthy("http://unknown:1", False)
    with pytest.raises(TypeError, match="a worker is a URL string or a dict"):
        r.add_workers([42])
    with pytest.raises(TypeError, match="not 'port'"):
        r.add_workers([{"url": "http://x", "port": 1}])
    with pytest.raises(TypeError, match="not one string"):
        r.add_workers("http://x")
    assert [w.url for w in r.workers()] == URLS[:2]


def test_select_argument_errors(make_router):
    r = make_router("round_robin")
    with pytest.raises(TypeError, match="text must be str or bytes, not int"):
        r.select(42)
    with pytest.raises(ValueError, match=re.escape("tokens[1]: -1 is not a token id")):
        r.select(tokens=[1, -1])
    with pytest.raises(ValueError, match=re.escape("tokens[0]: 4294967296 is not a token id")):
        r.select(tokens=[2**32])
    with pytest.raises(ValueError, match=re.escape("tokens[0]: 'a' is not a token id")):
        r.select(tokens=["a"])
    with pytest.raises(TypeError, match="tokens must be an iterable of ints"):
        r.select(tokens="abc")
    with pytest.raises(TypeError, match="headers must be a mapping"):
        r.select("x", headers=5)
    with pytest.raises(TypeError, match=r"\(name, value\) pair"):
        r.select("x", headers=[("only-a-name",)])
    with pytest.raises(TypeError, match="a header value must be str or bytes"):
        r.select("x", headers={"x-smg-routing-key": 7})
    with pytest.raises(TypeError, match="model must be str or bytes"):
        r.select("x", model=1)
    with pytest.raises(TypeError, match="not one string"):
        r.select("x", exclude=URLS[0])
    with pytest.raises(UnicodeEncodeError):
        r.select("\ud800")  # a lone surrogate has no UTF-8


def test_dispatch_and_feedback_errors(make_router):
    r, other = make_router("least_prefill"), make_router("least_prefill")
    s = r.select("x")
    with pytest.raises(ValueError, match="another Router"):
        other.dispatch(s)
    with pytest.raises(ValueError, match="another Router"):
        other.report_cached(s, 1)
    with pytest.raises(ValueError, match="prompt_tokens: -5 is negative"):
        r.dispatch(s, prompt_tokens=-5)
    with r.dispatch(s) as d:
        with pytest.raises(ValueError, match="dispatched already"):
            r.dispatch(s)
        with pytest.raises(ValueError, match="cached_tokens: -1 is negative"):
            r.report_cached(s, -1)
        with pytest.raises(ValueError, match="tokens: -3 < 0"):
            d.set_tokens(-3)
    assert all(w.in_flight == 0 for w in r.workers())
