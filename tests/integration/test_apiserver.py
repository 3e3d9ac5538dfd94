# SPDX-License-Identifier: Apache-2.0
"""Tests of build/leaderd-apiserver itself: kube-apiserver behaviour leaderd depends on
(status codes, Status bodies, validation, optimistic concurrency), persistence, fault
injection, the control API, watch, and the real kubectl against it.

Runs under tests/integration/run.py or alone: python3 tests/integration/test_apiserver.py
"""

import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "support"))  # leaderd_testing

from leaderd_testing.apiserver import (CONFIGMAPS, ApiServer, binary_path,  # noqa: E402
                                       is_transport_error)

NS = "default"
CONFLICT_MSG = ('Operation cannot be fulfilled on leases.coordination.k8s.io "%s": the '
                'object has been modified; please apply your changes to the latest '
                'version and try again')
TS = "2024-05-01T12:00:03.123456Z"


def lease(name, holder="r1", duration=15, transitions=0, rv=None, **spec):
    obj = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
           "metadata": {"name": name},
           "spec": dict({"holderIdentity": holder, "leaseDurationSeconds": duration,
                         "acquireTime": TS, "renewTime": TS,
                         "leaseTransitions": transitions}, **spec)}
    if rv is not None:
        obj["metadata"]["resourceVersion"] = rv
    return obj


def wait_for(pred, timeout=10.0, interval=0.05):
    """Polls pred until it returns a true value (returned) or timeout (None)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    return None


class Background:
    """Runs fn in a thread; done is set when it returns or raises."""

    def __init__(self, fn):
        self.result = None
        self.error = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn):
        try:
            self.result = fn()
        except Exception as e:  # reported to the test through .error
            self.error = e
        finally:
            self.done.set()


class ServerTestCase(unittest.TestCase):
    """One server (clients r1, r2) per test class, faults cleared after each test."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="leaderd-apiserver-test.")
        cls.srv = ApiServer(os.path.join(cls.tmp, "srv"), ["r1", "r2"],
                            state_file=os.path.join(cls.tmp, "state.json"))
        cls.srv.start()

    @classmethod
    def tearDownClass(cls):
        status = cls.srv.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        if status not in (0, None):
            raise AssertionError("leaderd-apiserver exited with %r" % status)

    def tearDown(self):
        self.srv.clear_faults()
        self.srv.resume()

    def create(self, name, **kw):
        status, obj = self.srv.post_lease(NS, lease(name, **kw))
        self.assertEqual(status, 201, obj)
        return obj


