#!/usr/bin/env python3
"""Runs kvroute_sim over a grid of configurations and prints, per policy, the
distribution (min, median, max) over the grid of its mean and p99 time to
first token relative to cache_aware and to the oracle, and of its hit rate.

The grid: the Mooncake conversation and synthetic traces and two Claude Code
merges (session arrival seeds 1 and 2, made by claude_code_to_mooncake.py);
three loads each (light, busy, overloaded); 4, 8 and 16 servers; a small and
a large KV pool per server. A load is a --speed at 8 servers, scaled with the
server count so that each server sees the same load at every size. Each
configuration runs with --seeds policy seeds; its figures are the means over
them, as one seed can decide a chaotic configuration (a small pool thrashing
or not).

  examples/sim/grid.py --sim build/rel/examples/kvroute_sim \\
      --traces ../shared/traces --claude-code cc_seed1.jsonl.gz cc_seed2.jsonl.gz

--smoke runs a tiny grid on the built-in agent generator (no trace files),
as the tests do. --from-csv FILE prints the tables again from the per-run
rows that --csv wrote (results/grid_sglang.csv), without running anything.
Each target line gives the worst configuration with two standard errors of
its figure over the policy seeds, and counts the configurations that miss
the target by more than that. Only the Python standard library is used.
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

# name: (file, requests, {load: speed at 8 servers}, {cache: pool tokens})
TRACES = {
    "conversation": ("conversation_trace.jsonl", 4000,
                     {"light": 0.5, "busy": 1.0, "overloaded": 1.5},
                     {"small": 500_000, "large": 2_000_000}),
    "synthetic": ("synthetic_trace.jsonl", 0,
                  {"light": 0.5, "busy": 1.0, "overloaded": 2.0},
                  {"small": 500_000, "large": 2_000_000}),
    "claude_code_s1": (None, 5000,
                       {"light": 0.1, "busy": 0.25, "overloaded": 0.5},
                       {"small": 1_000_000, "large": 4_000_000}),
    "claude_code_s2": (None, 5000,
                       {"light": 0.1, "busy": 0.25, "overloaded": 0.5},
                       {"small": 1_000_000, "large": 4_000_000}),
}
SERVERS = [4, 8, 16]
SMOKE = {"agent": ("agent", 200, {"busy": 1.0}, {"small": 200_000, "large": 1_000_000})}
SMOKE_SERVERS = [4]


def configs(traces, servers, files):
    out = []
    for name, (_, n, loads, caches) in traces.items():
        for load, speed in loads.items():
            for k in servers:
                for cache, tokens in caches.items():
                    out.append({"trace": name, "file": files[name], "n": n, "load": load,
                                "speed": speed * k / 8, "servers": k, "cache": cache,
                                "cache_tokens": tokens})
    return out


def tag_of(cfg):
    """A configuration's name in the tables and the per-run file names."""
    return "%s_%s_%d_%s" % (cfg["trace"], cfg["load"], cfg["servers"], cfg["cache"])


def run(sim, cfg, extra, outdir, seed, reuse):
    tag = tag_of(cfg)
    path = os.path.join(outdir, "%s_seed%d.json" % (tag, seed))
    cmd = [sim, cfg["file"], "--speed", repr(cfg["speed"]), "--servers", str(cfg["servers"]),
           "--cache-tokens", str(cfg["cache_tokens"]), "--seed", str(seed), "-q",
           "--json", path] + extra
    if cfg["n"]:
        cmd += ["-n", str(cfg["n"])]
    t0 = time.time()
    if not (reuse and os.path.exists(path)):
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            sys.exit("grid: %s failed: %s" % (" ".join(cmd), done.stderr.strip()))
    with open(path) as f:
        result = json.load(f)
    result["config"] = dict(cfg, tag=tag, seed=seed, seconds=time.time() - t0)
    return result


METRICS = ("hit_rate", "ttft_mean_s", "ttft_p50_s", "ttft_p99_s", "rejected")


def by_name(run):
    """A run's (or merged configuration's) policies by name."""
    return {p["name"]: p for p in run["policies"]}


def merge(runs):
    """One configuration's runs over the seeds: each policy's means, and the runs."""
    named = [by_name(r) for r in runs]
    policies = []
    for name in named[0]:
        each = [n[name] for n in named]
        policies.append(dict({m: statistics.fmean(p.get(m, 0) for p in each) for m in METRICS},
                             name=name))
    config = dict(runs[0]["config"], seconds=sum(r["config"]["seconds"] for r in runs))
    del config["seed"]
    return {"config": config, "policies": policies, "runs": runs}


def dist(xs):
    return "%.2f / %.2f / %.2f" % (min(xs), statistics.median(xs), max(xs))


