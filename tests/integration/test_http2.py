# SPDX-License-Identifier: Apache-2.0
"""leaderd over HTTP/2: nghttpx terminates TLS and HTTP/2 on 127.0.0.1 in front of
the bundled API server (which speaks HTTP/1.1 over TLS), and one replica with a
group of 64 shards talks to the API through it. Its renewals, claims, reads and
watch must go as HTTP/2 (nghttpx's access log names the protocol of each request),
all multiplexed on one TCP connection once the protocol is known (the log names the
client port of each request, and /proc shows that connection is the replica's),
and the replica must lead every shard.

nghttpx is Debian's nghttp2-proxy (tools/deps.sh installs it with the test
packages); without it this test fails unless LEADERD_ALLOW_SKIP=1 lets it be
skipped. Runs under tests/integration/run.py or alone:
python3 tests/integration/test_http2.py
"""

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "support"))  # leaderd_testing

from leaderd_testing.apiserver import ApiServer, write_kubeconfig  # noqa: E402
from leaderd_testing.cluster import (FAST, SCHED_SLACK, Replica, accepts,  # noqa: E402
                                     free_port, wait_until)

SHARDS = 64
CLIENT = "h2"
# One replica alone owns every shard once its member Lease is written and the
# shards' first claims went through: a lease duration and a few retry periods.
OWN_BOUND = FAST["lease_duration"] + 4 * FAST["retry_period"] + SCHED_SLACK + 10.0
# Two rounds of renewals, watched for the one-connection check.
WINDOW = 2 * FAST["retry_period"] + SCHED_SLACK + 10.0


