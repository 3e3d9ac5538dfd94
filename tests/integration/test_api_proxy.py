# SPDX-License-Identifier: Apache-2.0
"""Integration tests of the API write gate, --api-proxy ADDR:PORT: two
replicas over HTTPS against the bundled API server, each serving a proxy on
loopback. Reads pass on a standby; writes pass on the leader and get a 503
metav1.Status on the standby; the client's Authorization never reaches the
API server (the server names the client that wrote, by the token it got);
a write held past the term's renew deadline by renewals that stall is cut,
no release is written, and the server, which commits what it admitted,
commits it before the next leader's claim (a write in flight at a
purposeful step-down: test_api_proxy_release); a watch streams through for longer than
the proxy's idle timeout; 413 over 3 MiB; 501 for upgrades; the connection
cap; a non-loopback ADDR exits 2. The same for an ordinary resource,
ConfigMaps: create, update, patch and delete through the leader (the
server's ConfigMap log names the leader's client), the exact refusal body
on a standby, GET and LIST on a standby, and a ConfigMap watch that outlives
the idle timeout and then sees a write made through the leader's proxy.
Last, fencing across failovers: a writer
sends through all three replicas' proxies while the leader is SIGKILLed,
partitioned and SIGSTOPped, and the server's logs show every applied write
came from the Lease's holder of that moment."""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from leaderd_testing.apiserver import ApiServer, Watch
from leaderd_testing.cluster import (FAST, KILL_BOUND, LEADERD, SCHED_SLACK, TERM_BOUND,
                                     Replica, Watcher, free_port, stop_all, wait_until)

NS = "default"
POD = "/api/v1/namespaces/%s/pods/app" % NS
LEASES = "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % NS
CONFIGMAPS = "/api/v1/namespaces/%s/configmaps" % NS
MERGE = "application/merge-patch+json"
# The proxy's idle timeout, the sidecar server's (LD_HTTP_IDLE_TIMEOUT_S): a
# watch outlives it.
IDLE_TIMEOUT = 15.0
# How long an injected upstream delay holds a write: far longer than a cut
# takes, so a quick answer proves the cut.
SLOW_MS = 8000


