#!/usr/bin/env python3
"""A data-parallel dispatcher that routes with kvroute instead of round robin.

Shaped like an inference engine's in-server data-parallel controller (SGLang's
DataParallelController, whose default is round robin): one process receives
requests and hands each to one of N worker processes over a queue; each worker
keeps a prefix KV cache and answers with the tokens it found cached. The
controller asks kvroute where each request goes, holds the request's load
while it is in flight, and reports the cached tokens back to the policy.

The built-in workload is multi-turn chat: sessions over a few shared system
prompts, each turn's prompt being the whole conversation so far, so a turn
finds its history cached only on the worker that served the previous turn.
The example runs it once per policy, with fresh workers, and prints the
token hit rate each policy got and the difference from round robin.

    python3 python/examples/dp_dispatcher.py [--workers 4] [--sessions 48]
        [--turns 10] [--policies round_robin,cache_aware,least_prefill]
"""

import argparse
import collections
import multiprocessing as mp
import random
import sys
import time

import kvroute

CHARS_PER_TOKEN = 4  # kvroute's default chars_per_token
BLOCK_CHARS = 64  # a KV block: 16 tokens


class PrefixCache:
    """A worker's KV cache: blocks of BLOCK_CHARS characters, LRU-evicted.

    A block's key hashes the whole prefix up to its end (chained), so equal
    keys mean equal prefixes; a prompt's cached part is its longest run of
    leading blocks the cache holds.
    """

    def __init__(self, capacity_blocks):
        self.capacity = capacity_blocks
        self.blocks = collections.OrderedDict()

    def serve(self, text):
        """Returns the characters of `text` found cached, then caches all of it."""
        keys, h = [], 0
        for i in range(0, len(text) - len(text) % BLOCK_CHARS, BLOCK_CHARS):
            h = hash((h, text[i : i + BLOCK_CHARS]))
            keys.append(h)
        hit = 0
        while hit < len(keys) and keys[hit] in self.blocks:
            hit += 1
        for k in keys:
            self.blocks[k] = True
            self.blocks.move_to_end(k)
        while len(self.blocks) > self.capacity:
            self.blocks.popitem(last=False)
        return hit * BLOCK_CHARS


def reply_to(prompt, words):
    """The "model output": a deterministic reply to the prompt's last turn."""
    rng = random.Random(prompt[-200:])
    return " ".join(rng.choice(words) for _ in range(rng.randint(40, 110)))


def worker_main(inbox, outbox, capacity_blocks, prefill_chars_per_s, words):
    """One data-parallel rank: serves requests from its inbox until None."""
    cache = PrefixCache(capacity_blocks)
    while (job := inbox.get()) is not None:
        rid, prompt = job
        cached = cache.serve(prompt)
        time.sleep((len(prompt) - cached) / prefill_chars_per_s)  # prefill what is not cached
        outbox.put((rid, cached // CHARS_PER_TOKEN, len(prompt) // CHARS_PER_TOKEN,
                    reply_to(prompt, words)))


