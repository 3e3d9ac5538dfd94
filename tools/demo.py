#!/usr/bin/env python3
"""make demo: the bundled Lease API server and three leaderd replicas on
loopback. Shows who leads, kills the leader (SIGKILL) and times the
failover, then stops the new leader gracefully (SIGTERM) and times the
handover. Everything runs in a temporary folder and is stopped by PID."""
import os
import shutil
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))

from apiserver import ApiServer  # noqa: E402
from cluster import FAST, Replica, sample, leaders_in  # noqa: E402


def say(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def wait_new_leader(replicas, old, timeout):
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        leaders = leaders_in(sample(replicas))
        if len(leaders) == 1 and leaders[0] != old:
            return leaders[0], time.monotonic() - start
        time.sleep(0.01)
    return None, None


def show(replicas):
    for client, (status, doc) in sorted(sample(replicas).items()):
        if doc:
            say(f"  {client}: /leader -> {status}  leader={doc['leader']!r} "
                f"term={doc['term']} is_leader={str(doc['is_leader']).lower()}")


def main():
    work = tempfile.mkdtemp(prefix="leaderd-demo-")
    api = ApiServer(os.path.join(work, "api"), ["pod-a", "pod-b", "pod-c"])
    replicas = []
    try:
        api.start()
        say(f"bundled Lease API server (test-only) on {api.url}")
        t = FAST
        say(f"timings: lease-duration {t['lease_duration']:g}s, renew-deadline "
            f"{t['renew_deadline']:g}s, retry-period {t['retry_period']:g}s")
        for name in ("pod-a", "pod-b", "pod-c"):
            r = Replica(api, name, work, lease="demo").start()
            replicas.append(r)
            say(f"started leaderd {name} (pid {r.proc.pid}) on {r.url}")
        leader, took = wait_new_leader(replicas, None, 10)
        say(f"leader elected: {leader} after {took * 1000:.0f} ms")
        show(replicas)

        victim = next(r for r in replicas if r.client == leader)
        say(f"SIGKILL {leader} (no chance to release the lease)...")
        victim.stop(signal.SIGKILL)
        new, took = wait_new_leader(replicas, leader, 30)
        say(f"new leader: {new}, failover took {took:.2f} s "
            f"(bound: lease-duration + 2 x retry-period = "
            f"{t['lease_duration'] + 2 * t['retry_period']:g} s)")
        show(replicas)

        victim = next(r for r in replicas if r.client == new)
        say(f"SIGTERM {new} (graceful: it releases the lease)...")
        victim.send(signal.SIGTERM)
        handover, took = wait_new_leader(replicas, new, 30)
        rc = victim.wait_exit(10)
        say(f"new leader: {handover}, handover took {took * 1000:.0f} ms; {new} exited with {rc}")
        show(replicas)
        return 0
    finally:
        for r in replicas:
            r.stop(signal.SIGTERM)
        api.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
