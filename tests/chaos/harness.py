# SPDX-License-Identifier: Apache-2.0
"""Chaos harness: real leaderd replicas against build/leaderd-apiserver, a
poller that asks every replica's /leader every 25 ms, and the checks that turn
the samples and the API server's write log into pass/fail. Standard library
only. Every process is started here and stopped by PID; every wait is bounded.
It uses the package leaderd_testing (tests/support) and childrec.py beside it,
which its entry points (run.py, soak.py, test_checks.py) put on sys.path.

Clocks: samples carry time.monotonic() taken just before the request was sent
(start) and after the answer was read (end). The API server's write log
carries clock_us, CLOCK_MONOTONIC in microseconds taken when the write
committed; time.monotonic() is CLOCK_MONOTONIC too, so both compare directly
(run.py checks that before anything else).
"""
import asyncio
import bisect
import collections
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

from childrec import PERIOD as CHILD_PERIOD
from leaderd_testing.apiserver import LEASES, ApiServer, ControlError
from leaderd_testing.cluster import LEADERD, free_port
from leaderd_testing.cluster import http_get as get_url

HERE = os.path.dirname(os.path.abspath(__file__))

# The timings of the suite (lease > renew > 1.2 x retry).
LEASE = 4.0
RENEW = 3.0
RETRY = 1.0
KILL_BOUND = LEASE + 2 * RETRY  # a removed leader is replaced within this
TERM_BOUND = RETRY + 1.0        # a released Lease is taken within this
CONVERGE_BOUND = LEASE + RETRY  # after a fault heals, everyone agrees within this
# The bounds above are the design's; on a loaded machine (two cores shared
# with other jobs, make test-under-load) any step may wait for a CPU, so the
# liveness checks (record_failover, converge, steady) allow one more retry
# period, as if the attempt that should have won had been missed once. The
# safety checks (analyse(), stops_claiming) are orderings against the write
# log and get none. CHAOS_SCHED_SLACK overrides it (seconds).
SCHED_SLACK = float(os.environ.get("CHAOS_SCHED_SLACK", RETRY))

NS = "default"
LEASE_NAME = "chaos"
POD_NAME = "app"  # the Pod written through the replicas' API proxies
CONFIGMAP_NAME = "fenced"  # and the ConfigMap
POLL_INTERVAL = 0.025
FETCH_TIMEOUT = 2.0  # a live, running leaderd answers /leader in microseconds
CLOCK_SLACK = 0.001  # the write log has microseconds; allow one millisecond

# The exec child (Cluster(child=True)): `leaderd ... -- python3 childrec.py
# FILE`. Its grace is given explicitly (the default, half the margin) so the
# checks know it. A child is SIGKILLed at the latest renew-deadline +
# CHILD_GRACE after its leader's last renewal began, CHILD_MARGIN before any
# other replica may acquire.
CHILDREC = os.path.join(HERE, "childrec.py")
CHILD_GRACE = (LEASE - RENEW) / 2
CHILD_MARGIN = LEASE - RENEW - CHILD_GRACE
# The supervisor is a small C process acting on a timer, but it may wait for
# a CPU like anything else: half the margin is allowed for that. A child that
# lives longer has eaten into the time that keeps it apart from a successor.
CHILD_KILL_SLACK = CHILD_MARGIN / 2
# From the fork to the first record: a Python interpreter starting on a
# loaded machine. Liveness only (a child's first record after its leader's
# acquisition); no safety check uses it.
CHILD_START = 1.0

SANITIZER_RE = re.compile(r"ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:|"
                          r"SUMMARY: (Address|Leak|Undefined)Sanitizer")


def slow_factor():
    """Startup waits grow under sanitizers or valgrind; fault timings never do."""
    try:
        return float(os.environ.get("CHAOS_SLOW", "1"))
    except ValueError:
        return 1.0


class ScenarioError(Exception):
    """A bounded wait timed out or a step could not be done."""


def http_get(port, path, timeout=1.0):
    """(status, body bytes) of GET path on 127.0.0.1:port, or (None, None)
    when nothing answered."""
    return get_url(f"http://127.0.0.1:{port}{path}", timeout=timeout)


def micro_time(wall=None):
    """RFC 3339 with six fractional digits, as Leases carry."""
    wall = time.time() if wall is None else wall
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(wall)) + ".%06dZ" % (
        int(wall * 1e6) % 1000000)


# ---- processes ----

class Proc:
    """One leaderd process of a slot."""

    def __init__(self, slot, seq, popen, log_path, log_offset, started):
        self.slot = slot
        self.seq = seq
        self.popen = popen
        self.pid = popen.pid
        self.log_path = log_path
        self.log_offset = log_offset
        self.started = started
        self.expected_exit = None  # the signal we sent to end it
        self.signalled_at = None
        self.exited_at = None
        self.rc = None
        self.stops = []  # [(SIGSTOP time, SIGCONT time or None)]

    def poll(self):
        if self.exited_at is None:
            rc = self.popen.poll()
            if rc is not None:
                self.rc = rc
                self.exited_at = time.monotonic()
        return self.exited_at is None

    def stopped_during(self, t0, t1):
        return any(a <= t1 and (b is None or b >= t0) for a, b in self.stops)

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def label(self):
        return f"{self.slot.name}#{self.seq} (pid {self.pid})"


class Slot:
    """A replica position: a client name of the API server (its token and
    kubeconfig) and an identity; processes come and go."""

    def __init__(self, name, identity):
        self.name = name
        self.identity = identity
        self.port = None
        self.proxy_port = None  # its --api-proxy port (Cluster(api_proxy=True))
        self.proc = None
        self.procs = []

    def __repr__(self):
        return self.name


