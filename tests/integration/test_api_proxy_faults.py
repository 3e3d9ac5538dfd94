# SPDX-License-Identifier: Apache-2.0
"""The API write gate (--api-proxy) when the network fails under a write, with
the real binary and the bundled API server.

A write goes upstream at most once: the API server applies a PATCH and
drops the connection instead of answering, on an upstream connection the
proxy could have reused; the client gets a 502 Status saying the write may
or may not have been applied, and the server got the write once and applied
it once (libcurl would resend a request whose reused connection died
unanswered).

A cut write is never delivered late: in a network namespace of its own, the
packets of a large write towards the API server are dropped while the
write waits in leaderd's socket; the replica resigns, the write is cut at
the deadline of its term (503; and no release, since its fate is unknown),
the network heals, and the API server never applies it (a socket
closed gracefully would have delivered its queued bytes once the network
healed; the proxy's resets them). The same when leaderd is SIGKILLed with
the write queued: the kernel resets the connection. Needs root, `ip netns`
and tc's htb, u32 and pfifo; where they are missing the API server's "hang"
partition holds the write instead (a weaker test: the server has read it
whole), and the namespace test is skipped with the reason."""
import ctypes
import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from leaderd_testing.apiserver import ApiServer, requests_by_verb
from leaderd_testing.cluster import Replica, free_port, wait_until
from test_api_proxy import proxy_request

NS = "default"
CONFIGMAPS = "/api/v1/namespaces/%s/configmaps" % NS
MERGE = "application/merge-patch+json"
CLONE_NEWNET = 0x40000000
# A write this large leaves in TCP segments of several KiB, which the
# partition drops; leaderd's renewals and the test's calls to the API
# server stay under the size PARTITION_BITS give and pass.
QUEUED_BYTES = 40000
PARTITION_BITS = (12, 13, 14, 15)  # an IPv4 total length of 4096 bytes or more
# How long a cut write is watched for after the network heals: TCP's
# retransmission timer, doubling from 200 ms, fires within a few seconds
# of a partition this short.
LANDING_WINDOW = 10.0


def proxy_status(data):
    doc = json.loads(data)
    return doc["code"], doc["reason"], doc["message"]


class ProxyCase(unittest.TestCase):
    """One replica, leading, with --api-proxy."""

    def start_cluster(self):
        self.dir = tempfile.mkdtemp(prefix="leaderd-apiproxy-faults-")
        self.api = ApiServer(os.path.join(self.dir, "api"), ["r1"], verbose=False)
        self.api.start()
        self.proxy_port = free_port()
        self.r = Replica(self.api, "r1", self.dir,
                         extra_args=["--api-proxy", "127.0.0.1:%d" % self.proxy_port])
        self.r.start()
        wait_until(self.r.is_leader, 30, what="the replica to lead")

    def stop_cluster(self):
        if getattr(self, "r", None):
            self.r.stop()
        if getattr(self, "api", None):
            self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def cm_writes(self, name):
        return [e for e in self.api.configmap_log() if e["name"] == name]


class TestAWriteIsSentOnce(ProxyCase):

    def setUp(self):
        self.start_cluster()

    def tearDown(self):
        self.stop_cluster()

    def test_a_reset_after_the_write_went_out_gets_502_and_lands_once(self):
        status, _ = self.api.post_configmap(
            NS, {"metadata": {"name": "once"}, "data": {"n": "0"}}, client="r1")
        self.assertEqual(status, 201)
        # A read leaves an idle upstream connection the write could reuse.
        status, _, _ = proxy_request(self.proxy_port, "GET", CONFIGMAPS + "/once")
        self.assertEqual(status, 200)
        # The server applies every PATCH and then drops the connection.
        self.api.control("POST", "faults", {"client": "r1", "lose_reply_rate": 1.0,
                                            "verbs": ["patch"]})
        status, _, data = proxy_request(self.proxy_port, "PATCH", CONFIGMAPS + "/once",
                                        body={"data": {"n": "1"}},
                                        headers={"Content-Type": MERGE})
        self.api.clear_faults()
        self.assertEqual(status, 502, data)
        code, reason, message = proxy_status(data)
        self.assertEqual((code, reason), (502, "InternalError"))
        self.assertIn("may or may not have been applied", message)
        # The server got the PATCH once (a second one, changing nothing,
        # would not show in its write log) and applied it once.
        self.assertEqual(requests_by_verb(self.api.stats(), "r1").get("patch"), 1)
        patches = [e for e in self.cm_writes("once") if e["verb"] == "patch"]
        self.assertEqual(len(patches), 1, patches)


