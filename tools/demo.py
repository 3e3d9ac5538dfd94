#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""make demo: the bundled Lease API server and three leaderd replicas on
loopback. Shows who leads, kills the leader (SIGKILL) and times the
failover, then stops the new leader gracefully (SIGTERM) and times the
handover. Everything runs in a temporary folder and is stopped by PID.

make demo-child (--child): the same three replicas, each as
`leaderd ... -- python3 -c CHILD`, so only the leader runs the command. The
children's own lines (from the replicas' logs, where their stdout goes) show
which one runs, the SIGTERM its supervisor sends when its leaderd is
SIGKILLed, and the next child starting on the new leader, with timings."""
import argparse
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))  # leaderd_testing

from leaderd_testing.apiserver import ApiServer  # noqa: E402
from leaderd_testing.cluster import FAST, Replica, sample, leaders_in  # noqa: E402


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


# The command of --child: one line when it starts, one a second while it
# runs, one when SIGTERM stops it; T is time.monotonic(), a clock every
# process on the machine shares, so the demo can time them.
CHILD = r"""
import os, signal, time
me = f"{os.environ['LEADERD_IDENTITY']} term={os.environ['LEADERD_TERM']} pid={os.getpid()}"
def say(what):
    print(f"[child] {me} T={time.monotonic():.6f} {what}", flush=True)
def on_term(signo, frame):
    say("got SIGTERM, exiting")
    os._exit(0)
signal.signal(signal.SIGTERM, on_term)
say("started: only the leader runs me")
while True:
    time.sleep(1)
    say("working")
"""
CHILD_LINE = re.compile(r"^\[child\] (\S+) term=(\d+) pid=(\d+) T=([\d.]+) (.*)$")


class ChildLines:
    """Follows the replicas' logs for the children's lines, prints each as it
    comes and keeps them, so the demo can wait for one. A thread that reads
    every 50 ms until stop()."""

    def __init__(self, replicas):
        self.paths = [r.log_path for r in replicas]
        self.offsets = {p: 0 for p in self.paths}
        self.lines = []
        self.cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(5)

    def _run(self):
        while not self._stop.wait(0.05):
            for path in self.paths:
                self._read(path)

    def _read(self, path):
        try:
            with open(path, "rb") as f:
                f.seek(self.offsets[path])
                data = f.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1  # whole lines only
        self.offsets[path] += end
        for line in data[:end].decode(errors="replace").splitlines():
            m = CHILD_LINE.match(line)
            if not m:
                continue
            ev = {"who": m.group(1), "term": int(m.group(2)), "pid": int(m.group(3)),
                  "t": float(m.group(4)), "what": m.group(5)}
            say(f"  child of {ev['who']} (term {ev['term']}, pid {ev['pid']}): {ev['what']}")
            with self.cond:
                self.lines.append(ev)
                self.cond.notify_all()

    def wait(self, pred, timeout, what):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                ev = next((e for e in self.lines if pred(e)), None)
                if ev is not None:
                    return ev
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"no child line for {what} within {timeout:g} s")
                self.cond.wait(left)


def child_demo(api, work, t):
    replicas, lines = [], None
    try:
        for name in ("pod-a", "pod-b", "pod-c"):
            r = Replica(api, name, work, lease="demo",
                        extra_args=["--", sys.executable, "-c", CHILD])
            replicas.append(r.start())
            say(f"started leaderd {name} (pid {r.proc.pid}) -- python3 -c CHILD")
        lines = ChildLines(replicas).start()
        leader, took = wait_new_leader(replicas, None, 10)
        say(f"leader elected: {leader} after {took * 1000:.0f} ms; only its child may run")
        first = lines.wait(lambda e: e["who"] == leader, 10, f"{leader}'s child")
        time.sleep(2.2)  # for the reader: it works, and the standbys start no child

        victim = next(r for r in replicas if r.client == leader)
        say(f"SIGKILL {leader}'s leaderd: it cannot stop its child, its supervisor must...")
        t_kill = time.monotonic()
        victim.send(signal.SIGKILL)
        gone = lines.wait(lambda e: e["pid"] == first["pid"] and "SIGTERM" in e["what"],
                          10, f"{leader}'s child to stop")
        say(f"{leader}'s supervisor sent its child SIGTERM: it stopped "
            f"{gone['t'] - t_kill:.3f} s after the kill (SIGKILL would follow "
            f"--child-grace later)")
        nxt = lines.wait(lambda e: e["who"] != leader and e["what"].startswith("started"),
                         30, "a child on another replica")
        new = nxt["who"]
        say(f"the child moved to {new}: it started {nxt['t'] - t_kill:.2f} s after the "
            f"kill, {nxt['t'] - gone['t']:.2f} s after the old one stopped (bound: "
            f"lease-duration + 2 x retry-period = "
            f"{t['lease_duration'] + 2 * t['retry_period']:g} s)")
        time.sleep(1.2)  # for the reader: the new child works

        victim = next(r for r in replicas if r.client == new)
        say(f"SIGTERM {new}'s leaderd: passed to its child; it releases once the child exits...")
        t_term = time.monotonic()
        victim.send(signal.SIGTERM)
        gone = lines.wait(lambda e: e["pid"] == nxt["pid"] and "SIGTERM" in e["what"], 10,
                          f"{new}'s child to stop")
        third = lines.wait(lambda e: e["who"] not in (leader, new)
                           and e["what"].startswith("started"), 30, "the last child")
        rc = victim.wait_exit(10)
        say(f"{new}'s child stopped {(gone['t'] - t_term) * 1000:.0f} ms after the SIGTERM; "
            f"{new} exited with {rc} (its child's status); the child of {third['who']} "
            f"started {(third['t'] - gone['t']) * 1000:.0f} ms after the old one stopped")
        time.sleep(1.2)  # for the reader
        say("stopping everything")
        return 0
    finally:
        for r in replicas:
            r.stop(signal.SIGTERM)
        if lines is not None:
            lines.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", action="store_true",
                    help="each replica runs a command only while leading (make demo-child)")
    return run(child_demo if ap.parse_args().child else None)


def run(mode):
    work = tempfile.mkdtemp(prefix="leaderd-demo-")
    api = ApiServer(os.path.join(work, "api"), ["pod-a", "pod-b", "pod-c"])
    replicas = []
    try:
        api.start()
        say(f"bundled Lease API server (test-only) on {api.url}")
        t = FAST
        say(f"timings: lease-duration {t['lease_duration']:g}s, renew-deadline "
            f"{t['renew_deadline']:g}s, retry-period {t['retry_period']:g}s")
        if mode is not None:
            return mode(api, work, t)
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
