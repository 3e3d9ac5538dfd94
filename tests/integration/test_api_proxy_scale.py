# SPDX-License-Identifier: Apache-2.0
"""The API write gate (--api-proxy) at scale, against the real binary and the
bundled API server: the proxy is event-driven (one MHD polling thread, one
upstream thread), so as many watches as the proxy runs at once (64) streamed
through one replica's proxy all get their events while the process's thread
count stays what it was with no connection, the next one is answered 429,
/leader answers meanwhile, and 200 idle keep-alive connections
cost a bounded few KiB each; a client that hangs up on a quiet watch frees
its upstream connection at once (not at the next event, not at a timeout);
and the connection limit works as the sidecar HTTP server's does (a cap of
LD_HTTP_MAX_CONNECTIONS, the longest-idle connections closed past it, so a
fresh request is still answered)."""
import http.client
import json
import os
import shutil
import socket
import tempfile
import time
import unittest

from leaderd_testing.apiserver import ApiServer, Watch
from leaderd_testing.cluster import (Replica, closed_by_peer, free_port, proc_status,
                                     server_connections, timed_get, wait_until)

NS = "default"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % NS
# The proxy's exchanges at once, watches included (LD_PROXY_MAX_EXCHANGES).
WATCHES = 64
IDLE = 200
# The sidecar's limits, which the proxy shares (cmd/leaderd/http/http.h).
SERVER_CAP = 1024  # LD_HTTP_MAX_CONNECTIONS
IDLE_TIMEOUT = 15  # LD_HTTP_IDLE_TIMEOUT_S
# A fresh connection the proxy could only take once idle ones timed out
# would wait IDLE_TIMEOUT; one answered well before that was not starved.
NOT_STARVED = IDLE_TIMEOUT / 2
# The pool of an idle connection (CONNECTION_MEMORY in cmd/leaderd/proxy/proxy.c,
# 16 KiB, all of it touched once a request has been served) plus MHD's
# connection and the bookkeeping record, with room for allocator noise: a
# figure over it means memory grows with something else.
IDLE_CONN_KIB = 24
# A hang-up is seen at once; this only absorbs a loaded machine. Far below
# the idle timeout and the watch's own timeoutSeconds.
HANGUP_BOUND = 5.0


def threads(pid):
    return len(os.listdir("/proc/%d/task" % pid))


def upstream_sockets(pid, api_port):
    """Local ports of pid's established TCP connections to api_port."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:["):-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, table)) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            local, remote, state, inode = cols[1], cols[2], cols[3], cols[9]
            if (inode in inodes and state == "01"
                    and int(remote.rsplit(":", 1)[1], 16) == api_port):
                ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def open_watch(port, name, timeout):
    """A watch of Lease name through the proxy on port, its first event read:
    (connection, Watch)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("GET", LEASES + "?watch=1&fieldSelector=metadata.name%%3D%s"
                 "&timeoutSeconds=300" % name)
    resp = conn.getresponse()
    if resp.status != 200:
        raise AssertionError("watch: %d %r" % (resp.status, resp.read()[:200]))
    events = Watch(resp)
    first = events.next_event()
    if not first or first["type"] != "ADDED":
        raise AssertionError("watch: first event %r" % (first,))
    return conn, events