class TestLeaseApi(ServerTestCase):

    def test_auth_required(self):
        status, body = self.srv.json_request("GET", "/apis/coordination.k8s.io/v1/namespaces"
                                             "/default/leases", token="")
        self.assertEqual(status, 401)
        self.assertEqual(body, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Failure", "message": "Unauthorized",
                                "reason": "Unauthorized", "code": 401})
        status, _ = self.srv.json_request(
            "GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/x",
            token="0123456789abcdef0123")
        self.assertEqual(status, 401)
        status, _ = self.srv.json_request("GET", "/_control/stats")  # client token
        self.assertEqual(status, 401)
        status, version = self.srv.json_request("GET", "/version", token="")
        self.assertEqual(status, 200)
        self.assertEqual(version["major"], "1")

    def test_create_get_update_conflict(self):
        created = self.create("cgu")
        meta = created["metadata"]
        self.assertEqual(created["kind"], "Lease")
        self.assertEqual(created["apiVersion"], "coordination.k8s.io/v1")
        self.assertEqual(meta["namespace"], NS)
        self.assertRegex(meta["uid"], r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-")
        self.assertRegex(meta["creationTimestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertNotIn("generation", meta)
        self.assertNotIn("managedFields", meta)
        self.assertEqual(created["spec"]["renewTime"], TS)

        status, got = self.srv.get_lease(NS, "cgu")
        self.assertEqual((status, got), (200, created))

        first_rv = meta["resourceVersion"]
        got["spec"]["holderIdentity"] = "r2"
        got["spec"]["leaseTransitions"] = 1
        status, updated = self.srv.put_lease(NS, "cgu", got, client="r2")
        self.assertEqual(status, 200, updated)
        self.assertGreater(int(updated["metadata"]["resourceVersion"]), int(first_rv))
        self.assertEqual(updated["metadata"]["uid"], meta["uid"])
        self.assertEqual(updated["metadata"]["creationTimestamp"], meta["creationTimestamp"])

        stale = lease("cgu", holder="r1", rv=first_rv)
        status, body = self.srv.put_lease(NS, "cgu", stale)
        self.assertEqual(status, 409)
        self.assertEqual(body, {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": CONFLICT_MSG % "cgu", "reason": "Conflict",
            "details": {"name": "cgu", "group": "coordination.k8s.io", "kind": "leases"},
            "code": 409})
        status, still = self.srv.get_lease(NS, "cgu")
        self.assertEqual(still["spec"]["holderIdentity"], "r2")

    def test_no_op_update_keeps_resource_version(self):
        created = self.create("noop")
        status, again = self.srv.put_lease(NS, "noop", created)
        self.assertEqual(status, 200)
        self.assertEqual(again["metadata"]["resourceVersion"],
                         created["metadata"]["resourceVersion"])

    def test_already_exists(self):
        self.create("dup")
        status, body = self.srv.post_lease(NS, lease("dup"), client="r2")
        self.assertEqual(status, 409)
        self.assertEqual(body["reason"], "AlreadyExists")
        self.assertEqual(body["message"], 'leases.coordination.k8s.io "dup" already exists')
        self.assertEqual(body["details"],
                         {"name": "dup", "group": "coordination.k8s.io", "kind": "leases"})

    def test_not_found(self):
        status, body = self.srv.get_lease(NS, "nope")
        self.assertEqual(status, 404)
        self.assertEqual(body["reason"], "NotFound")
        self.assertEqual(body["message"], 'leases.coordination.k8s.io "nope" not found')

    def test_duration_zero_is_invalid(self):
        status, body = self.srv.post_lease(NS, lease("zero", duration=0))
        self.assertEqual(status, 422)
        self.assertEqual(body["reason"], "Invalid")
        self.assertEqual(body["details"]["kind"], "Lease")
        self.assertEqual(body["details"]["causes"], [{
            "reason": "FieldValueInvalid", "message": "Invalid value: 0: must be greater than 0",
            "field": "spec.leaseDurationSeconds"}])
        self.assertEqual(body["message"], 'Lease.coordination.k8s.io "zero" is invalid: '
                         'spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0')
        created = self.create("zero2")
        created["spec"]["leaseDurationSeconds"] = -3
        created["spec"]["leaseTransitions"] = -1
        status, body = self.srv.put_lease(NS, "zero2", created)
        self.assertEqual(status, 422)
        self.assertEqual([c["field"] for c in body["details"]["causes"]],
                         ["spec.leaseDurationSeconds", "spec.leaseTransitions"])

    def test_update_without_resource_version(self):
        self.create("norv")
        status, body = self.srv.put_lease(NS, "norv", lease("norv"))
        self.assertEqual(status, 422)
        self.assertEqual(body["message"], 'leases.coordination.k8s.io "norv" is invalid: '
                         'metadata.resourceVersion: Invalid value: 0x0: must be specified '
                         'for an update')
        self.assertEqual(body["details"]["causes"][0]["field"], "metadata.resourceVersion")

    def test_microtime_needs_six_digits(self):
        for bad in ("2024-05-01T12:00:03.123Z", "2024-05-01T12:00:03Z",
                    "2024-05-01T12:00:03.123456789Z", "2024-05-01 12:00:03.123456Z"):
            status, body = self.srv.post_lease(NS, lease("mt", renewTime=bad))
            self.assertEqual(status, 400, bad)
            self.assertEqual(body["reason"], "BadRequest")
            self.assertEqual(body["kind"], "Status")
        status, obj = self.srv.post_lease(NS, lease("mt", renewTime="2024-05-01T14:00:03.000001+02:00"))
        self.assertEqual(status, 201, obj)
        self.assertEqual(obj["spec"]["renewTime"], "2024-05-01T12:00:03.000001Z")

    def test_wrong_types_and_unknown_fields(self):
        status, body = self.srv.post_lease(NS, lease("types", duration="15"))
        self.assertEqual(status, 400)
        status, body = self.srv.post_lease(NS, lease("types", duration=2 ** 31))
        self.assertEqual(status, 400)
        status, _, _ = self.srv.request("POST", "/apis/coordination.k8s.io/v1/namespaces/"
                                        "default/leases", b"{not json")
        self.assertEqual(status, 400)
        obj = lease("types")
        obj["status"] = {"x": 1}
        obj["spec"]["bogus"] = True
        obj["metadata"]["managedFields"] = [{"manager": "x"}]
        status, created = self.srv.post_lease(NS, obj)
        self.assertEqual(status, 201)
        self.assertNotIn("status", created)
        self.assertNotIn("bogus", created["spec"])
        self.assertNotIn("managedFields", created["metadata"])

    def test_name_rules(self):
        status, body = self.srv.post_lease(NS, lease("Bad_Name"))
        self.assertEqual(status, 422)
        self.assertEqual(body["details"]["causes"][0]["field"], "metadata.name")
        status, body = self.srv.put_lease(NS, "one", lease("two"))
        self.assertEqual(status, 400)
        self.assertEqual(body["message"],
                         "the name of the object (two) does not match the name on the URL (one)")
        other = lease("ns1")
        other["metadata"]["namespace"] = "elsewhere"
        status, body = self.srv.post_lease(NS, other)
        self.assertEqual(status, 400)

    def test_put_creates(self):
        status, obj = self.srv.put_lease(NS, "putnew", lease("putnew"))
        self.assertEqual(status, 201, obj)
        self.assertEqual(self.srv.get_lease(NS, "putnew")[0], 200)

    def test_list_and_delete(self):
        self.create("la")
        self.srv.post_lease("other", lease("lb"))
        status, lst = self.srv.list_leases(NS)
        self.assertEqual(status, 200)
        self.assertEqual(lst["kind"], "LeaseList")
        names = [i["metadata"]["name"] for i in lst["items"]]
        self.assertIn("la", names)
        self.assertNotIn("lb", names)
        self.assertGreaterEqual(int(lst["metadata"]["resourceVersion"]),
                                max(int(i["metadata"]["resourceVersion"]) for i in lst["items"]))
        status, all_ns = self.srv.list_leases()
        self.assertIn(("other", "lb"), [(i["metadata"]["namespace"], i["metadata"]["name"])
                                        for i in all_ns["items"]])
        status, body = self.srv.delete_lease("other", "lb")
        self.assertEqual(status, 200)
        self.assertEqual(body["status"], "Success")
        self.assertEqual(self.srv.get_lease("other", "lb")[0], 404)
        self.assertEqual(self.srv.delete_lease("other", "lb")[0], 404)

    def test_patch(self):
        created = self.create("pa")
        status, obj = self.srv.patch_lease(
            NS, "pa", {"spec": {"holderIdentity": "r2", "$retainKeys": ["x"]},
                       "metadata": {"labels": {"a": "b"}}},
            content_type="application/strategic-merge-patch+json")
        self.assertEqual(status, 200, obj)
        self.assertEqual(obj["spec"]["holderIdentity"], "r2")
        self.assertEqual(obj["spec"]["leaseDurationSeconds"], 15)
        self.assertEqual(obj["metadata"]["labels"], {"a": "b"})
        status, body = self.srv.patch_lease(
            NS, "pa", {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
                       "spec": {"holderIdentity": "r1"}})
        self.assertEqual((status, body["reason"]), (409, "Conflict"))
        status, body = self.srv.patch_lease(NS, "pa", {"spec": {"leaseDurationSeconds": 0}})
        self.assertEqual(status, 422)
        status, _ = self.srv.patch_lease(NS, "pa", {}, content_type="application/apply-patch+yaml")
        self.assertEqual(status, 415)

    def test_raw_documents(self):
        self.srv.put_raw(NS, "raw1", '{"kind":"Lease", not json')
        status, _, data = self.srv.request("GET", "/apis/coordination.k8s.io/v1/namespaces/"
                                           "default/leases/raw1")
        self.assertEqual((status, data), (200, b'{"kind":"Lease", not json'))
        text = json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                           "metadata": {"name": "raw2", "namespace": NS,
                                        "resourceVersion": "777"},
                           "spec": {"holderIdentity": "x", "renewTime": "2024-05-01T12:00:03Z"}})
        self.assertEqual(self.srv.put_raw(NS, "raw2", text), "777")
        status, _, data = self.srv.request("GET", "/apis/coordination.k8s.io/v1/namespaces/"
                                           "default/leases/raw2")
        self.assertEqual(data.decode(), text)
        status, obj = self.srv.put_lease(NS, "raw2", lease("raw2", rv="777"))
        self.assertEqual(status, 200, obj)
        self.assertEqual(obj["spec"]["renewTime"], TS)

    def test_discovery_and_table(self):
        for path in ("/api", "/api/v1", "/apis", "/apis/coordination.k8s.io",
                     "/apis/coordination.k8s.io/v1"):
            status, doc = self.srv.json_request("GET", path)
            self.assertEqual(status, 200, path)
        self.assertEqual(doc["resources"][0]["name"], "leases")
        self.assertTrue(doc["resources"][0]["namespaced"])
        self.create("tbl", holder="holder-x")
        status, table = self.srv.json_request(
            "GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/tbl",
            headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"})
        self.assertEqual(status, 200)
        self.assertEqual([c["name"] for c in table["columnDefinitions"]], ["Name", "Holder", "Age"])
        self.assertEqual(table["rows"][0]["cells"][:2], ["tbl", "holder-x"])


class TestFaults(ServerTestCase):

    def test_latency(self):
        # r1's requests wait; r2's do not: r2 is answered while r1's request,
        # sent first, is still held (an order, not a figure; the latency is
        # long so that a loaded machine cannot make r2 that slow).
        self.create("lat")
        self.srv.set_faults("r1", latency_ms=2000)
        t0 = time.monotonic()
        slow = Background(lambda: self.srv.get_lease(NS, "lat", client="r1"))
        self.assertEqual(self.srv.get_lease(NS, "lat", client="r2")[0], 200)
        self.assertFalse(slow.done.is_set(), "r2 waited for r1's latency")
        self.assertTrue(slow.done.wait(30))
        self.assertGreaterEqual(time.monotonic() - t0, 2.0)
        self.assertIsNone(slow.error)
        self.assertEqual(slow.result[0], 200)

    LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/default/leases/"

    def raw_put(self, name, obj, client="r1", body_bytes=None):
        """Sends a PUT of Lease name on a TLS socket of its own and returns the
        socket, unread, so that the test decides how the client goes away.
        body_bytes sends only that many bytes of the body (Content-Length
        still announces all of it)."""
        body = json.dumps(obj).encode()
        ctx = ssl.create_default_context(cafile=self.srv.ca)
        raw = socket.create_connection(("127.0.0.1", self.srv.port), timeout=10)
        sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        head = ("PUT %s%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
                "Content-Length: %d\r\n\r\n"
                % (self.LEASE_PATH, name, self.srv.port, self.srv.token(client), len(body)))
        sock.sendall(head.encode() + body[:len(body) if body_bytes is None else body_bytes])
        return sock

    @staticmethod
    def reset(sock):
        """Closes sock with a TCP reset (SO_LINGER 0), as leaderd cuts a write."""
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()

    def holder(self, name):
        return self.srv.get_lease(NS, name, client="r2")[1]["spec"]["holderIdentity"]

    def test_an_admitted_put_commits_at_the_end_of_its_hold_after_a_hang_up(self):
        # set_faults' default: commit "admitted", kube-apiserver's behaviour.
        created = self.create("late")
        self.srv.reset_stats()
        out = self.srv.set_faults("r1", latency_ms=1500, verbs=["update"])
        self.assertEqual(out["commit"], "admitted")
        upd = dict(created, spec=dict(created["spec"], holderIdentity="late-writer"))
        t0 = time.monotonic()
        with self.assertRaises(Exception) as cm:
            self.srv.request("PUT", self.LEASE_PATH + "late", upd, client="r1", timeout=0.3)
        self.assertTrue(is_transport_error(cm.exception), repr(cm.exception))
        # The client is gone; the server still holds the write.
        self.assertEqual(self.srv.held("r1", "update"), 1, self.srv.held())
        landed = wait_for(lambda: self.holder("late") == "late-writer" and time.monotonic())
        self.assertIsNotNone(landed, "the admitted PUT never reached the store")
        self.assertGreaterEqual(landed - t0, 1.5, "applied before its hold was over")
        self.assertEqual(self.srv.stats()["r1"]["update"], {"late-200": 1})
        entry = [e for e in self.srv.write_log() if e["name"] == "late"][-1]
        self.assertEqual(entry["holderIdentity"], "late-writer")
        # The log's clock is CLOCK_MONOTONIC, as time.monotonic() is: the
        # commit is stamped at the end of the hold, not at its arrival.
        self.assertGreaterEqual(entry["clock_us"], (t0 + 1.5) * 1e6)
        self.assertEqual(self.srv.held(), {})

    def test_an_admitted_put_commits_although_its_client_resets(self):
        created = self.create("reset-late")
        self.srv.reset_stats()
        self.srv.set_faults("r1", latency_ms=1000, verbs=["update"])
        upd = dict(created, spec=dict(created["spec"], holderIdentity="after-reset"))
        sock = self.raw_put("reset-late", upd)
        wait_for(lambda: self.srv.held("r1", "update") == 1)
        self.reset(sock)
        self.assertIsNotNone(wait_for(lambda: self.holder("reset-late") == "after-reset"),
                             "a reset after admission dropped the write")
        self.assertEqual(self.srv.stats()["r1"]["update"], {"late-200": 1})

    def test_a_reset_before_the_whole_request_is_read_drops_it(self):
        created = self.create("unread")
        self.srv.reset_stats()
        self.srv.set_faults("r1", latency_ms=300, verbs=["update"])
        upd = dict(created, spec=dict(created["spec"], holderIdentity="never"))
        sock = self.raw_put("unread", upd, body_bytes=10)
        # Nothing to await: the server holds nothing, it waits for the body.
        time.sleep(0.3)
        self.assertEqual(self.srv.held(), {})
        self.reset(sock)
        # Absence over a bounded window: longer than the hold would take.
        time.sleep(1.0)
        self.assertEqual(self.holder("unread"), "r1")
        self.assertNotIn("r1", self.srv.stats())

    def test_a_connected_hold_drops_the_abandoned_put(self):
        created = self.create("dropped")
        self.srv.reset_stats()
        self.srv.set_faults("r1", latency_ms=1500, verbs=["update"], commit="connected")
        upd = dict(created, spec=dict(created["spec"], holderIdentity="never"))
        with self.assertRaises(Exception):
            self.srv.request("PUT", self.LEASE_PATH + "dropped", upd, client="r1",
                             timeout=0.3)
        seen = wait_for(lambda: self.srv.stats().get("r1", {}).get("update", {})
                        .get("disconnected"))
        self.assertEqual(seen, 1)
        self.assertEqual(self.holder("dropped"), "r1")

    def test_a_hang_up_during_a_hang_partition_drops_the_put(self):
        # The partition stands for the network: the request was never read,
        # whatever the commit rule of a latency hold.
        created = self.create("parted")
        self.srv.reset_stats()
        self.srv.set_faults("r1", partition="hang", latency_ms=100, verbs=["update"])
        upd = dict(created, spec=dict(created["spec"], holderIdentity="never"))
        sock = self.raw_put("parted", upd)
        self.assertEqual(wait_for(lambda: self.srv.held().get("r1", {}).get("update")),
                         {"partition": 1})
        self.reset(sock)
        seen = wait_for(lambda: self.srv.stats().get("r1", {}).get("update", {})
                        .get("disconnected"))
        self.assertEqual(seen, 1)
        self.srv.clear_faults("r1")
        self.assertEqual(self.holder("parted"), "r1")
        self.assertEqual(self.srv.held(), {})

    def test_commit_in_fault_json(self):
        ctl = lambda body: self.srv.request("POST", "/_control/faults", body,  # noqa: E731
                                            token=self.srv.token("admin"))[0]
        # The server's own default stays "connected"; apply_late is the
        # older name of "admitted" and is still reported.
        out = self.srv.control("POST", "faults", {"client": "r2", "latency_ms": 10})
        self.assertEqual((out["commit"], out["apply_late"]), ("connected", False))
        for body in ({"commit": "admitted"}, {"apply_late": True},
                     {"commit": "admitted", "apply_late": True}):
            out = self.srv.control("POST", "faults", dict(body, client="r2", latency_ms=10))
            self.assertEqual((out["commit"], out["apply_late"]), ("admitted", True), body)
            self.assertEqual(self.srv.faults()["r2"]["commit"], "admitted")
        out = self.srv.control("POST", "faults", {"client": "r2", "commit": "connected",
                                                  "apply_late": False})
        self.assertEqual(out["commit"], "connected")
        for bad in ({"apply_late": "yes"}, {"commit": "later"}, {"commit": True},
                    {"commit": "connected", "apply_late": True},
                    {"commit": "admitted", "apply_late": False}):
            self.assertEqual(ctl(dict(bad, client="r1")), 400, bad)

    def test_error_rate(self):
        self.create("err")
        self.srv.set_faults("r1", error_rate=1.0, error_code=503)
        for _ in range(3):
            status, body = self.srv.get_lease(NS, "err", client="r1")
            self.assertEqual(status, 503)
            self.assertEqual((body["kind"], body["reason"], body["code"]),
                             ("Status", "ServiceUnavailable", 503))
        self.assertEqual(self.srv.get_lease(NS, "err", client="r2")[0], 200)
        self.srv.set_faults("r1", error_rate=1.0, verbs=["update"])
        self.assertEqual(self.srv.get_lease(NS, "err", client="r1")[0], 200)
        self.assertEqual(self.srv.put_lease(NS, "err", lease("err", rv="1"), client="r1")[0], 500)

    def test_throttle(self):
        self.srv.set_faults("r2", throttle={"rate": 1.0, "retry_after": 2})
        status, headers, body = self.srv.request("GET", "/apis/coordination.k8s.io/v1/"
                                                 "namespaces/default/leases", client="r2")
        self.assertEqual(status, 429)
        self.assertEqual(headers["Retry-After"], "2")
        self.assertTrue(headers["Content-Type"].startswith("text/plain"))
        self.assertEqual(body, b"Too many requests, please try again later.\n")

    def test_hang_released_by_clear(self):
        self.create("hang")
        self.srv.set_faults("r1", partition="hang")
        bg = Background(lambda: self.srv.get_lease(NS, "hang", client="r1"))
        self.assertFalse(bg.done.wait(0.5), "a hung request was answered")
        self.assertEqual(self.srv.get_lease(NS, "hang", client="r2")[0], 200)
        self.srv.clear_faults("r1")
        self.assertTrue(bg.done.wait(10), "clearing the fault did not release the request")
        self.assertIsNone(bg.error)
        self.assertEqual(bg.result[0], 200)

    def test_hang_until_client_disconnects(self):
        self.srv.reset_stats()
        self.srv.set_faults("r2", partition="hang")
        with self.assertRaises(Exception) as cm:
            self.srv.request("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/x",
                             client="r2", timeout=0.3)
        self.assertTrue(is_transport_error(cm.exception), repr(cm.exception))
        seen = wait_for(lambda: self.srv.stats().get("r2", {}).get("get", {})
                        .get("disconnected"))
        self.assertEqual(seen, 1)

    def test_reset(self):
        self.srv.reset_stats()
        self.srv.set_faults("r1", partition="reset")
        with self.assertRaises(Exception) as cm:
            self.srv.get_lease(NS, "x", client="r1")
        self.assertTrue(is_transport_error(cm.exception), repr(cm.exception))
        self.assertEqual(self.srv.stats()["r1"]["get"], {"reset": 1})

    def test_pause(self):
        self.create("pause")
        self.srv.pause()
        bg = Background(lambda: self.srv.get_lease(NS, "pause", client="r2"))
        self.assertFalse(bg.done.wait(0.5), "a request was answered while paused")
        self.srv.resume()
        self.assertTrue(bg.done.wait(10))
        self.assertEqual(bg.result[0], 200)

    def test_bad_fault_body(self):
        status, _, _ = self.srv.request("POST", "/_control/faults",
                                        {"client": "r1", "error_rate": 2},
                                        token=self.srv.token("admin"))
        self.assertEqual(status, 400)


class TestLargeObjects(ServerTestCase):
    """Objects as large as kube-apiserver takes (request bodies up to 3 MiB) and
    strings Go's JSON decoder accepts (a NUL byte) go through every path."""

    MIB = 1 << 20

    def test_megabyte_holder_create_get_watch(self):
        big = "h" * self.MIB
        created = self.create("bigholder")
        w = self.srv.open_watch(NS, "bigholder",
                                resource_version=created["metadata"]["resourceVersion"],
                                timeout_seconds=30)
        try:
            upd = dict(created, spec=dict(created["spec"], holderIdentity=big))
            status, updated = self.srv.put_lease(NS, "bigholder", upd)
            self.assertEqual(status, 200)
            self.assertEqual(self.srv.get_lease(NS, "bigholder")[1], updated)
            ev = w.next_event()
            self.assertEqual(ev["type"], "MODIFIED")
            self.assertEqual(ev["object"]["spec"]["holderIdentity"], big)
        finally:
            w.close()
        entry = [e for e in self.srv.write_log() if e["name"] == "bigholder"][-1]
        self.assertEqual(entry["holderIdentity"], "h" * 256 + "...(%d bytes)" % self.MIB)

    def test_megabyte_annotations_survive_an_update(self):
        ann = {"chaos/blob": "a" * self.MIB}
        obj = lease("bigann", holder="ghost")
        obj["metadata"]["annotations"] = ann
        status, created = self.srv.post_lease(NS, obj)
        self.assertEqual(status, 201)
        upd = dict(created, spec=dict(created["spec"], holderIdentity="r2"))
        status, updated = self.srv.put_lease(NS, "bigann", upd, client="r2")
        self.assertEqual(status, 200)
        self.assertEqual(updated["metadata"]["annotations"], ann)

    def test_raw_megabyte_lease_is_stamped(self):
        holder = "x" + "\u00e9" * (self.MIB // 2)  # the log's 256-byte cut falls inside one
        text = json.dumps(dict(lease("rawbig", holder=holder),
                               metadata={"name": "rawbig", "namespace": NS}),
                          ensure_ascii=False)
        rv = self.srv.control("PUT", "raw/%s/rawbig?stamp=1" % NS, raw=text.encode())[
            "resourceVersion"]
        status, got = self.srv.get_lease(NS, "rawbig")
        self.assertEqual((status, got["metadata"]["resourceVersion"]), (200, rv))
        self.assertEqual(got["spec"]["holderIdentity"], holder)
        entry = [e for e in self.srv.write_log() if e["name"] == "rawbig"][-1]
        self.assertEqual(entry["holderIdentity"],
                         holder[:128] + "...(%d bytes)" % len(holder.encode()))

    def test_nul_in_holder(self):
        status, created = self.srv.post_lease(NS, lease("nul", holder="gh\x00ost"))
        self.assertEqual(status, 201, created)
        self.assertEqual(created["spec"]["holderIdentity"], "gh\x00ost")
        _, _, data = self.srv.request("GET", "/apis/coordination.k8s.io/v1/namespaces/"
                                      "default/leases/nul")
        self.assertIn(b'"gh\\u0000ost"', data)
        text = json.dumps(lease("nulraw", holder="x\x00y"))
        rv = self.srv.control("PUT", "raw/%s/nulraw?stamp=1" % NS, raw=text)[
            "resourceVersion"]
        self.assertEqual(self.srv.get_lease(NS, "nulraw")[1]["metadata"]["resourceVersion"],
                         rv)

    def test_body_over_three_mib_is_413(self):
        obj = lease("toobig", holder="h" * (3 * self.MIB))
        status, body = self.srv.post_lease(NS, obj)
        self.assertEqual((status, body["reason"]), (413, "RequestEntityTooLarge"))
        self.assertEqual(self.srv.get_lease(NS, "toobig")[0], 404)


class TestControl(ServerTestCase):

    def test_write_log(self):
        before = self.srv.write_log()
        since = before[-1]["seq"] if before else 0
        created = self.create("logged", holder="r1")
        upd = dict(created, spec=dict(created["spec"], holderIdentity="r2", leaseTransitions=1))
        self.assertEqual(self.srv.put_lease(NS, "logged", upd, client="r2")[0], 200)
        self.assertEqual(self.srv.put_lease(NS, "logged", upd, client="r2")[0], 409)
        entries = self.srv.write_log(since)
        self.assertEqual([(e["client"], e["verb"], e["name"], e["holderIdentity"],
                           e["leaseTransitions"]) for e in entries],
                         [("r1", "create", "logged", "r1", 0),
                          ("r2", "update", "logged", "r2", 1)])
        self.assertEqual(entries[1]["seq"], entries[0]["seq"] + 1)
        self.assertLessEqual(entries[0]["mono_ms"], entries[1]["mono_ms"])
        self.assertRegex(entries[0]["wall"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
        self.assertEqual(entries[0]["resourceVersion"], created["metadata"]["resourceVersion"])

    def test_stats(self):
        self.srv.reset_stats()
        self.srv.get_lease(NS, "missing-for-stats", client="r2")
        self.srv.list_leases(NS, client="r2")
        stats = self.srv.stats()
        self.assertEqual(stats["r2"]["get"], {"404": 1})
        self.assertEqual(stats["r2"]["list"], {"200": 1})

    def test_rotate_and_revoke(self):
        old = self.srv.token("r2")
        new = self.srv.rotate_token("r2")
        self.assertNotEqual(old, new)
        self.assertEqual(self.srv.token("r2"), new)
        with open(self.srv.kubeconfig("r2")) as f:
            self.assertIn(new, f.read())
        self.assertEqual(self.srv.list_leases(NS, client="r2")[0], 200)
        status, _ = self.srv.json_request("GET", "/apis/coordination.k8s.io/v1/leases", token=old)
        self.assertEqual(status, 401)
        newer = self.srv.rotate_token("r2", grace_ms=60000)
        status, _ = self.srv.json_request("GET", "/apis/coordination.k8s.io/v1/leases", token=new)
        self.assertEqual(status, 200, "the old token must work during the grace period")
        self.srv.revoke_token("r2")
        for tok in (new, newer):
            status, _ = self.srv.json_request("GET", "/apis/coordination.k8s.io/v1/leases",
                                              token=tok)
            self.assertEqual(status, 401)
        self.srv.rotate_token("r2")
        self.assertEqual(self.srv.list_leases(NS, client="r2")[0], 200)


class TestWatch(ServerTestCase):

    def test_watch_sees_changes(self):
        created = self.create("w1")
        w = self.srv.open_watch(NS, "w1", resource_version=created["metadata"]["resourceVersion"],
                                timeout_seconds=30)
        try:
            self.create("w-other")  # filtered out by the field selector
            upd = dict(created, spec=dict(created["spec"], holderIdentity="r2"))
            status, updated = self.srv.put_lease(NS, "w1", upd)
            self.assertEqual(status, 200)
            ev = w.next_event()
            self.assertEqual(ev["type"], "MODIFIED")
            self.assertEqual(ev["object"], updated)
            self.srv.delete_lease(NS, "w1")
            ev = w.next_event()
            self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("DELETED", "w1"))
        finally:
            w.close()

    def test_watch_initial_state_and_timeout(self):
        self.create("w2")
        t0 = time.monotonic()
        w = self.srv.open_watch(NS, "w2", timeout_seconds=1)
        try:
            ev = w.next_event()
            self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "w2"))
            self.assertIsNone(w.next_event())
            # Ended by the server at its timeoutSeconds (1 s), not by the
            # client's read timeout (10 s).
            self.assertLess(time.monotonic() - t0, 8)
        finally:
            w.close()

    def test_watch_cut_by_reset_fault(self):
        created = self.create("w3")
        w = self.srv.open_watch(NS, "w3", resource_version=created["metadata"]["resourceVersion"],
                                client="r2", timeout=10)
        try:
            self.srv.set_faults("r2", partition="reset")
            with self.assertRaises(Exception) as cm:
                w.next_event()
            self.assertTrue(is_transport_error(cm.exception), repr(cm.exception))
        finally:
            w.close()

    def test_watch_bad_resource_version(self):
        status, body = self.srv.json_request(
            "GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases?watch=1"
            "&resourceVersion=abc")
        self.assertEqual(status, 400)


def labelled(name, labels, **kw):
    obj = lease(name, **kw)
    if labels is not None:
        obj["metadata"]["labels"] = labels
    return obj


QNAME_RULE = ("must consist of alphanumeric characters, '-', '_' or '.', and must start "
              "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
              "'123-abc', regex used for validation is "
              "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
VALUE_RULE = ("a valid label must be an empty string or consist of alphanumeric "
              "characters, '-', '_' or '.', and must start and end with an alphanumeric "
              "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
              "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


class TestLabelSelector(ServerTestCase):
    """labelSelector on list and watch, as apimachinery's labels.Parse reads it."""

    NS = "lsel"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        for name, labels in (("a", {"app": "x", "tier": "web", "example.com/shard": "3"}),
                             ("b", {"app": "y", "tier": ""}),
                             ("c", None),
                             ("d", {"app": "x", "canary": "true"})):
            status, obj = cls.srv.post_lease(cls.NS, labelled(name, labels))
            if status != 201:
                raise AssertionError(obj)

    def names(self, selector, **kw):
        status, lst = self.srv.list_leases(self.NS, label_selector=selector, **kw)
        self.assertEqual(status, 200, lst)
        self.assertEqual(lst["kind"], "LeaseList")
        return [i["metadata"]["name"] for i in lst["items"]]

    def test_list_operators(self):
        cases = {
            "app=x": ["a", "d"],
            "app==x": ["a", "d"],
            "app!=x": ["b", "c"],  # an absent key passes !=
            "app in (x,y)": ["a", "b", "d"],
            "app notin (x)": ["b", "c"],
            "app": ["a", "b", "d"],
            "!app": ["c"],
            "app=x,!canary": ["a"],
            "tier=": ["b"],  # the empty value
            "tier in ()": ["b"],
            "tier in (web,)": ["a", "b"],
            "example.com/shard>2": ["a"],
            "example.com/shard<3": [],
            "  app  =  x  ,  tier  ": ["a"],
            "app in (in)": [],  # "in" is a value here, not a keyword
            "": ["a", "b", "c", "d"],
        }
        for selector, want in cases.items():
            with self.subTest(selector=selector):
                self.assertEqual(self.names(selector), want)

    def test_combined_with_field_selector(self):
        self.assertEqual(self.names("app=x", field_selector="metadata.name=d"), ["d"])
        self.assertEqual(self.names("app=y", field_selector="metadata.name=d"), [])
        status, lst = self.srv.list_leases(None, label_selector="app=x",
                                           field_selector="metadata.namespace=" + self.NS)
        self.assertEqual([i["metadata"]["name"] for i in lst["items"]], ["a", "d"])

    def test_list_version_is_the_store_revision(self):
        status, before = self.srv.list_leases(self.NS, label_selector="app=nobody")
        self.assertEqual(before["items"], [])
        created = self.create("lsel-rev")
        status, after = self.srv.list_leases(self.NS, label_selector="app=nobody")
        # Nothing matched either time, yet the list version moved with the store.
        self.assertEqual(after["metadata"]["resourceVersion"],
                         created["metadata"]["resourceVersion"])
        self.assertGreater(int(after["metadata"]["resourceVersion"]),
                           int(before["metadata"]["resourceVersion"]))

    def test_bad_selectors_are_400_with_parse_errors(self):
        cases = {
            "app x": "unable to parse requirement: found 'x', expected: in, notin, =, ==, "
                     "!=, gt, lt",
            "app in": "unable to parse requirement: found '' expected: '('",
            "app in (x": "unable to parse requirement: found '', expected: ',' or ')'",
            "app=x,": "found '', expected: identifier after ','",
            ",app": "found ',', expected: !, identifier, or 'end of string'",
            "!app=x": "found '=', expected: ',' or 'end of string'",
            "app=(x)": "unable to parse requirement: found '(', expected: identifier",
            "a_/b": "unable to parse requirement: <nil>: Invalid value: \"a_/b\": prefix "
                    "part a lowercase RFC 1123 subdomain must consist of lower case "
                    "alphanumeric characters, '-' or '.', and must start and end with an "
                    "alphanumeric character (e.g. 'example.com', regex used for validation "
                    "is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            "k" * 64: "unable to parse requirement: <nil>: Invalid value: \"%s\": name part "
                      "must be no more than 63 characters" % ("k" * 64),
            "-app": "unable to parse requirement: <nil>: Invalid value: \"-app\": name part "
                    + QNAME_RULE,
            "app=-x": "unable to parse requirement: values[0][app]: Invalid value: \"-x\": "
                      + VALUE_RULE,
            "n>x": "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', "
                   "'Lt' operators, the value must be an integer",
        }
        for selector, message in cases.items():
            with self.subTest(selector=selector):
                status, body = self.srv.list_leases(self.NS, label_selector=selector)
                self.assertEqual(status, 400, body)
                self.assertEqual((body["kind"], body["status"], body["reason"], body["code"]),
                                 ("Status", "Failure", "BadRequest", 400))
                self.assertEqual(body["message"], message)
        status, body = self.srv.json_request(
            "GET", "/apis/coordination.k8s.io/v1/namespaces/lsel/leases?watch=1"
            "&labelSelector=app%20x")
        self.assertEqual((status, body["reason"]), (400, "BadRequest"))

    def test_watch_initial_events_follow_the_selector(self):
        w = self.srv.open_watch(self.NS, label_selector="app=x", timeout_seconds=1)
        try:
            events = []
            for _ in range(10):
                ev = w.next_event()
                if ev is None:
                    break
                events.append(ev)
            self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events],
                             [("ADDED", "a"), ("ADDED", "d")])
        finally:
            w.close()

    def test_watch_events_follow_the_selector(self):
        ns = "lsel-watch"
        status, e1 = self.srv.post_lease(ns, labelled("e1", {"group": "g1"}))
        self.assertEqual(status, 201, e1)
        status, e2 = self.srv.post_lease(ns, labelled("e2", {"group": "g2"}))
        self.assertEqual(status, 201, e2)
        w = self.srv.open_watch(ns, label_selector="group=g1", timeout_seconds=60,
                                resource_version=e2["metadata"]["resourceVersion"])
        try:
            # e1 leaves the selection: DELETED with its last matching state.
            moved = json.loads(json.dumps(e1))
            moved["metadata"]["labels"] = {"group": "g2"}
            status, e1_out = self.srv.put_lease(ns, "e1", moved)
            self.assertEqual(status, 200, e1_out)
            ev = w.next_event()
            self.assertEqual(ev["type"], "DELETED")
            self.assertEqual(ev["object"]["metadata"]["labels"], {"group": "g1"})
            self.assertEqual(ev["object"]["metadata"]["resourceVersion"],
                             e1_out["metadata"]["resourceVersion"])
            self.assertEqual(ev["object"]["spec"], e1["spec"])
            # A change outside the selection is not sent; e2 joining it is ADDED.
            e1_out["spec"]["holderIdentity"] = "r2"
            status, _ = self.srv.put_lease(ns, "e1", e1_out)
            self.assertEqual(status, 200)
            joined = json.loads(json.dumps(e2))
            joined["metadata"]["labels"] = {"group": "g1"}
            status, e2_in = self.srv.put_lease(ns, "e2", joined)
            self.assertEqual(status, 200, e2_in)
            ev = w.next_event()
            self.assertEqual((ev["type"], ev["object"]), ("ADDED", e2_in))
            # Inside the selection: MODIFIED, then DELETED on delete.
            e2_in["spec"]["holderIdentity"] = "r2"
            status, e2_mod = self.srv.put_lease(ns, "e2", e2_in)
            self.assertEqual(status, 200, e2_mod)
            ev = w.next_event()
            self.assertEqual((ev["type"], ev["object"]), ("MODIFIED", e2_mod))
            status, _ = self.srv.delete_lease(ns, "e2")
            self.assertEqual(status, 200)
            ev = w.next_event()
            self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("DELETED", "e2"))
            self.assertGreater(int(ev["object"]["metadata"]["resourceVersion"]),
                               int(e2_mod["metadata"]["resourceVersion"]))
        finally:
            w.close()

    def test_watch_selector_via_patch(self):
        ns = "lsel-patch"
        status, p1 = self.srv.post_lease(ns, labelled("p1", None))
        self.assertEqual(status, 201, p1)
        w = self.srv.open_watch(ns, label_selector="shard in (0,1)", timeout_seconds=60,
                                resource_version=p1["metadata"]["resourceVersion"])
        try:
            status, joined = self.srv.patch_lease(ns, "p1", {"metadata": {"labels": {"shard": "1"}}})
            self.assertEqual(status, 200, joined)
            ev = w.next_event()
            self.assertEqual((ev["type"], ev["object"]), ("ADDED", joined))
            status, left = self.srv.patch_lease(ns, "p1", {"metadata": {"labels": None}})
            self.assertEqual(status, 200, left)
            ev = w.next_event()
            self.assertEqual(ev["type"], "DELETED")
            self.assertEqual(ev["object"]["metadata"]["labels"], {"shard": "1"})
            self.assertEqual(ev["object"]["metadata"]["resourceVersion"],
                             left["metadata"]["resourceVersion"])
        finally:
            w.close()


class TestWatchStart(ServerTestCase):
    """Where a watch starts, by resourceVersion, as kube-apiserver's watch cache does."""

    def events_until_end(self, w, limit=20):
        events = []
        for _ in range(limit):
            ev = w.next_event()
            if ev is None:
                break
            events.append((ev["type"], ev["object"]["metadata"]["name"]))
        return events

    def test_unset_empty_and_zero_start_with_the_current_state(self):
        ns = "wstart-initial"
        for name in ("s2", "s1"):
            self.assertEqual(self.srv.post_lease(ns, lease(name))[0], 201)
        for rv in (None, "", "0"):
            with self.subTest(resource_version=rv):
                w = self.srv.open_watch(ns, resource_version=rv, timeout_seconds=1)
                try:
                    self.assertEqual(self.events_until_end(w),
                                     [("ADDED", "s1"), ("ADDED", "s2")])
                finally:
                    w.close()

    def test_list_then_watch_from_the_list_version(self):
        ns = "wstart-list"
        status, old = self.srv.post_lease(ns, lease("old"))
        self.assertEqual(status, 201, old)
        status, lst = self.srv.list_leases(ns)
        self.assertEqual([i["metadata"]["name"] for i in lst["items"]], ["old"])
        # A write in another namespace moves the store revision past the list's.
        self.assertEqual(self.srv.post_lease("wstart-elsewhere", lease("x"))[0], 201)
        w = self.srv.open_watch(ns, resource_version=lst["metadata"]["resourceVersion"],
                                timeout_seconds=60)
        try:
            status, new = self.srv.post_lease(ns, lease("new"))
            self.assertEqual(status, 201, new)
            ev = w.next_event()
            # No replay of "old": the list already had it.
            self.assertEqual((ev["type"], ev["object"]), ("ADDED", new))
            old["spec"]["holderIdentity"] = "r2"
            status, upd = self.srv.put_lease(ns, "old", old)
            self.assertEqual(status, 200, upd)
            ev = w.next_event()
            self.assertEqual((ev["type"], ev["object"]), ("MODIFIED", upd))
        finally:
            w.close()

    def test_watch_from_a_version_replays_what_followed_it(self):
        ns = "wstart-replay"
        status, a = self.srv.post_lease(ns, lease("a"))
        self.assertEqual(status, 201, a)
        status, b = self.srv.post_lease(ns, lease("b"))
        self.assertEqual(status, 201, b)
        w = self.srv.open_watch(ns, resource_version=a["metadata"]["resourceVersion"],
                                timeout_seconds=1)
        try:
            self.assertEqual(self.events_until_end(w), [("ADDED", "b")])
        finally:
            w.close()


class TestLabelsAndOwners(ServerTestCase):
    """metadata.labels and metadata.ownerReferences: kept, returned, validated."""

    OWNER = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
             "uid": "6f0c9e4e-8d5b-4f7e-9a43-5d1c1f0b7a11", "controller": True,
             "blockOwnerDeletion": True}

    def test_kept_on_create_update_and_returned_everywhere(self):
        ns = "meta-keep"
        obj = labelled("k1", {"app": "x", "example.com/shard": "0"})
        obj["metadata"]["ownerReferences"] = [dict(self.OWNER, extra="dropped")]
        status, created = self.srv.post_lease(ns, obj)
        self.assertEqual(status, 201, created)
        meta = created["metadata"]
        self.assertEqual(meta["labels"], {"app": "x", "example.com/shard": "0"})
        self.assertEqual(meta["ownerReferences"], [self.OWNER])
        self.assertEqual(self.srv.get_lease(ns, "k1"), (200, created))
        status, lst = self.srv.list_leases(ns)
        self.assertEqual(lst["items"], [created])
        w = self.srv.open_watch(ns, timeout_seconds=1)
        try:
            ev = w.next_event()
            self.assertEqual((ev["type"], ev["object"]), ("ADDED", created))
        finally:
            w.close()
        created["metadata"]["labels"]["app"] = "y"
        status, updated = self.srv.put_lease(ns, "k1", created)
        self.assertEqual(status, 200, updated)
        self.assertEqual(updated["metadata"]["labels"], {"app": "y", "example.com/shard": "0"})
        self.assertEqual(updated["metadata"]["ownerReferences"], [self.OWNER])
        self.assertEqual(self.srv.get_lease(ns, "k1"), (200, updated))

    def invalid(self, obj):
        status, body = self.srv.post_lease("meta-bad", obj)
        self.assertEqual(status, 422, body)
        self.assertEqual((body["reason"], body["details"]["kind"]), ("Invalid", "Lease"))
        return body

    def test_bad_label_key_and_value_are_422(self):
        body = self.invalid(labelled("bad-key", {"-app": "x"}))
        self.assertEqual(body["message"],
                         'Lease.coordination.k8s.io "bad-key" is invalid: metadata.labels: '
                         'Invalid value: "-app": name part ' + QNAME_RULE)
        self.assertEqual(body["details"]["causes"],
                         [{"reason": "FieldValueInvalid", "field": "metadata.labels",
                           "message": 'Invalid value: "-app": name part ' + QNAME_RULE}])
        body = self.invalid(labelled("bad-value", {"app": "x" * 64}))
        self.assertEqual([c["message"] for c in body["details"]["causes"]],
                         ['Invalid value: "%s": must be no more than 63 characters' % ("x" * 64)])
        body = self.invalid(labelled("bad-prefix", {"Example.com/app": "x", "a/b/c": "y_"}))
        self.assertEqual([(c["field"], c["message"]) for c in body["details"]["causes"]],
                         [("metadata.labels", 'Invalid value: "Example.com/app": prefix part '
                           "a lowercase RFC 1123 subdomain must consist of lower case "
                           "alphanumeric characters, '-' or '.', and must start and end with "
                           "an alphanumeric character (e.g. 'example.com', regex used for "
                           "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]"
                           "([-a-z0-9]*[a-z0-9])?)*')"),
                          ("metadata.labels", 'Invalid value: "a/b/c": a qualified name '
                           + QNAME_RULE + " with an optional DNS subdomain prefix and '/' "
                           "(e.g. 'example.com/MyName')"),
                          ("metadata.labels", 'Invalid value: "y_": ' + VALUE_RULE)])
        self.assertTrue(body["message"].startswith(
            'Lease.coordination.k8s.io "bad-prefix" is invalid: [metadata.labels: '))
        # The same rules on update.
        status, ok = self.srv.post_lease("meta-bad", labelled("upd", {"app": "x"}))
        self.assertEqual(status, 201, ok)
        ok["metadata"]["labels"] = {"app": "bad value"}
        status, body = self.srv.put_lease("meta-bad", "upd", ok)
        self.assertEqual(status, 422, body)
        self.assertEqual(body["details"]["causes"][0]["message"],
                         'Invalid value: "bad value": ' + VALUE_RULE)

    def test_owner_reference_required_fields_are_422(self):
        obj = lease("no-owner-fields")
        obj["metadata"]["ownerReferences"] = [{"apiVersion": "apps/", "controller": False}]
        body = self.invalid(obj)
        self.assertEqual(
            [(c["field"], c["message"]) for c in body["details"]["causes"]],
            [("metadata.ownerReferences.apiVersion",
              'Invalid value: "apps/": version must not be empty'),
             ("metadata.ownerReferences.kind", 'Invalid value: "": must not be empty'),
             ("metadata.ownerReferences.name", 'Invalid value: "": must not be empty'),
             ("metadata.ownerReferences.uid", 'Invalid value: "": must not be empty')])
        obj["metadata"]["ownerReferences"] = [dict(self.OWNER, apiVersion="v1")]
        status, created = self.srv.post_lease("meta-bad", obj)
        self.assertEqual(status, 201, created)  # the core group has no group part

    def test_owner_reference_wrong_types_are_400(self):
        obj = lease("owner-types")
        obj["metadata"]["ownerReferences"] = [dict(self.OWNER, uid=5)]
        status, body = self.srv.post_lease("meta-bad", obj)
        self.assertEqual(status, 400, body)
        self.assertIn("cannot unmarshal number into Go struct field "
                      "OwnerReference.metadata.ownerReferences.uid of type string",
                      body["message"])
        obj["metadata"]["ownerReferences"] = ["web"]
        status, body = self.srv.post_lease("meta-bad", obj)
        self.assertEqual(status, 400, body)


