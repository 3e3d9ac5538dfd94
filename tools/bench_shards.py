#!/usr/bin/env python3
"""make bench-shards (and the end of make bench): figures of a shard group,
printed, never asserted. For each N of BENCH_SHARD_COUNTS (default
1,16,64,256) a fresh bundled API server and 3 replicas with --shards N and
the default timings (15s/10s/2s). In steady state, over BENCH_SHARD_SECONDS
(default 60): VmRSS and RssAnon of each replica and RssAnon's growth per
shard against the smallest N, API requests per minute per replica and in
total against the expected (N + M) x 60 / retry-period (one renewal per
shard and per member Lease), the requests by verb, and the most TCP
connections each replica held to the API server. Then, each from a balanced
assignment: a 4th replica joins, one replica leaves (SIGTERM), one crashes
(SIGKILL); each time the seconds from the event to the first balanced
assignment the API server's Lease list shows (polled every ~50 ms), and the
shards whose holder differs between the balanced tables before and after.

Balanced: every shard Lease is held by a live replica (one not signalled)
and every live replica holds floor(N/M) or ceil(N/M) of them. The goals
(docs/design/shards.md, issue 9) are printed next to the figures."""
import http.client
import json
import math
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))  # leaderd_testing

from leaderd_testing.apiserver import LEASES, ApiServer, requests_by_verb  # noqa: E402
from leaderd_testing.cluster import (DEFAULTS, Replica, client_connections,  # noqa: E402
                                     proc_fields)

CLIENTS = ["s1", "s2", "s3"]
JOINER = "s4"
# Lists the Leases; its own name so its requests are not counted for a replica.
OBSERVER = "observer"
GROUP = "bench"
SHARD_LABEL = "leaderd.io/shard"
POLL = 0.05
RSS_GOAL_KIB = 8
CONN_GOAL = 4


def verb_delta(before, after, client):
    b, a = requests_by_verb(before, client), requests_by_verb(after, client)
    return {v: a[v] - b.get(v, 0) for v in a if a[v] - b.get(v, 0)}


