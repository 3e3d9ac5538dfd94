# SPDX-License-Identifier: Apache-2.0
"""Real leaderd replicas on loopback against the bundled Lease API server
(apiserver.py): starting and stopping them, polling their /leader, checking
safety while polling (Watcher), unittest mixins, and what /proc says of a
process (its memory, descriptors and connections). Every process is started
here and stopped by PID; every wait is bounded.

The binary is $LEADERD_BUILD/leaderd (default build/ under the repository);
LEADERD may be reassigned before replicas start (tools/footprint.py does)."""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

from .apiserver import REPO, ApiServer

BUILD = os.path.abspath(os.environ.get("LEADERD_BUILD") or os.path.join(REPO, "build"))
LEADERD = os.path.join(BUILD, "leaderd")

# leaderd's own defaults, for figures of a replica as deployed.
DEFAULTS = {"lease_duration": 15.0, "renew_deadline": 10.0, "retry_period": 2.0}

# Short timings so failover tests take seconds (lease > renew > 1.2 x retry).
FAST = {"lease_duration": 4.0, "renew_deadline": 3.0, "retry_period": 1.0}

# Liveness bounds of the tests, from the timings (docs/guides/timings.md):
# a removed leader (SIGKILL, partition) is replaced within lease-duration
# (its Lease expires) + 2 x retry-period (a standby's next attempt, jittered
# by up to 1.2, after it last saw the Lease); a released Lease is taken within
# retry-period + 1 s; a leader exits within renew-deadline of SIGTERM (the
# release write is given at most that long, ld_election_shutdown).
KILL_BOUND = FAST["lease_duration"] + 2 * FAST["retry_period"]
TERM_BOUND = FAST["retry_period"] + 1.0
EXIT_BOUND = FAST["renew_deadline"]
# On a loaded machine (two cores shared with other jobs) any of those steps may
# wait for a CPU: a liveness bound gets one more retry period, as if the attempt
# that should have won had been missed once. Safety checks (one leader, term
# never decreasing, a partitioned leader stepping down before a takeover) are
# orderings, not timings, and get no slack.
SCHED_SLACK = FAST["retry_period"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout, interval=0.025, what="condition"):
    """Polls predicate until it returns a truthy value or timeout passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}")
        time.sleep(interval)


def http_get(url, timeout=1.0):
    """Returns (status, body bytes), or (None, None) when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, OSError):
        return None, None