def proxy_request(port, method, path, body=None, headers=None, timeout=10.0):
    """(status, headers dict with lower-case names, body bytes) of one request
    through a proxy on a fresh connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


class AppWrite(threading.Thread):
    """The app's PATCH of the Pod's "written" label through a proxy, on its
    own thread: answer is (status, headers, body) or error the exception;
    sent and ended the monotonic times it went and came back."""

    def __init__(self, port, value, timeout=30.0, headers=None, path=POD):
        super().__init__(daemon=True)
        self.port, self.value, self.timeout = port, value, timeout
        self.headers = dict({"Content-Type": MERGE}, **(headers or {}))
        self.path = path
        self.answer = self.error = self.sent = self.ended = None

    def run(self):
        self.sent = time.monotonic()
        try:
            self.answer = proxy_request(self.port, "PATCH", self.path,
                                        {"metadata": {"labels": {"written": self.value}}},
                                        self.headers, self.timeout)
        except (OSError, http.client.HTTPException) as e:
            self.error = e
        self.ended = time.monotonic()


def send_and_hang_up(port, value, path=POD, headers=None):
    """Sends the app's PATCH of the "written" label through a proxy on a raw
    socket and returns the socket unread: the caller hangs up."""
    body = json.dumps({"metadata": {"labels": {"written": value}}}).encode()
    head = "PATCH %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: %s\r\n" % (
        path, port, MERGE)
    for k, v in (headers or {}).items():
        head += "%s: %s\r\n" % (k, v)
    head += "Content-Length: %d\r\n\r\n" % len(body)
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(head.encode() + body)
    return sock


def metric(replica, line_prefix):
    """The value of the first /metrics sample starting with line_prefix, or None."""
    status, body = replica.get("/metrics")
    if status != 200:
        return None
    for line in body.decode().splitlines():
        if line.startswith(line_prefix + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


class ApiProxyBase(unittest.TestCase):
    clients = ["r1", "r2"]

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="leaderd-apiproxy-")
        self.api = ApiServer(os.path.join(self.dir, "api"), self.clients)
        self.replicas = []
        self.proxy_port = {}
        try:
            self.api.start()
            self.api.control("POST", "pods", {"namespace": NS, "name": "app",
                                              "labels": {"app": "demo"}})
            for c in self.clients:
                self.proxy_port[c] = free_port()
                r = Replica(self.api, c, self.dir,
                            extra_args=["--api-proxy", "127.0.0.1:%d" % self.proxy_port[c]])
                self.replicas.append(r.start())
        except BaseException:
            self.tearDown()
            raise
        self.watch = Watcher(self, self.replicas)

    def tearDown(self):
        stop_all(self, self.replicas)
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def roles(self):
        """(leader, standby) Replica objects, once exactly one leads."""
        leader = self.watch.one_leader(KILL_BOUND + SCHED_SLACK)
        lead = next(r for r in self.replicas if r.client == leader)
        standby = next(r for r in self.replicas if r.client != leader)
        # The standby must have seen the leader, so its refusal can name it.
        wait_until(lambda: standby.leader()[1] and standby.leader()[1]["leader"] == leader,
                   FAST["lease_duration"], what="the standby to see the leader")
        return lead, standby

    def port(self, replica):
        return self.proxy_port[replica.client]

    def pod_writes(self):
        return [e for e in self.api.control("GET", "pods/log")["log"]
                if e["client"] != "_control"]

    def patch_label(self, replica, value, headers=None, timeout=10.0):
        h = {"Content-Type": MERGE}
        h.update(headers or {})
        return proxy_request(self.port(replica), "PATCH", POD,
                             {"metadata": {"labels": {"written": value}}}, h, timeout)

    # -- writes held in the API server, which commits what it admitted --

    def hold_write(self, lead, value, held_ms, verbs=("patch",)):
        """Makes the server hold lead's Pod patches for held_ms ("commit":
        "admitted", the test support's default: a hang-up or a cut does not
        cancel them) and sends one through lead's proxy; returns its AppWrite
        once the server holds it."""
        self.api.set_faults(lead.client, latency_ms=held_ms, verbs=list(verbs))
        w = AppWrite(self.port(lead), value, timeout=held_ms / 1000 + 30)
        w.start()
        wait_until(lambda: self.api.held(lead.client, "patch") == 1, 5,
                   what="the write to be held in the API server")
        return w

    def committed(self, client, value):
        """The server's Pod log entry of value written by client, or None."""
        return next((e for e in self.pod_writes() if e["client"] == client
                     and e["labels"].get("written") == value), None)

    def lease_writes(self, since, client, holder):
        """The server's Lease writes after seq since by client naming holder."""
        return [e for e in self.api.write_log(since) if e["client"] == client
                and e["name"] == "demo" and e["holderIdentity"] == holder]

    def fresh_renewal(self, lead):
        """Waits for lead's next renewal and returns its log entry."""
        since = self.api.write_log()[-1]["seq"]
        return wait_until(lambda: (self.lease_writes(since, lead.client, lead.identity)
                                   or [None])[0],
                          2 * FAST["retry_period"] + SCHED_SLACK, what="a renewal")

    def assert_commit_before_the_claim(self, lead, standby, since, value, bound):
        """The held write of value commits before standby's first claim of the
        Lease (the server's log, one clock). Returns (commit, claim)."""
        commit = wait_until(lambda: self.committed(lead.client, value), bound,
                            what="the held write to commit")
        wait_until(standby.is_leader, bound + TERM_BOUND + SCHED_SLACK,
                   what="the next leader")
        claim = self.lease_writes(since, standby.client, standby.identity)[0]
        self.assertLess(commit["clock_us"], claim["clock_us"],
                        "the old leader's write committed %.3f s after the next "
                        "leader's first claim" % ((commit["clock_us"] - claim["clock_us"])
                                                  / 1e6))
        return commit, claim

    def hold_past_the_term(self, lead, value, verbs=("patch",)):
        """Waits for a renewal of lead's and sends a write through its proxy
        that the server holds until half-way between the term's renew
        deadline (that renewal + renew-deadline; the renewal began a little
        earlier still) and the earliest takeover (that renewal seen +
        lease-duration): past the first, before the second, which is the
        time lease-duration - renew-deadline the contract gives a cut write
        to land. Returns (renewal's log entry, AppWrite)."""
        renewal = self.fresh_renewal(lead)
        end = renewal["clock_us"] / 1e6 + (FAST["renew_deadline"]
                                           + FAST["lease_duration"]) / 2
        # The log's clock_us is CLOCK_MONOTONIC, as time.monotonic() is.
        held_ms = int((end - time.monotonic()) * 1000)
        self.assertGreater(held_ms, FAST["renew_deadline"] * 1000 - 500,
                           "the renewal was seen too late to time the hold")
        return renewal, self.hold_write(lead, value, held_ms, verbs)

    def assert_claim_after_expiry(self, lead, renewal, claim):
        """claim came no earlier than lease-duration after lead's last write
        of the Lease before it (at least renewal): the Lease expired by
        itself."""
        last = [e for e in self.api.write_log(renewal["seq"] - 1)
                if e["client"] == lead.client and e["name"] == "demo"
                and e["clock_us"] < claim["clock_us"]][-1]
        self.assertGreaterEqual(claim["clock_us"] - last["clock_us"],
                                FAST["lease_duration"] * 1e6,
                                "taken over %.3f s after the old leader's last write"
                                % ((claim["clock_us"] - last["clock_us"]) / 1e6))

    def assert_real_answer(self, w, value):
        """The app that stayed got the server's own answer: 200 and the Pod."""
        self.assertIsNone(w.error, w.error)
        status, _, body = w.answer
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["metadata"]["labels"]["written"], value)

    def assert_refusal(self, status, headers, body, holder=None, cut=False):
        self.assertEqual(status, 503, body)
        self.assertNotIn("retry-after", headers)
        self.assertTrue(headers.get("content-type", "").startswith("application/json"))
        doc = json.loads(body)
        self.assertEqual(doc["kind"], "Status")
        self.assertEqual(doc["apiVersion"], "v1")
        self.assertEqual(doc["metadata"], {})
        self.assertEqual(doc["status"], "Failure")
        self.assertEqual(doc["reason"], "ServiceUnavailable")
        self.assertEqual(doc["code"], 503)
        if holder:
            self.assertIn(holder, doc["message"])
        if cut:
            self.assertIn("cut", doc["message"])
        return doc


