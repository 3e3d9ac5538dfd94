# SPDX-License-Identifier: Apache-2.0
"""Start, stop and steer build/leaderd-apiserver, the bundled test Lease API
server (not for production), from Python tests. Standard library only.

    srv = ApiServer(tmpdir, ["r1", "r2"], state_file=os.path.join(tmpdir, "state.json"))
    srv.start()
    status, lease = srv.post_lease("default", {...}, client="r1")
    srv.set_faults("r1", partition="hang")
    ...
    srv.stop()

Every client also has a client certificate (CN = its name, signed by the server's CA):
EC P-256 by default, RSA for the names in rsa_clients. client_cert(name) gives its files,
cert_kubeconfig(name) a kubeconfig using it, request(..., cert=...) presents one.

The binary is $LEADERD_BUILD/leaderd-apiserver (default build/ under the repository).
$LEADERD_APISERVER_WRAPPER, when set, is a command prefix such as
"valgrind --leak-check=full --error-exitcode=99"; its output goes to DIR/apiserver.log
with the server's own stderr.
"""

import http.client
import json
import os
import select
import shlex
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

# This file is tests/support/leaderd_testing/apiserver.py.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
LEASES = "/apis/coordination.k8s.io/v1/namespaces/%s/leases"
CONFIGMAPS = "/api/v1/namespaces/%s/configmaps"
# The all-namespaces path of each namespaced collection.
ALL_NAMESPACES = {LEASES: "/apis/coordination.k8s.io/v1/leases",
                  CONFIGMAPS: "/api/v1/configmaps"}


def binary_path():
    build = os.environ.get("LEADERD_BUILD") or os.path.join(REPO, "build")
    return os.path.join(build, "leaderd-apiserver")


class ControlError(Exception):
    """A /_control/ call did not answer 200."""