def table(results):
    """Per policy: min / median / max over the grid."""
    names = [p["name"] for p in results[0]["policies"]]
    rows = ["| policy | mean TTFT / cache_aware | mean / oracle | p99 TTFT / cache_aware "
            "| p99 / oracle | hit rate | hit - cache_aware |",
            "|---|---|---|---|---|---|---|"]
    for name in names:
        rel = {"ca_mean": [], "or_mean": [], "ca_p99": [], "or_p99": [], "hit": [], "dhit": []}
        for r in results:
            by = by_name(r)
            p, ca, orc = by[name], by.get("cache_aware"), by.get("oracle")
            rel["hit"].append(p["hit_rate"])
            if ca:
                rel["ca_mean"].append(p["ttft_mean_s"] / ca["ttft_mean_s"])
                rel["ca_p99"].append(p["ttft_p99_s"] / ca["ttft_p99_s"])
                rel["dhit"].append(p["hit_rate"] - ca["hit_rate"])
            if orc:
                rel["or_mean"].append(p["ttft_mean_s"] / orc["ttft_mean_s"])
                rel["or_p99"].append(p["ttft_p99_s"] / orc["ttft_p99_s"])
        cells = [dist(rel[k]) if rel[k] else "-"
                 for k in ("ca_mean", "or_mean", "ca_p99", "or_p99", "hit", "dhit")]
        rows.append("| %s | %s |" % (name, " | ".join(cells)))
    return "\n".join(rows)


def by_trace(results):
    """least_prefill against the others per trace family and pool: min-max (median)."""
    def span(xs, fmt):
        return "%s-%s (%s)" % (fmt % min(xs), fmt % max(xs), fmt % statistics.median(xs))

    groups = {}
    for r in results:
        c = r["config"]
        family = "Claude Code" if c["trace"].startswith("claude_code") else c["trace"]
        groups.setdefault((family, c["cache"]), []).append(by_name(r))
    rows = ["| trace | pool | least_prefill / cache_aware | least_prefill / oracle "
            "| hit - cache_aware | least_prefill / least_prefill_fixed |",
            "|---|---|---|---|---|---|"]
    for (family, cache), cells in groups.items():
        cols = []
        for other, key in (("cache_aware", "ttft_mean_s"), ("oracle", "ttft_mean_s"),
                           ("cache_aware", "hit_rate"), ("least_prefill_fixed", "ttft_mean_s")):
            if not all("least_prefill" in b and other in b for b in cells):
                cols.append("-")
            elif key == "hit_rate":
                xs = [b["least_prefill"][key] - b[other][key] for b in cells]
                cols.append("%+.3f to %+.3f" % (min(xs), max(xs)))
            else:
                cols.append(span([b["least_prefill"][key] / b[other][key] for b in cells],
                                 "%.2f"))
        rows.append("| %s | %s | %s |" % (family, cache, " | ".join(cols)))
    return "\n".join(rows)


def seed_values(r, name, key):
    """A policy's figure in each of a configuration's runs (one per seed)."""
    return [by_name(run)[name][key] for run in r["runs"] if name in by_name(run)]


