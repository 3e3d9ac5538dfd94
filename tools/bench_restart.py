#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The cost of a container restart of the leader (docs/benchmarks.md): one
replica alone on a Lease against the bundled API server; SIGKILL it, start a
new process with the same --identity at once, and time from the SIGKILL until
the new process's /leader says is_leader (polled every 10 ms). Alone, so that
no standby takes over first: the figure is the restarted replica's own wait.
Prints min/median/max of BENCH_RESTARTS runs (default 5) for each timing set
in BENCH_RESTART_TIMINGS ("fast", "default" or both, comma-separated; fast
is the tests' 4s/3s/1s, default 15s/10s/2s), and the term before and after.

    LEADERD_BUILD=build tools/bench_restart.py
    LEADERD_BUILD=/path/to/an/older/build tools/bench_restart.py   # before
"""
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))  # leaderd_testing

from leaderd_testing.apiserver import ApiServer  # noqa: E402
from leaderd_testing.cluster import DEFAULTS, FAST, LEADERD, Replica, wait_until  # noqa: E402

TIMINGS = {"fast": FAST, "default": DEFAULTS}


def one_restart(api, workdir, timings, n):
    """Seconds from SIGKILL to the new process leading; (term before, after)."""
    first = Replica(api, f"c{2 * n}", workdir, identity="pod-0", timings=timings).start()
    bound = timings["lease_duration"] + 2 * timings["retry_period"] + 5
    try:
        wait_until(first.is_leader, 2 * bound, interval=0.01, what="the first process")
        term = first.leader()[1]["term"]
        first.stop(signal.SIGKILL)
        killed = time.monotonic()
        again = Replica(api, f"c{2 * n + 1}", workdir, identity="pod-0",
                        timings=timings).start()
        try:
            wait_until(again.is_leader, 2 * bound, interval=0.01, what="the restart")
            took = time.monotonic() - killed
            new_term = again.leader()[1]["term"]
        finally:
            again.stop(signal.SIGTERM)
    finally:
        first.stop(signal.SIGKILL)
    return took, (term, new_term)


def main():
    runs = int(os.environ.get("BENCH_RESTARTS", "5"))
    names = os.environ.get("BENCH_RESTART_TIMINGS", "fast,default").split(",")
    print(f"binary: {LEADERD}")
    for name in names:
        timings = TIMINGS[name]
        workdir = tempfile.mkdtemp(prefix="leaderd-bench-restart-")
        api = ApiServer(os.path.join(workdir, "api"), [f"c{i}" for i in range(2 * runs)])
        try:
            api.start()
            figures, terms = [], []
            for n in range(runs):
                took, term = one_restart(api, workdir, timings, n)
                figures.append(took)
                terms.append(term)
        finally:
            api.stop()
            shutil.rmtree(workdir, ignore_errors=True)
        print(f"{name} ({timings['lease_duration']:.0f}s/{timings['renew_deadline']:.0f}s/"
              f"{timings['retry_period']:.0f}s): leads again after SIGKILL in "
              f"min {min(figures):.2f} s, median {statistics.median(figures):.2f} s, "
              f"max {max(figures):.2f} s over {runs}; terms {terms}")


if __name__ == "__main__":
    main()
