#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""make bench: figures, not assertions. One leader and two standbys with the
default timings (15s/10s/2s) against the bundled API server for
BENCH_SECONDS (default 60): memory of each leaderd (VmRSS and RssAnon),
API requests per minute per replica, /leader throughput and latency with wrk
against the leader pinned to one core; then graceful handovers (SIGTERM of
the leader until another replica's /leader says 200; BENCH_HANDOVERS,
default 20) and crash failovers (SIGKILL; BENCH_CRASHES, default 5, with a
4 s lease) with min/median/p95; last, the latency of /healthz and /leader on
a fresh connection while 2,000 idle connections and 50 slowloris clients are
open, and while 100 /watch streams and 100 long-polls are held (the
integration tests only check that these probes are answered, not how fast)."""
import http.client
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))  # leaderd_testing

from leaderd_testing.apiserver import ApiServer, requests_by_verb  # noqa: E402
from leaderd_testing.cluster import (DEFAULTS, FAST, Replica, leaders_in,  # noqa: E402
                                     proc_fields, sample, timed_get, wait_until)
from leaderd_testing.figures import percentile  # noqa: E402

CLIENTS = ["b1", "b2", "b3"]


def proc_status(pid):
    """{field: "N kB" or a count} of the figures the table shows."""
    fields = proc_fields(pid, ("VmRSS", "RssAnon", "Threads"))
    return {k: v if k == "Threads" else f"{v} kB" for k, v in fields.items()}


def requests_of(stats, client):
    """Total requests the server counted for one client."""
    return sum(requests_by_verb(stats, client).values())


def run_wrk(url, seconds):
    if not shutil.which("wrk"):
        return "wrk not installed (apt-get install -y wrk)"
    cmd = ["wrk", "-t1", "-c16", f"-d{seconds}s", "--latency", url]
    if shutil.which("taskset") and os.cpu_count() and os.cpu_count() > 1:
        cmd = ["taskset", "-c", "1"] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30).stdout


def summary(label, values, unit="ms", scale=1000.0):
    if not values:
        print(f"{label}: no samples")
        return
    v = [x * scale for x in values]
    print(f"{label}: n={len(v)} min {min(v):.1f} {unit}, median {statistics.median(v):.1f} "
          f"{unit}, p95 {percentile(v, 0.95):.1f} {unit}, max {max(v):.1f} {unit}")


def time_new_leader(replicas, old, timeout):
    """Seconds until a replica other than old answers 200 on /leader."""
    start = time.monotonic()
    others = [r for r in replicas if r is not old]
    while time.monotonic() - start < timeout:
        for r in others:
            if r.get("/leader", timeout=0.5)[0] == 200:
                return time.monotonic() - start, r
    return None, None


def handovers(api, work, timings, count, sig):
    """Replaces the leader count times by sending it sig; returns durations."""
    replicas = [Replica(api, c, work, timings=timings,
                        extra_args=["--log-level", "info"]).start() for c in CLIENTS]
    took = []
    try:
        for _ in range(count):
            leader = wait_until(lambda: [r for r in replicas if r.is_leader()], 30,
                                interval=0.01, what="a leader")[0]
            # Every standby must be watching before the clock starts.
            time.sleep(0.3)
            if sig == signal.SIGKILL:
                # Kill right after a renewal, so the figure is lease + delay.
                renewed = leader.leader()[1]["renewed_at"]
                wait_until(lambda: leader.leader()[1]["renewed_at"] != renewed, 10,
                           interval=0.002, what="a renewal")
            leader.send(sig)
            t, _ = time_new_leader(replicas, leader, 60)
            if t is not None:
                took.append(t)
            leader.stop(signal.SIGKILL)
            replicas[replicas.index(leader)] = Replica(
                api, leader.client, work, timings=timings,
                extra_args=["--log-level", "info"]).start()
    finally:
        for r in replicas:
            r.stop(signal.SIGKILL)
    return took


def probe_latency(port, label, rounds=25):
    """Prints the fresh-connection latency of /healthz and /leader."""
    for path in ("/healthz", "/leader"):
        took = []
        for _ in range(rounds):
            status, _, t = timed_get(port, path, timeout=30)
            if status == 200:
                took.append(t)
        summary(f"  {path} {label}", took)


def held_connections(port, idle, slow, streams, polls):
    """Opens the connections a busy sidecar holds; returns them to close."""
    held = []
    try:
        for _ in range(idle):
            held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        for _ in range(slow):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"GET /leader HTTP/1.1\r\nHost: x\r\n")  # never completed
            held.append(s)
        status, body, _ = timed_get(port, "/leader")
        doc = json.loads(body)
        query = (f"leader={doc['leader']}&term={doc['term']}"
                 f"&is_leader={'true' if doc['is_leader'] else 'false'}")
        for i in range(streams + polls):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request("GET", "/watch" if i < streams else f"/leader?wait=30s&{query}")
            held.append(c)
    except BaseException:
        for h in held:
            h.close()
        raise
    return held


def loaded_probes(api, work):
    """Probe latency of one leader under held connections."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2400
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            print(f"\nprobe latency: skipped, the open-files limit is {hard} (< {need})")
            return
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    r = Replica(api, "b1", work, timings=DEFAULTS, lease="bench-probes",
                extra_args=["--log-level", "info"]).start()
    try:
        wait_until(r.is_leader, 30, what="the probe replica to lead")
        print("\nfresh-connection probe latency, one leader:")
        probe_latency(r.port, "idle server")
        for label, conns in (("2000 idle + 50 slowloris", (2000, 50, 0, 0)),
                             ("100 /watch + 100 held polls", (0, 0, 100, 100))):
            held = held_connections(r.port, *conns)
            try:
                probe_latency(r.port, label)
            finally:
                for h in held:
                    h.close()
    finally:
        r.stop(signal.SIGTERM)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def main():
    seconds = int(os.environ.get("BENCH_SECONDS", "60"))
    work = tempfile.mkdtemp(prefix="leaderd-bench-")
    api = ApiServer(os.path.join(work, "api"), CLIENTS)
    replicas = []
    try:
        api.start()
        for c in CLIENTS:
            replicas.append(Replica(api, c, work, timings=DEFAULTS,
                                    extra_args=["--log-level", "info"]).start())
        leader = wait_until(lambda: leaders_in(sample(replicas)), 20, what="a leader")[0]
        time.sleep(3)  # start-up requests (first GET, watch start) are not steady state
        before = api.stats()
        print(f"measuring {seconds}s with one leader ({leader}) and two standbys, "
              f"timings 15s/10s/2s ...", flush=True)
        time.sleep(seconds)
        after = api.stats()
        print(f"\n{'replica':8} {'role':8} {'VmRSS':>10} {'RssAnon':>10} {'threads':>7} "
              f"{'API req/min':>12}")
        for r in replicas:
            st = proc_status(r.proc.pid)
            n = requests_of(after, r.client) - requests_of(before, r.client)
            role = "leader" if r.client == leader else "standby"
            print(f"{r.client:8} {role:8} {st.get('VmRSS', '?'):>10} "
                  f"{st.get('RssAnon', '?'):>10} {st.get('Threads', '?'):>7} "
                  f"{n * 60.0 / seconds:12.1f}")
        print(f"(one request per retry period would be {60 / DEFAULTS['retry_period']:.0f}/min)")

        lr = next(r for r in replicas if r.client == leader)
        if shutil.which("taskset"):
            subprocess.run(["taskset", "-pc", "0", str(lr.proc.pid)],
                           capture_output=True)
        out = run_wrk(lr.url + "/leader", 10)
        print(f"\nwrk, GET /leader on the leader (leaderd pinned to core 0, wrk on core 1):")
        rps = re.search(r"Requests/sec:\s+([\d.]+)", out or "")
        print(out.strip())
        if rps:
            print(f"\n/leader throughput: {float(rps.group(1)):.0f} requests/s")
        st = proc_status(lr.proc.pid)
        print(f"leader after wrk: VmRSS {st.get('VmRSS')}, RssAnon {st.get('RssAnon')}")
        for r in replicas:
            r.stop(signal.SIGTERM)
        replicas = []

        n = int(os.environ.get("BENCH_HANDOVERS", "20"))
        print(f"\ngraceful handover (SIGTERM of the leader -> another /leader says 200), "
              f"timings 15s/10s/2s:")
        summary("  handover", handovers(api, work, DEFAULTS, n, signal.SIGTERM))
        n = int(os.environ.get("BENCH_CRASHES", "5"))
        print(f"\ncrash failover (SIGKILL right after a renewal), lease 4s:")
        crash = handovers(api, work, FAST, n, signal.SIGKILL)
        summary("  failover", crash, unit="s", scale=1.0)
        summary("  failover - lease-duration", [c - FAST["lease_duration"] for c in crash])
        loaded_probes(api, work)
        return 0
    finally:
        for r in replicas:
            r.stop(signal.SIGTERM)
        api.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