def tcp_tx_queues(pid, port):
    """Bytes queued for sending on each of pid's TCP connections to port."""
    out = []
    with open("/proc/%d/net/tcp" % pid) as f:
        for row in f.read().splitlines()[1:]:
            cols = row.split()
            if int(cols[2].rsplit(":", 1)[1], 16) == port and cols[3] == "01":
                out.append(int(cols[4].split(":")[0], 16))
    return out


def run(*argv):
    return subprocess.run(argv, capture_output=True, text=True)


def make_netns(name):
    """Makes network namespace name with its loopback up and ready for a
    partition (an htb root whose class 1:2 drops everything sent to it).
    Returns None, or why it cannot (nothing left behind)."""
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("tc"):
        return "needs root, ip and tc for a network namespace"
    res = run("ip", "netns", "add", name)
    if res.returncode != 0:
        return "cannot make a network namespace: " + res.stderr.strip()
    steps = [("ip", "-n", name, "link", "set", "lo", "up"),
             ("tc", "-n", name, "qdisc", "add", "dev", "lo", "root", "handle", "1:",
              "htb", "default", "1"),
             ("tc", "-n", name, "class", "add", "dev", "lo", "parent", "1:",
              "classid", "1:1", "htb", "rate", "10gbit"),
             ("tc", "-n", name, "class", "add", "dev", "lo", "parent", "1:",
              "classid", "1:2", "htb", "rate", "10gbit"),
             # A queue that holds nothing: whatever is sent to it is dropped.
             ("tc", "-n", name, "qdisc", "add", "dev", "lo", "parent", "1:2",
              "handle", "20:", "pfifo", "limit", "0")]
    for argv in steps:
        res = run(*argv)
        if res.returncode != 0:
            run("ip", "netns", "del", name)
            return "%s: %s" % (" ".join(argv[:6]), res.stderr.strip())
    return None


_netns_reason = []


def netns_unavailable():
    """Why this machine cannot run the partition in a network namespace,
    or None when it can (found out once, with a namespace made and deleted)."""
    if not _netns_reason:
        name = "ldprobe%d" % os.getpid()
        reason = make_netns(name)
        if reason is None:
            run("ip", "netns", "del", name)
        _netns_reason.append(reason)
    return _netns_reason[0]


class TestACutWriteNeverLandsLate(ProxyCase):
    """Everything in a network namespace the test enters (setns on its own
    thread, which the processes it starts inherit), so the partition, a tc
    filter on the namespace's loopback, touches nothing else."""

    @classmethod
    def setUpClass(cls):
        cls.netns = "ldfault%d" % os.getpid()
        cls.home = None
        cls.made = False
        reason = make_netns(cls.netns)
        if reason:
            raise unittest.SkipTest(reason + "; TestACutWriteHeldByTheServer stands in")
        cls.made = True
        cls.libc = ctypes.CDLL(None, use_errno=True)
        cls.home = os.open("/proc/self/ns/net", os.O_RDONLY)
        fd = os.open("/run/netns/" + cls.netns, os.O_RDONLY)
        try:
            if cls.libc.setns(fd, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                os.close(cls.home)
                cls.home = None
                cls.tearDownClass()
                raise unittest.SkipTest("setns: " + os.strerror(err))
        finally:
            os.close(fd)

    @classmethod
    def tearDownClass(cls):
        if cls.home is not None:
            cls.libc.setns(cls.home, CLONE_NEWNET)
            os.close(cls.home)
            cls.home = None
        if cls.made:
            run("ip", "netns", "del", cls.netns)
            cls.made = False

    def setUp(self):
        self.start_cluster()

    def tearDown(self):
        self.heal()
        self.stop_cluster()

    def partition(self):
        """Drops IPv4 packets towards the API server of PARTITION_BITS' size."""
        for bit in PARTITION_BITS:
            res = run("tc", "filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip",
                      "prio", "1", "u32", "match", "ip", "dport", str(self.api.port),
                      "0xffff", "match", "u16", hex(1 << bit), hex(1 << bit), "at", "2",
                      "flowid", "1:2")
            self.assertEqual(res.returncode, 0, res.stderr)

    def heal(self):
        run("tc", "filter", "del", "dev", "lo", "parent", "1:")

    def queue_a_write(self, name):
        """Starts a large write of ConfigMap name through the proxy behind the
        partition and waits until its bytes sit in leaderd's socket; returns
        the client's thread and where its answer will be."""
        pid = self.r.proc.pid
        self.partition()
        result = {}
        body = {"metadata": {"name": name}, "data": {"blob": "x" * QUEUED_BYTES}}

        def write():
            try:
                result["answer"] = proxy_request(
                    self.proxy_port, "POST", CONFIGMAPS, body=body,
                    headers={"Content-Type": "application/json"}, timeout=30)
            except OSError as e:
                result["error"] = e

        t = threading.Thread(target=write)
        t.start()
        try:
            wait_until(lambda: any(q >= QUEUED_BYTES
                                   for q in tcp_tx_queues(pid, self.api.port)),
                       10, what="the write to be queued in leaderd's socket")
        except BaseException:
            t.join(30)
            raise
        return t, result

    def assert_never_lands(self, name):
        """Heals the network and watches the server's log for the write."""
        self.heal()
        t0 = time.monotonic()
        while time.monotonic() - t0 < LANDING_WINDOW:
            self.assertEqual(self.cm_writes(name), [], "the cut write landed late")
            time.sleep(0.25)
        # The network is whole again: a write as large goes through.
        status, _ = self.api.post_configmap(
            NS, {"metadata": {"name": name + "-after"},
                 "data": {"blob": "y" * QUEUED_BYTES}}, client="r1")
        self.assertEqual(status, 201)
        self.assertEqual(self.cm_writes(name), [])

    def test_a_write_queued_behind_a_partition_is_cut_and_never_lands(self):
        t, result = self.queue_a_write("queued")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.r.port, timeout=10)
            conn.request("POST", "/resign")
            # The write went out: the step-down does not cut it, the term's
            # deadline does, and a cut write means no release (503).
            self.assertEqual(conn.getresponse().status, 503)
            conn.close()
        finally:
            t.join(30)
        self.assertFalse(t.is_alive())
        status, _, data = result["answer"]
        self.assertEqual(status, 503, data)
        self.assertIn("cut", proxy_status(data)[2])
        self.assertIn("term", proxy_status(data)[2])
        self.assert_never_lands("queued")

    def test_a_write_queued_when_leaderd_is_killed_never_lands(self):
        t, result = self.queue_a_write("killed")
        try:
            self.r.stop(signal.SIGKILL)
        finally:
            t.join(30)
        self.assertFalse(t.is_alive())
        self.assertIn("error", result, "a killed proxy answered: %r" % (result,))
        self.assert_never_lands("killed")