def accepts(host, port, timeout=1.0):
    """True when a TCP connection to host:port is accepted (then closed
    at once, without a request)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def timed_get(port, path, timeout=5.0):
    """(status, body, seconds) of one GET on a fresh connection."""
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
        return resp.status, body, time.monotonic() - t0
    finally:
        conn.close()


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def server_connections(pid, port):
    """How many connections process pid holds on its listening port (accepted
    ones, any state but LISTEN), from /proc. Unlike a count of all its fds,
    this ignores the process's own client connections (to the API server,
    its watch), which come and go with its work."""
    return _tcp_connections(pid, port, 1)


def client_connections(pid, port):
    """How many TCP connections process pid holds to a server on port (the
    API server, say), in any state but LISTEN, from /proc."""
    return _tcp_connections(pid, port, 2)


def _tcp_connections(pid, port, column):
    """pid's TCP sockets, not listening, whose address in column of
    /proc/net/tcp (1 local, 2 remote) has port."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if link.startswith("socket:["):
            inodes.add(link[len("socket:["):-1])
    n = 0
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            addr, state, inode = cols[column], cols[3], cols[9]
            if inode in inodes and int(addr.rsplit(":", 1)[1], 16) == port and state != "0A":
                n += 1
    return n


def closed_by_peer(socks):
    """How many of the client sockets socks the other side has closed (EOF
    or a reset is waiting on them), without blocking on the others."""
    closed = 0
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    return closed


def proc_status(pid, field):
    """A kB figure from /proc/PID/status, e.g. RssAnon."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def proc_fields(pid, fields):
    """{field: number} from /proc/PID/status for each of fields present
    (kB for the memory figures, a count for Threads)."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in fields:
                out[key] = int(value.split()[0])
    return out


class Replica:
    """One leaderd process using the API server client of the same name."""

    def __init__(self, api, client, workdir, identity=None, lease="demo",
                 namespace="default", timings=FAST, extra_args=(), wrapper=(),
                 env=None, binary=None):
        self.api = api
        self.client = client
        self.identity = identity or client
        self.lease = lease
        self.namespace = namespace
        self.timings = dict(timings)
        self.extra_args = list(extra_args)
        self.wrapper = list(wrapper)
        # Another build than LEADERD (another architecture's, run by wrapper).
        self.binary = binary
        self.env = env or {}
        self.workdir = workdir
        self.port = None
        self.proc = None
        self.log_path = os.path.join(workdir, f"leaderd-{client}.log")
        self.log_file = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def argv(self):
        t = self.timings
        return self.wrapper + [
            self.binary or LEADERD,
            "--lease-name", self.lease,
            "--namespace", self.namespace,
            "--identity", self.identity,
            "--kubeconfig", self.api.kubeconfig(self.client),
            "--listen", f"127.0.0.1:{self.port}",
            "--lease-duration", f"{int(t['lease_duration'])}s",
            "--renew-deadline", f"{int(t['renew_deadline'] * 1000)}ms",
            "--retry-period", f"{int(t['retry_period'] * 1000)}ms",
            "--log-level", "debug",
        ] + self.extra_args

    def start(self, wait_listening=True, timeout=10.0):
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEADERD_")}
        for k in ("KUBECONFIG", "POD_NAME", "POD_NAMESPACE", "KUBERNETES_SERVICE_HOST"):
            env.pop(k, None)
        env.update(self.env)
        self.log_file = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv(), stdout=self.log_file,
                                     stderr=subprocess.STDOUT, env=env)
        if wait_listening:
            wait_until(lambda: self.alive() and self.get("/healthz")[0] is not None,
                       timeout, what=f"{self.client} to listen")
            # leaderd opens the API proxy after its HTTP server (both before
            # its loop runs): an answer on /healthz does not mean the proxy
            # listens yet.
            proxy = self.proxy_address()
            if proxy:
                wait_until(lambda: self.alive() and accepts(*proxy), timeout,
                           what=f"{self.client}'s API proxy to listen")
        return self

    def proxy_address(self):
        """(host, port) of --api-proxy in extra_args, None without one or
        for port 0 (the system's choice, not known here)."""
        args = self.extra_args
        for i, a in enumerate(args):
            if a == "--":
                break  # the command's own arguments
            value = None
            if a == "--api-proxy" and i + 1 < len(args):
                value = args[i + 1]
            elif a.startswith("--api-proxy="):
                value = a.split("=", 1)[1]
            if value:
                host, _, port = value.rpartition(":")
                if port.isdigit() and int(port) > 0:
                    return host.strip("[]") or "127.0.0.1", int(port)
        return None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def get(self, path, timeout=1.0):
        return http_get(self.url + path, timeout=timeout)

    def leader(self):
        """(status, decoded /leader JSON) or (None, None)."""
        status, body = self.get("/leader")
        if status is None:
            return None, None
        return status, json.loads(body)

    def is_leader(self):
        status, doc = self.leader()
        return status == 200 and doc["is_leader"] is True

    def send(self, sig):
        if self.alive():
            os.kill(self.proc.pid, sig)

    def wait_exit(self, timeout):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, sig=signal.SIGTERM, timeout=15.0):
        """Stops the process (by PID) and returns its exit status."""
        if self.proc is None:
            return None
        if self.alive():
            os.kill(self.proc.pid, sig)
        rc = self.wait_exit(timeout)
        if rc is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            rc = self.proc.wait(timeout=10)
        if self.log_file:
            self.log_file.close()
            self.log_file = None
        return rc

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""


def sample(replicas):
    """One poll of every replica, one after another: {client: (status, doc)}
    in the order they answered."""
    return {r.client: r.leader() for r in replicas if r.alive()}


def leaders_in(snapshot):
    return [c for c, (status, doc) in snapshot.items()
            if status == 200 and doc and doc.get("is_leader")]