# ---- samples ----

class Sample:
    """One answer of /leader, or in shard mode of /shards: then shards is
    {shard ID: (is_leader, leader, term)} and members the live members it
    names (is_leader, leader and term stay False/None)."""
    __slots__ = ("slot", "proc", "rnd", "start", "end", "status", "is_leader", "leader",
                 "term", "err", "shards", "members")

    def __init__(self, slot, proc, rnd, start, end, status, doc, err):
        self.slot = slot
        self.proc = proc
        self.rnd = rnd
        self.start = start
        self.end = end
        self.status = status
        self.err = err
        self.is_leader = bool(doc and doc.get("is_leader") is True and status == 200)
        self.leader = doc.get("leader") if doc else None
        self.term = doc.get("term") if doc else None
        self.shards = self.members = None
        if doc and isinstance(doc.get("shards"), list) and status == 200:
            self.shards = {e["shard"]: (e.get("is_leader") is True, e.get("leader"),
                                        e.get("term")) for e in doc["shards"]}
            self.members = doc.get("members")

    def for_shard(self, sid):
        """This answer as if it were a /leader answer for shard sid alone."""
        return ShardSample(self, sid)


class ShardSample:
    """A Sample of /shards seen as one shard's /leader sample, so that the
    single-Lease checks of analyse() apply per shard unchanged."""
    __slots__ = ("slot", "proc", "rnd", "start", "end", "status", "is_leader", "leader",
                 "term", "err")

    def __init__(self, s, sid):
        self.slot, self.proc, self.rnd = s.slot, s.proc, s.rnd
        self.start, self.end, self.status, self.err = s.start, s.end, s.status, s.err
        self.is_leader, self.leader, self.term = (s.shards or {}).get(sid, (False, None, None))