def two_se_ratio(xs, ys):
    """mean(xs) / mean(ys) and two standard errors of it over the seeds (the
    delta method, the seeds' draws independent); 0 for a single seed."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    ratio = mx / my
    if len(xs) < 2 or len(ys) < 2 or mx == 0:
        return ratio, 0.0
    rel = (statistics.variance(xs) / (len(xs) * mx * mx) +
           statistics.variance(ys) / (len(ys) * my * my))
    return ratio, 2 * ratio * rel ** 0.5


def two_se_diff(xs, ys):
    """mean(xs) - mean(ys) and two standard errors of it over the seeds."""
    diff = statistics.fmean(xs) - statistics.fmean(ys)
    if len(xs) < 2 or len(ys) < 2:
        return diff, 0.0
    return diff, 2 * (statistics.variance(xs) / len(xs) + statistics.variance(ys) / len(ys)) ** 0.5


def target_line(label, cells, worst, fmt, bound, beyond, median_bound=None):
    """`label`: the worst cell with two standard errors of its figure, the
    median (with its own target, if any), and the cells that miss `bound`
    by more than two standard errors. cells: (value, two_se, tag); worst
    picks the worst; beyond(value, two_se) says whether a cell misses."""
    if not cells:
        return None
    x, se, tag = worst(cells)
    far = [t for v, e, t in cells if beyond(v, e)]
    median = fmt % statistics.median(v for v, _, _ in cells)
    return ("%s: worst %s (%s, +-%.3f at two standard errors) [target %s], median %s%s; "
            "missed by more than two standard errors: %d of %d%s"
            % (label, fmt % x, tag, se, bound, median,
               " [target %s]" % median_bound if median_bound else "", len(far), len(cells),
               " (%s)" % ", ".join(far) if far else ""))


def targets(results):
    """The targets on least_prefill, the oracle and the fixed weight, as lines."""
    lp_ca, lp_fixed, dhit, vs_oracle = [], [], [], []
    for r in results:
        by = by_name(r)
        tag = r["config"]["tag"]
        mean = lambda name: seed_values(r, name, "ttft_mean_s")
        if "least_prefill" in by and "cache_aware" in by:
            lp_ca.append(two_se_ratio(mean("least_prefill"), mean("cache_aware")) + (tag,))
            dhit.append(two_se_diff(seed_values(r, "least_prefill", "hit_rate"),
                                    seed_values(r, "cache_aware", "hit_rate")) + (tag,))
        if "least_prefill" in by and "least_prefill_fixed" in by:
            lp_fixed.append(two_se_ratio(mean("least_prefill"), mean("least_prefill_fixed"))
                            + (tag,))
        if "oracle" in by:
            best = min((p["ttft_mean_s"], name) for name, p in by.items() if name != "oracle")
            x, se = two_se_ratio(mean(best[1]), mean("oracle"))
            vs_oracle.append((x, se, "%s on %s" % (best[1], tag)))
    out = [
        target_line("least_prefill mean TTFT / cache_aware", lp_ca, max, "%.3f", "<= 1",
                    lambda v, e: v - e > 1, median_bound="<= 0.67"),
        target_line("least_prefill hit rate - cache_aware's", dhit, min, "%+.3f", ">= -0.05",
                    lambda v, e: v + e < -0.05),
        target_line("least_prefill mean TTFT / least_prefill_fixed (queue weight 0.4)", lp_fixed,
                    max, "%.3f", "<= 1.05", lambda v, e: v - e > 1.05),
        target_line("best router's mean TTFT / oracle's", vs_oracle, min, "%.3f", ">= 0.95",
                    lambda v, e: v + e < 0.95),
    ]
    if results and len(results[0]["runs"]) > 1:
        split = [r["config"]["tag"] for r in results if seeds_disagree(r["runs"])]
        out.append("configurations where the seeds disagree on whether least_prefill's mean "
                   "TTFT beats cache_aware's: %d of %d%s" % (len(split), len(results),
                                                            " (%s)" % ", ".join(split)
                                                            if split else ""))
    return "\n".join(line for line in out if line)


def seeds_disagree(runs):
    """True when least_prefill beats cache_aware's mean TTFT with some seeds, not others."""
    wins = set()
    for r in runs:
        by = by_name(r)
        if "least_prefill" in by and "cache_aware" in by:
            wins.add(by["least_prefill"]["ttft_mean_s"] <= by["cache_aware"]["ttft_mean_s"])
    return len(wins) > 1


CSV_FIELDS = ("trace", "load", "servers", "cache", "speed", "cache_tokens", "seed", "policy",
              "hit_rate", "ttft_mean_s", "ttft_p50_s", "ttft_p99_s", "rejected")