class ApiServer:
    """One leaderd-apiserver process. Not thread-safe except for the request helpers,
    which open a fresh connection per call."""

    def __init__(self, dir, clients, state_file=None, port=0, verbose=True, rsa_clients=()):
        self.dir = os.path.abspath(dir)
        self.clients = list(clients)
        self.rsa_clients = list(rsa_clients)
        self.state_file = state_file
        self.port = port
        self.verbose = verbose
        self.proc = None
        self.url = None
        self.log_path = os.path.join(self.dir, "apiserver.log")
        self._log = None
        self._ctx = None

    # ---- process lifecycle ----

    def command(self):
        cmd = [binary_path(), "--dir", self.dir, "--listen", "127.0.0.1:%d" % self.port]
        if self.clients:
            cmd += ["--clients", ",".join(self.clients)]
        if self.rsa_clients:
            cmd += ["--rsa-clients", ",".join(self.rsa_clients)]
        if self.state_file:
            cmd += ["--state-file", self.state_file]
        if self.verbose:
            cmd.append("--verbose")
        wrapper = os.environ.get("LEADERD_APISERVER_WRAPPER", "")
        return shlex.split(wrapper) + cmd

    def start(self, timeout=None):
        """Spawns the server and waits (bounded) for its `listening on` line. The port
        it got is kept, so a later start() after stop() comes back on the same URL."""
        if self.proc is not None:
            raise RuntimeError("already started")
        if timeout is None:
            timeout = 120.0 if os.environ.get("LEADERD_APISERVER_WRAPPER") else 15.0
        os.makedirs(self.dir, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE,
                                     stderr=self._log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("leaderd-apiserver did not start; see %s" % self.log_path)
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 256)
                if not chunk:
                    continue
                line += chunk
        text = line.decode().strip()
        prefix = "listening on "
        if not text.startswith(prefix):
            self.stop()
            raise RuntimeError("unexpected first line %r" % text)
        self.url = text[len(prefix):]
        self.port = int(self.url.rsplit(":", 1)[1])
        self._ctx = ssl.create_default_context(cafile=self.ca)
        return self

    def stop(self, timeout=None):
        """SIGTERM, then SIGKILL after timeout seconds. Returns the exit status (None if
        it was not running)."""
        if self.proc is None:
            return None
        if timeout is None:
            timeout = 60.0 if os.environ.get("LEADERD_APISERVER_WRAPPER") else 10.0
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        proc.stdout.close()
        if self._log:
            self._log.close()
            self._log = None
        return proc.returncode

    def restart(self):
        status = self.stop()
        self.start()
        return status

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- files the server writes ----

    @property
    def ca(self):
        return os.path.join(self.dir, "ca.crt")

    def token(self, name):
        """Current token of client name (read from DIR/tokens/NAME), or the admin token
        for "admin"."""
        path = os.path.join(self.dir, "admin-token" if name == "admin" else "tokens/" + name)
        with open(path) as f:
            return f.read().strip()

    def kubeconfig(self, name, token_file=False):
        suffix = "-tokenfile" if token_file else ""
        return os.path.join(self.dir, "kubeconfig-%s%s" % (name, suffix))

    def client_cert(self, name):
        """(certificate path, key path) of client name's client certificate."""
        base = os.path.join(self.dir, "certs", name)
        return base + ".crt", base + ".key"

    def cert_kubeconfig(self, name, files=False):
        """Kubeconfig authenticating client name by its client certificate: inline
        (client-certificate-data, client-key-data), or with files=True naming the files
        (client-certificate, client-key)."""
        return os.path.join(self.dir, "kubeconfig-%s-%s" % (name, "certfile" if files else "cert"))

    def sec1_kubeconfig(self, name):
        """Kubeconfig for client name (an EC client) with its key rewritten in SEC1 form
        ("BEGIN EC PRIVATE KEY", as k3s writes them) by the openssl command; files in the
        server's directory. Raises CalledProcessError without openssl."""
        crt, key = self.client_cert(name)
        sec1 = os.path.join(self.dir, "certs", name + "-sec1.key")
        subprocess.run(["openssl", "ec", "-in", key, "-out", sec1], check=True,
                       capture_output=True)
        path = os.path.join(self.dir, "kubeconfig-%s-sec1" % name)
        write_kubeconfig(path, self.url, self.ca, name, cert=crt, key=sec1)
        return path

    # ---- HTTP ----

    def request(self, method, path, body=None, client=None, token=None, cert=None,
                content_type="application/json", headers=None, timeout=10.0):
        """One HTTPS request on a new connection. client names whose token to send
        (default: the first client); token overrides it ("" sends none). cert, a
        (certificate path, key path) pair, is presented as the TLS client certificate;
        then no token is sent unless token says so. body may be bytes, str or a
        JSON-serialisable value. Returns (status, headers, body bytes); HTTP errors are
        returned, transport errors raise (OSError / URLError)."""
        if token is None:
            token = "" if cert else self.token(client or self.clients[0])
        ctx = self._ctx
        if cert:
            ctx = ssl.create_default_context(cafile=self.ca)
            ctx.load_cert_chain(*cert)
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        req = urllib.request.Request(self.url + path, data=body, method=method)
        if token:
            req.add_header("Authorization", "Bearer " + token)
        if body is not None and content_type:
            req.add_header("Content-Type", content_type)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=timeout) as resp:
                return resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def json_request(self, method, path, body=None, **kw):
        """Like request() but decodes the body as JSON: (status, value)."""
        status, _, data = self.request(method, path, body, **kw)
        return status, json.loads(data) if data else None

    def control(self, method, path, body=None, raw=None):
        status, _, data = self.request(method, "/_control/" + path,
                                       raw if raw is not None else body,
                                       token=self.token("admin"))
        if status != 200:
            raise ControlError("%s %s: %d %s" % (method, path, status, data[:300]))
        return json.loads(data)

    # ---- control API ----

    def set_faults(self, name, partition=None, latency_ms=0, error_rate=0.0,
                   error_code=500, throttle=None, verbs=None, commit=None,
                   watch_lag_ms=0):
        """Replaces the faults of client name. partition: None, "hang" or "reset";
        throttle: {"rate": 0..1, "retry_after": seconds}; verbs: limit to these kube
        verbs (get, list, watch, create, update, patch, delete, discovery, other).
        commit: what a hang-up during latency_ms does to the request, which the
        server has read whole. The default here is "admitted", as kube-apiserver
        behaves: it commits at the end of the hold all the same, only the reply
        is lost; a test that wants the friendlier "connected" (the hang-up drops
        it) must ask for it. A "hang" partition always drops on a hang-up: the
        request never counted as read. watch_lag_ms: every event reaches this
        client's watches only that long after it was stored (its API server's
        watch cache behind), its reads and writes current."""
        body = {"client": name, "partition": partition, "latency_ms": latency_ms,
                "error_rate": error_rate, "error_code": error_code,
                "commit": commit or "admitted", "watch_lag_ms": watch_lag_ms}
        if throttle is not None:
            body["throttle"] = throttle
        if verbs is not None:
            body["verbs"] = list(verbs)
        return self.control("POST", "faults", body)

    def clear_faults(self, name=None):
        """Clears name's faults, or everyone's when name is None."""
        return self.control("POST", "faults/clear", {} if name is None else {"client": name})

    def faults(self):
        return self.control("GET", "faults")

    def rotate_token(self, name, grace_ms=0):
        """New token for name (also written to DIR/tokens/NAME); returns it."""
        return self.control("POST", "rotate", {"client": name, "grace_ms": grace_ms})["token"]

    def revoke_token(self, name):
        return self.control("POST", "revoke", {"client": name})

    def pause(self):
        return self.control("POST", "pause")

    def resume(self):
        return self.control("POST", "resume")

    def put_raw(self, ns, name, text):
        """Stores text verbatim as Lease ns/name (no validation; may be invalid JSON).
        Returns the resourceVersion it gets for preconditions."""
        return self.control("PUT", "raw/%s/%s" % (ns, name), raw=text)["resourceVersion"]

    def write_log(self, since=0):
        """Successful Lease writes: [{seq, mono_ms, clock_us, wall, client, verb,
        namespace, name, holderIdentity, leaseTransitions, resourceVersion}, ...] with
        seq > since."""
        return self.control("GET", "log?since=%d" % since)["entries"]

    def configmap_log(self, since=0):
        """Successful ConfigMap writes, like write_log but with data (or dataBytes
        past 1 KiB) in place of the Lease fields; its own seq."""
        return self.control("GET", "configmaps/log?since=%d" % since)["entries"]

    def pod_log(self):
        """Pod label changes: [{seq, namespace, pod, labels, client, time_us,
        mono_ms, clock_us}, ...]."""
        return self.control("GET", "pods/log")["log"]

    def stats(self):
        """{client: {verb: {code or "reset"/"disconnected": count}}}."""
        return self.control("GET", "stats")

    def held(self, client=None, verb=None):
        """The requests a fault holds now: {client: {verb: {"partition"|"latency":
        N}}}; with client and verb, how many of that client's requests of that
        verb are held (either kind)."""
        held = self.control("GET", "held")
        if client is None:
            return held
        return sum(held.get(client, {}).get(verb, {}).values())

    def reset_stats(self):
        return self.control("POST", "stats/reset")

    # ---- Lease helpers: (status, decoded body) ----

    def get_lease(self, ns, name, client=None):
        return self.json_request("GET", LEASES % ns + "/" + name, client=client)

    def list_leases(self, ns=None, client=None, label_selector=None, field_selector=None):
        path = LEASES % ns if ns else "/apis/coordination.k8s.io/v1/leases"
        query = [(k, v) for k, v in (("labelSelector", label_selector),
                                     ("fieldSelector", field_selector)) if v is not None]
        if query:
            path += "?" + urllib.parse.urlencode(query)
        return self.json_request("GET", path, client=client)

    def post_lease(self, ns, obj, client=None):
        return self.json_request("POST", LEASES % ns, obj, client=client)

    def put_lease(self, ns, name, obj, client=None):
        return self.json_request("PUT", LEASES % ns + "/" + name, obj, client=client)

    def patch_lease(self, ns, name, patch, client=None,
                    content_type="application/merge-patch+json"):
        return self.json_request("PATCH", LEASES % ns + "/" + name, patch, client=client,
                                 content_type=content_type)

    def delete_lease(self, ns, name, client=None, options=None):
        """options: a DeleteOptions body (e.g. {"preconditions": {...}}) or None."""
        return self.json_request("DELETE", LEASES % ns + "/" + name, options, client=client)

    # ---- ConfigMap helpers: (status, decoded body) ----

    def get_configmap(self, ns, name, client=None):
        return self.json_request("GET", CONFIGMAPS % ns + "/" + name, client=client)

    def list_configmaps(self, ns=None, client=None, label_selector=None):
        path = CONFIGMAPS % ns if ns else ALL_NAMESPACES[CONFIGMAPS]
        if label_selector is not None:
            path += "?" + urllib.parse.urlencode({"labelSelector": label_selector})
        return self.json_request("GET", path, client=client)

    def post_configmap(self, ns, obj, client=None):
        return self.json_request("POST", CONFIGMAPS % ns, obj, client=client)

    def put_configmap(self, ns, name, obj, client=None):
        return self.json_request("PUT", CONFIGMAPS % ns + "/" + name, obj, client=client)

    def patch_configmap(self, ns, name, patch, client=None,
                        content_type="application/merge-patch+json"):
        return self.json_request("PATCH", CONFIGMAPS % ns + "/" + name, patch,
                                 client=client, content_type=content_type)

    def delete_configmap(self, ns, name, client=None, options=None):
        return self.json_request("DELETE", CONFIGMAPS % ns + "/" + name, options,
                                 client=client)

    def open_watch(self, ns, name=None, resource_version=None, timeout_seconds=None,
                   bookmarks=False, client=None, timeout=10.0, label_selector=None,
                   collection=LEASES):
        """Starts a watch on collection (LEASES or CONFIGMAPS); returns a Watch whose
        next_event() yields decoded events."""
        query = ["watch=1"]
        if name:
            query.append("fieldSelector=metadata.name%3D" + name)
        if label_selector is not None:
            query.append("labelSelector=" + urllib.parse.quote(label_selector, safe=""))
        if resource_version is not None:
            query.append("resourceVersion=" + resource_version)
        if timeout_seconds is not None:
            query.append("timeoutSeconds=%d" % timeout_seconds)
        if bookmarks:
            query.append("allowWatchBookmarks=true")
        path = collection % ns if ns else ALL_NAMESPACES[collection]
        req = urllib.request.Request(self.url + path + "?" + "&".join(query))
        req.add_header("Authorization", "Bearer " + self.token(client or self.clients[0]))
        return Watch(urllib.request.urlopen(req, context=self._ctx, timeout=timeout))