class Poller:
    """Asks every live replica's /leader every POLL_INTERVAL from an asyncio
    loop in its own thread. All requests of one round leave together; a replica
    that has not answered the previous round (stopped, say) is skipped until it
    does, so one slow replica never delays the others."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.lock = threading.Lock()
        self.samples = []
        self.latest = {}
        self.rounds = 0
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()),
                                        name="poller", daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(FETCH_TIMEOUT + 5)

    def trim(self, before):
        """Drops samples that started before `before` (the soak keeps memory flat)."""
        with self.lock:
            self.samples = [s for s in self.samples if s.start >= before]

    def since(self, index):
        with self.lock:
            return self.samples[index:], len(self.samples)

    async def _main(self):
        inflight = {}
        nxt = time.monotonic()
        while not self._stop.is_set():
            self.rounds += 1
            for slot, proc, port in self.cluster.poll_targets():
                if slot.name in inflight:
                    continue
                task = asyncio.ensure_future(self._fetch(slot, proc, port, self.rounds))
                inflight[slot.name] = task
                task.add_done_callback(lambda _t, k=slot.name: inflight.pop(k, None))
            nxt += POLL_INTERVAL
            delay = nxt - time.monotonic()
            if delay < 0:
                nxt = time.monotonic()
                delay = 0
            await asyncio.sleep(delay)
        for task in list(inflight.values()):
            task.cancel()
        await asyncio.sleep(0)

    async def _fetch(self, slot, proc, port, rnd):
        start = time.monotonic()
        status = doc = err = None
        writer = None
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port), FETCH_TIMEOUT)
            writer.write(b"GET " + self.cluster.poll_path.encode()
                         + b" HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            left = max(0.05, FETCH_TIMEOUT - (time.monotonic() - start))
            data = await asyncio.wait_for(reader.read(), left)
            head, _, body = data.partition(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            doc = json.loads(body)
        except asyncio.TimeoutError:
            err = "timeout"
        except (OSError, ValueError, IndexError) as e:
            err = type(e).__name__
        finally:
            if writer is not None:
                writer.close()
        s = Sample(slot, proc, rnd, start, time.monotonic(), status, doc, err)
        with self.lock:
            self.samples.append(s)
            if status is not None:
                self.latest[slot.name] = s


# ---- the write log ----

class Write:
    __slots__ = ("t", "client", "verb", "holder", "transitions", "rv", "kind")

    def __init__(self, entry, replica_clients):
        self.t = entry["clock_us"] / 1e6
        self.client = entry["client"]
        self.verb = entry["verb"]
        h = entry.get("holderIdentity")
        self.holder = h if isinstance(h, str) else None
        self.transitions = entry.get("leaseTransitions")
        self.rv = entry.get("resourceVersion")
        if self.verb in ("raw", "delete"):
            self.kind = "oob"  # outside the protocol: garbage or a deletion
        elif self.client in replica_clients:
            self.kind = "proto"
        else:
            self.kind = "admin"  # a valid Lease written back by the test

    def __repr__(self):
        return f"{self.verb} by {self.client} holder={self.holder!r} term={self.transitions}"


# ---- the cluster ----

class Cluster:
    """An API server and N leaderd replicas on loopback, plus the poller."""

    def __init__(self, workdir, n, extra_clients=("dup",), log_level="debug",
                 api_verbose=True, child=False, shards=None, api_proxy=False):
        self.dir = workdir
        # With api_proxy, every replica runs `--api-proxy 127.0.0.1:PORT` (a
        # fresh port per process, Slot.proxy_port) and the API server holds
        # the Pod POD_NAME and the ConfigMap CONFIGMAP_NAME for writes through
        # those proxies.
        self.api_proxy = api_proxy
        # With shards (a count), every replica runs `--shards N` on the group
        # LEASE_NAME; the poller asks /shards and the log keeps every shard
        # Lease's writes (shard_writes).
        self.shards = shards
        self.poll_path = "/shards" if shards else "/leader"
        self.shard_writes = {}
        os.makedirs(workdir, exist_ok=True)
        # With child, every replica runs childrec.py while leading, and all
        # of them record into this one file.
        self.child_file = os.path.join(workdir, "children.rec") if child else None
        self.slots = [Slot(f"r{i + 1}", f"r{i + 1}") for i in range(n)]
        self.extra_clients = list(extra_clients)
        self.clients = [s.name for s in self.slots] + self.extra_clients
        self.log_level = log_level
        self.api = ApiServer(os.path.join(workdir, "api"), self.clients,
                             state_file=os.path.join(workdir, "api", "state.json"),
                             verbose=api_verbose)
        self.lock = threading.Lock()
        self.poller = Poller(self)
        self.writes = []
        self._log_since = 0
        self._seq = 0
        self.api_exits = []

    # -- lifecycle --

    def start(self):
        self.api.start()
        if self.api_proxy:
            self.api.control("POST", "pods", {"namespace": NS, "name": POD_NAME,
                                              "labels": {"app": "chaos"}})
            status, body = self.api.post_configmap(NS, {"metadata": {"name": CONFIGMAP_NAME},
                                                        "data": {"written": ""}})
            if status != 201:
                raise RuntimeError(f"cannot create ConfigMap {CONFIGMAP_NAME}: {body}")
        for slot in self.slots:
            self.start_slot(slot)
        self.poller.start()
        return self

    def argv(self, slot):
        return [LEADERD,
                "--lease-name", LEASE_NAME, "--namespace", NS,
                "--identity", slot.identity,
                "--kubeconfig", self.api.kubeconfig(slot.name, token_file=True),
                "--listen", f"127.0.0.1:{slot.port}",
                "--lease-duration", f"{int(LEASE)}s",
                "--renew-deadline", f"{int(RENEW * 1000)}ms",
                "--retry-period", f"{int(RETRY * 1000)}ms",
                "--log-level", self.log_level] + self.child_argv() + (
                    ["--shards", str(self.shards)] if self.shards else []) + (
                    ["--api-proxy", f"127.0.0.1:{slot.proxy_port}"] if self.api_proxy else [])

    def child_argv(self):
        if self.child_file is None:
            return []
        return ["--child-grace", f"{int(CHILD_GRACE * 1000)}ms",
                "--", sys.executable, CHILDREC, self.child_file]

    def start_slot(self, slot, timeout=10.0):
        """Starts a new process in slot and waits until its HTTP server answers."""
        timeout *= slow_factor()
        if slot.proc is not None and slot.proc.poll():
            raise ScenarioError(f"{slot.proc.label()} is still running")
        slot.port = free_port()
        if self.api_proxy:
            slot.proxy_port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEADERD_")}
        for k in ("KUBECONFIG", "POD_NAME", "POD_NAMESPACE", "KUBERNETES_SERVICE_HOST"):
            env.pop(k, None)
        log_path = os.path.join(self.dir, f"leaderd-{slot.name}.log")
        with open(log_path, "ab") as log:
            offset = log.tell()
            popen = subprocess.Popen(self.argv(slot), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
        self._seq += 1
        proc = Proc(slot, self._seq, popen, log_path, offset, time.monotonic())
        slot.procs.append(proc)
        deadline = time.monotonic() + timeout
        while http_get(slot.port, "/healthz", timeout=0.5)[0] is None:
            if not proc.poll():
                raise ScenarioError(f"{proc.label()} exited with {proc.rc} at start:\n"
                                    + tail(proc.log()))
            if time.monotonic() > deadline:
                raise ScenarioError(f"{proc.label()} did not listen within {timeout:.0f}s")
            time.sleep(0.02)
        with self.lock:
            slot.proc = proc
        return proc

    def poll_targets(self):
        out = []
        with self.lock:
            for slot in self.slots:
                p = slot.proc
                if p is not None and p.poll():
                    out.append((slot, p, slot.port))
        return out

    def all_procs(self):
        return [p for s in self.slots for p in s.procs]

    def live_slots(self):
        return [s for s in self.slots if s.proc is not None and s.proc.poll()]

    def slot(self, name):
        return next(s for s in self.slots if s.name == name)

    def send(self, slot, sig):
        p = slot.proc
        if p is None or not p.poll():
            raise ScenarioError(f"{slot.name} is not running")
        now = time.monotonic()
        if sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
            p.expected_exit = sig
            p.signalled_at = now
        if sig == signal.SIGSTOP:
            p.stops.append((now, None))
        os.kill(p.pid, sig)
        if sig == signal.SIGCONT and p.stops and p.stops[-1][1] is None:
            p.stops[-1] = (p.stops[-1][0], time.monotonic())
        return now

    def wait_exit(self, slot, timeout):
        p = slot.proc
        try:
            p.popen.wait(timeout=timeout * slow_factor())
        except subprocess.TimeoutExpired:
            return None
        p.poll()
        return p.rc

    def stop_slot(self, slot, failures, timeout=10.0):
        """SIGTERM (after SIGCONT, in case it is stopped); records a failure
        unless it exits with 0 in time."""
        p = slot.proc
        if p is None or not p.poll():
            return
        if p.stops and p.stops[-1][1] is None:
            self.send(slot, signal.SIGCONT)
        self.send(slot, signal.SIGTERM)
        rc = self.wait_exit(slot, timeout)
        if rc is None:
            os.kill(p.pid, signal.SIGKILL)
            p.popen.wait(10)
            p.poll()
            failures.append(f"{p.label()} did not exit within {timeout:.0f}s of SIGTERM")
        elif rc != 0:
            failures.append(f"{p.label()} exited with {rc} on SIGTERM:\n" + tail(p.log()))

    def shutdown(self, failures):
        """Stops the poller, every replica (checking exit 0 on SIGTERM) and the
        API server."""
        self.poller.stop()
        # The leader last: a standby stopped after it might take the released
        # Lease and start a child just to pass it SIGTERM at once.
        latest = self.latest()
        for slot in sorted(self.slots, key=lambda s: bool(
                latest.get(s.name) is not None and latest[s.name].is_leader)):
            self.stop_slot(slot, failures)
        self.refresh_log()  # the last writes, for checks after the shutdown
        rc = self.api.stop()
        if rc not in (0, None):
            failures.append(f"leaderd-apiserver exited with {rc}")

    def kill_everything(self):
        """Last resort after an exception: SIGKILL by PID."""
        self.poller.stop()
        for p in self.all_procs():
            if p.poll():
                try:
                    os.kill(p.pid, signal.SIGKILL)
                    p.popen.wait(10)
                except (OSError, subprocess.TimeoutExpired):
                    pass
        if self.api.proc is not None:
            try:
                self.api.proc.kill()
            except OSError:
                pass
            self.api.stop()

    # -- the API server --

    def restart_api(self, down_for):
        """Stops the API server, waits down_for seconds, starts it on the same
        port with the same state file. Returns (stopped at, up again at)."""
        self.refresh_log()
        t0 = time.monotonic()
        rc = self.api.stop()
        self.api_exits.append(rc)
        time.sleep(down_for)
        self.api.start()
        self._log_since = 0
        return t0, time.monotonic()

    def admin(self, method, path, body=None, timeout=3.0):
        return self.api.json_request(method, path, body, token=self.api.token("admin"),
                                     timeout=timeout)

    def lease_path(self):
        return LEASES % NS + "/" + LEASE_NAME

    def refresh_log(self):
        try:
            entries = self.api.write_log(self._log_since)
        except (ControlError, OSError):
            return self.writes
        replica_clients = set(self.clients)
        prefix = LEASE_NAME + "-"
        for e in entries:
            self._log_since = e["seq"]
            if e.get("namespace") != NS:
                continue
            name = e.get("name") or ""
            if name == LEASE_NAME:
                self.writes.append(Write(e, replica_clients))
            elif self.shards and name.startswith(prefix) and \
                    name[len(prefix):].isdigit():
                self.shard_writes.setdefault(name[len(prefix):], []).append(
                    Write(e, replica_clients))
        return self.writes

    def shard_ids(self):
        return [str(i) for i in range(self.shards or 0)]

    def shard_holders(self):
        """{shard: holder per its last write ("" released, None never written)}."""
        self.refresh_log()
        out = {}
        for sid in self.shard_ids():
            ws = self.shard_writes.get(sid)
            out[sid] = ws[-1].holder if ws and ws[-1].verb != "delete" else None
        return out

    def shard_owners(self, exclude=()):
        """{shard: slot} when, per the latest answer (under 0.5 s old) of every
        live replica not in exclude, each sees those replicas as the members,
        every shard is claimed by exactly one of them, is held by it per the
        write log, and each owns floor or ceil of N/M; else None."""
        names = {s.name for s in exclude}
        latest = self.latest()
        live = [s for s in self.live_slots() if s.name not in names]
        members = sorted(s.identity for s in live)
        holders = self.shard_holders()
        owners = {}
        now = time.monotonic()
        for slot in live:
            smp = latest.get(slot.name)
            if smp is None or smp.proc is not slot.proc or now - smp.start > 0.5 \
                    or smp.shards is None or smp.members != members:
                return None
            for sid, (lead, leader, _term) in smp.shards.items():
                if holders.get(sid) != (leader or ""):
                    return None
                if lead:
                    if sid in owners:
                        return None
                    owners[sid] = slot
        if len(owners) != self.shards:
            return None
        counts = {sum(1 for o in owners.values() if o is s) for s in live}
        n, m = self.shards, len(live)
        if not counts <= {n // m, -(-n // m)}:
            return None
        return owners

    def shards_steady(self, timeout=KILL_BOUND + 4 * RETRY + SCHED_SLACK + 3, exclude=(),
                      hold=0.2):
        """Waits until shard_owners() holds, unchanged, for `hold` seconds;
        returns it."""
        deadline = time.monotonic() + timeout
        since, prev = None, None
        while True:
            now = time.monotonic()
            cur = self.shard_owners(exclude)
            if cur is not None and cur == prev:
                if now - since >= hold:
                    return cur
            else:
                prev, since = cur, now
            if now > deadline:
                def owned(v):
                    return sorted((i for i, x in (v.shards or {}).items() if x[0]), key=int)
                raise ScenarioError(
                    f"the shards did not balance within {timeout:.1f}s: answers "
                    + ", ".join(f"{k}: members={v.members} owned={owned(v)}"
                                for k, v in sorted(self.latest().items())))
            time.sleep(0.05)

    def last_write(self):
        self.refresh_log()
        return self.writes[-1] if self.writes else None

    def holder(self):
        """The holder per the last write: an identity, "" when released, None
        when there is no Lease or it is garbage."""
        w = self.last_write()
        if w is None or w.verb == "delete":
            return None
        return w.holder

    # -- the exec children's records --

    def child_text(self):
        """The children's records so far ("" before the first)."""
        try:
            with open(self.child_file, "rb") as f:
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def child_runs(self):
        """The child instances recorded so far (see child_instances)."""
        return child_instances(self.child_text())[0]

    def wait_child(self, pred, timeout, what):
        """The first child instance pred accepts; the file is re-read every
        heartbeat, as that is how often it can change."""
        deadline = time.monotonic() + timeout
        while True:
            for run in self.child_runs():
                if pred(run):
                    return run
            if time.monotonic() > deadline:
                raise ScenarioError(f"timed out after {timeout:.1f}s waiting for {what}")
            time.sleep(CHILD_PERIOD)

    # -- waiting on samples --

    def latest(self):
        with self.poller.lock:
            return dict(self.poller.latest)

    def samples(self, pred=None):
        """A copy of the samples so far (those pred accepts)."""
        with self.poller.lock:
            return [s for s in self.poller.samples if pred is None or pred(s)]

    def wait_sample(self, pred, timeout, what):
        """Returns the first new sample for which pred holds."""
        _, idx = self.poller.since(0)
        deadline = time.monotonic() + timeout
        while True:
            new, idx = self.poller.since(idx)
            for s in new:
                if pred(s):
                    return s
            if time.monotonic() > deadline:
                raise ScenarioError(f"timed out after {timeout:.1f}s waiting for {what}")
            time.sleep(POLL_INTERVAL / 2)

    def first_claim(self, after, timeout, exclude=(), what="a leader"):
        names = {s.name for s in exclude}
        return self.wait_sample(lambda s: s.is_leader and s.start >= after
                                and s.slot.name not in names, timeout, what)

    def agreement(self, exclude=()):
        """The leader slot when, per the latest answer of every live replica,
        exactly one claims leadership, it is the holder the API server has, and
        every replica names that holder; else None."""
        names = {s.name for s in exclude}
        latest = self.latest()
        holder = self.holder()
        if not holder:
            return None
        leaders = []
        now = time.monotonic()
        for slot in self.live_slots():
            if slot.name in names:
                continue
            s = latest.get(slot.name)
            if s is None or s.proc is not slot.proc or now - s.start > 0.5:
                return None
            if s.leader != holder:
                return None
            if s.is_leader:
                leaders.append(slot)
        if len(leaders) == 1 and leaders[0].identity == holder:
            return leaders[0]
        return None

    def steady(self, timeout=KILL_BOUND + SCHED_SLACK + 3, exclude=(), hold=0.2):
        """Waits until agreement() holds for `hold` seconds; returns the leader.
        In shard mode: shards_steady(), the owner map."""
        if self.shards:
            return self.shards_steady(exclude=exclude, hold=hold)
        deadline = time.monotonic() + timeout
        since = None
        leader = None
        while True:
            now = time.monotonic()
            cur = self.agreement(exclude)
            if cur is not None and cur is leader:
                if now - since >= hold:
                    return leader
            else:
                leader, since = cur, now
            if now > deadline:
                raise ScenarioError(
                    f"no agreement on one leader within {timeout:.1f}s: "
                    f"holder {self.holder()!r}, answers "
                    + ", ".join(f"{k}: leader={v.leader!r} is_leader={v.is_leader}"
                                for k, v in sorted(self.latest().items())))
            time.sleep(0.05)


