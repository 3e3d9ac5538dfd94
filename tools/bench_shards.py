#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""make bench-shards (and the end of make bench): figures of a shard group
under shard protocol 2 (docs/design/shard-protocol.md), printed, never
asserted.

For each N of BENCH_SHARD_COUNTS (default 1,16,256,1024): a fresh bundled API
server and M = 4 replicas with --shards N and leaderd's default timings
15s/10s/2s (BENCH_SHARD_TIMINGS=fast: the tests' 4s/3s/1s, for a quick run).

Steady state, over BENCH_SHARD_SECONDS (default 60) once the group is balanced
and no shard Lease has been written for two retry periods:
  - Lease writes per replica per minute, member and shard Leases apart (goal:
    one member renewal per retry period, 30 a minute at the default timings,
    whatever N; no shard write while nobody comes or goes);
  - API requests per minute of the whole group, by verb (the API server's own
    count per client);
  - CPU seconds per replica per minute (utime + stime, /proc/PID/stat);
  - VmRSS, RssAnon and RssFile per replica at the end (/proc/PID/status, read
    no earlier than STARTUP_DROP_S after a replica's start; goal: VmRSS under
    8 MiB at N = 1024);
  - the most TCP connections a replica held to the API server (sampled every
    second).

Events, each from a balanced, quiet group: a 5th replica joins; one replica
leaves (SIGTERM); a rolling update replaces all 4 replicas with new names,
one at a time, as a Deployment with maxSurge 1 and maxUnavailable 0 does
(start a new replica, wait until it is Ready, BENCH_ROLL_PAUSE seconds more,
SIGTERM one old replica and wait for it to exit, then the next; Ready is
BENCH_ROLL_READY, see READY); one replica crashes (SIGKILL). For each: the
seconds from the event to the balanced state the group settled in, the shard
owner changes, and how long shard Leases named nobody (released and not yet
taken: no replica owns the shard meanwhile). The rolling update also prints
each step and its owner changes per shard (goal: at most 1.5).

How: the group's Lease writes are taken from the API server's write log
(GET /_control/log, every successful write with its holder and the server's
CLOCK_MONOTONIC at commit, the clock time.monotonic() reads), followed every
~50 ms. It holds every write, so a hand-over between two polls is not missed
and every time is the commit's own, not a poll's.
  - Balanced: every shard Lease names a live replica (one not signalled) and
    every live replica holds floor(N/M) or ceil(N/M) of them. An event's time
    runs from the event (for a new replica, before its process starts) to
    the write that began the balanced state the group was still in once no
    shard Lease had been written for two retry periods (quiet).
  - Owner change: a write naming holder B of a shard whose last non-empty
    holder was A != B; a release to "" is not one, so A -> "" -> B counts
    once and A -> "" -> A not at all. "net" is the number of shards whose
    holder differs between the balanced tables before and after the event
    (what the protocol 1 figures counted as "moved").

The binary: build/leaderd (LEADERD_BUILD) by default; BENCH_SHARD_BINARY (or
the first argument) names another: a path, or "static" / "musl" for the
image's static binaries that `make static` / `make static LIBC=musl` link
under build/ (tools/footprint.py's labels; the image ships musl).

The protocol 1 figures of docs/benchmarks.md (2026-12-01, 3 replicas,
dynamic build) are kept below as THEN, and the summary prints now/then
ratios where both exist."""
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

from leaderd_testing import cluster  # noqa: E402
from leaderd_testing.apiserver import ApiServer, requests_by_verb  # noqa: E402
from leaderd_testing.cluster import (DEFAULTS, FAST, Replica, client_connections,  # noqa: E402
                                     proc_fields)

M = 4
FIRST = [f"s{i}" for i in range(1, M + 1)]
JOINER = f"s{M + 1}"
ROLLED = [f"r{i}" for i in range(1, M + 1)]  # the rolling update's new replicas
GROUP = "bench"
NS = "default"
POLL = 0.05
RSS_GOAL_KIB = 8 * 1024  # VmRSS at N = 1024
CONN_GOAL = 4
ROLL_MOVES_GOAL = 1.5  # owner changes per shard over a rolling update
STATIC = {"static": "static", "musl": "static-musl"}  # label: directory under build/
# leaderd drops its start-up code's page-table entries 15 s after it starts
# (LD_MEMTRIM_STARTUP_MS, cmd/leaderd/core/memtrim.h): VmRSS is about twice
# its steady figure before that, so memory is read only after it.
STARTUP_DROP_S = 15.0 + 2.0

# What a new replica of the rolling update must show before an old one is
# stopped. A Deployment waits for its readiness; deploy/examples/sharded has
# no readinessProbe, so its Pod is Ready once its startupProbe (/readyz) passes.
READY = {
    "healthz": "/healthz answers 200. In shard mode that says the loop is alive (it "
               "published within its stall limit), the API server has not refused its "
               "credentials for a renew deadline, no other process uses its identity, and "
               "it has not stepped out for owning nothing; nothing about membership or "
               "shards, so it holds within a second of the start",
    "readyz": "/readyz answers 200: the replica has observed its member Lease and listed "
              "the group once (what deploy/examples/sharded's startupProbe waits for)",
    "balanced": "the group is balanced over the live replicas, the new one included "
                "(it owns its quota): slower than any probe, the pace a careful operator "
                "would choose",
}

# Protocol 1, from docs/benchmarks.md ("Shard groups", 2026-12-01,
# BENCH_SHARD_SECONDS=30, M = 3, dynamic build, 15s/10s/2s): per N, mean VmRSS
# and RssAnon (kB), API requests per minute of the group and of each replica,
# and (seconds, shards moved) of a join (3 -> 4), a leave (4 -> 3), a crash (3 -> 2).
THEN_M = 3
THEN = {
    1: {"vmrss": 6220, "anon": 1917, "req": 120, "req_each": (60, 30, 30),
        "join": (0.04, 0), "leave": (0.05, 1), "crash": (15.00, 1)},
    16: {"vmrss": 6295, "anon": 2027, "req": 570, "req_each": (210, 180, 180),
         "join": (0.08, 4), "leave": (0.06, 4), "crash": (15.01, 6)},
    64: {"vmrss": 6492, "anon": 2227, "req": 2010, "req_each": (690, 660, 660),
         "join": (0.14, 16), "leave": (0.06, 16), "crash": (15.02, 22)},
    256: {"vmrss": 7167, "anon": 2901, "req": 7770, "req_each": (2610, 2580, 2580),
          "join": (0.41, 64), "leave": (0.17, 64), "crash": (15.01, 86)},
}


# ---- configuration ----

def settings(argv):
    """Everything the environment and the command line choose, checked."""
    build = os.path.abspath(os.environ.get("LEADERD_BUILD") or os.path.join(HERE, "..", "build"))
    binary = (argv[0] if argv else "") or os.environ.get("BENCH_SHARD_BINARY") or "dynamic"
    if binary == "dynamic":
        binary = os.path.join(build, "leaderd")
    elif binary in STATIC:
        binary = os.path.join(build, STATIC[binary], "leaderd")
    binary = os.path.abspath(binary)
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"bench_shards: no binary {binary} (`make static` or "
                         f"`make static LIBC=musl` builds the static ones)")
    ready = os.environ.get("BENCH_ROLL_READY", "healthz")
    if ready not in READY:
        raise SystemExit(f"bench_shards: BENCH_ROLL_READY is one of {', '.join(READY)}")
    fast = os.environ.get("BENCH_SHARD_TIMINGS", "default") == "fast"
    return {
        "counts": [int(x) for x in
                   os.environ.get("BENCH_SHARD_COUNTS", "1,16,256,1024").split(",") if x.strip()],
        "seconds": float(os.environ.get("BENCH_SHARD_SECONDS", "60")),
        "timings": FAST if fast else DEFAULTS,
        "binary": binary,
        "ready": ready,
        "pause": float(os.environ.get("BENCH_ROLL_PAUSE", "0")),
    }


def timings_label(t):
    return "/".join(f"{t[k]:g}s" for k in ("lease_duration", "renew_deadline", "retry_period"))


# ---- the API server's write log ----

def shard_of(name):
    """The shard ID a Lease name is of, or None for a member Lease."""
    if not name.startswith(GROUP + "-") or name.startswith(GROUP + "-member-"):
        return None
    return name[len(GROUP) + 1:]


def balanced(table, n, live):
    """True when all n shards are held by members of live, each of which
    holds floor(n/m) or ceil(n/m)."""
    if len(table) != n or not live:
        return False
    counts = {m: 0 for m in live}
    for holder in table.values():
        if holder not in counts:
            return False
        counts[holder] += 1
    lo, hi = n // len(live), -(-n // len(live))
    return all(lo <= c <= hi for c in counts.values())


class WriteLog:
    """Follows the API server's write log on one kept-alive HTTPS connection
    (a poll every 50 ms costs no TLS handshake) and keeps, from every write
    of the group's Leases in commit order: the shards' holders (table), the
    commit times of the owner changes and of all writes per client, and,
    while a target membership is tracked, when the current balanced state
    began."""

    def __init__(self, api):
        self.api = api
        self.conn = None
        self.seq = 0
        self.table = {}      # shard: holder or ""
        self.owner = {}      # shard: its last non-empty holder
        self.changes = []    # commit time of every owner change
        self.free_since = {}  # shard: when its Lease came to name nobody
        self.gaps = []       # (from, to) of each time a shard Lease named nobody
        self.writes = []     # (commit time, client, "member" or "shard")
        self.last_shard_write = 0.0
        self.target = None   # (n, live) while tracking
        self.balanced_at = None  # when the current balanced state began
        self.first_at = None     # when the first one did

    def _fetch(self):
        for _ in range(2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPSConnection(
                        "127.0.0.1", self.api.port, context=self.api._ctx, timeout=10)
                self.conn.request("GET", f"/_control/log?since={self.seq}", headers={
                    "Authorization": "Bearer " + self.api.token("admin")})
                resp = self.conn.getresponse()
                body = resp.read()
                if resp.status == 200:
                    return json.loads(body)["entries"]
            except (OSError, http.client.HTTPException, ValueError):
                pass
            self.close()
        raise RuntimeError("the API server's write log did not answer")

    def sync(self):
        """Applies every write committed since the last sync."""
        for e in self._fetch():
            self.seq = max(self.seq, e["seq"])
            if e.get("namespace") == NS:
                self._apply(e)

    def _apply(self, e):
        t = e["clock_us"] / 1e6
        shard = shard_of(e.get("name") or "")
        self.writes.append((t, e["client"], "member" if shard is None else "shard"))
        if shard is None:
            return
        self.last_shard_write = t
        holder = e.get("holderIdentity") or ""
        if e["verb"] == "delete":
            self.table.pop(shard, None)
        else:
            self.table[shard] = holder
        if holder and self.owner.get(shard, holder) != holder:
            self.changes.append(t)
        if holder:
            self.owner[shard] = holder
            if shard in self.free_since:
                self.gaps.append((self.free_since.pop(shard), t))
        elif e["verb"] != "delete":
            self.free_since.setdefault(shard, t)
        self._judge(t)

    def track(self, n, live):
        """From now on, notes when the group becomes balanced over live (a
        set the caller keeps), judging the table as synced so far at once."""
        self.target = (n, live)
        self.balanced_at = self.first_at = None
        self._judge(time.monotonic())

    def untrack(self):
        self.target = None

    def _judge(self, t):
        if self.target is None:
            return
        if not balanced(self.table, *self.target):
            self.balanced_at = None
        elif self.balanced_at is None:
            self.balanced_at = t
            if self.first_at is None:
                self.first_at = t

    def owner_changes(self, since, until=math.inf):
        return sum(1 for t in self.changes if since <= t < until)

    def owner_changes_after(self, t0):
        return sum(1 for t in self.changes if t > t0)

    def free_gaps(self, since):
        """(the longest, the sum of) the times a shard Lease named nobody,
        of those that ended after since, in seconds."""
        spans = [b - a for a, b in self.gaps if b >= since]
        return (max(spans), sum(spans)) if spans else (0.0, 0.0)

    def writes_by(self, client, kind, since, until):
        return sum(1 for t, c, k in self.writes if c == client and k == kind and since <= t < until)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def settle(log, quiet, timeout):
    """Follows the log until it shows the tracked balance and no shard write
    for quiet seconds, or timeout. Returns (balanced_at or None, quiet?)."""
    end = time.monotonic() + timeout
    while True:
        log.sync()
        now = time.monotonic()
        last = max(log.last_shard_write, log.balanced_at or 0.0)
        if log.balanced_at is not None and now - last >= quiet:
            return log.balanced_at, True
        if now >= end:
            return log.balanced_at, False
        time.sleep(POLL)


def net_moved(before, after):
    return sum(1 for s in after if before.get(s) != after[s])


# ---- processes ----

def cpu_seconds(pid):
    """utime + stime of pid, in seconds (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Group:
    """One N's API server, its replicas and the write log, and the live set
    (the replicas started and not signalled, by identity)."""

    def __init__(self, work, n, cfg):
        self.n, self.cfg, self.t = n, cfg, cfg["timings"]
        self.dir = os.path.join(work, f"n{n}")
        self.api = ApiServer(os.path.join(self.dir, "api"), FIRST + [JOINER] + ROLLED,
                             verbose=False)
        self.replicas = {}
        self.started = {}  # client: monotonic time its process started
        self.live = set()
        self.log = WriteLog(self.api)
        # Two retry periods without a shard write: every replica has seen
        # the others renew since the last change and acted on it.
        self.quiet = 2 * self.t["retry_period"]

    def start(self, client):
        r = Replica(self.api, client, self.dir, lease=GROUP, timings=self.t,
                    extra_args=["--shards", str(self.n), "--log-level", "info"])
        self.started[client] = time.monotonic()
        self.replicas[client] = r.start(timeout=30)
        self.live.add(client)
        return r

    def signal(self, client, sig):
        self.live.discard(client)
        self.replicas[client].send(sig)

    def wait_exit(self, client):
        """Seconds the process took to exit after now, or None."""
        t0 = time.monotonic()
        rc = self.replicas[client].wait_exit(self.t["renew_deadline"] + 30)
        return None if rc is None else time.monotonic() - t0

    def balance_timeout(self):
        return self.t["lease_duration"] + 4 * self.t["retry_period"] + 60

    def close(self):
        self.log.close()
        for r in self.replicas.values():
            r.stop(signal.SIGKILL)
        self.api.stop()

    def tail_logs(self):
        for r in self.replicas.values():
            print(f"--- last lines of {r.client}'s log:\n{r.log()[-1500:]}")


# ---- steady state ----

def steady_state(g, seconds):
    """Figures over seconds of a quiet group; prints them and returns them."""
    live = [g.replicas[c] for c in sorted(g.live)]
    g.log.sync()
    before, t0 = g.api.stats(), time.monotonic()
    cpu0 = {r.client: cpu_seconds(r.proc.pid) for r in live}
    conns = {r.client: 0 for r in live}
    end = t0 + seconds
    while True:
        for r in live:
            conns[r.client] = max(conns[r.client], client_connections(r.proc.pid, g.api.port))
        left = end - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(1.0, left))
    after, t1 = g.api.stats(), time.monotonic()
    g.log.sync()
    per_min = 60.0 / (t1 - t0)
    cpu1 = {r.client: cpu_seconds(r.proc.pid) for r in live}
    # A point in time the figure is of, not a synchronisation.
    time.sleep(max(0.0, max(g.started.values()) + STARTUP_DROP_S - time.monotonic()))
    rows, verbs = [], {}
    for r in live:
        b, a = requests_by_verb(before, r.client), requests_by_verb(after, r.client)
        for v in a:
            verbs[v] = verbs.get(v, 0) + a[v] - b.get(v, 0)
        rows.append({"client": r.client,
                     "member": g.log.writes_by(r.client, "member", t0, t1) * per_min,
                     "shard": g.log.writes_by(r.client, "shard", t0, t1) * per_min,
                     "req": (sum(a.values()) - sum(b.values())) * per_min,
                     "cpu": (cpu1[r.client] - cpu0[r.client]) * per_min,
                     "conns": conns[r.client],
                     **proc_fields(r.proc.pid, ("VmRSS", "RssAnon", "RssFile"))})
    print_steady(g, rows, verbs, per_min)
    return {"rows": rows, "group_req": sum(verbs.values()) * per_min,
            "verbs": {v: c * per_min for v, c in verbs.items() if c}}


def print_steady(g, rows, verbs, per_min):
    goal = 60.0 / g.t["retry_period"]
    print(f"  {'replica':8} {'Lease writes/min':>16} {'of shards':>9} {'req/min':>8} "
          f"{'CPU s/min':>9} {'VmRSS kB':>9} {'RssAnon kB':>10} {'RssFile kB':>10} "
          f"{'max conns':>9}")
    for w in rows:
        print(f"  {w['client']:8} {w['member'] + w['shard']:16.1f} {w['shard']:9.1f} "
              f"{w['req']:8.1f} {w['cpu']:9.3f} {w['VmRSS']:9,} {w['RssAnon']:10,} "
              f"{w['RssFile']:10,} {w['conns']:9}")
    by_verb = ", ".join(f"{v} {c * per_min:.1f}" for v, c in sorted(verbs.items()) if c)
    print(f"  group: {sum(verbs.values()) * per_min:.1f} API requests/min ({by_verb or 'none'}); "
          f"goals: {goal:g} Lease writes per replica per minute (one per retry period) and "
          f"none of a shard; VmRSS < {RSS_GOAL_KIB:,} kB at N = 1024; "
          f"<= {CONN_GOAL} connections", flush=True)


# ---- events ----

def event(g, label, act, goal_s, goal_moves, timeout):
    """Runs act() on a quiet balanced group; act changes g.live and calls
    g.log.track once the membership is final. Prints and returns the figures
    ({"s", "moves", "later", "net"}), or None when the group did not settle."""
    g.log.sync()
    g.log.untrack()
    before = dict(g.log.table)
    t0 = time.monotonic()
    act()
    at, quiet = settle(g.log, g.quiet, timeout)
    if at is None:
        print(f"  {label}: not balanced within {timeout:.0f}s; holders: "
              f"{sorted(set(g.log.table.values()))}, live: {sorted(g.live)}", flush=True)
        return None
    out = {"s": at - t0, "moves": g.log.owner_changes(t0),
           "later": g.log.owner_changes_after(at), "net": net_moved(before, g.log.table)}
    out["free_max"], out["free_sum"] = g.log.free_gaps(t0)
    first = g.log.first_at - t0
    again = f" (first balanced after {first:.2f}s)" if g.log.first_at < at else ""
    print(f"  {label}: balanced after {out['s']:.2f}s{again} (goal <= {goal_s:.1f}s), "
          f"{out['moves']} owner changes (goal <= {goal_moves}; {out['later']} after "
          f"balance), net {out['net']} shards{'' if quiet else '; never quiet'}; "
          f"a shard Lease named nobody for at most {out['free_max']:.2f}s "
          f"({out['free_sum']:.1f} shard-seconds in all)", flush=True)
    return out


def join(g):
    n, t = g.n, g.t

    def act():
        g.live.add(JOINER)  # before the process: the clock runs from its start
        g.start(JOINER)
        g.log.track(n, g.live)
    return event(g, f"join, {M} -> {M + 1} replicas", act,
                 t["lease_duration"] + 4 * t["retry_period"], math.ceil(n / (M + 1)) + 1,
                 g.balance_timeout())


def leave(g, client, sig):
    """SIGTERM (a graceful leave) or SIGKILL (a crash) of client."""
    n, t = g.n, g.t
    g.log.sync()
    mine = sum(1 for h in g.log.table.values() if h == client)
    drain = t["retry_period"]  # --shard-drain's default: the release waits for it
    if sig == signal.SIGTERM:
        label, goal = "graceful leave (SIGTERM)", drain + t["retry_period"] + 1.0
    else:
        label, goal = "crash (SIGKILL)", t["lease_duration"] + 2 * t["retry_period"] + 1.0

    def act():
        g.signal(client, sig)
        g.log.track(n, g.live)
    res = event(g, f"{label}, {len(g.live)} -> {len(g.live) - 1} replicas", act, goal,
                f"{mine} + 1", g.balance_timeout())
    g.wait_exit(client)
    return res


def wait_ready(g, client, t0, timeout):
    """Seconds from t0 (before its process started) until client is Ready by
    BENCH_ROLL_READY, or None."""
    r, how = g.replicas[client], g.cfg["ready"]
    while time.monotonic() - t0 < timeout:
        if how == "balanced":
            g.log.sync()
            ok = balanced(g.log.table, g.n, g.live)
        else:
            ok = r.get("/" + how)[0] == 200
        if ok:
            return time.monotonic() - t0
        time.sleep(POLL)
    return None


def roll(g):
    """Replaces every live replica by a new one, one at a time. A step's
    owner changes are those from its start to the next step's start (the
    last one's: to the end), so the takes of what an old replica released
    just before it exited count in its step."""
    n, t = g.n, g.t
    old = sorted(g.live)
    steps = []

    def act():
        for new, gone in zip(ROLLED, old):
            t_step = time.monotonic()
            g.start(new)
            ready = wait_ready(g, new, t_step, g.balance_timeout())
            if ready is None:
                raise RuntimeError(f"rolling update: {new} never Ready ({g.cfg['ready']})")
            time.sleep(g.cfg["pause"])  # the configured pace, not a synchronisation
            g.signal(gone, signal.SIGTERM)
            if gone == old[-1]:
                g.log.track(n, g.live)
            steps.append((new, gone, ready, g.wait_exit(gone), t_step))
    res = event(g, f"rolling update of {M} replicas (maxSurge 1, maxUnavailable 0)", act,
                M * (t["lease_duration"] + 4 * t["retry_period"]),
                f"{ROLL_MOVES_GOAL} x N = {ROLL_MOVES_GOAL * n:g}", g.balance_timeout())
    ends = [s[4] for s in steps[1:]] + [math.inf]
    for (new, gone, ready, exited, start), end in zip(steps, ends):
        ex = f"{exited:.2f}s" if exited is not None else "never"
        print(f"    start {new}: Ready {ready:.2f}s after its start; SIGTERM {gone}: exited "
              f"after {ex}; {g.log.owner_changes(start, end)} owner changes in this step")
    if res is not None:
        res["per_shard"] = res["moves"] / n
        print(f"    owner changes / N = {res['per_shard']:.2f} (goal <= {ROLL_MOVES_GOAL})")
    return res


# ---- one N ----

def run_n(n, work, cfg):
    """All figures for one N; every process started here is killed by PID."""
    g = Group(work, n, cfg)
    out = {"n": n}
    try:
        g.api.start()
        t0 = time.monotonic()
        for c in FIRST:
            g.start(c)
        g.log.track(n, g.live)
        at, _ = settle(g.log, g.quiet, g.balance_timeout())
        if at is None:
            print(f"N={n}: never balanced at start; holders {sorted(set(g.log.table.values()))}")
            g.tail_logs()
            return out
        print(f"\nN={n} shards, M={M} replicas, timings {timings_label(g.t)}: balanced "
              f"{at - t0:.2f}s after the first replica started, "
              f"{g.log.owner_changes(t0)} owner changes on the way; "
              f"measuring {cfg['seconds']:g}s ...", flush=True)
        out["steady"] = steady_state(g, cfg["seconds"])
        for key, step in (("join", join),
                          ("leave", lambda g: leave(g, sorted(g.live)[0], signal.SIGTERM)),
                          ("roll", roll),
                          ("crash", lambda g: leave(g, sorted(g.live)[0], signal.SIGKILL))):
            try:
                out[key] = step(g)
            except (AssertionError, RuntimeError) as e:
                print(f"  {key}: {e}", flush=True)
                out[key] = None
            if out[key] is None:
                g.tail_logs()
                break
        return out
    finally:
        g.close()


# ---- summary ----

def ev(r, key):
    v = r.get(key)
    return f"{v['s']:.2f}/{v['moves']}" if v else "-"


def ratio(now, then):
    return f"{now / then:.3f}" if then else "-"


def print_summary(results, cfg):
    retry = cfg["timings"]["retry_period"]
    print(f"\nsummary (per replica: the mean of the {M} steady replicas, max where it says so; "
          f"events: seconds to balance / owner changes; load average now "
          f"{os.getloadavg()[0]:.2f}):")
    print(f"  {'N':>5} {'writes/min':>10} {'group req/min':>13} {'CPU s/min':>9} "
          f"{'VmRSS kB':>9} {'max VmRSS':>9} {'RssAnon kB':>10} {'conns':>5} "
          f"{'join':>9} {'leave':>9} {'roll':>10} {'roll/N':>6} {'crash':>9}")
    for r in results:
        s = r.get("steady")
        if not s:
            print(f"  {r['n']:>5} (no figures)")
            continue
        rows = s["rows"]
        mean = (lambda k: statistics.mean(w[k] for w in rows))
        roll_n = f"{r['roll']['per_shard']:.2f}" if r.get("roll") else "-"
        print(f"  {r['n']:>5} {mean('member') + mean('shard'):10.1f} {s['group_req']:13.1f} "
              f"{mean('cpu'):9.3f} {mean('VmRSS'):9,.0f} {max(w['VmRSS'] for w in rows):9,} "
              f"{mean('RssAnon'):10,.0f} {max(w['conns'] for w in rows):5} {ev(r, 'join'):>9} "
              f"{ev(r, 'leave'):>9} {ev(r, 'roll'):>10} {roll_n:>6} {ev(r, 'crash'):>9}")
    print(f"  goals: {60 / retry:g} writes per replica per minute at every N; VmRSS < "
          f"{RSS_GOAL_KIB:,} kB at N = 1024; <= {CONN_GOAL} connections; roll/N <= "
          f"{ROLL_MOVES_GOAL}")
    print_then(results, cfg)


def print_then(results, cfg):
    """Now vs then: the protocol 1 figures of docs/benchmarks.md (THEN)."""
    rows = [r for r in results if r.get("steady") and r["n"] in THEN]
    if not rows:
        print(f"\nnow vs then: no N in common with the protocol 1 figures "
              f"(N = {', '.join(map(str, THEN))})")
        return
    caveats = []
    if cfg["timings"] is not DEFAULTS:
        caveats.append("then used the default timings, now the fast ones")
    if os.path.basename(os.path.dirname(cfg["binary"])) in STATIC.values():
        caveats.append("then the dynamic build, now a static binary")
    print(f"\nnow vs then: ratios to the protocol 1 figures of docs/benchmarks.md "
          f"(2026-12-01, M = {THEN_M}, dynamic build); now M = {M}, so the group's "
          f"requests and the events' memberships differ; 'net' is what then called "
          f"moved{'; ' + '; '.join(caveats) if caveats else ''}:")
    print(f"  {'N':>5} {'group req/min':>19} {'req/min/replica':>21} {'VmRSS':>6} "
          f"{'RssAnon':>7} {'join s':>6} {'net':>5} {'leave s':>7} {'net':>5} "
          f"{'crash s':>7} {'net':>5}")
    for r in rows:
        then, s = THEN[r["n"]], r["steady"]
        each = statistics.mean(w["req"] for w in s["rows"])
        then_each = statistics.mean(then["req_each"])
        mean = (lambda k: statistics.mean(w[k] for w in s["rows"]))
        cells = []
        for key in ("join", "leave", "crash"):
            now = r.get(key)
            cells += [ratio(now["s"], then[key][0]) if now else "-",
                      ratio(now["net"], then[key][1]) if now else "-"]
        group = ratio(s["group_req"], then["req"])
        print(f"  {r['n']:>5} {s['group_req']:7.0f}/{then['req']:<5} {group:>5} "
              f"{each:7.1f}/{then_each:<6.0f} {ratio(each, then_each):>6} "
              f"{ratio(mean('VmRSS'), then['vmrss']):>6} "
              f"{ratio(mean('RssAnon'), then['anon']):>7} {cells[0]:>6} {cells[1]:>5} "
              f"{cells[2]:>7} {cells[3]:>5} {cells[4]:>7} {cells[5]:>5}")


def main(argv):
    cfg = settings(argv)
    cluster.LEADERD = cfg["binary"]
    work = tempfile.mkdtemp(prefix="leaderd-bench-shards-")
    print(f"shard groups (protocol 2): N = {', '.join(map(str, cfg['counts']))} over {M} "
          f"replicas of {cfg['binary']}, timings {timings_label(cfg['timings'])}, bundled API "
          f"server, {cfg['seconds']:g}s of steady state; load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"rolling update: Ready = {cfg['ready']}: {READY[cfg['ready']]}; then "
          f"{cfg['pause']:g}s more (BENCH_ROLL_PAUSE) before the old replica's SIGTERM",
          flush=True)
    results = []
    try:
        for n in cfg["counts"]:
            try:
                results.append(run_n(n, work, cfg))
            except (AssertionError, OSError, RuntimeError) as e:
                # A figure printer: one N that could not run does not stop the others.
                print(f"N={n}: {e}", flush=True)
                results.append({"n": n})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_summary(results, cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
