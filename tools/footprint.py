#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""make bench-footprint: figures, not assertions. For each leaderd binary given
(label=path; default the dynamic build and, when built, the static ones of
`make static` and `make static LIBC=musl`), three replicas with the default
timings (15s/10s/2s) against the bundled API server; once a leader holds the
Lease and FOOTPRINT_SETTLE seconds (default 25) have passed, prints VmRSS,
RssAnon and RssFile of each replica from /proc/PID/status, and with FOOTPRINT_MAPS=1 the leader's resident
kB per mapping from /proc/PID/smaps (largest first), which says where the
pages come from. The same replicas are also sampled BEFORE_DROP_S after start,
before leaderd drops start-up code's page-table entries (LD_MEMTRIM_STARTUP_MS,
15 s): the figure without that step, in the same run.
A binary of another architecture (`make static ARCH=arm64`, listed by default when
built) runs under qemu-user (leaderd_testing.foreign): its figures are of the
emulator's process, which holds qemu itself, its translated code and the guest's
memory, so they are not what the binary would take on an arm64 node."""
import os
import shutil
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))  # leaderd_testing

from leaderd_testing import cluster, foreign  # noqa: E402
from leaderd_testing.apiserver import ApiServer  # noqa: E402
from leaderd_testing.cluster import (DEFAULTS, Replica, leaders_in, proc_fields,  # noqa: E402
                                     sample, wait_until)

CLIENTS = ["b1", "b2", "b3"]
FIELDS = ("VmRSS", "RssAnon", "RssFile", "Threads")
# Start-up's handshakes and first renewals are over, the drop (15 s) not yet.
BEFORE_DROP_S = 12.0


def smaps_of(pid):
    """[(rss kB, anon kB, perms, name)] per mapping, largest first."""
    rows, cur = [], None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and not head[0].endswith(":"):
                cur = [0, 0, head[1], head[5] if len(head) > 5 else "[anon]"]
                rows.append(cur)
            elif head and head[0] == "Rss:":
                cur[0] = int(head[1])
            elif head and head[0] == "Anonymous:":
                cur[1] = int(head[1])
    return sorted((tuple(r) for r in rows if r[0]), reverse=True)


def measure(label, binary, settle, show_maps):
    cluster.LEADERD = binary
    work = tempfile.mkdtemp(prefix="leaderd-footprint-")
    api = ApiServer(os.path.join(work, "api"), CLIENTS, verbose=False)
    replicas = []
    try:
        api.start()
        started = time.monotonic()
        wrapper = foreign.wrapper_for(binary)
        for c in CLIENTS:
            replicas.append(Replica(api, c, work, timings=DEFAULTS, lease="footprint",
                                    extra_args=["--log-level", "info"], wrapper=wrapper,
                                    binary=binary).start(timeout=30 if wrapper else 10))
        leader = wait_until(lambda: leaders_in(sample(replicas)), 30, what="a leader")[0]
        elected = time.monotonic()
        # Figures, not synchronisation: the process has no event for "start-up
        # is over"; these are the points in time the figures are of.
        time.sleep(max(0.0, started + BEFORE_DROP_S - time.monotonic()))
        before = {r.client: proc_fields(r.proc.pid, FIELDS) for r in replicas}
        # Start-up (first GET, the watch, TLS handshakes) is not steady state;
        # a few renewals and standby attempts are.
        time.sleep(max(0.0, elected + settle - time.monotonic()))
        how = f", run by {os.path.basename(wrapper[0])}: the emulator's RSS" if wrapper else ""
        print(f"\n{label}: {binary} ({os.path.getsize(binary) // 1024} kB file{how})")
        print(f"  {'replica':8} {'role':8} {'VmRSS':>7} {'RssAnon':>8} {'RssFile':>8} "
              f"{'threads':>7}   (kB; before the drop, {BEFORE_DROP_S:.0f} s after start: "
              f"VmRSS RssAnon RssFile)")
        for r in replicas:
            st = proc_fields(r.proc.pid, FIELDS)
            b = before[r.client]
            role = "leader" if r.client == leader else "standby"
            print(f"  {r.client:8} {role:8} {st['VmRSS']:7} {st['RssAnon']:8} "
                  f"{st['RssFile']:8} {st['Threads']:7}   "
                  f"{b['VmRSS']:7} {b['RssAnon']:8} {b['RssFile']:8}")
        if show_maps:
            lr = next(r for r in replicas if r.client == leader)
            print(f"  leader's mappings (Rss kB, of it anonymous, perms, name):")
            for rss, anon, perms, name in smaps_of(lr.proc.pid)[:12]:
                print(f"    {rss:6} {anon:6} {perms} {os.path.basename(name)}")
    finally:
        for r in replicas:
            r.stop(signal.SIGTERM)
        api.stop()
        shutil.rmtree(work, ignore_errors=True)


def main(argv):
    build = os.environ.get("LEADERD_BUILD") or os.path.join(HERE, "..", "build")
    targets = [a.split("=", 1) for a in argv]
    if not targets:
        targets = [("dynamic", os.path.join(build, "leaderd"))]
        for label, sub, how in (("static", "static", "make static"),
                                ("musl", "static-musl", "make static LIBC=musl"),
                                ("musl-arm64", "static-musl-arm64", "make static ARCH=arm64")):
            binary = os.path.join(build, sub, "leaderd")
            if os.path.exists(binary):
                targets.append((label, binary))
            else:
                print(f"(no {label} binary: `{how}` builds it)")
    settle = float(os.environ.get("FOOTPRINT_SETTLE", "25"))
    show_maps = os.environ.get("FOOTPRINT_MAPS") == "1"
    for label, binary in targets:
        try:
            foreign.wrapper_for(binary)
        except RuntimeError as e:
            print(f"(no figures for {label}: {e})")
            continue
        measure(label, os.path.abspath(binary), settle, show_maps)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