def tail(text, lines=25):
    return "\n".join("    | " + ln for ln in text.splitlines()[-lines:])


# ---- a scenario run and its checks ----

class Ctx:
    """One run of one scenario: the cluster, what was measured, what failed."""

    def __init__(self, cluster, name, rep):
        self.c = cluster
        self.name = name
        self.rep = rep
        self.t0 = time.monotonic()
        self.failures = []
        self.notes = []
        self.failovers = []  # (seconds to the acquisition write, seconds to a 200)
        self.allow_term_reset = False

    def rel(self, t):
        return f"t+{t - self.t0:.3f}s"

    def fail(self, msg):
        self.failures.append(msg)

    def note(self, msg):
        self.notes.append(msg)

    def check(self, cond, msg):
        if not cond:
            self.fail(msg)
        return cond

    def sleep_until(self, t):
        d = t - time.monotonic()
        if d > 0:
            time.sleep(d)

    def record_failover(self, t_fault, old_identity, bound, timeout_extra=2.0,
                        exclude=(), what="failover"):
        """Waits for another replica to claim leadership after t_fault; records
        and checks the time to the acquisition write and to the first 200
        against bound + SCHED_SLACK."""
        limit = bound + SCHED_SLACK
        s = self.c.first_claim(t_fault, limit + timeout_extra, exclude=exclude,
                               what=f"a new leader after {what}")
        serving = s.end - t_fault
        acq = None
        for w in self.c.refresh_log():
            if w.t >= t_fault and w.kind == "proto" and w.holder and \
                    w.holder != old_identity:
                acq = w.t - t_fault
                break
        self.failovers.append((acq, serving))
        if acq is not None:
            self.check(acq <= limit, f"{what}: the new holder's write came {acq:.3f}s "
                       f"after the fault (bound {bound:.1f}s + {SCHED_SLACK:.1f}s slack)")
        else:
            self.fail(f"{what}: {s.slot.name} claims leadership but no acquisition "
                      f"by another identity is in the write log")
        # The poll itself adds up to one interval plus its round trip.
        self.check(serving <= limit + POLL_INTERVAL + 0.075,
                   f"{what}: first /leader 200 of {s.slot.name} {serving:.3f}s after the "
                   f"fault (bound {bound:.1f}s + {SCHED_SLACK:.1f}s slack)")
        return s

    def converge(self, t_heal, bound=CONVERGE_BOUND, exclude=()):
        """Every replica agrees on the real holder within bound + SCHED_SLACK
        of t_heal."""
        left = t_heal + bound + SCHED_SLACK - time.monotonic()
        try:
            return self.c.steady(timeout=max(left, 0.3), exclude=exclude)
        except ScenarioError as e:
            self.fail(f"no convergence within {bound:.1f}s + {SCHED_SLACK:.1f}s slack of "
                      f"the heal at {self.rel(t_heal)}: {e}")
            return None

    def stops_claiming(self, slot, t_fault, limit, why):
        """slot claims nothing that started later than t_fault + limit."""
        late = self.c.samples(lambda s: s.slot is slot and s.is_leader
                              and s.start > t_fault + limit + CLOCK_SLACK)
        if late:
            self.fail(f"{slot.name} still claimed leadership {late[-1].start - t_fault:.3f}s "
                      f"after {why} ({len(late)} samples; limit {limit:.1f}s)")

    def log_since(self, slot, t):
        """Log lines of slot's current process (all of it; leaderd's lines carry
        wall times, so callers match on content)."""
        return slot.proc.log() if slot.proc else ""