class TestApiProxy(ApiProxyBase):
    def test_reads_pass_on_a_standby(self):
        lead, standby = self.roles()
        for r in (standby, lead):
            status, headers, body = proxy_request(self.port(r), "GET", LEASES + "/demo")
            self.assertEqual(status, 200, body)
            self.assertEqual(json.loads(body)["spec"]["holderIdentity"], lead.client)
            self.assertTrue(headers["content-type"].startswith("application/json"))
            status, _, body = proxy_request(self.port(r), "GET", POD)
            self.assertEqual(status, 200, body)
            self.assertEqual(json.loads(body)["metadata"]["labels"]["app"], "demo")
        # A query string passes as it came.
        status, _, body = proxy_request(
            self.port(standby), "GET", "/api/v1/namespaces/%s/pods?labelSelector=app%%3Dnone" % NS)
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["items"], [])
        self.assertEqual(metric(standby, 'leaderd_proxy_requests_total{verb="GET",code="200"}'),
                         3)

    def test_writes_pass_on_the_leader_and_are_refused_on_a_standby(self):
        lead, standby = self.roles()
        status, _, body = self.patch_label(lead, "by-leader")
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["metadata"]["labels"]["written"], "by-leader")

        status, headers, body = self.patch_label(standby, "by-standby")
        doc = self.assert_refusal(status, headers, body, holder=lead.client)
        self.assertIn(standby.client, doc["message"])
        # Every verb of a write is gated, with or without a body.
        for method, path, payload in (("POST", "/apis/events.k8s.io/v1/namespaces/%s/events"
                                       % NS, {"metadata": {"name": "e"}}),
                                      ("PUT", POD, {"metadata": {"name": "app"}}),
                                      ("DELETE", POD, None)):
            status, headers, body = proxy_request(self.port(standby), method, path, payload,
                                                  {"Content-Type": "application/json"})
            self.assert_refusal(status, headers, body, holder=lead.client)

        writes = self.pod_writes()
        self.assertEqual([(e["client"], e["labels"].get("written")) for e in writes],
                         [(lead.client, "by-leader")])
        self.assertEqual(metric(standby, "leaderd_proxy_writes_refused_total"), 4)
        self.assertEqual(metric(lead, "leaderd_proxy_writes_refused_total"), 0)
        self.assertEqual(
            metric(standby, 'leaderd_proxy_requests_total{verb="PATCH",code="503"}'), 1)
        self.assertEqual(
            metric(lead, 'leaderd_proxy_requests_total{verb="PATCH",code="200"}'), 1)

    def test_the_client_authorization_is_not_forwarded(self):
        lead, _ = self.roles()
        # The admin token would make the write the admin's; a bogus one would
        # get a 401. Neither reaches the server: it sees leaderd's token.
        for token in (self.api.token("admin"), "bogus"):
            status, _, body = self.patch_label(lead, token[:5],
                                               {"Authorization": "Bearer " + token})
            self.assertEqual(status, 200, body)
        self.assertEqual([e["client"] for e in self.pod_writes()], [lead.client] * 2)
        # Hop-by-hop headers are dropped too; the body still goes as sent.
        status, _, body = self.patch_label(lead, "hop", {"Connection": "close, X-Hop",
                                                         "X-Hop": "1", "TE": "trailers"})
        self.assertEqual(status, 200, body)
        self.assertEqual(self.pod_writes()[-1]["labels"]["written"], "hop")

    def test_a_write_held_past_the_term_is_cut_when_renewals_stall(self):
        """Renewals stall (held as long as the write, each landing only after
        leaderd gave it up), so the term ends at its renew deadline by time
        alone; the write, held past that deadline, is cut then, and no
        release is written. The server commits the cut write all the same at
        the end of its hold, as kube-apiserver would: still before the next
        leader's first claim, which comes only lease-duration after the old
        leader's last write of the Lease."""
        lead, standby = self.roles()
        since = self.api.write_log()[-1]["seq"]
        renewal, w = self.hold_past_the_term(lead, "stalled", verbs=["patch", "update"])
        w.join(FAST["lease_duration"] + SCHED_SLACK)
        self.assertFalse(w.is_alive())
        self.assertIsNone(w.error, w.error)
        self.assert_refusal(*w.answer, cut=True)
        self.assertEqual(metric(lead, "leaderd_proxy_writes_aborted_total"), 1)
        # Renewals sent before the deadline land up to the hold later and
        # keep the Lease for the old leader until they expire: a long wait.
        commit, claim = self.assert_commit_before_the_claim(
            lead, standby, since, "stalled",
            2 * FAST["lease_duration"] + FAST["renew_deadline"])
        self.assertEqual(self.lease_writes(since, lead.client, ""), [],
                         "a release was written although a write was cut")
        self.assert_claim_after_expiry(lead, renewal, claim)
        self.api.clear_faults()

    def test_a_watch_streams_through_past_the_idle_timeout(self):
        lead, standby = self.roles()
        status, _ = self.api.post_lease(NS, {"metadata": {"name": "quiet"}, "spec": {}},
                                        client="r1")
        self.assertEqual(status, 201)
        conn = http.client.HTTPConnection("127.0.0.1", self.port(standby),
                                          timeout=IDLE_TIMEOUT + 10)
        try:
            conn.request("GET", LEASES + "?watch=1&fieldSelector=metadata.name%3Dquiet"
                         "&timeoutSeconds=60")
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            events = Watch(resp)
            first = events.next_event()
            self.assertEqual(first["type"], "ADDED")
            self.assertEqual(first["object"]["metadata"]["name"], "quiet")
            # A connection that says nothing meanwhile is closed by the
            # idle timeout; the watch, as quiet, is not.
            idle = socket.create_connection(("127.0.0.1", self.port(standby)), timeout=5)
            # Silence for longer than the proxy's idle timeout, then a change.
            time.sleep(IDLE_TIMEOUT + 2)
            try:
                self.assertEqual(idle.recv(1), b"", "an idle connection stayed open")
            except ConnectionResetError:
                pass
            finally:
                idle.close()
            status, _ = self.api.patch_lease(NS, "quiet",
                                             {"metadata": {"labels": {"k": "v"}}},
                                             client="r1")
            self.assertEqual(status, 200)
            t0 = time.monotonic()
            event = events.next_event()
            self.assertLess(time.monotonic() - t0, 5)
            self.assertEqual(event["type"], "MODIFIED")
            self.assertEqual(event["object"]["metadata"]["labels"], {"k": "v"})
        finally:
            conn.close()
        # The watch never delayed anything else on the same proxy.
        status, _, _ = proxy_request(self.port(standby), "GET", POD)
        self.assertEqual(status, 200)

    def test_limits_413_and_501(self):
        lead, _ = self.roles()
        big = b"{" + b" " * (3 * 1024 * 1024) + b"}"
        status, headers, body = proxy_request(self.port(lead), "PATCH", POD, big,
                                              {"Content-Type": MERGE}, timeout=30)
        self.assertEqual(status, 413, body[:200])
        self.assertEqual(json.loads(body)["reason"], "RequestEntityTooLarge")
        for method, path, headers in (
                ("POST", POD + "/exec?command=sh", {}),
                ("GET", POD + "/portforward?ports=80", {}),
                ("GET", POD + "/attach", {}),
                ("GET", POD, {"Connection": "Upgrade", "Upgrade": "websocket"})):
            status, _, body = proxy_request(self.port(lead), method, path, None, headers)
            self.assertEqual(status, 501, (method, path, body))
            self.assertEqual(json.loads(body)["reason"], "NotImplemented")
        self.assertEqual(self.pod_writes(), [])
        # The proxy still serves afterwards.
        self.assertEqual(self.patch_label(lead, "after")[0], 200)