class Watch:
    """An open watch stream (one JSON event per line)."""

    def __init__(self, resp):
        self.resp = resp
        self.buf = b""

    def next_event(self):
        """The next event as a dict, or None at the clean end of the stream. Raises
        socket.timeout when nothing arrives within the request timeout, and
        http.client.IncompleteRead when the server drops the connection mid-stream
        (readline() would hide that)."""
        while b"\n" not in self.buf:
            chunk = self.resp.read1(65536)
            if not chunk:
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def close(self):
        self.resp.close()


def requests_by_verb(stats, client):
    """{verb: requests} of one client in ApiServer.stats() (all outcomes)."""
    out = {}
    for verb, per_outcome in stats.get(client, {}).items():
        if isinstance(per_outcome, dict):
            out[verb] = sum(v for v in per_outcome.values() if isinstance(v, int))
        elif isinstance(per_outcome, int):
            out[verb] = per_outcome
    return out


def write_kubeconfig(path, server, ca, user, token=None, cert=None, key=None):
    """Writes a kubeconfig (YAML, one user, namespace default) for mixes the server does
    not write itself, such as one client's certificate against another server: token
    inline and/or cert and key as file paths."""
    fields = {"token": token, "client-certificate": cert, "client-key": key}
    lines = ["apiVersion: v1", "kind: Config", "clusters:", "- name: test", "  cluster:",
             "    server: " + json.dumps(server),
             "    certificate-authority: " + json.dumps(ca),
             "users:", "- name: " + json.dumps(user), "  user:"]
    lines += ["    %s: %s" % (k, json.dumps(v)) for k, v in fields.items() if v is not None]
    lines += ["contexts:", "- name: test", "  context:", "    cluster: test",
              "    user: " + json.dumps(user), "    namespace: default",
              "current-context: test"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)
    return path


def is_transport_error(exc):
    """True for the ways a dropped connection shows up in urllib."""
    return isinstance(exc, (ConnectionError, ssl.SSLError, socket.timeout,
                            urllib.error.URLError, EOFError, http.client.IncompleteRead,
                            http.client.RemoteDisconnected))
