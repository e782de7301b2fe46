#!/usr/bin/env python3
"""Runs kvroute_sim --compare-replicas once per policy seed and prints, per
policy, how R synced replicas compare with one router over the seeds: the
hit rate (one router, and synced minus one router) and the mean time to
first token (synced over one router), as min / median / max, and the
targets on the seeds' means.

One seed is one draw: on loads where the servers' caches churn (Claude
Code sessions on a few contexts per server) a policy's own seed moves its
hit rate by several hundredths, as much as replicas do. The targets of
--compare-replicas (hit rate within 0.01, mean TTFT within 1.1x) are read
here on the means over the seeds.

  examples/sim/replica_seeds.py --sim build/rel/examples/kvroute_sim --seeds 4 -j 2 \\
      -- cc_seed1.jsonl.gz -n 5000 --replicas 4

Everything after `--` goes to kvroute_sim (the trace first). --smoke runs
two seeds of the built-in chat generator, as the tests do. Only the Python
standard library is used.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

# "cache_aware x4 synced   0.377  393.527s ..." -> policy, mode, hit, mean TTFT (s)
ROW = re.compile(r"^(\S+)(?: x\d+ (synced|trees only|unsynced))?\s+(\d+\.\d+)\s+(\d+\.\d+)s\s")
MODES = ["synced", "trees only", "unsynced"]


def run(sim, args, seed):
    cmd = [sim] + args + ["--compare-replicas", "-q", "--seed", str(seed)]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit("replica_seeds: %s failed: %s" % (" ".join(cmd), done.stderr.strip()))
    rows = {}  # (policy, mode or "one") -> (hit, ttft_mean)
    for line in done.stdout.splitlines():
        m = ROW.match(line)
        if m:
            rows[(m.group(1), m.group(2) or "one")] = (float(m.group(3)), float(m.group(4)))
    if not rows:
        sys.exit("replica_seeds: no result rows in the output of %s" % " ".join(cmd))
    return rows


def dist(xs, fmt):
    return " / ".join(fmt % x for x in (min(xs), statistics.median(xs), max(xs)))


def report(per_seed):
    policies = []
    for rows in per_seed:
        for policy, mode in rows:
            if mode == "one" and policy not in policies:
                policies.append(policy)
    n = len(per_seed)
    out = ["| over %d seeds (min / median / max) | hit rate | hit - one router's "
           "| mean TTFT / one router's |" % n, "|---|---|---|---|"]
    lines = []
    for policy in policies:
        one = [rows[(policy, "one")] for rows in per_seed]
        out.append("| %s, one router | %s | - | - |" % (policy, dist([h for h, _ in one], "%.3f")))
        for mode in MODES:
            got = [rows.get((policy, mode)) for rows in per_seed]
            if any(g is None for g in got):
                continue
            dhit = [g[0] - o[0] for g, o in zip(got, one)]
            ratio = [g[1] / o[1] for g, o in zip(got, one)]
            out.append("| %s, %s | %s | %s | %s |" % (
                policy, mode, dist([g[0] for g in got], "%.3f"), dist(dhit, "%+.3f"),
                dist(ratio, "%.2fx")))
            if mode == "unsynced":
                continue
            mean_one_hit = statistics.mean(h for h, _ in one)
            mean_hit = statistics.mean(g[0] for g in got)
            mean_ratio = statistics.mean(g[1] for g in got) / statistics.mean(t for _, t in one)
            d = mean_hit - mean_one_hit
            lines.append(
                "%s, %s: mean hit %.3f vs %.3f (%+.3f) %s [within 0.01]; mean TTFT %.2fx %s "
                "[within 1.1x]; seeds within 0.01: %d of %d" % (
                    policy, mode, mean_hit, mean_one_hit, d, "PASS" if d >= -0.01 else "FAIL",
                    mean_ratio, "PASS" if mean_ratio <= 1.1 else "FAIL",
                    sum(1 for x in dhit if x >= -0.01), n))
    return "\n".join(out + [""] + lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sim", required=True, help="the kvroute_sim binary")
    ap.add_argument("--seeds", type=int, default=4, help="policy seeds 1..N (default 4)")
    ap.add_argument("-j", type=int, default=1, help="runs at once (default 1)")
    ap.add_argument("--smoke", action="store_true",
                    help="two seeds of the built-in chat generator, 2 replicas")
    ap.add_argument("sim_args", nargs="*", help="after --: the trace and kvroute_sim's flags")
    a = ap.parse_args()
    args = a.sim_args
    seeds = a.seeds
    if a.smoke:
        args, seeds = ["chat", "-n", "300", "--servers", "4", "--replicas", "2"], 2
    if not args:
        ap.error("give the trace and kvroute_sim's flags after --")
    if "--replicas" not in args:
        ap.error("kvroute_sim needs --replicas R")
    if seeds < 1:
        ap.error("--seeds must be at least 1")
    with ThreadPoolExecutor(max_workers=max(1, a.j)) as pool:
        per_seed = list(pool.map(lambda s: run(a.sim, args, s), range(1, seeds + 1)))
    shown = [os.path.basename(args[0])] + args[1:]  # the trace's name, not where it lies
    print("kvroute_sim %s, --compare-replicas, seeds 1-%d" % (" ".join(shown), seeds))
    print(report(per_seed))


if __name__ == "__main__":
    main()