def configmap(name, data, labels=None, rv=None):
    meta = {"name": name}
    if labels:
        meta["labels"] = labels
    if rv:
        meta["resourceVersion"] = rv
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


class TestApiProxyConfigMaps(ApiProxyBase):
    """An ordinary resource through the gate: ConfigMaps."""

    def cm(self, replica, method, name=None, body=None, content_type="application/json",
           query=""):
        path = CONFIGMAPS + ("/" + name if name else "") + query
        status, headers, data = proxy_request(self.port(replica), method, path, body,
                                              {"Content-Type": content_type})
        return status, headers, json.loads(data) if data else None

    def test_crud_through_the_leader(self):
        lead, _ = self.roles()
        status, _, created = self.cm(lead, "POST", body=configmap("c1", {"k": "1"}))
        self.assertEqual(status, 201, created)
        rv = created["metadata"]["resourceVersion"]
        status, _, updated = self.cm(lead, "PUT", "c1", configmap("c1", {"k": "2"}, rv=rv))
        self.assertEqual((status, updated["data"]), (200, {"k": "2"}), updated)
        # Optimistic concurrency passes through: the server's 409 comes back as is.
        status, _, body = self.cm(lead, "PUT", "c1", configmap("c1", {"k": "3"}, rv=rv))
        self.assertEqual((status, body["reason"]), (409, "Conflict"), body)
        status, _, patched = self.cm(lead, "PATCH", "c1", {"data": {"p": "x"}}, MERGE)
        self.assertEqual((status, patched["data"]), (200, {"k": "2", "p": "x"}), patched)
        status, _, gone = self.cm(lead, "DELETE", "c1")
        self.assertEqual((status, gone["status"], gone["details"]["name"]),
                         (200, "Success", "c1"), gone)
        self.assertEqual(self.api.get_configmap(NS, "c1")[0], 404)
        # The server applied each write as leaderd's own client, the leader's.
        self.assertEqual([(e["client"], e["verb"], e["data"]) for e in self.api.configmap_log()],
                         [(lead.client, "create", {"k": "1"}),
                          (lead.client, "update", {"k": "2"}),
                          (lead.client, "patch", {"k": "2", "p": "x"}),
                          (lead.client, "delete", {"k": "2", "p": "x"})])

    def test_writes_refused_on_a_standby_with_the_exact_status(self):
        lead, standby = self.roles()
        status, created = self.api.post_configmap(NS, configmap("c2", {"k": "v"}))
        self.assertEqual(status, 201, created)
        refusal = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "write refused by leaderd: %s is not the leader of the Lease "
                              "%s/demo; the holder is %s"
                              % (standby.identity, NS, lead.identity),
                   "reason": "ServiceUnavailable", "code": 503}
        rv = created["metadata"]["resourceVersion"]
        for method, name, body, ctype in (
                ("POST", None, configmap("c3", {"k": "v"}), "application/json"),
                ("PUT", "c2", configmap("c2", {"k": "w"}, rv=rv), "application/json"),
                ("PATCH", "c2", {"data": {"k": "w"}}, MERGE),
                ("DELETE", "c2", None, "application/json")):
            with self.subTest(method=method):
                status, headers, doc = self.cm(standby, method, name, body, ctype)
                self.assertEqual((status, doc), (503, refusal))
                self.assertNotIn("retry-after", headers)
        self.assertEqual(self.api.get_configmap(NS, "c2"), (200, created))
        self.assertEqual(self.api.get_configmap(NS, "c3")[0], 404)
        self.assertEqual([e["client"] for e in self.api.configmap_log()], ["r1"])
        self.assertEqual(metric(standby, "leaderd_proxy_writes_refused_total"), 4)

    def test_get_and_list_on_a_standby(self):
        _, standby = self.roles()
        for name, tier in (("l1", "web"), ("l2", "db")):
            self.assertEqual(self.api.post_configmap(
                NS, configmap(name, {"n": name}, labels={"tier": tier}))[0], 201)
        status, _, got = self.cm(standby, "GET", "l1")
        self.assertEqual((status, got), (200, self.api.get_configmap(NS, "l1")[1]))
        status, _, lst = self.cm(standby, "GET", query="?labelSelector=tier%3Dweb")
        self.assertEqual(status, 200, lst)
        self.assertEqual((lst["kind"], [i["metadata"]["name"] for i in lst["items"]]),
                         ("ConfigMapList", ["l1"]))
        self.assertEqual(lst["metadata"]["resourceVersion"],
                         self.api.list_configmaps(NS)[1]["metadata"]["resourceVersion"])
        status, _, missing = self.cm(standby, "GET", "nope")
        self.assertEqual((status, missing["message"]), (404, 'configmaps "nope" not found'))

    def test_a_configmap_watch_outlives_the_idle_timeout(self):
        lead, standby = self.roles()
        status, created = self.api.post_configmap(NS, configmap("quiet", {"n": "0"}))
        self.assertEqual(status, 201, created)
        conn = http.client.HTTPConnection("127.0.0.1", self.port(standby),
                                          timeout=IDLE_TIMEOUT + 10)
        try:
            conn.request("GET", CONFIGMAPS + "?watch=1&timeoutSeconds=60&resourceVersion="
                         + created["metadata"]["resourceVersion"])
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            events = Watch(resp)
            # Nothing to say for longer than the proxy's idle timeout.
            time.sleep(IDLE_TIMEOUT + 2)
            status, _, patched = self.cm(lead, "PATCH", "quiet", {"data": {"n": "1"}}, MERGE)
            self.assertEqual(status, 200, patched)
            t0 = time.monotonic()
            event = events.next_event()
            self.assertLess(time.monotonic() - t0, 5)
            self.assertEqual((event["type"], event["object"]), ("MODIFIED", patched))
        finally:
            conn.close()