class TestDelete(ServerTestCase):
    """DELETE of a Lease with DeleteOptions preconditions."""

    NS = "del"

    def test_success_answer_and_watch_event(self):
        status, created = self.srv.post_lease(self.NS, lease("d1"))
        self.assertEqual(status, 201, created)
        w = self.srv.open_watch(self.NS, "d1", timeout_seconds=60,
                                resource_version=created["metadata"]["resourceVersion"])
        try:
            status, body = self.srv.delete_lease(self.NS, "d1", options={
                "kind": "DeleteOptions", "apiVersion": "v1",
                "preconditions": {"uid": created["metadata"]["uid"],
                                  "resourceVersion": created["metadata"]["resourceVersion"]}})
            self.assertEqual(status, 200, body)
            # A Lease delete answers a Status, not the object (no ReturnDeletedObject).
            self.assertEqual(body, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                    "status": "Success",
                                    "details": {"name": "d1", "group": "coordination.k8s.io",
                                                "kind": "leases",
                                                "uid": created["metadata"]["uid"]}})
            ev = w.next_event()
            self.assertEqual(ev["type"], "DELETED")
            self.assertEqual(ev["object"]["spec"], created["spec"])
            self.assertGreater(int(ev["object"]["metadata"]["resourceVersion"]),
                               int(created["metadata"]["resourceVersion"]))
        finally:
            w.close()
        status, body = self.srv.delete_lease(self.NS, "d1")
        self.assertEqual((status, body["reason"], body["message"]),
                         (404, "NotFound", 'leases.coordination.k8s.io "d1" not found'))

    def test_precondition_mismatch_is_409(self):
        status, created = self.srv.post_lease(self.NS, lease("d2"))
        self.assertEqual(status, 201, created)
        uid, rv = created["metadata"]["uid"], created["metadata"]["resourceVersion"]
        # rest.BeforeDelete's wording: the kind, not the resource, names the object.
        prefix = 'Operation cannot be fulfilled on Lease.coordination.k8s.io "d2": '
        uid_why = ("the UID in the precondition (%s) does not match the UID in record (%s). "
                   "The object might have been deleted and then recreated")
        cases = [
            ({"uid": "not-the-uid"}, uid_why % ("not-the-uid", uid)),
            ({"resourceVersion": "1"},
             "the ResourceVersion in the precondition (1) does not match the ResourceVersion "
             "in record (%s). The object might have been modified" % rv),
            # The uid is checked before the version.
            ({"uid": "x", "resourceVersion": "1"}, uid_why % ("x", uid)),
            # A precondition is a pointer: "" is a value, and it does not match.
            ({"uid": ""}, uid_why % ("", uid)),
        ]
        for pre, why in cases:
            with self.subTest(preconditions=pre):
                status, body = self.srv.delete_lease(self.NS, "d2",
                                                     options={"preconditions": pre})
                self.assertEqual(status, 409, body)
                self.assertEqual((body["reason"], body["message"]), ("Conflict", prefix + why))
                self.assertEqual(body["details"], {"name": "d2", "group": "coordination.k8s.io",
                                                   "kind": "Lease"})
        self.assertEqual(self.srv.get_lease(self.NS, "d2"), (200, created))
        status, body = self.srv.delete_lease(self.NS, "d2", options={"preconditions": {
            "uid": uid, "resourceVersion": None}})
        self.assertEqual(status, 200, body)
        self.assertEqual(self.srv.get_lease(self.NS, "d2")[0], 404)

    def test_bad_delete_options_are_400(self):
        status, created = self.srv.post_lease(self.NS, lease("d3"))
        self.assertEqual(status, 201, created)
        for body in ('{"preconditions": {"uid": 5}}', '{"preconditions": []}', "[]", "{"):
            with self.subTest(body=body):
                status, reply = self.srv.json_request(
                    "DELETE", "/apis/coordination.k8s.io/v1/namespaces/del/leases/d3", body)
                self.assertEqual((status, reply["reason"]), (400, "BadRequest"))
        self.assertEqual(self.srv.get_lease(self.NS, "d3")[0], 200)