class Lister:
    """Lists the group's Leases on one kept-alive HTTPS connection, so a poll
    every 50 ms costs no TLS handshake."""

    def __init__(self, api):
        self.api = api
        self.conn = None
        self.path = f"{LEASES % 'default'}?labelSelector=leaderd.io%2Fshard-group%3D{GROUP}"

    def table(self):
        """{shard ID: holder or ""}, or None when the list failed."""
        for _ in range(2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPSConnection(
                        "127.0.0.1", self.api.port, context=self.api._ctx, timeout=5)
                self.conn.request("GET", self.path, headers={
                    "Authorization": "Bearer " + self.api.token(OBSERVER)})
                resp = self.conn.getresponse()
                body = resp.read()
                if resp.status != 200:
                    return None
                out = {}
                for lease in json.loads(body).get("items", []):
                    shard = (lease["metadata"].get("labels") or {}).get(SHARD_LABEL)
                    if shard is not None:
                        out[shard] = (lease.get("spec") or {}).get("holderIdentity") or ""
                return out
            except (OSError, http.client.HTTPException, ValueError):
                self.close()
        return None

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def balanced(table, n, live):
    """True when all n shards are held by members of live, each of which
    holds floor(n/m) or ceil(n/m)."""
    if table is None or len(table) != n or not live:
        return False
    counts = {m: 0 for m in live}
    for holder in table.values():
        if holder not in counts:
            return False
        counts[holder] += 1
    lo, hi = n // len(live), -(-n // len(live))
    return all(lo <= c <= hi for c in counts.values())


def wait_balanced(lister, n, live, timeout):
    """(seconds until the Lease list first shows a balanced assignment, that
    table), or (None, the last table) after timeout."""
    start = time.monotonic()
    table = None
    while time.monotonic() - start < timeout:
        table = lister.table()
        if balanced(table, n, live):
            return time.monotonic() - start, table
        time.sleep(POLL)
    return None, table


def moves(before, after):
    return sorted((s for s in after if before.get(s) != after[s]), key=str)


def start_replica(api, client, work, n, timings):
    return Replica(api, client, work, lease=GROUP, timings=timings,
                   extra_args=["--shards", str(n), "--log-level", "info"]).start(timeout=30)


def tail_logs(replicas):
    for r in replicas:
        print(f"--- last lines of {r.client}'s log:\n{r.log()[-1500:]}")


def steady_state(api, replicas, n, seconds, timings):
    """Memory, requests and connections over seconds; returns the figures."""
    time.sleep(3)  # the first assignment's acquires are not steady state
    before = api.stats()
    conns = {r.client: 0 for r in replicas}
    end = time.monotonic() + seconds
    while True:
        for r in replicas:
            conns[r.client] = max(conns[r.client], client_connections(r.proc.pid, api.port))
        left = end - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(1.0, left))
    after = api.stats()
    rows = []
    for r in replicas:
        verbs = verb_delta(before, after, r.client)
        rows.append({"client": r.client, **proc_fields(r.proc.pid, ("VmRSS", "RssAnon")),
                     "req_min": sum(verbs.values()) * 60.0 / seconds,
                     "verbs": verbs, "conns": conns[r.client]})
    expected = (n + len(replicas)) * 60.0 / timings["retry_period"]
    total = sum(row["req_min"] for row in rows)
    print(f"  {'replica':8} {'VmRSS kB':>9} {'RssAnon kB':>10} {'req/min':>8} "
          f"{'max conns':>9}  requests by verb")
    for row in rows:
        verbs = ", ".join(f"{v} {c}" for v, c in sorted(row["verbs"].items()))
        print(f"  {row['client']:8} {row['VmRSS']:9,} {row['RssAnon']:10,} "
              f"{row['req_min']:8.1f} {row['conns']:9}  {verbs}")
    print(f"  total {total:.1f} req/min, expected (N + M) x 60 / retry-period = "
          f"{expected:.0f}: ratio {total / expected:.3f} (goal 0.90-1.10); "
          f"most connections {max(conns.values())} (goal <= {CONN_GOAL})")
    return {"rss": statistics.mean(r["VmRSS"] for r in rows),
            "anon": statistics.mean(r["RssAnon"] for r in rows),
            "total": total,
            "expected": expected, "conns": max(conns.values())}


def event(label, lister, n, live, old, t0, goal_s, goal_moves, leaver=None):
    """Waits for balance after an event at monotonic time t0; prints and
    returns (seconds, shards moved, the balanced table), or None."""
    took, table = wait_balanced(lister, n, live, goal_s + 30 - (time.monotonic() - t0))
    if took is None:
        print(f"  {label}: not balanced within {goal_s + 30:.0f}s; last table {table}")
        return None
    took = time.monotonic() - t0
    moved = moves(old, table)
    extra = ""
    if leaver is not None:
        others = [s for s in moved if old.get(s) != leaver]
        extra = f"; {len(others)} of them not the leaver's"
    print(f"  {label}: balanced after {took:.2f}s (goal <= {goal_s:.1f}s), "
          f"{len(moved)} shards moved (goal <= {goal_moves}{extra})", flush=True)
    return took, len(moved), table