class TestApiProxyFencing(ApiProxyBase):
    """A writer sends a write through every replica's proxy, round after
    round, while the leader is SIGKILLed, partitioned and SIGSTOPped in turn.
    The API server's logs decide: every write it applied came from the
    replica that held the Lease at that moment (the last Lease write the
    server committed before it names that replica)."""

    clients = ["r1", "r2", "r3"]

    def writer(self, stop, answers):
        n = 0
        while not stop.is_set():
            for r in self.replicas:
                n += 1
                try:
                    status = self.patch_label(r, "%s-%d" % (r.client, n), timeout=1.5)[0]
                except (OSError, http.client.HTTPException):
                    status = None  # a stopped or killed proxy, or one cut mid-answer
                answers.append((r.client, status))
            time.sleep(0.02)

    def test_no_write_lands_outside_its_leadership(self):
        stop = threading.Event()
        answers = []
        t = threading.Thread(target=self.writer, args=(stop, answers))
        t.start()
        try:
            for fault in ("kill", "partition", "stop"):
                lead, _ = self.roles()
                if fault == "kill":
                    lead.stop(signal.SIGKILL)
                elif fault == "partition":
                    self.api.set_faults(lead.client, partition="hang")
                else:
                    lead.send(signal.SIGSTOP)
                self.watch.until(lambda snap, leaders: leaders and leaders[0] != lead.client,
                                 KILL_BOUND + 2 * SCHED_SLACK, "a new leader")
                # Writes go on through the new leader (and the old one's
                # proxy, once it is back) for a while.
                time.sleep(1.0)
                if fault == "kill":
                    lead.start()
                elif fault == "partition":
                    self.api.clear_faults(lead.client)
                else:
                    lead.send(signal.SIGCONT)
                time.sleep(1.0)
        finally:
            stop.set()
            t.join(30)
        leases = [e for e in self.api.write_log() if e["name"] == "demo"]
        writes = self.pod_writes()
        winners = {c for c, status in answers if status == 200}
        self.assertGreaterEqual(len(winners), 2, "writes went through fewer than two leaders")
        self.assertGreater(len(writes), 20)
        for w in writes:
            # The server's microsecond clock on both logs; a tie counts the
            # Lease write first (see tests/chaos/harness.proxy_fencing_problems).
            before = [e for e in leases if e["clock_us"] <= w["clock_us"]]
            self.assertTrue(before, w)
            holder = before[-1]["holderIdentity"]
            self.assertEqual(holder, w["client"],
                             "write %s by %s applied while %s held the Lease (last Lease "
                             "write %s)" % (w["labels"], w["client"], holder, before[-1]))
        # Every accepted answer is a write the server applied (none lost).
        applied = {(w["client"], w["labels"].get("written")) for w in writes}
        self.assertLessEqual(len([a for a in answers if a[1] == 200]), len(applied))