class Watcher:
    """Polls all replicas, checking safety on every sample: never two
    replicas claiming leadership at once, and term never decreasing.

    A sample asks the replicas one after another, so it is not one instant:
    the old leader may say yes, hand over, and the new one say yes a moment
    later in the same sample. Claims are therefore judged in the order they
    were answered: each later claim must carry a higher term (a handover in
    between). Two claims of one term, or a later claim of an older term, are
    two leaders at once — within a sample and across samples (an old leader
    that goes on claiming after the new one has)."""

    def __init__(self, testcase, replicas):
        self.t = testcase
        self.replicas = replicas
        self.last_term = {}
        self.samples = 0
        self.last_claim = None  # (term, client) of the latest claim seen

    def poll(self):
        snap = sample(self.replicas)
        self.samples += 1
        leaders = leaders_in(snap)
        for client in leaders:
            claim = (snap[client][1]["term"], client)
            if self.last_claim is not None:
                term, holder = self.last_claim
                self.t.assertTrue(claim[0] > term or claim == self.last_claim,
                                  f"two leaders at once: {client} claims term {claim[0]} "
                                  f"after {holder} claimed term {term}: {snap}")
            self.last_claim = claim
        for client, (status, doc) in snap.items():
            if doc is None:
                continue
            prev = self.last_term.get(client, -1)
            self.t.assertGreaterEqual(doc["term"], prev, f"term went down on {client}")
            self.last_term[client] = doc["term"]
        return snap, leaders

    def until(self, predicate, timeout, what):
        """Polls every 25 ms until predicate(snapshot, leaders) is truthy."""
        deadline = time.monotonic() + timeout
        while True:
            snap, leaders = self.poll()
            value = predicate(snap, leaders)
            if value:
                return value
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}: {snap}")
            time.sleep(0.025)

    def for_duration(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.poll()
            time.sleep(0.025)

    def one_leader(self, timeout):
        def check(snap, leaders):
            return leaders[0] if len(leaders) == 1 else None
        return self.until(check, timeout, "exactly one leader")


def test_failed(testcase):
    """True once the running unittest test method has failed or errored."""
    result = getattr(testcase._outcome, "result", None)
    return result is not None and any(
        t is testcase for t, _ in result.failures + result.errors)


def stop_all(testcase, replicas):
    """Kills every replica by PID; prints their logs when the test failed."""
    failed = test_failed(testcase) or os.environ.get("LEADERD_IT_KEEP")
    for r in replicas:
        r.stop(signal.SIGKILL)
    if failed:
        for r in replicas:
            print(f"--- log of {r.client}:\n{r.log()[-4000:]}")


class OneLeader:
    """Mixin for a unittest.TestCase whose tests share one leading replica:
    cls.r (client and identity "solo") with its own API server cls.api in
    cls.dir (named after dir_prefix), leading before the first test and
    stopped by PID after the last."""

    dir_prefix = "leaderd-solo-"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp(prefix=cls.dir_prefix)
        cls.api = ApiServer(os.path.join(cls.dir, "api"), ["solo"])
        cls.r = Replica(cls.api, "solo", cls.dir)
        try:
            cls.api.start()
            cls.r.start()
            wait_until(cls.r.is_leader, FAST["lease_duration"] + 2,
                       what="the only replica to lead")
        except BaseException:
            cls.stop_leader()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.stop_leader()
        super().tearDownClass()

    @classmethod
    def stop_leader(cls):
        cls.r.stop()
        cls.api.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)


class FreshReplicas:
    """Mixin for a unittest.TestCase whose every test gets its own API server
    self.api and one started replica per name in clients (self.replicas, in
    that order, watched by self.watch), all in self.dir (named after
    dir_prefix) and stopped by PID after the test."""

    clients = ()
    dir_prefix = "leaderd-it-"

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp(prefix=self.dir_prefix)
        self.api = ApiServer(os.path.join(self.dir, "api"), list(self.clients))
        self.replicas = []
        try:
            self.api.start()
            for c in self.clients:
                self.replicas.append(Replica(self.api, c, self.dir))
                self.replicas[-1].start()
        except BaseException:
            self.stop_replicas()
            raise
        self.watch = Watcher(self, self.replicas)

    def tearDown(self):
        self.stop_replicas()
        super().tearDown()

    def stop_replicas(self):
        stop_all(self, self.replicas)
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