def run_n(n, seconds, work, timings):
    """All figures for one N; every process started here is killed by PID."""
    d = os.path.join(work, f"n{n}")
    api = ApiServer(os.path.join(d, "api"), CLIENTS + [JOINER, OBSERVER], verbose=False)
    replicas = []
    lister = Lister(api)
    lease, retry = timings["lease_duration"], timings["retry_period"]
    out = {"n": n}
    try:
        api.start()
        t0 = time.monotonic()
        for c in CLIENTS:
            replicas.append(start_replica(api, c, d, n, timings))
        live = {r.identity for r in replicas}
        took, table = wait_balanced(lister, n, live, lease + 4 * retry + 30)
        if took is None:
            print(f"N={n}: never balanced at start; last table {table}")
            tail_logs(replicas)
            return out
        print(f"\nN={n} shards, M=3 replicas, timings 15s/10s/2s: balanced "
              f"{time.monotonic() - t0:.2f}s after the first replica started; "
              f"measuring {seconds}s ...", flush=True)
        out.update(steady_state(api, replicas, n, seconds, timings))

        # Join: a 4th replica; the clock starts before its process does.
        _, old = wait_balanced(lister, n, live, 10)
        t0 = time.monotonic()
        replicas.append(start_replica(api, JOINER, d, n, timings))
        live.add(JOINER)
        res = event("join (a 4th replica)", lister, n, live, old, t0,
                    lease + 4 * retry, math.ceil(n / 4) + 1)
        if res is None:
            tail_logs(replicas)
            return out
        out["join"], old = res[:2], res[2]

        # Graceful leave, then a crash, each of one of the original three.
        for key, sig, label, goal in (
                ("leave", signal.SIGTERM, "graceful leave (SIGTERM)", retry + 1.0),
                ("crash", signal.SIGKILL, "crash (SIGKILL)", lease + 2 * retry + 1.0)):
            gone = next(r for r in replicas if r.identity in live)
            mine = sum(1 for h in old.values() if h == gone.identity)
            t0 = time.monotonic()
            gone.send(sig)
            live.discard(gone.identity)
            res = event(f"{label}, {len(live) + 1} -> {len(live)} replicas", lister, n,
                        live, old, t0, goal, f"{mine} + 1", leaver=gone.identity)
            if res is None:
                tail_logs(replicas)
                return out
            out[key], old = res[:2], res[2]
            gone.stop(signal.SIGKILL)
        return out
    finally:
        lister.close()
        for r in replicas:
            r.stop(signal.SIGKILL)
        api.stop()


def main():
    counts = [int(x) for x in os.environ.get("BENCH_SHARD_COUNTS", "1,16,64,256").split(",")
              if x.strip()]
    seconds = int(os.environ.get("BENCH_SHARD_SECONDS", "60"))
    work = tempfile.mkdtemp(prefix="leaderd-bench-shards-")
    print(f"shard groups: N = {', '.join(map(str, counts))} over 3 replicas, bundled API "
          f"server, load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    results = []
    try:
        for n in counts:
            try:
                results.append(run_n(n, seconds, work, DEFAULTS))
            except (AssertionError, OSError, RuntimeError) as e:
                # A figure printer: one N that could not run does not stop the others.
                print(f"N={n}: {e}", flush=True)
                results.append({"n": n})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = next((r for r in results if "anon" in r), None)
    print(f"\nsummary (kB are the mean of the 3 replicas; RssAnon growth per shard "
          f"against N={base['n'] if base else '?'} and against the N before, goal <= "
          f"{RSS_GOAL_KIB} KiB; load average now {os.getloadavg()[0]:.2f}):")
    print(f"  {'N':>4} {'VmRSS kB':>9} {'RssAnon kB':>10} {'KiB/shard':>9} {'marginal':>8} "
          f"{'req/min':>8} {'ratio':>6} {'conns':>5} {'join s/moved':>13} "
          f"{'leave s/moved':>13} {'crash s/moved':>13}")
    prev = None
    for r in results:
        if "anon" not in r:
            print(f"  {r['n']:>4} (no figures)")
            continue

        def growth(ref):
            if ref is None or ref["n"] == r["n"]:
                return "-"
            return f"{(r['anon'] - ref['anon']) / (r['n'] - ref['n']):.2f}"

        def ev(key):
            v = r.get(key)
            return f"{v[0]:.2f}/{v[1]}" if v else "-"
        print(f"  {r['n']:>4} {r['rss']:9,.0f} {r['anon']:10,.0f} {growth(base):>9} "
              f"{growth(prev):>8} {r['total']:8.1f} {r['total'] / r['expected']:6.3f} "
              f"{r['conns']:>5} {ev('join'):>13} {ev('leave'):>13} {ev('crash'):>13}")
        prev = r
    return 0


if __name__ == "__main__":
    sys.exit(main())
