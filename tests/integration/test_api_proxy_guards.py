# SPDX-License-Identifier: Apache-2.0
"""Integration tests of the API write gate's guards (--api-proxy), on the real
binary: two replicas with a proxy each against the bundled API server over
HTTPS. A request whose Host is not the proxy's loopback address and port
(a rebound DNS name, another port, none on HTTP/1.1) gets 403; so does one
with Origin or Sec-Fetch-Site (a browser's) and one with an Impersonate-*
header; a path with dot segments, percent-encoded or not, gets 400; a
write to the replica's own Lease (a PATCH, percent-encoded too, a DELETE of
the namespace's Leases) gets 403 on the leader itself and the Lease is left
as it was; in shard mode the group's shard and member Leases are refused
the same way. So is a POST to the namespace's Lease collection whose body
would create one of them (by metadata.name, or in shard mode by a
generateName the API server could make a member Lease from), and one whose
body the gate cannot read as JSON (YAML, protobuf, duplicate keys): nothing
is created. Every refusal is a metav1.Status naming the replica, and
nothing refused reaches the API server (its per-client request counts).

The bundled API server does not record request headers, so the last test
puts a recording HTTP server in its place for one replica (which then never
leads; reads pass all the same): X-Forwarded-*, Forwarded, X-Real-Ip and
X-Remote-* headers sent to the proxy never reach it, while an ordinary
header does."""
import http.client
import json
import os
import shutil
import socket
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from leaderd_testing.apiserver import ApiServer
from leaderd_testing.cluster import FAST, SCHED_SLACK, Replica, free_port, stop_all, wait_until
from test_api_proxy import LEASES, MERGE, NS, POD, ApiProxyBase

DEMO = LEASES + "/demo"