def lease_checks(ctx, samples, writes, problem):
    """Checks 1-3 of analyse() over one Lease's samples and its writes (sorted
    by time); problem(kind, msg) records what fails."""
    wtimes = [w.t for w in writes]

    # 1. Never two replicas claiming one term in one poll round. The requests
    # of a round leave together but are answered a moment apart, so a
    # handover can fall inside a round: the old holder's claim (older term)
    # and the new one's may both be true. Whether the older claim came after
    # the new holder's write is check 2's question, answered from the log.
    rounds = collections.defaultdict(list)
    for s in samples:
        if s.is_leader:
            rounds[(s.rnd, s.term)].append(s)
    for rnd, _term in sorted(rounds, key=lambda k: (k[0], -1 if k[1] is None else k[1])):
        ss = rounds[(rnd, _term)]
        if len({s.slot.name for s in ss}) > 1:
            problem("two leaders in one poll round",
                    f"round {rnd} at {ctx.rel(ss[0].start)}: "
                    + ", ".join(f"{s.slot.name} (term {s.term}, asked {ctx.rel(s.start)}, "
                                f"answered {ctx.rel(s.end)})" for s in ss))

    # 2. Never a claim after another holder's write (write log vs. samples).
    # The claim was computed somewhere between the request and its answer, so
    # it may rest on a write of ours up to the answer; a foreign write counts
    # against it only when it was in the log before the request left.
    for s in samples:
        if not s.is_leader:
            continue
        me, client = s.slot.identity, s.slot.name
        i = bisect.bisect_left(wtimes, s.start - CLOCK_SLACK) - 1
        j = bisect.bisect_right(wtimes, s.end + CLOCK_SLACK)
        if any(w.holder == me and (w.kind == "admin" or (w.kind == "proto" and
                                                         w.client == client))
               for w in writes[max(i, 0):j]):
            continue
        if i < 0:
            problem("claim without a write", f"{client} claimed at {ctx.rel(s.start)} "
                    f"before any write of the Lease")
            continue
        w = writes[i]
        if w.kind in ("proto", "admin"):
            if w.holder != me:
                problem("claim after another holder's write",
                        f"{client} (asked {ctx.rel(s.start)}, term {s.term}) claimed "
                        f"leadership after {w!r} at {ctx.rel(w.t)}")
            elif w.kind == "proto" and w.client != client:
                problem("claim after another process of the same identity wrote",
                        f"{client} (asked {ctx.rel(s.start)}) claimed leadership after "
                        f"{w!r} at {ctx.rel(w.t)}")
            continue
        prev = next((p for p in reversed(writes[:i]) if p.kind != "oob"), None)
        grace = (prev is not None and prev.holder == me
                 and (prev.kind == "admin" or prev.client == client)
                 and s.start <= w.t + RENEW + CLOCK_SLACK)
        if not grace:
            problem("claim after an out-of-band write",
                    f"{client} (asked {ctx.rel(s.start)}) claimed leadership "
                    f"{s.start - w.t:.3f}s after {w!r} at {ctx.rel(w.t)} "
                    f"(previous holder {prev.holder if prev else None!r}; a holder may "
                    f"keep claiming for at most renew-deadline)")

    # 3. term never decreases in one process, except across a deletion of the
    # Lease: one re-created by a process that never saw the old one starts
    # again at leaseTransitions 0 (leaderd carries the term on). A process that
    # could not read the Lease while it was deleted and re-created learns of
    # the reset late (in a soak, during the next scenario), so the deletion
    # is looked up in the write log: after the write that began the old term,
    # before the sample that shows the new one.
    deletes = [w.t for w in writes if w.verb == "delete"]

    def lease_replaced(old_term, seen_at, until):
        began = [w.t for w in writes if w.transitions == old_term and w.t <= seen_at]
        since = began[-1] if began else float("-inf")
        return any(since < t <= until for t in deletes)

    if not ctx.allow_term_reset:
        last = {}
        for s in sorted(samples, key=lambda x: x.start):
            if s.term is None:
                continue
            key = s.proc
            if (key in last and s.term < last[key][0]
                    and not lease_replaced(last[key][0], last[key][1], s.start)):
                problem("term went down",
                        f"{s.proc.label()}: term {last[key][0]} at {ctx.rel(last[key][1])} "
                        f"then {s.term} at {ctx.rel(s.start)}")
            last[key] = (s.term, s.start)