class TestApiProxyShards(unittest.TestCase):
    """Shard mode: two replicas share 4 shards; a write passes through a
    replica's proxy only with X-Leaderd-Shard naming a shard that replica
    owns: 503 for a shard the other owns, 404 for no such shard, 400 without
    the header; reads pass without one."""
    clients = ["r1", "r2"]

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="leaderd-apiproxy-shards-")
        self.api = ApiServer(os.path.join(self.dir, "api"), self.clients)
        self.replicas = []
        self.proxy_port = {}
        try:
            self.api.start()
            self.api.control("POST", "pods", {"namespace": NS, "name": "app",
                                              "labels": {"app": "demo"}})
            for c in self.clients:
                self.proxy_port[c] = free_port()
                r = Replica(self.api, c, self.dir, lease="work",
                            extra_args=["--shards", "4", "--api-proxy",
                                        "127.0.0.1:%d" % self.proxy_port[c]])
                self.replicas.append(r.start())
        except BaseException:
            self.tearDown()
            raise

    def tearDown(self):
        stop_all(self, self.replicas)
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def owned(self, replica):
        status, body = replica.get("/shards")
        return json.loads(body)["owned"] if status == 200 else []

    def test_writes_need_an_owned_shard(self):
        def balanced():
            return all(len(self.owned(r)) == 2 for r in self.replicas)
        wait_until(balanced, FAST["lease_duration"] * 3 + SCHED_SLACK,
                   what="two shards each")
        a, b = self.replicas
        mine, theirs = self.owned(a)[0], self.owned(b)[0]
        port = self.proxy_port[a.client]
        patch = {"metadata": {"labels": {"written": "yes"}}}
        h = {"Content-Type": MERGE}

        status, _, body = proxy_request(port, "PATCH", POD, patch,
                                        dict(h, **{"X-Leaderd-Shard": mine}))
        self.assertEqual(status, 200, body)
        status, headers, body = proxy_request(port, "PATCH", POD, patch,
                                              dict(h, **{"X-Leaderd-Shard": theirs}))
        self.assertEqual(status, 503, body)
        self.assertNotIn("retry-after", headers)
        doc = json.loads(body)
        self.assertEqual((doc["kind"], doc["status"], doc["reason"]),
                         ("Status", "Failure", "ServiceUnavailable"))
        self.assertIn(b.identity, doc["message"])
        status, _, body = proxy_request(port, "PATCH", POD, patch,
                                        dict(h, **{"X-Leaderd-Shard": "9"}))
        self.assertEqual(status, 404, body)
        status, _, body = proxy_request(port, "PATCH", POD, patch, h)
        self.assertEqual(status, 400, body)
        self.assertIn(b"X-Leaderd-Shard", body)
        status, _, body = proxy_request(port, "GET", POD)
        self.assertEqual(status, 200, body)
        # Exactly the one write reached the server, from a's own client.
        writes = [e for e in self.api.control("GET", "pods/log")["log"]
                  if e["client"] != "_control"]
        self.assertEqual([e["client"] for e in writes], [a.client], writes)


class TestApiProxyConfig(unittest.TestCase):
    def test_a_non_loopback_address_exits_2(self):
        for addr in ("0.0.0.0:8001", ":8001", "10.1.2.3:8001", "[::]:8001",
                     "127.0.0.1:0", "127.0.0.1:99999"):
            p = subprocess.run([LEADERD, "--lease-name", "x", "--identity", "a",
                                "--kubeconfig", "/dev/null", "--api-proxy", addr],
                               capture_output=True, timeout=10, env={"PATH": "/usr/bin:/bin"})
            self.assertEqual(p.returncode, 2, (addr, p.stderr))
            lines = p.stderr.decode().strip().splitlines()
            self.assertEqual(len(lines), 1, lines)
            self.assertIn("--api-proxy", lines[0])
        p = subprocess.run([LEADERD, "--lease-name", "x", "--kubeconfig", "/dev/null"],
                           capture_output=True, timeout=10,
                           env={"PATH": "/usr/bin:/bin", "LEADERD_API_PROXY": "0.0.0.0:1"})
        self.assertEqual(p.returncode, 2)
        self.assertIn("LEADERD_API_PROXY", p.stderr.decode())
        self.assertIn("loopback", p.stderr.decode())


if __name__ == "__main__":
    unittest.main()