def raw_request(port, method, path, headers, body=None, host=True, timeout=10.0):
    """(status, body bytes) of one request through a proxy, with the Host
    header as given in headers (host=True: the proxy's own address)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        if host:
            conn.putheader("Host", "127.0.0.1:%d" % port)
        for k, v in headers.items():
            conn.putheader(k, v)
        if body is not None:
            body = json.dumps(body).encode()
            conn.putheader("Content-Type", MERGE if method == "PATCH" else "application/json")
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def post_raw(port, path, ctype, data, headers=None):
    """(status, body bytes) of a POST of the bytes data through a proxy, with
    Content-Type ctype (None: no Content-Type header)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10.0)
    try:
        conn.putrequest("POST", path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", "127.0.0.1:%d" % port)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        if ctype is not None:
            conn.putheader("Content-Type", ctype)
        conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def socket_request(port, request):
    """(status, body bytes) of a request written as raw bytes; the proxy
    closes the connection after it (Connection: close or HTTP/1.0)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


class GuardAsserts:
    def assert_status(self, status, body, code, reason, identity, *words):
        self.assertEqual(status, code, body[:300])
        doc = json.loads(body)
        self.assertEqual((doc["kind"], doc["apiVersion"], doc["status"], doc["reason"],
                          doc["code"]), ("Status", "v1", "Failure", reason, code))
        self.assertIn(identity, doc["message"])
        for w in words:
            self.assertIn(w, doc["message"])

    def assert_forbidden(self, status, body, identity, *words):
        self.assert_status(status, body, 403, "Forbidden", identity, *words)


class TestApiProxyGuards(GuardAsserts, ApiProxyBase):
    def writes_seen(self, client):
        """The API server's count of client's write requests (any resource)."""
        verbs = self.api.stats().get(client, {})
        return {v: c for v, c in verbs.items()
                if v in ("create", "patch", "delete", "deletecollection")}

    def test_requests_not_addressed_to_the_proxy_get_403(self):
        lead, standby = self.roles()
        port = self.port(lead)
        self.api.reset_stats()
        for host in ("evil.example:%d" % port, "127.0.0.1.nip.io:%d" % port,
                     "127.0.0.1:%d" % (port + 1), "localhost", "10.0.0.1:%d" % port):
            for method, body in (("GET", None), ("PATCH", {"metadata": {}})):
                status, data = raw_request(port, method, POD, {"Host": host}, body,
                                           host=False)
                self.assert_forbidden(status, data, lead.identity, "Host")
        # HTTP/1.1 without Host: refused; HTTP/1.0 may leave it out.
        status, data = socket_request(
            port, b"GET " + POD.encode() + b" HTTP/1.1\r\nConnection: close\r\n\r\n")
        self.assert_forbidden(status, data, lead.identity, "Host")
        status, data = socket_request(port, b"GET " + POD.encode() + b" HTTP/1.0\r\n\r\n")
        self.assertEqual(status, 200, data[:300])
        # The loopback names with the port pass, IPv6 too.
        for host in ("localhost:%d" % port, "127.0.0.1:%d" % port, "[::1]:%d" % port):
            status, data = raw_request(port, "GET", POD, {"Host": host}, host=False)
            self.assertEqual(status, 200, (host, data[:300]))
        # Browsers: Origin or Sec-Fetch-Site, on reads and writes.
        for header in ({"Origin": "http://evil.example"}, {"Origin": "null"},
                       {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-origin"}):
            for method, body in (("GET", None), ("PATCH", {"metadata": {}})):
                status, data = raw_request(port, method, POD, header, body)
                self.assert_forbidden(status, data, lead.identity, "browsers")
        # Impersonation, off by default.
        for header in ("Impersonate-User", "Impersonate-Group", "Impersonate-Uid",
                       "Impersonate-Extra-Scopes"):
            for method, body in (("GET", None), ("PATCH", {"metadata": {}})):
                status, data = raw_request(port, method, POD, {header: "admin"}, body)
                self.assert_forbidden(status, data, lead.identity, header,
                                      "--api-proxy-impersonation")
        # Dot segments: 400, encoded or not, on every replica.
        for r in (lead, standby):
            for path in ("/api/v1/namespaces/%s/pods/../pods/app" % NS,
                         "/api/v1/namespaces/%s/pods/%%2e%%2E/pods/app" % NS,
                         "/api/v1/namespaces/%s/pods/app/%%2E" % NS,
                         "/api/v1/namespaces/%s/pods/x%%2F..%%2Fapp" % NS):
                status, data = raw_request(self.port(r), "GET", path, {})
                self.assert_status(status, data, 400, "BadRequest", r.identity, "..")
        status, data = raw_request(self.port(lead), "PATCH",
                                   "/api/v1/namespaces/%s/pods/x/../app" % NS, {},
                                   {"metadata": {"labels": {"written": "dots"}}})
        self.assertEqual(status, 400, data[:300])
        # None of it reached the API server as a write, and the proxy still
        # serves a good request.
        self.assertEqual(self.writes_seen(lead.client), {})
        self.assertEqual(self.pod_writes(), [])
        status, _, body = self.patch_label(lead, "after")
        self.assertEqual(status, 200, body[:300])
        self.assertEqual([e["labels"]["written"] for e in self.pod_writes()], ["after"])
        self.assertEqual(
            self.api.stats().get(lead.client, {}).get("patch", {}).get("200"), 1)

    def test_the_own_lease_cannot_be_written_through_the_proxy(self):
        lead, standby = self.roles()
        self.api.reset_stats()
        stretch = {"spec": {"leaseDurationSeconds": 86400}}
        for r in (lead, standby):
            for method, path, body in (
                    ("PATCH", DEMO, stretch),
                    ("PATCH", LEASES + "/d%65mo", stretch),
                    ("PATCH", LEASES.replace("coordination.k8s.io", "coordination%2Ek8s.io")
                     + "/demo?fieldManager=app", stretch),
                    ("PUT", DEMO, {"metadata": {"name": "demo"}, "spec": {}}),
                    ("DELETE", DEMO, None)):
                status, data = raw_request(self.port(r), method, path, {}, body)
                self.assert_forbidden(status, data, r.identity, "%s/demo" % NS)
            status, data = raw_request(self.port(r), "DELETE", LEASES, {})
            self.assert_forbidden(status, data, r.identity, "namespace %s" % NS)
        self.assertEqual(self.writes_seen(lead.client), {})
        self.assertEqual(self.writes_seen(standby.client), {})
        # The Lease is as the election left it, and it still leads.
        status, lease = self.api.get_lease(NS, "demo")
        self.assertEqual(status, 200)
        self.assertEqual(lease["spec"]["leaseDurationSeconds"], int(FAST["lease_duration"]))
        self.assertEqual(lease["spec"]["holderIdentity"], lead.identity)
        self.assertTrue(lead.is_leader())
        # Reading it passes; another Lease in the namespace is the app's.
        status, _, body = proxy_get(self.port(standby), DEMO)
        self.assertEqual(status, 200, body[:300])
        self.assertEqual(json.loads(body)["spec"]["holderIdentity"], lead.identity)
        status, data = raw_request(self.port(lead), "POST", LEASES, {},
                                   {"metadata": {"name": "app-lock"}, "spec": {}})
        self.assertEqual(status, 201, data[:300])
        status, data = raw_request(self.port(lead), "PATCH", LEASES + "/app-lock", {},
                                   {"spec": {"leaseDurationSeconds": 86400}})
        self.assertEqual(status, 200, data[:300])
        status, lease = self.api.get_lease(NS, "app-lock")
        self.assertEqual(lease["spec"]["leaseDurationSeconds"], 86400)

    def test_the_own_lease_cannot_be_created_through_the_collection(self):
        lead, standby = self.roles()
        status, before = self.api.get_lease(NS, "demo")
        self.assertEqual(status, 200)
        self.api.reset_stats()
        create = json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                             "metadata": {"name": "demo", "namespace": NS},
                             "spec": {"holderIdentity": "app"}}).encode()
        odd = LEASES.replace("coordination.k8s.io", "coordination%2Ek8s.io") + "/"
        for r in (lead, standby):
            for path in (LEASES, odd, LEASES + "?fieldManager=app"):
                for ctype in (None, "application/json"):
                    status, data = post_raw(self.port(r), path, ctype, create)
                    self.assert_forbidden(status, data, r.identity,
                                          "would create the Lease %s/demo" % NS)
                status, data = post_raw(self.port(r), path, None,
                                        b'{"metadata":{"Name":"demo"}}')
                self.assert_forbidden(status, data, r.identity, "metadata.name")
            # A body the gate cannot read, even one naming another Lease.
            for ctype, data in (("application/yaml", b"metadata:\n  name: demo\n"),
                                ("application/yaml", b'{"metadata":{"name":"app-lock"}}'),
                                ("application/vnd.kubernetes.protobuf", b"k8s\x00\n\x0c"),
                                (None, b'{"metadata":{"name":"x","name":"demo"}}'),
                                (None, b"")):
                status, body = post_raw(self.port(r), LEASES, ctype, data)
                self.assert_forbidden(status, body, r.identity, "cannot read this body")
        self.assertEqual(self.writes_seen(lead.client), {})
        self.assertEqual(self.writes_seen(standby.client), {})
        # The Lease is still the election's (renewals change its version).
        status, after = self.api.get_lease(NS, "demo")
        self.assertEqual(after["spec"]["holderIdentity"], lead.identity)
        self.assertEqual(after["metadata"]["uid"], before["metadata"]["uid"])
        status, leases = self.api.list_leases(NS)
        self.assertEqual(sorted(i["metadata"]["name"] for i in leases["items"]), ["demo"])
        # Another name passes, read from JSON with its charset.
        status, data = post_raw(self.port(lead), LEASES, "application/json; charset=utf-8",
                                b'{"metadata":{"name":"app-lock"},"spec":{}}')
        self.assertEqual(status, 201, data[:300])


def proxy_get(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.getheaders(), resp.read()
    finally:
        conn.close()


class TestApiProxyGuardsShards(GuardAsserts, unittest.TestCase):
    """One replica owning a group of two shards: its proxy refuses writes to
    the shard Leases and to member Leases, even naming a shard it owns."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="leaderd-apiproxy-guards-")
        self.api = ApiServer(os.path.join(self.dir, "api"), ["r1"])
        self.replicas = []
        try:
            self.api.start()
            self.port = free_port()
            self.replica = Replica(self.api, "r1", self.dir, lease="work",
                                   extra_args=["--shards", "2", "--api-proxy",
                                               "127.0.0.1:%d" % self.port])
            self.replicas.append(self.replica.start())
        except BaseException:
            self.tearDown()
            raise

    def tearDown(self):
        stop_all(self, self.replicas)
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_group_leases_are_refused(self):
        def owns_both():
            status, body = self.replica.get("/shards")
            return status == 200 and len(json.loads(body)["owned"]) == 2
        wait_until(owns_both, FAST["lease_duration"] * 3 + SCHED_SLACK, what="both shards")
        status, before = self.api.get_lease(NS, "work-0")
        self.assertEqual(status, 200)
        self.api.reset_stats()
        for name in ("work-0", "work-1", "work-member-r1", "work-member-gone"):
            status, data = raw_request(self.port, "PATCH", LEASES + "/" + name,
                                       {"X-Leaderd-Shard": "0"},
                                       {"spec": {"leaseDurationSeconds": 86400}})
            self.assert_forbidden(status, data, "r1", "shard group work")
        status, data = raw_request(self.port, "DELETE", LEASES, {"X-Leaderd-Shard": "0"})
        self.assert_forbidden(status, data, "r1", "shard group work")
        # Creating one through the collection: by name, or by a generateName
        # the API server could make a member Lease from (a fake member would
        # change the group's assignment).
        for meta, why in (({"name": "work-member-ghost"}, "metadata.name"),
                          ({"name": "work-1"}, "metadata.name"),
                          ({"generateName": "work-member-"}, "metadata.generateName"),
                          ({"generateName": "w"}, "metadata.generateName")):
            status, data = raw_request(self.port, "POST", LEASES, {"X-Leaderd-Shard": "0"},
                                       {"metadata": meta, "spec": {}})
            self.assert_forbidden(status, data, "r1", "shard group work", why)
        status, data = post_raw(self.port, LEASES, "application/yaml",
                                b"metadata:\n  generateName: work-member-\n",
                                {"X-Leaderd-Shard": "0"})
        self.assert_forbidden(status, data, "r1", "shard group work", "cannot read")
        self.assertNotIn("patch", self.api.stats().get("r1", {}))
        self.assertNotIn("create", self.api.stats().get("r1", {}))
        status, leases = self.api.list_leases(NS)
        self.assertEqual(sorted(i["metadata"]["name"] for i in leases["items"]),
                         ["work-0", "work-1", "work-member-r1"])
        status, after = self.api.get_lease(NS, "work-0")
        self.assertEqual(after["spec"]["leaseDurationSeconds"],
                         before["spec"]["leaseDurationSeconds"])
        # An owned shard's ordinary write passes.
        status, data = raw_request(self.port, "POST", LEASES, {"X-Leaderd-Shard": "0"},
                                   {"metadata": {"name": "app-lock"}, "spec": {}})
        self.assertEqual(status, 201, data[:300])


class Recorder:
    """A plain-HTTP stand-in for the API server that records every request's
    headers and answers 404, except GET POD (200): enough for the proxy's
    reads, while the election it cannot serve keeps failing."""

    def __init__(self, workdir):
        self.requests = []
        self.lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                with recorder.lock:
                    recorder.requests.append((self.command, self.path, dict(self.headers)))
                ok = self.command == "GET" and self.path == POD
                body = json.dumps({"kind": "Pod"} if ok else
                                  {"kind": "Status", "status": "Failure", "code": 404,
                                   "reason": "NotFound"}).encode()
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.path = os.path.join(workdir, "kubeconfig-recorder")
        with open(self.path, "w") as f:
            f.write("\n".join([
                "apiVersion: v1", "kind: Config", "clusters:", "- name: rec", "  cluster:",
                "    server: http://127.0.0.1:%d" % self.server.server_address[1],
                "users:", "- name: rec", "  user:", "    token: recorder-token",
                "contexts:", "- name: rec", "  context:", "    cluster: rec",
                "    user: rec", "    namespace: default", "current-context: rec", ""]))
        os.chmod(self.path, 0o600)

    def kubeconfig(self, _client):
        return self.path

    def start(self):
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    def seen(self, path):
        with self.lock:
            return [r for r in self.requests if r[1] == path]


class TestApiProxyForwardedHeaders(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="leaderd-apiproxy-fwd-")
        self.recorder = Recorder(self.dir)
        self.replicas = []
        try:
            self.recorder.start()
            self.port = free_port()
            self.replicas.append(Replica(self.recorder, "r1", self.dir, extra_args=[
                "--api-proxy", "127.0.0.1:%d" % self.port]).start())
        except BaseException:
            self.tearDown()
            raise

    def tearDown(self):
        stop_all(self, self.replicas)
        self.recorder.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_forwarded_headers_do_not_reach_the_api_server(self):
        status, data = raw_request(self.port, "GET", POD, {
            "X-Forwarded-For": "203.0.113.7", "X-Forwarded-Host": "evil.example",
            "X-Forwarded-Proto": "https", "x-forwarded-user": "admin",
            "Forwarded": "for=203.0.113.7;host=evil.example", "X-App-Marker": "kept",
            "X-Real-Ip": "203.0.113.7", "X-Real-IP": "203.0.113.8",
            "X-Remote-User": "admin", "x-remote-group": "system:masters",
            "X-Remote-Extra-Scopes": "all", "X-Remote-Uid": "0"})
        self.assertEqual(status, 200, data[:300])
        seen = self.recorder.seen(POD)
        self.assertEqual(len(seen), 1, seen)
        headers = {k.lower(): v for k, v in seen[0][2].items()}
        self.assertEqual(headers.get("x-app-marker"), "kept")
        self.assertEqual(headers.get("authorization"), "Bearer recorder-token")
        leaked = [k for k in headers
                  if k.startswith(("x-forwarded-", "x-remote-"))
                  or k in ("forwarded", "x-real-ip")]
        self.assertEqual(leaked, [], headers)
        # Impersonation is refused unless the flag allows it.
        status, data = raw_request(self.port, "GET", POD, {"Impersonate-User": "admin"})
        self.assertEqual(status, 403, data[:300])
        self.assertEqual(len(self.recorder.seen(POD)), 1)

    def test_impersonation_passes_with_the_flag(self):
        port = free_port()
        self.replicas.append(Replica(self.recorder, "r2", self.dir, extra_args=[
            "--api-proxy", "127.0.0.1:%d" % port, "--api-proxy-impersonation", "true"]).start())
        status, data = raw_request(port, "GET", POD, {"Impersonate-User": "admin",
                                                      "Impersonate-Group": "ops"})
        self.assertEqual(status, 200, data[:300])
        seen = self.recorder.seen(POD)
        self.assertEqual(len(seen), 1, seen)
        headers = {k.lower(): v for k, v in seen[0][2].items()}
        self.assertEqual((headers.get("impersonate-user"), headers.get("impersonate-group")),
                         ("admin", "ops"))


if __name__ == "__main__":
    unittest.main()