class ProxyBase(unittest.TestCase):
    """One replica, leading, with --api-proxy, for each test class."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="leaderd-apiproxy-scale-")
        cls.api = ApiServer(os.path.join(cls.dir, "api"), ["r1"], verbose=False)
        cls.r = None
        try:
            cls.api.start()
            cls.proxy_port = free_port()
            cls.r = Replica(cls.api, "r1", cls.dir,
                            extra_args=["--api-proxy", "127.0.0.1:%d" % cls.proxy_port])
            cls.r.start()
            wait_until(cls.r.is_leader, 30, what="the replica to lead")
        except BaseException:
            cls.tearDownClass()
            raise
        cls.api_port = int(cls.api.url.rsplit(":", 1)[1])

    @classmethod
    def tearDownClass(cls):
        if cls.r:
            cls.r.stop()
        cls.api.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def proxy_get(self, path, timeout=10.0):
        conn = http.client.HTTPConnection("127.0.0.1", self.proxy_port, timeout=timeout)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def wait_proxy_connections_closed(self):
        wait_until(lambda: server_connections(self.r.proc.pid, self.proxy_port) == 0,
                   2 * IDLE_TIMEOUT, what="the proxy to close the test's connections")


class TestProxyHangUp(ProxyBase):
    """In a class of its own: the proxy has served nothing before, so the
    watch's upstream connection is a new one, told apart by its port."""

    def test_a_hang_up_on_a_quiet_watch_frees_its_upstream_connection(self):
        pid = self.r.proc.pid
        status, _ = self.api.post_lease(NS, {"metadata": {"name": "quiet"}, "spec": {}},
                                        client="r1")
        self.assertEqual(status, 201)
        before = upstream_sockets(pid, self.api_port)
        conn, _ = open_watch(self.proxy_port, "quiet", 30)
        mine = upstream_sockets(pid, self.api_port) - before
        self.assertEqual(len(mine), 1, "the watch's upstream connection")
        # Nothing happens on the watch: only the hang-up can end it.
        t0 = time.monotonic()
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        wait_until(lambda: not (upstream_sockets(pid, self.api_port) & mine),
                   HANGUP_BOUND, what="the proxy to close the watch's upstream connection")
        took = time.monotonic() - t0
        print("\n  upstream connection of a quiet watch closed %.0f ms after the "
              "client hung up" % (took * 1000))
        wait_until(lambda: server_connections(pid, self.proxy_port) == 0, HANGUP_BOUND,
                   what="the proxy to close the client's connection")
        # The proxy serves on.
        self.assertEqual(self.proxy_get("/version")[0], 200)


class TestProxyIdleMemory(ProxyBase):
    """In a class of its own: a fresh process, whose heap has no free memory
    from earlier tests to reuse or give back while it is measured."""

    def test_idle_connections_are_small(self):
        pid = self.r.proc.pid
        wait_until(lambda: server_connections(pid, self.proxy_port) == 0, 2 * IDLE_TIMEOUT,
                   what="the proxy to have no connection")
        # One round first, so the figures below count connections, not the
        # proxy's first use (its upstream connection, its first buffers).
        self.assertEqual(self.proxy_get("/version")[0], 200)
        wait_until(lambda: server_connections(pid, self.proxy_port) == 0, 2 * IDLE_TIMEOUT,
                   what="the proxy to close the first connection")
        idle_threads = threads(pid)
        rss0 = proc_status(pid, "RssAnon")
        conns = []
        try:
            for _ in range(IDLE):
                c = http.client.HTTPConnection("127.0.0.1", self.proxy_port, timeout=10)
                c.request("GET", "/version")
                resp = c.getresponse()
                resp.read()
                self.assertEqual(resp.status, 200)
                conns.append(c)  # kept open, idle: keep-alive
            wait_until(lambda: server_connections(pid, self.proxy_port) == IDLE, IDLE_TIMEOUT,
                       what="the proxy to count the connections")
            rss = proc_status(pid, "RssAnon")
            per = (rss - rss0) / IDLE
            print("\n  %d idle keep-alive connections through the proxy: RssAnon %d -> %d kB, "
                  "%.1f KiB each; threads %d -> %d"
                  % (IDLE, rss0, rss, per, idle_threads, threads(pid)))
            self.assertLess(per, IDLE_CONN_KIB)
            self.assertEqual(threads(pid), idle_threads)
        finally:
            for c in conns:
                c.close()
        self.wait_proxy_connections_closed()


