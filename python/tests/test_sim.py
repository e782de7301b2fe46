"""kvroute.simulate: the trace simulator from Python, results as plain dicts."""

import gzip
import json
import re

import kvroute
import pytest

pytestmark = pytest.mark.skipif(not kvroute.SIM_POLICIES,
                                reason="built without the simulator (nlohmann-json, zlib)")

SUMMARY = {"name", "hit_rate", "ttft_mean_s", "ttft_p50_s", "ttft_p99_s", "imbalance",
           "select_us_mean", "select_us_p99", "branches"}


def text_trace(sessions=5, turns=6):
    """A multi-turn text trace: each turn carries its session's history."""
    out, t = [], 0.0
    for turn in range(turns):
        for s in range(sessions):
            history = f"system prompt of session {s}. " * 150 + "".join(
                f" user turn {k} of session {s}." * 20 for k in range(turn + 1))
            out.append({"t": t, "text": history, "session": f"s{s}", "output_length": 32})
            t += 0.05
    return out


def test_a_generator_gives_every_policy_as_plain_data():
    res = kvroute.simulate("chat", n=300)
    assert res["trace"] == "chat" and res["requests"] == 300 and res["servers"] == 8
    assert 0 < res["ideal_hit_rate"] <= 1
    assert list(res["policies"]) == [
        "round_robin", "random", "power_of_two", "consistent_hashing", "prefix_hash", "manual",
        "bucket", "cache_aware", "cache_aware_feedback", "least_prefill", "oracle", "sticky"]
    for name, p in res["policies"].items():
        assert set(p) == SUMMARY and p["name"] == name
        assert 0 <= p["hit_rate"] <= res["ideal_hit_rate"] + 1e-9
        assert sum(p["branches"].values()) == 300
    json.dumps(res)  # plain data all the way down
    p = res["policies"]
    assert p["cache_aware"]["hit_rate"] > p["round_robin"]["hit_rate"]


def test_options_reach_the_server_model_and_per_request_lists():
    res = kvroute.simulate("agent", n=200, policies=["least_prefill"], servers=3,
                           cache_tokens=200_000, prefill_rate=10_000, tpot=0.01, seed=4,
                           per_request=True, speed=2)
    assert res["servers"] == 3 and res["trace"] == "agent (speed 2)"
    p = res["policies"]["least_prefill"]
    assert len(p["ttft_s"]) == len(p["server"]) == len(p["branch"]) == 200
    assert set(p["server"]) <= {0, 1, 2} and len(p["prefill_tokens"]) == 3
    assert all(b in kvroute.BRANCHES for b in p["branch"])
    assert len(p["cached_tokens"]) == len(p["claimed_tokens"]) == 200


def test_a_list_of_requests():
    res = kvroute.simulate(text_trace(), policies=["round_robin", "cache_aware", "sticky"],
                           servers=3)
    assert res["trace"] == "requests" and res["requests"] == 30
    p = res["policies"]
    assert p["cache_aware"]["hit_rate"] > p["round_robin"]["hit_rate"]


def test_a_trace_file_plain_or_gzip(tmp_path):
    lines = "\n".join(json.dumps(r) for r in text_trace()) + "\n"
    plain = tmp_path / "trace.jsonl"
    plain.write_text(lines)
    packed = tmp_path / "trace.jsonl.gz"
    packed.write_bytes(gzip.compress(lines.encode()))
    a = kvroute.simulate(str(plain), policies="cache_aware", servers=3)
    b = kvroute.simulate(packed, policies=["cache_aware"], servers=3)  # a PathLike
    assert a["trace"] == "trace.jsonl" and b["trace"] == "trace.jsonl.gz"
    assert a["policies"]["cache_aware"]["hit_rate"] == b["policies"]["cache_aware"]["hit_rate"]


def test_a_mooncake_trace(tmp_path):
    rows = [{"timestamp": 100 * i, "input_length": 1500, "output_length": 20,
             "hash_ids": [1, 2, 3 + i % 4]} for i in range(40)]
    f = tmp_path / "mooncake.jsonl"
    f.write_text("\n".join(map(json.dumps, rows)))
    res = kvroute.simulate(f, policies=["cache_aware", "oracle"], servers=2)
    assert res["requests"] == 40 and res["ideal_hit_rate"] > 0.5


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="'fastest' is not a simulator policy"):
        kvroute.simulate("chat", n=10, policies=["fastest"])
    with pytest.raises(TypeError, match="unexpected option 'gpus'.*servers, cache_tokens"):
        kvroute.simulate("chat", n=10, gpus=8)
    with pytest.raises(ValueError, match=re.escape("servers: 0 is not in [1, 4096]")):
        kvroute.simulate("chat", n=10, servers=0)
    with pytest.raises(ValueError, match="speed: -1.0 is not a positive number"):
        kvroute.simulate("chat", n=10, speed=-1)
    with pytest.raises(ValueError, match="ca_tenant_rule: 'oldest'"):
        kvroute.simulate("chat", n=10, ca_tenant_rule="oldest")
    with pytest.raises(FileNotFoundError, match="no such trace file"):
        kvroute.simulate(str(tmp_path / "missing.jsonl"))
    with pytest.raises(ValueError, match=re.escape('requests:2: missing field "t"')):
        kvroute.simulate([{"t": 0, "text": "a"}, {"text": "b"}])
    with pytest.raises(TypeError, match="each request is a dict"):
        kvroute.simulate([("t", 0)])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"t": 0, "text": "a"}\nnot json\n')
    with pytest.raises(ValueError, match="bad.jsonl:2: not valid JSON"):
        kvroute.simulate(bad)
    with pytest.raises(ValueError, match="no requests"):
        kvroute.simulate([])


def test_listed_names():
    assert "cache_aware" in kvroute.SIM_POLICIES and "oracle" in kvroute.SIM_POLICIES
    assert kvroute.SIM_GENERATORS == ("chat", "agent", "batch")
