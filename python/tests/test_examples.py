"""The examples and the benchmark script run, and say what they should."""

import os
import re
import subprocess
import sys

from conftest import REPO

EXAMPLES = REPO / "python" / "examples"


def run(script, *args, timeout=120):
    p = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                       timeout=timeout, env=os.environ.copy())
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_quickstart_keeps_each_conversation_on_its_worker():
    out = run(EXAMPLES / "quickstart.py")
    homes = dict(re.findall(r"turn 0 (\w+)\s+-> (\S+) \(cache_miss\)", out))
    assert len(homes) == 2
    for user, url in homes.items():
        assert f"turn 1 {user:<5} -> {url} (cache_hit)" in out
    assert "cache_threshold (--cache-threshold): 2 is outside [0, 1]" in out


def test_dp_dispatcher_prints_the_hit_rate_difference():
    out = run(EXAMPLES / "dp_dispatcher.py")
    rates = {m[0]: float(m[1]) for m in re.findall(r"^(\w+)\s+(0\.\d+)\s", out, re.M)}
    assert set(rates) == {"round_robin", "cache_aware", "least_prefill"}
    assert rates["cache_aware"] > rates["round_robin"] + 0.15
    assert rates["least_prefill"] > rates["round_robin"] + 0.15
    line = re.search(r"^cache_aware vs round_robin: hit rate ([+-]\d\.\d{3}) "
                     r"\((0\.\d{3}) against (0\.\d{3})\)$", out, re.M)
    assert line, out
    assert float(line.group(2)) == rates["cache_aware"]
    assert float(line.group(3)) == rates["round_robin"]
    # The difference is printed from the unrounded rates: within the three
    # roundings of the printed ones.
    assert abs(float(line.group(1)) - (rates["cache_aware"] - rates["round_robin"])) <= 0.0015


def test_dp_dispatcher_options():
    out = run(EXAMPLES / "dp_dispatcher.py", "--workers", "2", "--sessions", "6", "--turns", "3",
              "--policies", "round_robin,manual")
    assert "manual vs round_robin: hit rate" in out
    line = re.search(r"^manual\s+0\.\d+\s.*$", out, re.M).group(0)
    assert "vacant=6" in line and "occupied_hit=12" in line


def test_the_overhead_benchmark_runs():
    out = run(REPO / "python" / "benchmarks" / "select_overhead.py", "--texts", "50",
              "--rounds", "2", "--policies", "round_robin,cache_aware")
    assert re.search(r"^cache_aware\s+select\s+\d+ \[", out, re.M)
    assert re.search(r"^round_robin\s+select\+dispatch\s+\d+ \[", out, re.M)