class TestACutWriteHeldByTheServer(ProxyCase):
    """Where no network namespace can be made: the API server holds the
    write (its "hang" partition) instead of the network, the replica
    resigns, the write is cut at its term's deadline and nothing is
    released, the partition clears, and the write never
    lands. Weaker than the namespace test: the server holds a request it
    has read whole, so it is not bytes queued in leaderd's socket."""

    @classmethod
    def setUpClass(cls):
        if netns_unavailable() is None:
            raise unittest.SkipTest("TestACutWriteNeverLandsLate partitions the network "
                                    "itself here")

    def setUp(self):
        self.start_cluster()

    def tearDown(self):
        self.stop_cluster()

    def test_a_write_held_by_a_hanging_server_is_cut_and_never_lands(self):
        pid = self.r.proc.pid
        before = len(tcp_tx_queues(pid, self.api.port))
        self.api.set_faults("r1", partition="hang", verbs=["create"])
        result = {}
        body = {"metadata": {"name": "held"}, "data": {"n": "1"}}

        def write():
            result["answer"] = proxy_request(self.proxy_port, "POST", CONFIGMAPS, body=body,
                                             headers={"Content-Type": "application/json"},
                                             timeout=30)

        t = threading.Thread(target=write)
        t.start()
        try:
            # The write's own connection is up: its request follows at once.
            wait_until(lambda: len(tcp_tx_queues(pid, self.api.port)) > before, 10,
                       what="the write's upstream connection")
            conn = http.client.HTTPConnection("127.0.0.1", self.r.port, timeout=10)
            conn.request("POST", "/resign")
            # The write went out: the step-down does not cut it, the term's
            # deadline does, and a cut write means no release (503).
            self.assertEqual(conn.getresponse().status, 503)
            conn.close()
        finally:
            t.join(30)
        self.assertFalse(t.is_alive())
        status, _, data = result["answer"]
        self.assertEqual(status, 503, data)
        self.assertIn("cut", proxy_status(data)[2])
        self.assertIn("term", proxy_status(data)[2])
        self.api.clear_faults()
        t0 = time.monotonic()
        while time.monotonic() - t0 < LANDING_WINDOW:
            self.assertEqual(self.cm_writes("held"), [], "the cut write landed late")
            time.sleep(0.25)


if __name__ == "__main__":
    unittest.main()