def analyse(ctx, t_from=None, t_to=None):
    """The checks every scenario gets, over samples that started in
    [t_from, t_to] (default: all)."""
    c = ctx.c
    samples = c.samples(lambda s: (t_from is None or s.start >= t_from)
                        and (t_to is None or s.start <= t_to))
    writes = sorted(c.refresh_log(), key=lambda w: w.t)
    problems = collections.OrderedDict()

    def problem(kind, msg):
        problems.setdefault(kind, []).append(msg)

    if getattr(c, "shards", None):
        # Per shard, the single-Lease checks on that shard's claims and
        # writes: a shard never has two owners, terms per shard only grow.
        for sid in c.shard_ids():
            ws = sorted(c.shard_writes.get(sid, []), key=lambda w: w.t)
            lease_checks(ctx, [x.for_shard(sid) for x in samples if x.shards is not None],
                         ws, lambda kind, msg, sid=sid: problem(kind, f"shard {sid}: {msg}"))
    else:
        lease_checks(ctx, samples, writes, problem)

    # 4. /leader always answers while the process runs and is not stopped.
    for s in samples:
        if s.status is not None:
            continue
        p = s.proc
        if p.stopped_during(s.start, s.end):
            continue
        if p.signalled_at is not None and s.end >= p.signalled_at:
            continue
        if p.exited_at is not None and s.end >= p.exited_at - 0.5:
            continue
        problem("/leader did not answer",
                f"{p.label()}: request at {ctx.rel(s.start)} failed after "
                f"{s.end - s.start:.3f}s ({s.err})")

    # 5. No process ended unless we ended it; no sanitizer report.
    for p in c.all_procs():
        p.poll()
        if p.exited_at is not None and p.expected_exit is None:
            problem("replica crashed", f"{p.label()} exited with {p.rc} at "
                    f"{ctx.rel(p.exited_at)}:\n" + tail(p.log()))
        m = SANITIZER_RE.search(p.log())
        if m:
            problem("sanitizer report", f"{p.label()}: {m.group(0)}\n" + tail(p.log(), 40))

    for kind, msgs in problems.items():
        more = f" (and {len(msgs) - 3} more)" if len(msgs) > 3 else ""
        ctx.fail(f"{kind}: " + "; ".join(msgs[:3]) + more)
    return len(samples)


