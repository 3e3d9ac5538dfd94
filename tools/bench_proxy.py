#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Part of make bench: figures, not assertions, for the API write gate
(--api-proxy). One leader with default timings against the bundled API
server: the latency of a GET and a PUT (a Lease nobody elects) sent
directly over HTTPS (keep-alive, the replica's token) and through the
leader's proxy (keep-alive, plain HTTP on loopback), p50/p99 over
BENCH_PROXY_ROUNDS (default 500) each; then GET throughput through the
proxy with wrk when it is installed."""
import http.client
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))  # leaderd_testing

from leaderd_testing.apiserver import LEASES, ApiServer  # noqa: E402
from leaderd_testing.cluster import DEFAULTS, Replica, free_port, wait_until  # noqa: E402
from leaderd_testing.figures import percentile  # noqa: E402


def timed(conn, method, path, body, headers, rounds):
    """Latencies (seconds) of rounds requests on one keep-alive connection;
    body(i) gives each request's body (or None)."""
    took = []
    for i in range(rounds):
        data = body(i) if body else None
        t0 = time.perf_counter()
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        payload = resp.read()
        took.append(time.perf_counter() - t0)
        if resp.status != 200:
            raise RuntimeError(f"{method} {path}: {resp.status} {payload[:200]!r}")
    return took


def line(label, took):
    ms = [t * 1000 for t in took]
    print(f"  {label:28} p50 {percentile(ms, 0.5):6.2f} ms   p99 {percentile(ms, 0.99):6.2f} ms")


def main():
    rounds = int(os.environ.get("BENCH_PROXY_ROUNDS", "500"))
    work = tempfile.mkdtemp(prefix="leaderd-bench-proxy-")
    api = ApiServer(os.path.join(work, "api"), ["p1"], verbose=False)
    replica = None
    try:
        api.start()
        status, _ = api.post_lease("default", {"metadata": {"name": "bench"}, "spec": {}},
                                   client="p1")
        assert status == 201, status
        port = free_port()
        replica = Replica(api, "p1", api.dir, timings=DEFAULTS,
                          extra_args=["--log-level", "info",
                                      "--api-proxy", f"127.0.0.1:{port}"]).start()
        wait_until(replica.is_leader, 30, what="the replica to lead")

        host, aport = api.url.split("//", 1)[1].rsplit(":", 1)
        direct = http.client.HTTPSConnection(host, int(aport), timeout=10,
                                             context=ssl.create_default_context(cafile=api.ca))
        proxied = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        auth = {"Authorization": "Bearer " + api.token("p1")}
        item = LEASES % "default" + "/bench"

        def put_body(conn, headers):
            def body(i):
                conn.request("GET", item, headers=headers)
                lease = json.loads(conn.getresponse().read())
                lease["metadata"]["labels"] = {"round": str(i)}
                return json.dumps(lease)
            return body

        print(f"API write gate latency, {rounds} requests each, one keep-alive connection "
              f"(the PUT's preceding GET not counted):")
        json_h = {"Content-Type": "application/json"}
        results = {}
        for label, conn, headers in (("direct (HTTPS)", direct, auth),
                                     ("through --api-proxy", proxied, {})):
            results[label] = (
                timed(conn, "GET", item, None, headers, rounds),
                timed(conn, "PUT", item, put_body(conn, headers), {**headers, **json_h},
                      rounds))
        for label, (gets, puts) in results.items():
            line(f"GET  {label}", gets)
            line(f"PUT  {label}", puts)
        direct.close()
        proxied.close()

        if shutil.which("wrk"):
            cmd = ["wrk", "-t1", "-c8", "-d10s", "--latency", f"http://127.0.0.1:{port}{item}"]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
            rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
            print(f"\nwrk, GET through the proxy (8 connections, 10 s): "
                  f"{float(rps.group(1)):.0f} requests/s" if rps else out)
        else:
            print("\nwrk not installed (apt-get install -y wrk): no throughput figure")
        return 0
    finally:
        if replica:
            replica.stop(signal.SIGTERM)
        api.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