class TestProxyBackPressure(ProxyBase):
    """A fresh process again, so its heap growth is this test's alone."""

    ITEMS = 100
    ITEM_BYTES = 30000  # a 3 MB list

    def test_a_client_that_does_not_read_holds_the_upstream(self):
        pid = self.r.proc.pid
        for i in range(self.ITEMS):
            status, _ = self.api.post_lease(
                NS, {"metadata": {"name": "big%d" % i,
                                  "annotations": {"a": "x" * self.ITEM_BYTES}},
                     "spec": {}}, client="r1")
            self.assertEqual(status, 201)
        # Warm up: the proxy's first exchange and buffers.
        self.assertEqual(self.proxy_get(LEASES + "/big0")[0], 200)
        rss0 = proc_status(pid, "RssAnon")
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            # A small receive window, so the kernel cannot take the answer
            # for the client: the proxy has to hold back.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(30)
            s.connect(("127.0.0.1", self.proxy_port))
            s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n"
                       % (LEASES, self.proxy_port)).encode())
            # The answer is under way and the client reads nothing: the
            # proxy's memory must not take the 3 MB body.
            first = s.recv(1)
            self.assertEqual(first, b"H")
            # Nothing to wait for (the point is that nothing happens): the
            # largest figure over a second, in which the API server could
            # have sent the whole answer many times over.
            rss, until = rss0, time.monotonic() + 1.0
            while time.monotonic() < until:
                rss = max(rss, proc_status(pid, "RssAnon"))
                time.sleep(0.05)
            data = bytearray(first)
            for _ in range(100000):  # bounded: 3 MB in pieces of 64 KiB at least
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        finally:
            s.close()
        head, _, body = bytes(data).partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200"), head[:100])
        if b"transfer-encoding: chunked" in head.lower():
            out, rest = bytearray(), body
            for _ in range(len(body)):
                size, _, rest = rest.partition(b"\r\n")
                n = int(size, 16)
                if n == 0:
                    break
                out += rest[:n]
                rest = rest[n + 2:]
            body = bytes(out)
        items = json.loads(body)["items"]
        big = [i for i in items if i["metadata"]["name"].startswith("big")]
        self.assertEqual(len(big), self.ITEMS)
        self.assertTrue(all(i["metadata"]["annotations"]["a"] == "x" * self.ITEM_BYTES
                            for i in big))
        print("\n  a %d kB answer to a client that stopped reading: the proxy's RssAnon "
              "%d -> %d kB" % (len(body) // 1000, rss0, rss))
        self.assertLess(rss - rss0, 1024, "the proxy buffered what the client did not read")


class TestProxyScale(ProxyBase):

    def test_64_watches_stream_on_two_threads_and_the_next_gets_429(self):
        pid = self.r.proc.pid
        status, _ = self.api.post_lease(NS, {"metadata": {"name": "many"}, "spec": {}},
                                        client="r1")
        self.assertEqual(status, 201)
        self.assertEqual(self.proxy_get(LEASES + "/many")[0], 200)
        wait_until(lambda: server_connections(pid, self.proxy_port) == 0, IDLE_TIMEOUT,
                   what="the proxy to have no connection")
        idle_threads = threads(pid)
        rss0 = proc_status(pid, "RssAnon")
        watches = []
        try:
            t0 = time.monotonic()
            for _ in range(WATCHES):
                watches.append(open_watch(self.proxy_port, "many", 60))
            opened = time.monotonic() - t0
            self.assertGreaterEqual(server_connections(pid, self.proxy_port), WATCHES)
            # One more is past the proxy's exchanges at once.
            conn = http.client.HTTPConnection("127.0.0.1", self.proxy_port, timeout=10)
            try:
                conn.request("GET", LEASES + "?watch=1")
                resp = conn.getresponse()
                self.assertEqual(resp.status, 429)
                self.assertEqual(resp.getheader("Retry-After"), "1")
                self.assertEqual(json.loads(resp.read())["reason"], "TooManyRequests")
            finally:
                conn.close()
            busy_threads = threads(pid)
            rss = proc_status(pid, "RssAnon")
            # The sidecar answers at once meanwhile.
            took = []
            for path in ("/leader", "/healthz"):
                status, _, t = timed_get(self.r.port, path, 10)
                self.assertEqual(status, 200, path)
                took.append(t * 1000)
            # One change: every stream gets it.
            status, _ = self.api.patch_lease(NS, "many",
                                             {"metadata": {"labels": {"k": "v"}}},
                                             client="r1")
            self.assertEqual(status, 200)
            t1 = time.monotonic()
            for _, events in watches:
                event = events.next_event()
                self.assertEqual(event["type"], "MODIFIED")
                self.assertEqual(event["object"]["metadata"]["labels"], {"k": "v"})
            fanout = time.monotonic() - t1
            print("\n  %d watches opened through the proxy in %.2f s; threads %d with none, "
                  "%d with them; RssAnon %d -> %d kB (%.1f KiB a watch); /leader, /healthz "
                  "%.1f, %.1f ms; one change reached all in %.0f ms"
                  % (WATCHES, opened, idle_threads, busy_threads, rss0, rss,
                     (rss - rss0) / WATCHES, took[0], took[1], fanout * 1000))
            self.assertEqual(busy_threads, idle_threads,
                             "threads grew with the proxied connections")
        finally:
            for conn, _ in watches:
                conn.close()
        self.wait_proxy_connections_closed()
        self.assertEqual(threads(pid), idle_threads)

    def test_the_connection_limit_is_the_sidecars(self):
        pid = self.r.proc.pid
        n = SERVER_CAP + 100
        held = []
        try:
            for _ in range(n):
                held.append(socket.create_connection(("127.0.0.1", self.proxy_port),
                                                     timeout=10))
            # More than the cap are open: a fresh request is still answered,
            # at once, as the sidecar answers /leader (the longest-idle
            # connections are closed to make room).
            t0 = time.monotonic()
            status, _ = self.proxy_get("/version", timeout=IDLE_TIMEOUT + 5)
            took = time.monotonic() - t0
            self.assertEqual(status, 200)
            self.assertLess(took, NOT_STARVED)
            held_by_proxy = server_connections(pid, self.proxy_port)
            dropped = closed_by_peer(held)
            print("\n  %d connections to the proxy: it holds %d, closed %d idle ones; a "
                  "fresh request answered in %.0f ms" % (n, held_by_proxy, dropped,
                                                         took * 1000))
            self.assertLessEqual(held_by_proxy, SERVER_CAP, "connections not bounded")
            self.assertGreaterEqual(dropped, 1, "no idle connection was closed past the cap")
            # None dropped while there was room.
            self.assertGreaterEqual(n - dropped, SERVER_CAP - 128)
            self.assertTrue(self.r.is_leader())
        finally:
            for s in held:
                s.close()
        self.wait_proxy_connections_closed()
        self.assertEqual(self.proxy_get("/version")[0], 200)


# A file-descriptor limit far below the connection cap, and low enough that
# descriptors run out before the proxy's exchanges at once do: each proxied
# request holds two (the client's and its upstream connection).
LOW_NOFILE = 160
LOW_WATCHES = WATCHES


class LowFdReplica(Replica):
    """A replica run under prlimit, soft and hard RLIMIT_NOFILE alike."""

    def argv(self):
        return (["prlimit", "--nofile=%d:%d" % (LOW_NOFILE, LOW_NOFILE), "--"]
                + super().argv())


@unittest.skipUnless(shutil.which("prlimit"), "needs prlimit (util-linux)")
class TestProxyLowFdLimit(unittest.TestCase):
    """The proxy sizes its connection cap from RLIMIT_NOFILE counting both
    descriptors of a proxied request, so past the limit a connection is
    turned away at the door instead of taken and then answered 502 for a
    lack of descriptors (or, worse, starving the election's own
    connection to the API server)."""

    def test_watches_past_the_fd_limit_are_refused_not_broken(self):
        d = tempfile.mkdtemp(prefix="leaderd-apiproxy-lowfd-")
        api = ApiServer(os.path.join(d, "api"), ["r1"], verbose=False)
        r = None
        watches = []
        try:
            api.start()
            port = free_port()
            r = LowFdReplica(api, "r1", d,
                             extra_args=["--api-proxy", "127.0.0.1:%d" % port])
            r.start()
            wait_until(r.is_leader, 30, what="the replica to lead")
            served, turned_away, failed = 0, 0, []
            for i in range(LOW_WATCHES):
                try:
                    watches.append(open_watch(port, "demo", 20.0))
                    served += 1
                except AssertionError as e:
                    failed.append(str(e))
                except OSError:
                    turned_away += 1
            print("\n  RLIMIT_NOFILE %d, %d watches: %d served, %d turned away, %d failed"
                  % (LOW_NOFILE, LOW_WATCHES, served, turned_away, len(failed)))
            self.assertEqual(len(failed), 0,
                             "watches taken in and then failed: %r" % failed[:2])
            self.assertGreaterEqual(served, 20)
            self.assertGreater(turned_away, 0)
            self.assertTrue(r.is_leader())
        finally:
            for conn, _ in watches:
                conn.close()
            if r:
                r.stop()
            api.stop()
            shutil.rmtree(d, ignore_errors=True)

if __name__ == "__main__":
    unittest.main()