# ---- writes through the API proxies (Cluster(api_proxy=True)) ----

def what_was_written(w):
    """A write log entry's payload: a Pod log entry's labels, a ConfigMap
    log entry's data."""
    return w.get("labels", w.get("data"))


def proxy_fencing_problems(leases, writes):
    """The API write gate's fencing, by the API server's own logs and clock:
    every write it applied (writes: its Pod log and ConfigMap write log
    entries, each with client and clock_us) came from the replica that held
    the Lease at that moment, i.e. the one named by the last Lease write
    (leases: its write log entries of LEASE_NAME, each with holderIdentity and
    clock_us) stamped at or before it. Every log carries the server's
    clock_us, CLOCK_MONOTONIC in microseconds stamped under the lock of the
    table written as the write is applied, so they compare directly, and a
    write in the same millisecond as a takeover is judged by its microsecond.

    A tie (the same microsecond) counts the Lease write first. For the new
    holder that is exact: its proxy lets a write through only after it has
    read the answer to its Lease write, which the server sends after
    stamping it, so any write of its own really is later. For anyone else a
    tie is reported as a violation: it can raise a false alarm, never hide a
    late write of the old holder. Returns one message per violation."""
    leases = sorted(leases, key=lambda e: e["clock_us"])
    times = [e["clock_us"] for e in leases]
    out = []
    for w in writes:
        kind = "Pod" if "labels" in w else "ConfigMap"
        i = bisect.bisect_right(times, w["clock_us"])
        if i == 0:
            out.append(f"{kind} write {what_was_written(w)} by {w['client']} at "
                       f"{w['clock_us']} us before any Lease write")
            continue
        holder = leases[i - 1].get("holderIdentity")
        if holder != w["client"]:
            out.append(f"{kind} write {what_was_written(w)} by {w['client']} at "
                       f"{w['clock_us']} us while {holder!r} held the Lease (its write at "
                       f"{times[i - 1]} us by {leases[i - 1].get('client')})")
    return out


# ---- the exec children's records ----

class ChildRun:
    """One child instance, from its own records (childrec.py)."""
    __slots__ = ("identity", "term", "pid", "start", "last", "stopped", "after_stop",
                 "records", "max_gap")

    def __init__(self, identity, term, pid, t):
        self.identity = identity
        self.term = term
        self.pid = pid
        self.start = self.last = t
        self.stopped = False
        self.after_stop = False
        self.records = 1
        self.max_gap = 0.0

    @property
    def end(self):
        """The last moment the child may have acted. Every record's time is
        read before the record is written, by the running child, and the
        child acts only through records: it was alive at each of them and
        did nothing between two but sleep. A stop record is followed by the
        exit and nothing else. A child with no stop record was SIGKILLed at
        some point after its last record: the next record may have been under
        way, so its life is taken to end one heartbeat later (the granularity
        of the records; a child killed right after a record looks the same)."""
        return self.last if self.stopped else self.last + CHILD_PERIOD

    def label(self):
        return f"child {self.pid} of {self.identity} (term {self.term})"