class Controller:
    """Hands requests to worker processes, choosing each worker with kvroute."""

    def __init__(self, ctx, policy, n_workers, capacity_blocks, prefill_chars_per_s, words):
        self.urls = [f"dp-rank-{i}" for i in range(n_workers)]
        self.router = kvroute.Router(policy=policy, workers=self.urls)
        self.inboxes = [ctx.Queue() for _ in self.urls]
        self.outbox = ctx.Queue()
        self.procs = [
            ctx.Process(target=worker_main, daemon=True,
                        args=(q, self.outbox, capacity_blocks, prefill_chars_per_s, words))
            for q in self.inboxes
        ]
        for p in self.procs:
            p.start()
        self.in_flight = {}  # rid -> (selection, dispatch, sent time)

    def submit(self, rid, prompt, session):
        s = self.router.select(prompt, headers={"x-smg-routing-key": session})
        if not s:
            raise RuntimeError(f"no worker for request {rid}: {s.branch}")
        d = self.router.dispatch(s, prompt_tokens=len(prompt) // CHARS_PER_TOKEN)
        self.in_flight[rid] = (s, d, time.perf_counter())
        self.inboxes[self.urls.index(s.url)].put((rid, prompt))
        return s.branch

    def next_reply(self):
        """Waits for one reply; ends its load and reports its cached tokens."""
        rid, cached, prompt_tokens, reply = self.outbox.get(timeout=60)
        s, d, sent = self.in_flight.pop(rid)
        self.router.report_cached(s, cached, prompt_tokens=prompt_tokens)
        d.release()
        return rid, cached, prompt_tokens, reply, time.perf_counter() - sent

    def close(self):
        for q in self.inboxes:
            q.put(None)
        for p in self.procs:
            p.join(timeout=10)


def workload(sessions, turns, seed=7):
    """Session i: a system prompt (one of four) and user turns, drawn once."""
    rng = random.Random(seed)
    words = [
        "cache", "prefix", "token", "router", "worker", "prefill", "decode", "batch",
        "session", "latency", "memory", "tree", "model", "request", "queue", "load",
    ]
    systems = [
        f"System prompt {k}: you are assistant {k}. "
        + " ".join(rng.choice(words) for _ in range(300 + 60 * k))
        for k in range(4)
    ]
    users = [
        (rng.choice(systems), [
            f"\nUser {i}: " + " ".join(rng.choice(words) for _ in range(rng.randint(20, 70)))
            for _ in range(turns)
        ])
        for i in range(sessions)
    ]
    return users, words


def run(policy, args):
    """Runs every session's turns through a Controller with `policy`."""
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    sessions, words = workload(args.sessions, args.turns)
    c = Controller(ctx, policy, args.workers, args.cache_blocks, args.prefill_rate, words)
    history = [system for system, _ in sessions]
    turn = [0] * len(sessions)
    cached_total = prompt_total = 0
    latencies, branches = [], collections.Counter()
    try:
        for i, (_, user_turns) in enumerate(sessions):  # every session's first turn
            history[i] += user_turns[0]
            branches[c.submit(i, history[i], f"session-{i}")] += 1
        while c.in_flight:
            i, cached, prompt_tokens, reply, latency = c.next_reply()
            cached_total += cached
            prompt_total += prompt_tokens
            latencies.append(latency)
            turn[i] += 1
            if turn[i] < args.turns:  # the next turn carries the whole conversation
                history[i] += "\nAssistant: " + reply + sessions[i][1][turn[i]]
                branches[c.submit(i, history[i], f"session-{i}")] += 1
    finally:
        c.close()
    return {
        "hit_rate": cached_total / max(prompt_total, 1),
        "mean_latency_ms": 1000 * sum(latencies) / len(latencies),
        "requests": len(latencies),
        "branches": dict(branches.most_common()),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=4, help="worker processes (default 4)")
    p.add_argument("--sessions", type=int, default=48, help="concurrent sessions (default 48)")
    p.add_argument("--turns", type=int, default=10, help="turns per session (default 10)")
    p.add_argument("--cache-blocks", type=int, default=2000,
                   help=f"KV blocks of {BLOCK_CHARS} characters per worker (default 2000)")
    p.add_argument("--prefill-rate", type=float, default=4e6,
                   help="characters a worker prefills per second (default 4e6)")
    p.add_argument("--policies", default="round_robin,cache_aware,least_prefill",
                   help="kvroute policies to compare (the first is the baseline)")
    args = p.parse_args(argv)
    policies = args.policies.split(",")
    print(f"dp_dispatcher: {args.workers} worker processes, {args.sessions} multi-turn "
          f"sessions x {args.turns} turns, {args.cache_blocks} cached blocks of "
          f"{BLOCK_CHARS} characters per worker")
    print(f"{'policy':<16}{'hit rate':>9}{'latency':>12}  branches")
    results = {}
    for policy in policies:
        r = results[policy] = run(policy, args)
        branches = " ".join(f"{k}={v}" for k, v in r["branches"].items())
        print(f"{policy:<16}{r['hit_rate']:>9.3f}{r['mean_latency_ms']:>10.1f}ms  {branches}")
    base = policies[0]
    for policy in policies[1:]:
        diff = results[policy]["hit_rate"] - results[base]["hit_rate"]
        print(f"{policy} vs {base}: hit rate {diff:+.3f} "
              f"({results[policy]['hit_rate']:.3f} against {results[base]['hit_rate']:.3f})")
    return results


if __name__ == "__main__":
    main()
    sys.exit(0)