def configmap(name, data=None, labels=None, **fields):
    obj = dict({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}},
               **fields)
    if data is not None:
        obj["data"] = data
    if labels is not None:
        obj["metadata"]["labels"] = labels
    return obj


def status_body(code, reason, message, details=None):
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    if details is not None:
        body["details"] = details
    return body


CM_CONFLICT = ('Operation cannot be fulfilled on configmaps "%s": the object has been '
               'modified; please apply your changes to the latest version and try again')


class TestConfigMaps(ServerTestCase):
    """core/v1 ConfigMaps: the Lease store's semantics with the core group's Status
    bodies (no group in details, bare resource names in messages)."""

    NS = "cm"

    def cm_create(self, name, **kw):
        status, obj = self.srv.post_configmap(self.NS, configmap(name, **kw))
        self.assertEqual(status, 201, obj)
        return obj

    def test_create_get_conflict_update(self):
        created = self.cm_create("c1", data={"k": "v"}, labels={"app": "x"})
        self.assertEqual((created["kind"], created["apiVersion"]), ("ConfigMap", "v1"))
        meta = created["metadata"]
        self.assertEqual((meta["name"], meta["namespace"], meta["labels"]),
                         ("c1", self.NS, {"app": "x"}))
        self.assertRegex(meta["uid"], r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-")
        self.assertRegex(meta["creationTimestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual(created["data"], {"k": "v"})
        self.assertEqual(self.srv.get_configmap(self.NS, "c1"), (200, created))
        self.assertEqual(self.srv.post_configmap(self.NS, configmap("c1")), (409, status_body(
            409, "AlreadyExists", 'configmaps "c1" already exists',
            {"name": "c1", "kind": "configmaps"})))
        status, updated = self.srv.put_configmap(self.NS, "c1", dict(created, data={"k": "v2"}))
        self.assertEqual(status, 200, updated)
        self.assertEqual(updated["data"], {"k": "v2"})
        self.assertEqual(updated["metadata"]["uid"], meta["uid"])
        self.assertGreater(int(updated["metadata"]["resourceVersion"]),
                           int(meta["resourceVersion"]))
        # The version the first PUT consumed is stale now.
        status, body = self.srv.put_configmap(self.NS, "c1", dict(created, data={"k": "v3"}))
        self.assertEqual((status, body), (409, status_body(
            409, "Conflict", CM_CONFLICT % "c1", {"name": "c1", "kind": "configmaps"})))
        no_rv = configmap("c1", data={"k": "v3"})
        status, body = self.srv.put_configmap(self.NS, "c1", no_rv)
        self.assertEqual((status, body["reason"], body["details"]["causes"][0]["field"]),
                         (422, "Invalid", "metadata.resourceVersion"))
        self.assertEqual(self.srv.get_configmap(self.NS, "c1"), (200, updated))
        # A Lease of the same name is another object.
        self.assertEqual(self.srv.get_lease(self.NS, "c1")[0], 404)

    def test_put_creates_and_not_found(self):
        status, obj = self.srv.put_configmap(self.NS, "c-put", configmap("c-put", {"a": "1"}))
        self.assertEqual((status, obj["data"]), (201, {"a": "1"}))
        self.assertEqual(self.srv.get_configmap(self.NS, "nope"), (404, status_body(
            404, "NotFound", 'configmaps "nope" not found',
            {"name": "nope", "kind": "configmaps"})))

    def test_list_with_label_selector_and_version(self):
        ns = "cm-list"
        for name, tier in (("b", "web"), ("a", "web"), ("c", "db")):
            status, _ = self.srv.post_configmap(ns, configmap(name, labels={"tier": tier}))
            self.assertEqual(status, 201)
        self.assertEqual(self.srv.post_lease(ns, lease("a"))[0], 201)
        status, lst = self.srv.list_configmaps(ns)
        self.assertEqual(status, 200, lst)
        self.assertEqual((lst["kind"], lst["apiVersion"]), ("ConfigMapList", "v1"))
        self.assertEqual([i["metadata"]["name"] for i in lst["items"]], ["a", "b", "c"])
        # The list version is the store's revision, which the Lease write moved.
        self.assertEqual(lst["metadata"]["resourceVersion"],
                         self.srv.list_leases(ns)[1]["metadata"]["resourceVersion"])
        status, web = self.srv.list_configmaps(ns, label_selector="tier=web")
        self.assertEqual([i["metadata"]["name"] for i in web["items"]], ["a", "b"])
        status, body = self.srv.list_configmaps(ns, label_selector="tier in (web")
        self.assertEqual((status, body["reason"]), (400, "BadRequest"))
        status, everywhere = self.srv.list_configmaps(label_selector="tier=db")
        self.assertEqual([(i["metadata"]["namespace"], i["metadata"]["name"])
                          for i in everywhere["items"]], [(ns, "c")])

    def test_patch_merge_strategic_and_precondition(self):
        created = self.cm_create("p1", data={"keep": "1", "drop": "2"})
        status, patched = self.srv.patch_configmap(
            self.NS, "p1", {"data": {"drop": None, "new": "3"}})
        self.assertEqual((status, patched["data"]), (200, {"keep": "1", "new": "3"}))
        # Strategic merge is treated as a merge patch (data is a plain map).
        status, patched = self.srv.patch_configmap(
            self.NS, "p1", {"data": {"new": "4"}},
            content_type="application/strategic-merge-patch+json")
        self.assertEqual((status, patched["data"]), (200, {"keep": "1", "new": "4"}))
        stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
                 "data": {"x": "y"}}
        self.assertEqual(self.srv.patch_configmap(self.NS, "p1", stale)[0], 409)
        self.assertEqual(self.srv.patch_configmap(self.NS, "missing", {"data": {}})[0], 404)
        status, body = self.srv.patch_configmap(self.NS, "p1", {"data": {"a b": "1"}})
        self.assertEqual((status, body["details"]["causes"][0]["field"]), (422, "data[a b]"))
        self.assertEqual(self.srv.get_configmap(self.NS, "p1")[1]["data"],
                         {"keep": "1", "new": "4"})

    def test_validation(self):
        status, body = self.srv.post_configmap(self.NS, configmap("Bad_Name"))
        self.assertEqual((status, body["reason"]), (422, "Invalid"))
        self.assertTrue(body["message"].startswith(
            'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a '
            'lowercase RFC 1123 subdomain'), body["message"])
        self.assertEqual(body["details"]["kind"], "ConfigMap")
        self.assertNotIn("group", body["details"])
        status, body = self.srv.post_configmap(
            self.NS, configmap("v1", data={"..x": "1", "ok": "2"}, binaryData={"ok": "AQI="}))
        self.assertEqual(status, 422, body)
        self.assertEqual(
            [(c["field"], c["message"]) for c in body["details"]["causes"]],
            [("data[..x]", 'Invalid value: "..x": must not start with \'..\''),
             ("data[ok]", 'Invalid value: "ok": duplicate of key present in binaryData')])
        status, body = self.srv.post_configmap(self.NS, configmap("v2", data={"k": 1}))
        self.assertEqual((status, body["message"]), (400, (
            'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot '
            'unmarshal number into Go struct field ConfigMap.data of type string')))
        status, body = self.srv.post_configmap(self.NS, configmap("v3", binaryData={"k": "@"}))
        self.assertEqual((status, body["reason"]), (400, "BadRequest"))
        self.assertIn("illegal base64 data", body["message"])
        status, _, raw = self.srv.request("POST", "/api/v1/namespaces/cm/configmaps", b"{")
        self.assertEqual((status, json.loads(raw)["reason"]), (400, "BadRequest"))
        status, body = self.srv.post_configmap(self.NS, configmap("v4", data={"k": "x" * (1 << 20)},
                                                                  binaryData={"b": "AAAA"}))
        self.assertEqual((status, body["details"]["causes"][0]["reason"]),
                         (422, "FieldValueTooLong"))
        for name in ("v1", "v2", "v3", "v4"):
            self.assertEqual(self.srv.get_configmap(self.NS, name)[0], 404)

    def test_immutable(self):
        created = self.cm_create("imm", data={"k": "v"}, immutable=True)
        self.assertIs(created["immutable"], True)
        status, body = self.srv.put_configmap(self.NS, "imm", dict(created, data={"k": "w"}))
        self.assertEqual((status, [c["field"] for c in body["details"]["causes"]]),
                         (422, ["data"]), body)
        self.assertIn("field is immutable when `immutable` is set", body["message"])
        status, body = self.srv.patch_configmap(self.NS, "imm", {"immutable": False})
        self.assertEqual((status, [c["field"] for c in body["details"]["causes"]]),
                         (422, ["immutable"]), body)
        # Its metadata may still change.
        status, body = self.srv.patch_configmap(self.NS, "imm",
                                                {"metadata": {"labels": {"a": "b"}}})
        self.assertEqual((status, body["metadata"].get("labels")), (200, {"a": "b"}))

    def test_delete_with_preconditions(self):
        created = self.cm_create("d1", data={"k": "v"})
        uid, rv = created["metadata"]["uid"], created["metadata"]["resourceVersion"]
        status, body = self.srv.delete_configmap(self.NS, "d1",
                                                 options={"preconditions": {"uid": "other"}})
        self.assertEqual((status, body), (409, status_body(
            409, "Conflict",
            'Operation cannot be fulfilled on ConfigMap "d1": the UID in the precondition '
            '(other) does not match the UID in record (%s). The object might have been '
            'deleted and then recreated' % uid, {"name": "d1", "kind": "ConfigMap"})))
        status, body = self.srv.delete_configmap(
            self.NS, "d1", options={"preconditions": {"resourceVersion": "1"}})
        self.assertEqual((status, body["reason"]), (409, "Conflict"))
        self.assertIn("the ResourceVersion in the precondition (1) does not match the "
                      "ResourceVersion in record (%s)" % rv, body["message"])
        self.assertEqual(self.srv.get_configmap(self.NS, "d1"), (200, created))
        status, body = self.srv.delete_configmap(
            self.NS, "d1", options={"preconditions": {"uid": uid, "resourceVersion": rv}})
        self.assertEqual((status, body), (200, {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": "d1", "kind": "configmaps", "uid": uid}}))
        self.assertEqual(self.srv.delete_configmap(self.NS, "d1")[0], 404)

    def test_watch_sees_only_configmaps(self):
        ns = "cm-watch"
        created = self.srv.post_configmap(ns, configmap("w1", {"n": "0"}))[1]
        w = self.srv.open_watch(ns, resource_version=created["metadata"]["resourceVersion"],
                                timeout_seconds=60, collection=CONFIGMAPS)
        try:
            self.assertEqual(self.srv.post_lease(ns, lease("w1"))[0], 201)
            status, added = self.srv.post_configmap(ns, configmap("w2", {"n": "1"}))
            self.assertEqual(status, 201)
            status, modified = self.srv.patch_configmap(ns, "w1", {"data": {"n": "2"}})
            self.assertEqual(status, 200)
            self.assertEqual(self.srv.delete_configmap(ns, "w2")[0], 200)
            events = [w.next_event() for _ in range(3)]
            self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events],
                             [("ADDED", "w2"), ("MODIFIED", "w1"), ("DELETED", "w2")])
            self.assertEqual(events[0]["object"], added)
            self.assertEqual(events[1]["object"], modified)
            self.assertEqual(events[2]["object"]["kind"], "ConfigMap")
        finally:
            w.close()

    def test_watch_initial_events_selector_and_timeout(self):
        ns = "cm-watch2"
        for name, app in (("i2", "x"), ("i1", "x"), ("i3", "y")):
            self.assertEqual(self.srv.post_configmap(
                ns, configmap(name, labels={"app": app}))[0], 201)
        t0 = time.monotonic()
        w = self.srv.open_watch(ns, timeout_seconds=1, label_selector="app=x",
                                collection=CONFIGMAPS)
        try:
            names = [w.next_event() for _ in range(2)]
            self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in names],
                             [("ADDED", "i1"), ("ADDED", "i2")])
            self.assertIsNone(w.next_event())
            self.assertLess(time.monotonic() - t0, 8)
        finally:
            w.close()
        status, body = self.srv.json_request(
            "GET", "/api/v1/namespaces/cm/configmaps?watch=1&resourceVersion=abc")
        self.assertEqual(status, 400)

    def test_watch_bookmark_is_a_configmap(self):
        w = self.srv.open_watch("cm-bm", resource_version=str(self.srv.list_configmaps(
            "cm-bm")[1]["metadata"]["resourceVersion"]), timeout_seconds=30, bookmarks=True,
            collection=CONFIGMAPS, timeout=25)
        try:
            ev = w.next_event()  # the server sends one every 10 s
            self.assertEqual(ev["type"], "BOOKMARK")
            self.assertEqual((ev["object"]["kind"], ev["object"]["apiVersion"]),
                             ("ConfigMap", "v1"))
            self.assertRegex(ev["object"]["metadata"]["resourceVersion"], r"^\d+$")
        finally:
            w.close()

    def test_write_log_and_faults(self):
        since = (self.srv.configmap_log() or [{"seq": 0}])[-1]["seq"]
        lease_since = (self.srv.write_log() or [{"seq": 0}])[-1]["seq"]
        created = self.cm_create("log1", data={"v": "1"})
        self.assertEqual(self.srv.put_configmap(
            self.NS, "log1", dict(created, data={"v": "2"}), client="r2")[0], 200)
        self.assertEqual(self.srv.delete_configmap(self.NS, "log1", client="r2")[0], 200)
        entries = self.srv.configmap_log(since)
        self.assertEqual([(e["client"], e["verb"], e["name"], e["data"]) for e in entries],
                         [("r1", "create", "log1", {"v": "1"}),
                          ("r2", "update", "log1", {"v": "2"}),
                          ("r2", "delete", "log1", {"v": "2"})])
        self.assertEqual([e["seq"] for e in entries], [since + 1, since + 2, since + 3])
        clocks = [e["clock_us"] for e in entries]
        self.assertEqual(clocks, sorted(clocks))
        # ConfigMap writes stay out of the Lease log.
        self.assertEqual(self.srv.write_log(lease_since), [])
        self.srv.set_faults("r2", error_rate=1.0, error_code=503, verbs=["create"])
        status, body = self.srv.post_configmap(self.NS, configmap("f1"), client="r2")
        self.assertEqual((status, body["reason"]), (503, "ServiceUnavailable"))
        self.assertEqual(self.srv.get_configmap(self.NS, "f1", client="r2")[0], 404)
        self.assertEqual(self.srv.post_configmap(self.NS, configmap("f1"))[0], 201)


class TestRestart(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="leaderd-apiserver-test.")
        self.srv = ApiServer(os.path.join(self.tmp, "srv"), ["r1"],
                             state_file=os.path.join(self.tmp, "state.json"))

    def tearDown(self):
        self.srv.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_state_survives_restart(self):
        self.srv.start()
        status, cm = self.srv.post_configmap(NS, configmap("keep", {"k": "v"}))
        self.assertEqual(status, 201)
        status, created = self.srv.post_lease(NS, lease("keep"))
        self.assertEqual(status, 201)
        for i in range(3):
            created["spec"]["leaseTransitions"] = i + 1
            status, created = self.srv.put_lease(NS, "keep", created)
            self.assertEqual(status, 200)
        url, token = self.srv.url, self.srv.token("r1")
        with open(self.srv.ca) as f:
            ca = f.read()
        self.assertEqual(self.srv.stop(), 0)
        self.srv.start()
        self.assertEqual(self.srv.url, url)
        self.assertEqual(self.srv.token("r1"), token)
        with open(self.srv.ca) as f:
            self.assertEqual(f.read(), ca)
        status, got = self.srv.get_lease(NS, "keep")
        self.assertEqual((status, got), (200, created))
        # A ConfigMap and a Lease of one name come back as two objects.
        self.assertEqual(self.srv.get_configmap(NS, "keep"), (200, cm))
        got["spec"]["holderIdentity"] = "after-restart"
        status, after = self.srv.put_lease(NS, "keep", got)
        self.assertEqual(status, 200)
        self.assertGreater(int(after["metadata"]["resourceVersion"]),
                           int(created["metadata"]["resourceVersion"]))
        w = self.srv.open_watch(NS, "keep", resource_version="1", timeout_seconds=5)
        try:
            ev = w.next_event()
        finally:
            w.close()
        self.assertEqual(ev["type"], "ERROR")
        self.assertEqual((ev["object"]["code"], ev["object"]["reason"]), (410, "Expired"))
        # Like the watch cache: the oldest version a watch can resume from, which after
        # a restart is the version the store was loaded at.
        self.assertEqual(ev["object"]["message"], "too old resource version: 1 (%s)"
                         % created["metadata"]["resourceVersion"])

    def test_sigterm_releases_held_requests(self):
        self.srv.start()
        self.srv.set_faults("r1", partition="hang")
        held = Background(lambda: self.srv.get_lease(NS, "x", client="r1"))
        w = self.srv.open_watch(NS, timeout_seconds=60, client="admin")
        t0 = time.monotonic()
        self.assertEqual(self.srv.stop(), 0)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertTrue(held.done.wait(10))
        self.assertIsNotNone(held.error)
        w.close()

    def test_refuses_non_loopback(self):
        out = subprocess.run([binary_path(), "--dir", os.path.join(self.tmp, "x"),
                              "--listen", "0.0.0.0:0"], capture_output=True, timeout=30)
        self.assertEqual(out.returncode, 2)
        self.assertIn(b"loopback", out.stderr)


@unittest.skipUnless(shutil.which("kubectl"), "kubectl not installed")
class TestKubectl(ServerTestCase):

    def kubectl(self, *args, check=True):
        cache = os.path.join(self.tmp, "kube-cache")
        env = dict(os.environ, HOME=self.tmp, KUBECONFIG=self.srv.kubeconfig("r1"))
        out = subprocess.run(["kubectl", "--cache-dir", cache] + list(args),
                             capture_output=True, text=True, env=env, timeout=60)
        if check and out.returncode != 0:
            self.fail("kubectl %s: %s%s" % (" ".join(args), out.stdout, out.stderr))
        return out.stdout

    def test_kubectl_round_trip(self):
        path = os.path.join(self.tmp, "lease.yaml")
        with open(path, "w") as f:
            f.write("apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n"
                    "  name: kube\nspec:\n  holderIdentity: someone\n"
                    "  leaseDurationSeconds: 15\n")
        self.kubectl("apply", "-f", path, "--validate=false")
        obj = json.loads(self.kubectl("get", "lease", "kube", "-o", "json"))
        self.assertEqual(obj["spec"]["holderIdentity"], "someone")
        with open(path, "a") as f:
            f.write("  leaseTransitions: 3\n")
        self.kubectl("apply", "-f", path, "--validate=false")
        self.assertIn("leaseTransitions: 3", self.kubectl("get", "lease", "kube", "-o", "yaml"))
        table = self.kubectl("get", "leases")
        self.assertRegex(table, r"NAME\s+HOLDER\s+AGE")
        self.assertRegex(table, r"kube\s+someone\s+\d+s")
        self.kubectl("delete", "lease", "kube")
        self.assertEqual(self.srv.get_lease(NS, "kube")[0], 404)

    def test_kubectl_configmaps(self):
        path = os.path.join(self.tmp, "cm.yaml")
        with open(path, "w") as f:
            f.write('apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-cm\n'
                    'data:\n  a: "1"\n')
        self.kubectl("apply", "-f", path, "--validate=false")
        self.assertRegex(self.kubectl("get", "cm"), r"kube-cm\s+\d+s")
        self.kubectl("patch", "configmap", "kube-cm", "-p", '{"data":{"a":"2"}}')
        self.assertEqual(self.kubectl("get", "configmap", "kube-cm", "-o",
                                      "jsonpath={.data.a}"), "2")
        self.kubectl("delete", "cm", "kube-cm")
        self.assertEqual(self.srv.get_configmap(NS, "kube-cm")[0], 404)


if __name__ == "__main__":
    unittest.main(verbosity=2)