def child_instances(text, final=False):
    """(runs in order of their start records, problems). An unterminated last
    line is a record being written unless final (every child has exited)."""
    runs, current, problems = [], {}, []
    lines = text.split("\n")
    tail_line = lines.pop()
    if final and tail_line:
        problems.append(f"torn last record {tail_line[:80]!r}")
    for n, line in enumerate(lines, 1):
        parts = line.split(" ")
        try:
            kind, ident, term, pid, t = parts
            term = int(term) if term.isdigit() else None
            pid, t = int(pid), float(t)
        except ValueError:
            problems.append(f"line {n} is not a record: {line[:80]!r}")
            continue
        if kind == "start":
            run = ChildRun(ident, term, pid, t)
            current[pid] = run
            runs.append(run)
            continue
        run = current.get(pid)
        if kind not in ("beat", "stop") or run is None:
            problems.append(f"line {n} does not continue a running child: {line[:80]!r}")
            continue
        if run.stopped and not run.after_stop:
            # Something of it lives on (a process that left the group, say):
            # it counts, and its records extend its life.
            problems.append(f"{run.label()} went on after its stop record: line {n}")
            run.after_stop = True
        run.max_gap = max(run.max_gap, t - run.last)
        run.last = t
        run.records += 1
        run.stopped = run.stopped or kind == "stop"
    return runs, problems


def analyse_children(ctx):
    """The checks of the exec children's records, once every replica has
    exited. Returns the instances."""
    c = ctx.c
    runs, problems = child_instances(c.child_text(), final=True)
    runs.sort(key=lambda r: r.start)
    writes = sorted((w for w in c.refresh_log() if w.kind != "oob"), key=lambda w: w.t)
    wtimes = [w.t for w in writes]
    samples = sorted(c.samples(), key=lambda s: s.start)

    def clients_of(identity):
        return {s.name for s in c.slots if s.identity == identity}

    # 1. Never two children at once, by their own records: no child's first
    # record may come before the end (ChildRun.end) of any child that started
    # earlier. No tolerance: records of two children that interleave in time
    # overlap beyond doubt, and the heartbeat beyond a killed child's last
    # record is the only uncertainty the records leave.
    latest = None
    for run in runs:
        if latest is not None and run.start < latest.end:
            problems.append(f"two children at once: {run.label()} started at "
                            f"{ctx.rel(run.start)}, {latest.end - run.start:.3f}s before "
                            f"{latest.label()} (from {ctx.rel(latest.start)}) ended at "
                            f"{ctx.rel(latest.end)}")
        if latest is None or run.end > latest.end:
            latest = run

    gaps = []
    for run in runs:
        mine = clients_of(run.identity)
        if not run.stopped:
            problems.append(f"{run.label()} left no stop record: it was killed without "
                            f"SIGTERM, or did not get to handle it within the grace")
        # 2. It starts only once its replica holds the Lease in its term:
        # the last write before its first record is its replica's, with the
        # child's term (LEADERD_TERM).
        i = bisect.bisect_right(wtimes, run.start + CLOCK_SLACK) - 1
        w = writes[i] if i >= 0 else None
        if w is None or w.kind != "proto" or w.client not in mine or \
                w.holder != run.identity or w.transitions != run.term:
            problems.append(f"{run.label()} started at {ctx.rel(run.start)} but the Lease's "
                            f"last write then was {w!r}")
            continue
        # 3. It is gone by the supervisor's deadline: renew-deadline after
        # the last renewal of its term began (at or before that renewal's
        # commit), plus the grace, plus CHILD_KILL_SLACK.
        own = [x for x in writes if x.client in mine and x.holder == run.identity
               and x.transitions == run.term and x.t <= run.end]
        limit = own[-1].t + RENEW + CHILD_GRACE
        if run.end > limit + CHILD_KILL_SLACK:
            problems.append(f"{run.label()} acted until {ctx.rel(run.end)}, "
                            f"{run.end - own[-1].t:.3f}s after its term's last renewal at "
                            f"{ctx.rel(own[-1].t)} (limit renew-deadline + grace = "
                            f"{RENEW + CHILD_GRACE:.1f}s + {CHILD_KILL_SLACK:.2f}s)")
        # 4. Per the poller: once its replica answered that it no longer led
        # in that term, the child is gone within the grace. (While a replica
        # is stopped or dead nothing answers; check 3 covers that.)
        done = next((s for s in samples if s.slot.name in mine and s.start >= run.start
                     and s.status is not None
                     and not (s.is_leader and s.term == run.term)), None)
        if done is not None and run.end > done.end + CHILD_GRACE + CHILD_KILL_SLACK:
            problems.append(f"{run.label()} acted until {ctx.rel(run.end)}, "
                            f"{run.end - done.end:.3f}s after {done.slot.name} answered "
                            f"that it no longer led (at {ctx.rel(done.end)}; grace "
                            f"{CHILD_GRACE:.1f}s + {CHILD_KILL_SLACK:.2f}s)")
    for a, b in zip(runs, runs[1:]):
        gaps.append(b.start - a.end)
    if runs:
        ctx.note(f"{len(runs)} children; longest pause between one child's records "
                 f"{max(r.max_gap for r in runs):.3f}s"
                 + (f"; closest handover {min(gaps):.3f}s" if gaps else ""))
    for msg in problems[:5]:
        ctx.fail("exec children: " + msg)
    if len(problems) > 5:
        ctx.fail(f"exec children: and {len(problems) - 5} more problems")
    return runs
