#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""make demo-shards: the bundled Lease API server and three leaderd replicas
on loopback sharing 12 shards (--shards 12). Prints who owns which shard,
then SIGKILLs one replica, starts a new one and SIGTERMs another, each time
with the shards that moved and how long the group took to balance again.
Everything runs in a temporary folder and is stopped by PID; every wait is
bounded."""
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))  # leaderd_testing

from leaderd_testing.apiserver import ApiServer  # noqa: E402
from leaderd_testing.cluster import FAST, Replica  # noqa: E402

SHARDS = 12
GROUP = "demo"
NAMES = ["pod-a", "pod-b", "pod-c", "pod-d"]


def say(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def shards_of(replica):
    """The decoded /shards of one replica, or None."""
    try:
        with urllib.request.urlopen(replica.url + "/shards", timeout=1) as r:
            return json.loads(r.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def balanced(replicas):
    """{shard: owner} once every live replica sees the same members (the live
    ones), every shard is claimed by exactly one replica and every replica
    owns floor or ceil of N/M; else None."""
    live = [r for r in replicas if r.alive()]
    members = sorted(r.identity for r in live)
    owners = {}
    for r in live:
        doc = shards_of(r)
        if not doc or doc.get("members") != members:
            return None
        for sid in doc["owned"]:
            if sid in owners:
                return None
            owners[sid] = r.identity
    if len(owners) != SHARDS:
        return None
    counts = {list(owners.values()).count(m) for m in members}
    if not counts <= {SHARDS // len(members), -(-SHARDS // len(members))}:
        return None
    return owners


def wait_balanced(replicas, since, timeout=30):
    while time.monotonic() - since < timeout:
        owners = balanced(replicas)
        if owners:
            return owners, time.monotonic() - since
        time.sleep(0.02)
    raise RuntimeError(f"the group did not balance within {timeout} s")


def table(owners):
    ids = sorted(owners, key=int)
    say("  shard  " + " ".join(f"{i:>5}" for i in ids))
    say("  owner  " + " ".join(f"{owners[i]:>5}" for i in ids))
    per = {}
    for i in ids:
        per.setdefault(owners[i], []).append(i)
    for who in sorted(per):
        say(f"  {who} owns {len(per[who])}: {', '.join(per[who])}")


def moves(before, after):
    moved = [f"{s}: {before[s]} -> {after[s]}" for s in sorted(before, key=int)
             if before[s] != after[s]]
    return f"{len(moved)} shards moved" + (" (" + "; ".join(moved) + ")" if moved else "")


def main():
    t = FAST
    work = tempfile.mkdtemp(prefix="leaderd-demo-shards-")
    api = ApiServer(os.path.join(work, "api"), NAMES)
    replicas = []

    def start(name):
        r = Replica(api, name, work, lease=GROUP, extra_args=["--shards", str(SHARDS)])
        replicas.append(r.start())
        say(f"started leaderd {name} (pid {r.proc.pid}) on {r.url}: --lease-name {GROUP} "
            f"--shards {SHARDS}")
        return r

    try:
        api.start()
        say(f"bundled Lease API server (test-only) on {api.url}")
        say(f"timings: lease-duration {t['lease_duration']:g}s, renew-deadline "
            f"{t['renew_deadline']:g}s, retry-period {t['retry_period']:g}s")
        t0 = time.monotonic()
        for name in NAMES[:3]:
            start(name)
        owners, took = wait_balanced(replicas, t0)
        say(f"balanced over 3 members after {took:.2f} s (each owns {SHARDS // 3}):")
        table(owners)

        victim = replicas[0]
        say(f"SIGKILL {victim.client} (no chance to release its shards)...")
        t0 = time.monotonic()
        victim.stop(signal.SIGKILL)
        after, took = wait_balanced(replicas, t0)
        say(f"rebalanced in {took:.2f} s (bound: lease-duration + 2 x retry-period + 1 s = "
            f"{t['lease_duration'] + 2 * t['retry_period'] + 1:g} s): {moves(owners, after)}")
        table(after)
        owners = after

        # The newcomer has never seen the crashed member's Lease change, so
        # it counts it as live until lease-duration has passed (the
        # local-monotonic rule): this join waits out that, too.
        say(f"a new replica joins: {NAMES[3]} (it counts the crashed {victim.client} as a "
            f"member until its Lease has not changed for lease-duration)...")
        t0 = time.monotonic()
        start(NAMES[3])
        after, took = wait_balanced(replicas, t0)
        say(f"rebalanced in {took:.2f} s (bound: lease-duration + 4 x retry-period = "
            f"{t['lease_duration'] + 4 * t['retry_period']:g} s): {moves(owners, after)}")
        table(after)
        owners = after

        victim = next(r for r in replicas if r.alive() and r.client == NAMES[1])
        say(f"SIGTERM {victim.client} (graceful: it releases its shards and deletes its "
            f"member Lease)...")
        t0 = time.monotonic()
        victim.send(signal.SIGTERM)
        rc = victim.wait_exit(10)  # until it has gone, it still counts as a member
        after, took = wait_balanced(replicas, t0)
        say(f"rebalanced in {took:.2f} s (bound: retry-period + 1 s = "
            f"{t['retry_period'] + 1:g} s); {victim.client} exited with {rc}: "
            f"{moves(owners, after)}")
        table(after)
        say("stopping everything")
        return 0
    finally:
        for r in replicas:
            r.stop(signal.SIGTERM)
        api.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