def read_csv(path):
    """The merged results that write_csv wrote, configurations in file order.
    Exits with the file, line and field at the first row it cannot read."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
            header = rows[0].keys() if rows else []
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        sys.exit("grid: cannot read %s: %s" % (path, e))
    missing = [k for k in CSV_FIELDS if k not in header]
    if not rows or missing:
        sys.exit("grid: %s: %s" % (path, "no rows" if not rows else
                                    "missing column(s) %s" % ", ".join(missing)))
    runs = {}  # (tag, seed) -> run, in file order
    for line, row in enumerate(rows, start=2):
        try:
            c = {"trace": row["trace"], "load": row["load"], "servers": int(row["servers"]),
                 "cache": row["cache"], "speed": float(row["speed"]),
                 "cache_tokens": int(row["cache_tokens"]), "seed": int(row["seed"]),
                 "seconds": 0.0}
            p = {k: float(row[k]) for k in METRICS}
        except (TypeError, ValueError) as e:
            sys.exit("grid: %s line %d: %s" % (path, line, e))
        c["tag"] = tag_of(c)
        run = runs.setdefault((c["tag"], c["seed"]), {"config": c, "policies": []})
        run["policies"].append(dict(p, name=row["policy"]))
    configs = {}  # tag -> its runs
    for (tag, _), run in runs.items():
        configs.setdefault(tag, []).append(run)
    for tag, its in configs.items():
        names = [[p["name"] for p in r["policies"]] for r in its]
        if any(n != names[0] for n in names):
            sys.exit("grid: %s: the seeds of %s ran different policies" % (path, tag))
    return [merge(its) for its in configs.values()]


def write_csv(results, path):
    """One row per configuration, seed and policy."""
    with open(path, "w") as f:
        f.write(",".join(CSV_FIELDS) + "\n")
        for merged in results:
            for r in merged["runs"]:
                c = r["config"]
                for p in r["policies"]:
                    f.write("%s,%s,%d,%s,%g,%d,%d,%s,%.4f,%.4f,%.4f,%.4f,%d\n"
                            % (c["trace"], c["load"], c["servers"], c["cache"], c["speed"],
                               c["cache_tokens"], c["seed"], p["name"], p["hit_rate"],
                               p["ttft_mean_s"], p["ttft_p50_s"], p["ttft_p99_s"],
                               p.get("rejected", 0)))


def report(results):
    print(table(results))
    print()
    print(by_trace(results))
    print()
    print(targets(results))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", help="the kvroute_sim binary (not with --from-csv)")
    ap.add_argument("--traces", help="folder with conversation_trace.jsonl, synthetic_trace.jsonl")
    ap.add_argument("--claude-code", nargs=2, metavar=("SEED1", "SEED2"),
                    help="the two Claude Code merges (claude_code_to_mooncake.py --seed 1, 2)")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="runs at once (default 2)")
    ap.add_argument("--seeds", type=int, default=4,
                    help="policy seeds per configuration, 1 to N (default 4)")
    ap.add_argument("--out", help="folder for each run's JSON (default: a temp dir)")
    ap.add_argument("--reuse", action="store_true",
                    help="read a run's JSON already in --out instead of running it again "
                    "(resumes an interrupted grid with the same flags)")
    ap.add_argument("--only", help="comma-separated trace names to run")
    ap.add_argument("--csv", help="also write every run's results (a row per seed) to this CSV file")
    ap.add_argument("--smoke", action="store_true", help="tiny grid on the built-in generator")
    ap.add_argument("--from-csv", metavar="FILE",
                    help="print the tables from the rows --csv wrote, running nothing")
    ap.add_argument("--policies", help="kvroute_sim --policies (default: all, and "
                    "least_prefill_fixed)")
    ap.add_argument("extra", nargs="*", help="more kvroute_sim flags (after --)")
    a = ap.parse_args()
    if a.from_csv:
        results = read_csv(a.from_csv)
        print("%d configurations x %d policy seeds, from %s\n"
              % (len(results), len(results[0]["runs"]), a.from_csv))
        report(results)
        return
    if not a.sim:
        ap.error("--sim is required (or --from-csv)")

    if a.smoke:
        traces, servers, files = SMOKE, SMOKE_SERVERS, {"agent": "agent"}
    else:
        if not a.traces or not a.claude_code:
            ap.error("--traces and --claude-code are required (or --smoke)")
        traces, servers = TRACES, SERVERS
        files = {"conversation": os.path.join(a.traces, "conversation_trace.jsonl"),
                 "synthetic": os.path.join(a.traces, "synthetic_trace.jsonl"),
                 "claude_code_s1": a.claude_code[0], "claude_code_s2": a.claude_code[1]}
    if a.only:
        keep = a.only.split(",")
        traces = {k: v for k, v in traces.items() if k in keep}
    policies = a.policies or ("round_robin,random,power_of_two,consistent_hashing,prefix_hash,"
                              "manual,bucket,cache_aware,cache_aware_feedback,least_prefill,"
                              "least_prefill_fixed,oracle,sticky")
    extra = ["--policies", policies] + a.extra
    if a.seeds < 1:
        ap.error("--seeds must be at least 1, got %d" % a.seeds)
    if a.reuse and not a.out:
        ap.error("--reuse needs --out, the folder of an earlier run")
    outdir = a.out or tempfile.mkdtemp(prefix="kvroute_grid_")
    os.makedirs(outdir, exist_ok=True)
    grid = configs(traces, servers, files)
    jobs = [(c, seed) for c in grid for seed in range(1, a.seeds + 1)]
    t0 = time.time()
    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        runs = list(pool.map(lambda job: run(a.sim, job[0], extra, outdir, job[1], a.reuse),
                             jobs))
    wall = time.time() - t0
    results = [merge(runs[i:i + a.seeds]) for i in range(0, len(runs), a.seeds)]
    print("%d configurations x %d policy seeds, %d at once, %.0f s (per-run JSON in %s)\n"
          % (len(results), a.seeds, a.jobs, wall, outdir))
    report(results)
    if a.csv:
        write_csv(results, a.csv)


if __name__ == "__main__":
    main()
