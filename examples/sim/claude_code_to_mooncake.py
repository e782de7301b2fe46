#!/usr/bin/env python3
"""Converts kv-cache-tester's Claude Code sessions into one kvroute_sim trace.

Input: the session files of https://github.com/callanjfox/kv-cache-tester,
folder traces/ (trace_NNNN.json, one Claude Code session each, 64-token
blocks numbered per session), given as that folder, a .tar.gz of it, or
files. Output: Mooncake JSON Lines in time order, one request a line:

  {"timestamp": ms, "input_length": tokens, "output_length": tokens,
   "hash_ids": [...], "session": "trace_0001", "think_time": s}

- Blocks are re-blocked to 512 tokens: the ids are chained, so 512-token
  block j is 64-token block 8j+7 (full blocks only; kvroute_sim pads the
  partial last block with a fresh id). Ids are renumbered so that equal
  (session file, id) pairs get equal numbers and different files never
  share one (the upstream ids are local to a file).
- Sessions start as a Poisson process of --session-rate sessions per
  second (seeded by --seed), in file-name order; a request's timestamp is
  its session's start plus its "t". A sub-agent (type "subagent") becomes
  its own session "<file id>::<agent id>", starting at its parent's start
  plus the marker's "t", sharing its parent's ids.
- "think_time" is the trace's delay between the previous response and this
  request, for kvroute_sim's closed loop.
- --max-file-bytes skips larger files (the copy used for the published
  results had every upstream file under 4 MiB: --max-file-bytes 4194303).

Only the Python standard library is used.
"""

import argparse
import gzip
import json
import os
import random
import sys
import tarfile


def session_files(paths, max_bytes):
    """Yields (name, bytes) for each trace_*.json, sorted by name."""
    found = []
    for path in paths:
        if os.path.isdir(path):
            for name in os.listdir(path):
                full = os.path.join(path, name)
                if name.endswith(".json") and os.path.getsize(full) <= max_bytes:
                    found.append((name, lambda full=full: open(full, "rb").read()))
        elif path.endswith((".tar.gz", ".tgz", ".tar")):
            tar = tarfile.open(path)
            for member in tar.getmembers():
                name = os.path.basename(member.name)
                if member.isfile() and name.endswith(".json") and member.size <= max_bytes:
                    found.append((name, lambda m=member, t=tar: t.extractfile(m).read()))
        elif os.path.getsize(path) <= max_bytes:
            found.append((os.path.basename(path), lambda p=path: open(p, "rb").read()))
    found.sort(key=lambda x: x[0])
    for name, read in found:
        yield name, read()


class Ids:
    """Renumbers (file, 512-token block id) pairs densely, from 0."""

    def __init__(self):
        self.map = {}

    def reblock(self, scope, ids64):
        out = []
        for j in range(len(ids64) // 8):
            key = (scope, ids64[8 * j + 7])
            if key not in self.map:
                self.map[key] = len(self.map)
            out.append(self.map[key])
        return out


def requests_of(session, scope, start, items, ids, out):
    """Appends the lines of one session's requests (sub-agents recursively)."""
    for r in items:
        if r.get("type") == "subagent":
            sub = "%s::%s" % (scope, r.get("agent_id", len(out)))
            requests_of(sub, scope, start + float(r["t"]), r.get("requests", []), ids, out)
            continue
        out.append({
            "timestamp": round((start + float(r["t"])) * 1000.0, 3),
            "input_length": int(r["in"]),
            "output_length": int(r["out"]),
            "hash_ids": ids.reblock(scope, r.get("hash_ids", [])),
            "session": session,
            "think_time": float(r.get("think_time", 0.0)),
        })


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="traces/ folder, .tar.gz of it, or files")
    ap.add_argument("-o", "--output", required=True, help="output .jsonl or .jsonl.gz")
    ap.add_argument("--session-rate", type=float, default=0.05,
                    help="new sessions per second (Poisson; default 0.05)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the session starts (default 1)")
    ap.add_argument("--max-file-bytes", type=int, default=1 << 62,
                    help="skip session files larger than this")
    a = ap.parse_args()
    if a.session_rate <= 0:
        ap.error("--session-rate must be > 0")

    rng = random.Random(a.seed)
    ids = Ids()
    lines = []
    start = 0.0
    files = 0
    for name, data in session_files(a.paths, a.max_file_bytes):
        trace = json.loads(data)
        scope = trace.get("id", name[:-5])
        requests_of(scope, scope, start, trace.get("requests", []), ids, lines)
        start += rng.expovariate(a.session_rate)
        files += 1
    if not lines:
        sys.exit("claude_code_to_mooncake: no requests found in %s" % " ".join(a.paths))
    lines.sort(key=lambda x: x["timestamp"])  # stable: a session keeps its order
    opener = gzip.open if a.output.endswith(".gz") else open
    with opener(a.output, "wt") as f:
        for x in lines:
            f.write(json.dumps(x, separators=(", ", ": ")) + "\n")
    print("%s: %d requests from %d session files" % (a.output, len(lines), files), file=sys.stderr)


if __name__ == "__main__":
    main()