def tcp_local_ports(pid, remote_port):
    """Local ports of pid's TCP connections to remote_port (not listening)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:["):-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            local, remote, state, inode = cols[1], cols[2], cols[3], cols[9]
            if inode in inodes and state != "0A" and \
                    int(remote.rsplit(":", 1)[1], 16) == remote_port:
                ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


class Nghttpx:
    """nghttpx on 127.0.0.1:port with the API server's certificate, forwarding to
    the API server over TLS. Its access log has one line per request:
    `CLIENT_PORT ALPN STATUS METHOD PATH PROTOCOL`."""

    def __init__(self, api, workdir):
        self.api = api
        self.port = free_port()
        self.access_log = os.path.join(workdir, "nghttpx-access.log")
        self.error_log = os.path.join(workdir, "nghttpx-error.log")
        self.proc = None

    def start(self):
        backend = "127.0.0.1,%d;;tls" % self.api.port
        argv = ["nghttpx", "--conf=/dev/null", "--workers=1", "--no-ocsp",
                "--frontend=127.0.0.1,%d" % self.port, "--backend=" + backend,
                # The backend is the test server on loopback: its certificate
                # names 127.0.0.1, which nghttpx would check as a host name.
                "--insecure",
                "--backend-read-timeout=10m", "--frontend-read-timeout=10m",
                "--accesslog-file=" + self.access_log,
                "--accesslog-format=$remote_port $alpn $status $request",
                "--errorlog-file=" + self.error_log,
                os.path.join(self.api.dir, "server.key"),
                os.path.join(self.api.dir, "server.crt")]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self.listening, 10.0, what="nghttpx to listen")

    def listening(self):
        if self.proc.poll() is not None:
            raise AssertionError("nghttpx exited %s; see %s" % (self.proc.returncode,
                                                                self.error_log))
        return accepts("127.0.0.1", self.port)

    def requests(self):
        """[(client_port, protocol, status, method, path, alpn)] logged so far."""
        try:
            with open(self.access_log) as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            parts = line.split(" ")
            if len(parts) == 6:
                port, alpn, status, method, path, proto = parts
                out.append((int(port), proto, status, method, path, alpn))
        return out

    def stop(self):
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10.0)


class ProxiedReplica(Replica):
    """A Replica whose kubeconfig names nghttpx instead of the API server."""

    def __init__(self, api, client, workdir, kubeconfig, **kw):
        super().__init__(api, client, workdir, **kw)
        self.kubeconfig = kubeconfig

    def argv(self):
        argv = super().argv()
        argv[argv.index("--kubeconfig") + 1] = self.kubeconfig
        return argv


def shards_doc(replica):
    conn = http.client.HTTPConnection("127.0.0.1", replica.port, timeout=2.0)
    try:
        conn.request("GET", "/shards")
        resp = conn.getresponse()
        body = resp.read()
        return json.loads(body) if resp.status == 200 else None
    except (OSError, ValueError):
        return None
    finally:
        conn.close()


class TestHttp2ThroughNghttpx(unittest.TestCase):
    def setUp(self):
        if not shutil.which("nghttpx"):
            why = "nghttpx is not installed (nghttp2-proxy; tools/deps.sh test installs it)"
            if os.environ.get("LEADERD_ALLOW_SKIP") == "1":
                raise unittest.SkipTest(why)
            raise AssertionError(why + "; LEADERD_ALLOW_SKIP=1 skips this test instead")
        self.tmp = tempfile.mkdtemp(prefix="leaderd-it-h2-")
        self.api = ApiServer(os.path.join(self.tmp, "api"), [CLIENT])
        self.api.start()
        self.proxy = Nghttpx(self.api, self.tmp)
        self.replica = None

    def tearDown(self):
        if self.replica is not None:
            self.replica.stop()
        self.proxy.stop()
        status = self.api.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.assertEqual(status, 0, "leaderd-apiserver exit status")

    def test_shard_group_runs_over_one_http2_connection(self):
        self.proxy.start()
        kubeconfig = write_kubeconfig(
            os.path.join(self.tmp, "via-nghttpx.kubeconfig"),
            "https://127.0.0.1:%d" % self.proxy.port, self.api.ca, CLIENT,
            token=self.api.token(CLIENT))
        self.replica = ProxiedReplica(self.api, CLIENT, self.tmp, kubeconfig, lease="grp",
                                      extra_args=["--shards", str(SHARDS)])
        self.replica.start()

        def owns_all():
            doc = shards_doc(self.replica)
            return doc is not None and len(doc["shards"]) == SHARDS and \
                all(s["is_leader"] and s["leader"] == CLIENT for s in doc["shards"])
        wait_until(owns_all, OWN_BOUND, interval=0.2, what="the replica to lead every shard")

        # Every shard's Lease and the member Lease were written by this replica,
        # through the proxy.
        written = {e["name"] for e in self.api.write_log() if e["client"] == CLIENT}
        self.assertGreaterEqual(len(written), SHARDS + 1, "Leases written")

        # Two renewals after the start-up burst: of the member Lease alone, as
        # the shard Leases are written only when their owner changes.
        start = len(self.proxy.requests())

        def window():
            return self.proxy.requests()[start:]
        wait_until(lambda: sum(r[3] == "PUT" for r in window()) >= 2, WINDOW,
                   interval=0.2, what="two renewals of the member Lease")
        window = window()
        self.assertTrue(self.replica.alive(), "leaderd exited")
        self.assertTrue(owns_all(), "the replica no longer leads every shard")

        every = self.proxy.requests()
        self.assertGreater(len(every), SHARDS, "too few requests went through nghttpx")
        self.assertEqual({r[1] for r in every}, {"HTTP/2"}, "protocols in the access log")
        self.assertEqual({r[5] for r in every}, {"h2"}, "ALPN in the access log")
        ports = {r[0] for r in window}
        self.assertEqual(len(ports), 1, "client connections carrying the window's "
                         "%d requests: %s" % (len(window), sorted(ports)))
        self.assertIn(ports.pop(), tcp_local_ports(self.replica.proc.pid, self.proxy.port),
                      "the connection is not one of leaderd's")


if __name__ == "__main__":
    unittest.main()
