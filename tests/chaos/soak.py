#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Soak: one cluster (3 leaderd replicas and the bundled API server) kept up
for SOAK_SECONDS (default 3600) while the chaos scenarios that keep the
replica processes alive run one after another, each with its usual checks.
Every minute it prints each process's VmRSS, RssAnon and open file
descriptors; at the end their first / last / max, so growth shows. Memory
and fd figures are reported, not asserted; safety and liveness failures are
(exit status 1).

    SOAK_SECONDS=180 tests/chaos/soak.py
"""
import argparse
import collections
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "support"))  # leaderd_testing

from harness import Cluster, Ctx, ScenarioError, analyse  # noqa: E402
from scenarios import SCENARIOS  # noqa: E402

REPORT_EVERY = 60.0
MIN_FAULT_TIME = 15.0  # no new fault when less than this is left


def proc_figures(pid):
    """(VmRSS kB, RssAnon kB, open fds) or None when the process is gone."""
    try:
        fig = {}
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, val = line.partition(":")
                if key in ("VmRSS", "RssAnon"):
                    fig[key] = int(val.split()[0])
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return fig.get("VmRSS", 0), fig.get("RssAnon", 0), fds
    except (OSError, ValueError):
        return None


class Monitor:
    """Prints the figures every REPORT_EVERY seconds from its own thread and
    keeps them per process."""

    def __init__(self, cluster, started, out):
        self.c = cluster
        self.started = started
        self.out = out
        self.series = collections.OrderedDict()  # label -> [(t, rss, anon, fds)]
        self.faults = 0
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="monitor", daemon=True)

    def targets(self):
        out = []
        for slot in self.c.slots:
            if slot.proc is not None and slot.proc.poll():
                out.append((f"{slot.name} pid {slot.proc.pid}", slot.proc.pid))
        if self.c.api.proc is not None:
            out.append((f"apiserver pid {self.c.api.proc.pid}", self.c.api.proc.pid))
        return out

    def sample(self):
        t = time.monotonic() - self.started
        parts = []
        for label, pid in self.targets():
            fig = proc_figures(pid)
            if fig is None:
                continue
            self.series.setdefault(label, []).append((t,) + fig)
            parts.append(f"{label}: VmRSS {fig[0]} kB, RssAnon {fig[1]} kB, {fig[2]} fds")
        m, s = divmod(int(t), 60)
        print(f"[soak {m:3d}:{s:02d}] faults {self.faults} ({self.failed} failed)\n  "
              + "\n  ".join(parts), file=self.out, flush=True)

    def _run(self):
        while not self._stop.wait(REPORT_EVERY):
            self.sample()

    def start(self):
        self.sample()
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join(5)
        self.sample()

    def summary(self):
        print("\nprocess                     VmRSS kB first/last/max    "
              "RssAnon kB first/last/max   fds first/last/max", file=self.out)
        for label, pts in self.series.items():
            def fl(i):
                vals = [p[i] for p in pts]
                return f"{vals[0]}/{vals[-1]}/{max(vals)}"
            print(f"{label:<27} {fl(1):>24}  {fl(2):>25}  {fl(3):>16}", file=self.out)
        print(f"({len(next(iter(self.series.values()), []))} readings, one a minute; "
              f"figures are reported, not asserted)", file=self.out)


class Interrupted(BaseException):
    pass


def _interrupt(signum, frame):
    raise Interrupted(f"signal {signum}")


def main():
    # SIGTERM (a CI timeout, kill) ends the soak through the same path as a
    # failure, which stops every process it started.
    signal.signal(signal.SIGTERM, _interrupt)
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float,
                    default=float(os.environ.get("SOAK_SECONDS", 3600)))
    ap.add_argument("-n", "--replicas", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    out = sys.stdout
    faults = [s for s in SCENARIOS if s.soak and not s.known_failure]
    root = tempfile.mkdtemp(prefix="leaderd-soak-")
    c = Cluster(os.path.join(root, "cluster"), args.replicas, log_level="info",
                api_verbose=False)
    started = time.monotonic()
    end = started + args.seconds
    print(f"soak: {args.seconds:.0f}s, {args.replicas} replicas, faults cycling through "
          f"{', '.join(s.name for s in faults)}; work directory {root}", file=out,
          flush=True)
    mon = Monitor(c, started, out)
    done = collections.Counter()
    failures = []
    try:
        c.start()
        c.steady()
        mon.start()
        i = 0
        while time.monotonic() + MIN_FAULT_TIME < end:
            sc = faults[i % len(faults)]
            i += 1
            ctx = Ctx(c, sc.name, i)
            try:
                c.steady()
                sc.fn(ctx)
            except ScenarioError as e:
                ctx.fail(str(e))
            except Exception:
                ctx.fail("the scenario raised:\n" + traceback.format_exc())
            analyse(ctx, t_from=ctx.t0)
            done[sc.name] += 1
            mon.faults += 1
            t_rel = ctx.t0 - started
            if ctx.failures:
                mon.failed += 1
                failures.append((t_rel, sc.name, ctx.failures))
                print(f"FAIL {sc.name} at {t_rel:.0f}s:", file=out)
                for f in ctx.failures:
                    print("      " + f.replace("\n", "\n      "), file=out, flush=True)
            # Bounded memory: samples of finished faults are not needed again.
            c.poller.trim(time.monotonic() - 5)
            c.writes = c.writes[-200:]
            time.sleep(1.0)
        ctx = Ctx(c, "soak end", 0)
        ctx.t0 = started
        mon.stop()
        stop_failures = []
        c.shutdown(stop_failures)
        for f in stop_failures:
            failures.append((time.monotonic() - started, "shutdown", [f]))
            print(f"FAIL shutdown: {f}", file=out)
    except BaseException:
        failures.append((time.monotonic() - started, "soak",
                         [traceback.format_exc()]))
        print(f"FAIL soak:\n{traceback.format_exc()}", file=out)
        c.kill_everything()
    mon.summary()
    print("\nfaults injected: " + ", ".join(f"{k} x{v}" for k, v in done.items()),
          file=out)
    for t_rel, name, fs in failures:
        print(f"failed: {name} at {t_rel:.0f}s: {fs[0].splitlines()[0]}", file=out)
    if failures or args.keep:
        print(f"work directory kept: {root}", file=out)
    else:
        shutil.rmtree(root, ignore_errors=True)
    print(f"soak: {sum(done.values())} faults, {len(failures)} failed", file=out, flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
