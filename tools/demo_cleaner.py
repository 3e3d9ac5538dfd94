#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""make demo-cleaner: the sharded clean-up operator of examples/cleaner run
end to end on loopback, and judged from the API server's own log.

The bundled API server, three "Pods" (each a leaderd replica with
`--shards` and the write gate `--api-proxy`, plus examples/cleaner/cleaner.py
talking only to them), and a creator making ConfigMaps continuously with
mixed expiries (some already past, most a few seconds ahead, some far in the
future). The API server holds every delete 200 ms and applies it even when
its client has gone, so deletes are in flight at the crash and at every
hand-over. Then a crash (SIGKILL of a Pod's two processes), a join, a rolling
update of every replica (a new Pod starts, then an old one is stopped as
Kubernetes stops it: the app first, then the native sidecar) and a graceful
leave. Then creation stops, every expired object is given time to go, and
the run is judged:

- from the API server's ConfigMap log: objects created / expired / deleted,
  deleted exactly once, deleted before their expiry, left expired;
- from its Lease log (clock_us, the server's one clock): every delete is
  checked against the shard's owner at that moment (the last write of the
  shard Lease before it names the deleting replica, and that replica's
  member Lease still names itself): deletes by a non-owner;
- from the apps' own lines (on the same CLOCK_MONOTONIC): two apps working
  on one shard at once, where a crashed app's work ends at its SIGKILL;
- the longest an expired object waited (from its expiry, or from its
  creation for one created expired).

Every judged event goes to a JSON lines file (--events, printed at the
end). --short runs the shortened scenario of tests/integration/test_cleaner.py;
--named uses named shards and an annotation instead of numbered shards by uid.
--without-gate runs, instead of cleaner.py, the sharding guide's former loop
as copied without --api-proxy (named shards, /shards read once per pass,
deletes straight to the API server, a 5 s sleep against the 1 s drain): the
same judge then finds deletes by non-owners whenever a shard moves during a
pass.
Exit status 0 when every zero is a zero. Processes are stopped by PID; every
wait is bounded."""
import argparse
import datetime
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "support"))  # leaderd_testing

from leaderd_testing.apiserver import ApiServer  # noqa: E402
from leaderd_testing.cluster import FAST, Replica, free_port, wait_until  # noqa: E402

CLEANER = os.path.join(REPO, "examples", "cleaner", "cleaner.py")
GROUP = "cleaner"
NS = "default"
EXPIRES = "cleaner.example/expires"
SHARD_ANN = "cleaner.example/shard"
NUMBERED = 6
NAMED = ["eu", "us", "ap", "sa", "af", "oc"]
NAMES = ["pod-a", "pod-b", "pod-c", "pod-d", "pod-e", "pod-f", "pod-g"]
CREATOR = "creator"
# Every delete is held this long by the API server before it is applied,
# and applied even if its client has hung up or died meanwhile ("admitted",
# as kube-apiserver does): deletes are in flight at the crash and at every
# hand-over.
DELETE_LATENCY_MS = 200
# Before the crash and the graceful leave, the victim's deletes are held this
# long instead: the test sees one held (a control request over TLS, slow on a
# loaded machine) and only then signals, so the hold must outlast that look
# by far; it stays well under the lease duration, within which the shard's
# Lease still names the victim when the delete lands.
VICTIM_DELETE_LATENCY_MS = 1500


# --without-gate: the loop of the sharding guide's former example, as a
# user would copy it without --api-proxy: it reads /shards once per pass,
# deletes through the API server directly with its own token, and sleeps
# 5 s (the old example slept 10 s against the default 2 s drain; here the
# drain is 1 s). It logs its passes as work on the shards it read.
WITHOUT_GATE = r"""
import datetime, json, ssl, sys, time, urllib.error, urllib.request
sidecar, api, ca, token_file, me, ann = sys.argv[1:7]
ctx = ssl.create_default_context(cafile=ca)
with open(token_file) as f:
    auth = {"Authorization": "Bearer " + f.read().strip()}
def log(**f):
    f.update(app=me, mono_us=int(time.monotonic() * 1e6))
    print(json.dumps(f), flush=True)
def expired(text, now):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() <= now
coll = api + "/api/v1/namespaces/default/configmaps"
while True:
    try:
        with urllib.request.urlopen(sidecar + "/shards", timeout=2) as r:
            mine = {s["shard"]: s["term"] for s in json.load(r)["shards"] if s["is_leader"]}
    except (OSError, ValueError):
        mine = {}
    for s, t in mine.items():
        log(event="start", shard=s, term=t)
    now = time.time()
    try:
        req = urllib.request.Request(coll, headers=auth)
        with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
            items = json.load(r)["items"]
    except (OSError, ValueError):
        items = []
    for cm in items:
        meta = cm["metadata"]
        notes = meta.get("annotations") or {}
        if notes.get(ann) not in mine or not expired(notes.get("cleaner.example/expires", "9999-01-01T00:00:00Z"), now):
            continue
        req = urllib.request.Request(coll + "/" + meta["name"], method="DELETE",
            headers=dict(auth, **{"Content-Type": "application/json"}),
            data=json.dumps({"preconditions": {"uid": meta["uid"]}}).encode())
        try:
            urllib.request.urlopen(req, context=ctx, timeout=10).close()
            code = 200
        except urllib.error.HTTPError as e:
            code = e.code
        except OSError:
            code = None
        log(event="delete", shard=notes[ann], name=meta["name"], answer=code)
    for s, t in mine.items():
        log(event="stop", shard=s, term=t)
    time.sleep(5)
"""


def say(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def mono_us():
    return int(time.monotonic() * 1e6)


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def numbered_shard(uid, n=NUMBERED):
    """The shard of n whose range holds FNV-1a64(uid), as leaderd and
    KEP-5866 split the hash space: [floor(i*2^64/n), floor((i+1)*2^64/n))."""
    h = fnv1a64(uid.encode())
    for i in range(n):
        if (i * 2 ** 64) // n <= h < ((i + 1) * 2 ** 64) // n:
            return str(i)
    raise AssertionError("unreachable")


class Pod:
    """One Pod of the Deployment: leaderd (a native sidecar: the app starts
    once /readyz answers 200) and the cleaner, which talks only to it."""

    def __init__(self, api, name, work, shards_arg, named, interval, gated=True):
        self.name = name
        self.proxy_port = free_port()
        self.leaderd = Replica(api, name, work, lease=GROUP, extra_args=[
            "--shards", shards_arg, "--api-proxy", f"127.0.0.1:{self.proxy_port}"])
        self.events_path = os.path.join(work, f"app-{name}.jsonl")
        self.app_log = os.path.join(work, f"app-{name}.stderr")
        self.named = named
        self.interval = interval
        self.gated = gated
        self.api = api
        self.app = None
        self.app_end_us = None  # when the app's work ended by force
        self.crashed_us = None
        self.sigterm_us = None  # when leaderd got SIGTERM with the app still running

    def start(self):
        self.leaderd.start()
        wait_until(lambda: self.leaderd.get("/readyz")[0] == 200, 10,
                   what=f"{self.name}'s leaderd /readyz")
        argv = [sys.executable, CLEANER, "--sidecar", self.leaderd.url,
                "--api", f"http://127.0.0.1:{self.proxy_port}", "--namespace", NS,
                "--identity", self.name, "--interval", str(self.interval)]
        if self.named:
            argv += ["--shard-annotation", SHARD_ANN]
        if not self.gated:
            argv = [sys.executable, "-c", WITHOUT_GATE, self.leaderd.url, self.api.url,
                    self.api.ca, os.path.join(self.api.dir, "tokens", self.name), self.name,
                    SHARD_ANN]
        with open(self.events_path, "ab") as out, open(self.app_log, "ab") as err:
            self.app = subprocess.Popen(argv, stdout=out, stderr=err,
                                        stdin=subprocess.DEVNULL)
        return self

    def alive(self):
        return self.leaderd.alive()

    def crash(self):
        """Both processes SIGKILLed at once: nothing is released or drained."""
        if self.app and self.app.poll() is None:
            self.app.kill()
        self.leaderd.send(signal.SIGKILL)
        self.app_end_us = self.crashed_us = mono_us()
        if self.app:
            self.app.wait(10)
        self.leaderd.stop(signal.SIGKILL)

    def terminate(self):
        """As the kubelet stops a Pod with a native sidecar: SIGTERM to the
        app, and once it has exited SIGTERM to leaderd (which drains and
        releases its shards and deletes its member Lease)."""
        if self.app and self.app.poll() is None:
            self.app.send_signal(signal.SIGTERM)
            try:
                self.app.wait(10)
            except subprocess.TimeoutExpired:
                self.app.kill()
                self.app.wait(10)
        # Work it did not say it stopped ends here (cleaner.py always says).
        self.app_end_us = mono_us()
        return self.leaderd.stop(signal.SIGTERM, timeout=15)

    def terminate_together(self):
        """As the kubelet stops a Pod whose leaderd is a plain container: both
        get SIGTERM at once. leaderd stops claiming at once; the app's delete
        in flight holds the shard's release (the gate) until it is answered,
        and the app's POST /drained then ends the drain."""
        self.app.send_signal(signal.SIGTERM)
        self.leaderd.send(signal.SIGTERM)
        self.sigterm_us = mono_us()
        try:
            self.app.wait(10)
        except subprocess.TimeoutExpired:
            self.app.kill()
            self.app.wait(10)
        self.app_end_us = mono_us()
        return self.leaderd.stop(signal.SIGTERM, timeout=15)

    def shards(self):
        try:
            with urllib.request.urlopen(self.leaderd.url + "/shards", timeout=1) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None


def balanced(pods, n):
    """{shard: owner} once every live Pod sees the live Pods as the members,
    every shard is owned by exactly one of them and each owns floor or ceil
    of n / members; else None."""
    live = [p for p in pods if p.alive()]
    members = sorted(p.name for p in live)
    owners = {}
    for p in live:
        doc = p.shards()
        if not doc or doc.get("members") != members:
            return None
        for sid in doc["owned"]:
            if sid in owners:
                return None
            owners[sid] = p.name
    if len(owners) != n:
        return None
    counts = {list(owners.values()).count(m) for m in members}
    return owners if counts <= {n // len(members), -(-n // len(members))} else None


class Creator(threading.Thread):
    """Creates a ConfigMap every period seconds with a mixed expiry; keeps
    {name: {uid, shard, expires, expires_us}} of those the server created."""

    def __init__(self, api, named, period, delays, seed):
        super().__init__(daemon=True)
        self.api, self.named, self.period, self.delays = api, named, period, delays
        self.rand = random.Random(seed)
        self.objects = {}
        self.stop = threading.Event()

    def run(self):
        n = 0
        while not self.stop.is_set():
            n += 1
            name = "obj-%05d" % n
            delay = self.rand.choice(self.delays)
            if isinstance(delay, tuple):
                delay = self.rand.uniform(*delay)
            wall = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(
                seconds=delay)
            created_us = mono_us()
            expires_us = created_us + int(delay * 1e6)
            notes = {EXPIRES: wall.isoformat(timespec="milliseconds").replace("+00:00", "Z")}
            if self.named:
                notes[SHARD_ANN] = self.rand.choice(NAMED)
            try:
                status, body = self.api.post_configmap(
                    NS, {"metadata": {"name": name, "annotations": notes},
                         "data": {"n": str(n)}}, client=CREATOR)
            except OSError:
                status, body = None, None
            if status == 201:
                uid = body["metadata"]["uid"]
                self.objects[name] = {
                    "uid": uid, "expires_us": expires_us, "expires": notes[EXPIRES],
                    # Expired already when created: it waits from its creation.
                    "due_us": max(expires_us, created_us),
                    "shard": notes[SHARD_ANN] if self.named else numbered_shard(uid)}
            self.stop.wait(self.period)


def app_events(pods):
    out = []
    for p in pods:
        try:
            with open(p.events_path) as f:
                for line in f:
                    line = line.strip()
                    if line.startswith("{"):
                        out.append(json.loads(line))
        except OSError:
            pass
    return out


def work_intervals(pods, end_us):
    """[(app, shard, term, start_us, end_us)] from the apps' start/stop lines;
    work an app never stopped ends when the demo killed it (or at end_us)."""
    ends = {p.name: p.app_end_us for p in pods}
    open_ = {}
    out = []
    for e in sorted(app_events(pods), key=lambda e: e["mono_us"]):
        key = (e.get("app"), e.get("shard"))
        if e["event"] == "start":
            open_[key] = (e["term"], e["mono_us"])
        elif e["event"] == "stop" and key in open_:
            term, start = open_.pop(key)
            out.append((key[0], key[1], term, start, e["mono_us"]))
    for (app, shard), (term, start) in open_.items():
        out.append((app, shard, term, start, ends.get(app) or end_us))
    return out


def judge(api, creator, pods, stop_us, events_path):
    """The figures of the run, judged from the API server's logs; writes every
    judged event to events_path as a JSON line."""
    leases = api.write_log()
    cms = api.configmap_log()
    by_lease = {}
    for e in leases:
        by_lease.setdefault(e["name"], []).append(e)

    def last_before(lease, t):
        """The last write of lease at or before t (a tie counts the Lease
        write first), or None."""
        last = None
        for e in by_lease.get(lease, []):
            if e["clock_us"] <= t:
                last = e
        return last

    objs = creator.objects
    deletes = [e for e in cms if e["verb"] == "delete"]
    count = {}
    judged = []
    non_owner = premature = 0
    longest = 0.0
    for d in deletes:
        o = objs.get(d["name"])
        count[d["name"]] = count.get(d["name"], 0) + 1
        shard = o["shard"] if o else None
        s = last_before(f"{GROUP}-{shard}", d["clock_us"]) if shard else None
        m = last_before(f"{GROUP}-member-{d['client']}", d["clock_us"])
        owner = s["holderIdentity"] if s else None
        member_ok = bool(m and m.get("verb") != "delete"
                         and m.get("holderIdentity") == d["client"])
        owned = owner == d["client"] and member_ok
        non_owner += not owned
        waited = (d["clock_us"] - o["due_us"]) / 1e6 if o else None
        if waited is not None:
            premature += d["clock_us"] < o["expires_us"]
            longest = max(longest, waited)
        judged.append({"kind": "delete", "name": d["name"], "client": d["client"],
                       "clock_us": d["clock_us"], "shard": shard, "shard_holder": owner,
                       "member_lease_names_client": member_ok, "by_owner": owned,
                       "nth_delete": count[d["name"]], "waited_s": waited})
    expired = {n for n, o in objs.items() if o["expires_us"] <= stop_us}
    deleted = set(count)
    once = sum(1 for n in expired if count.get(n) == 1)
    twice = sum(1 for c in count.values() if c > 1)
    left = sorted(expired - deleted)
    unknown = sorted(deleted - set(objs))
    # Two apps at work on one shard at once, from the apps' own lines.
    intervals = work_intervals(pods, mono_us())
    overlaps = 0
    for i, a in enumerate(intervals):
        for b in intervals[i + 1:]:
            if a[1] == b[1] and a[0] != b[0] and a[3] < b[4] and b[3] < a[4]:
                overlaps += 1
                judged.append({"kind": "overlap", "shard": a[1], "a": a, "b": b})
    figures = {
        "created": len(objs), "expired": len(expired), "deleted": len(deleted),
        "deleted_exactly_once": once, "deleted_more_than_once": twice,
        "expired_not_deleted": len(left), "deleted_before_expiry": premature,
        "deleted_unknown": len(unknown), "non_owner_deletes": non_owner,
        "two_apps_on_one_shard": overlaps, "longest_wait_s": round(longest, 3),
        "deletes_refused_by_gate": sum(1 for e in app_events(pods)
                                       if e["event"] == "delete" and e.get("answer") == 503),
        "deletes_landed_after_crash": sum(
            1 for d in deletes for p in pods
            if p.crashed_us and d["client"] == p.name and d["clock_us"] > p.crashed_us),
        "deletes_landed_after_sigterm": sum(
            1 for d in deletes for p in pods
            if p.sigterm_us and d["client"] == p.name and d["clock_us"] > p.sigterm_us),
        "drained_answered": sum(1 for e in app_events(pods)
                                if e["event"] == "drained" and e.get("answer") == 200),
    }
    with open(events_path, "w") as f:
        for name, o in sorted(objs.items()):
            f.write(json.dumps(dict(kind="object", name=name, deletes=count.get(name, 0),
                                    expired=name in expired, **o), sort_keys=True) + "\n")
        for e in leases:
            f.write(json.dumps(dict(kind="lease", **e), sort_keys=True) + "\n")
        for e in judged:
            f.write(json.dumps(e, sort_keys=True) + "\n")
        for app, shard, term, start, end in intervals:
            f.write(json.dumps({"kind": "work", "app": app, "shard": shard, "term": term,
                                "start_us": start, "end_us": end}) + "\n")
        f.write(json.dumps(dict(kind="figures", **figures), sort_keys=True) + "\n")
    return figures, left


ZEROS = ("deleted_more_than_once", "expired_not_deleted", "deleted_before_expiry",
         "deleted_unknown", "non_owner_deletes", "two_apps_on_one_shard")


def run(short=False, named=False, events=None, seed=1, gated=True):
    """The whole scenario; returns the figures (a dict)."""
    t = FAST
    work = tempfile.mkdtemp(prefix="leaderd-demo-cleaner-")
    shards = NAMED if named else [str(i) for i in range(NUMBERED)]
    shards_arg = ",".join(NAMED) if named else str(NUMBERED)
    dwell = 0.5 if short else 4.0  # how long each phase runs before the next
    # Mixed expiries: already past, a few seconds ahead, far in the future.
    delays = [-5.0, (0.0, 2.0), (0.0, 2.0), (2.0, 5.0), 3600.0] if short else \
        [-30.0, (0.0, 3.0), (0.0, 3.0), (3.0, 10.0), (3.0, 10.0), 3600.0]
    api = ApiServer(os.path.join(work, "api"), NAMES + [CREATOR])
    pods = []
    creator = None
    events = events or os.path.join(work, "judged.jsonl")

    def start(name):
        p = Pod(api, name, work, shards_arg, named, 0.5, gated).start()
        pods.append(p)
        say(f"started {name}: leaderd pid {p.leaderd.proc.pid} (--shards {shards_arg} "
            f"--api-proxy 127.0.0.1:{p.proxy_port}), cleaner pid {p.app.pid}")
        return p

    def settle(what, timeout):
        t0 = time.monotonic()
        owners = wait_until(lambda: balanced(pods, len(shards)), timeout,
                            interval=0.05, what=f"the group to balance ({what})")
        per = {}
        for s, who in owners.items():
            per.setdefault(who, []).append(s)
        say(f"  balanced after {time.monotonic() - t0:.1f} s: " + "; ".join(
            f"{who} owns {','.join(sorted(v))}" for who, v in sorted(per.items())))
        time.sleep(dwell)

    def live(name):
        return next(p for p in pods if p.name == name and p.alive())

    def hold_a_delete(name):
        """Returns once the API server holds one of name's deletes, each now
        held VICTIM_DELETE_LATENCY_MS: the signal that follows comes while it
        is in flight however slow this look was."""
        api.set_faults(name, latency_ms=VICTIM_DELETE_LATENCY_MS, verbs=["delete"],
                       commit="admitted")
        try:
            wait_until(lambda: api.held(name, "delete") > 0, 15, interval=0.01,
                       what=f"a delete of {name} in flight")
        except AssertionError as e:
            say(str(e))

    try:
        api.start()
        for name in NAMES:
            api.set_faults(name, latency_ms=DELETE_LATENCY_MS, verbs=["delete"],
                           commit="admitted")
        say(f"bundled API server (test-only) on {api.url}; timings: lease-duration "
            f"{t['lease_duration']:g}s, renew-deadline {t['renew_deadline']:g}s, "
            f"retry-period {t['retry_period']:g}s (= --shard-drain); the API server holds "
            f"every delete {DELETE_LATENCY_MS} ms and applies it even if its client is gone")
        creator = Creator(api, named, 0.1 if short else 0.2, delays, seed)
        creator.start()
        say("creating ConfigMaps continuously (one every "
            f"{creator.period:g} s) with mixed expiries")
        for name in NAMES[:3]:
            start(name)
        settle("start", 20)
        # Crash while the API server holds one of pod-a's deletes: it is
        # applied after the SIGKILL, as a real API server would.
        hold_a_delete("pod-a")
        say("crash: SIGKILL pod-a's leaderd and cleaner, with a delete in flight")
        live("pod-a").crash()
        settle("after the crash", 20)
        say("join: pod-d")
        start("pod-d")
        settle("after the join", 20)
        for old, new in (("pod-b", "pod-e"), ("pod-c", "pod-f"), ("pod-d", "pod-g")):
            say(f"rolling update: {new} starts, then {old} stops (app, then leaderd)")
            start(new)
            rc = live(old).terminate()
            say(f"  {old} exited with {rc}")
            settle(f"{old} -> {new}", 20)
        hold_a_delete("pod-e")
        say("graceful leave: pod-e stops, app and leaderd SIGTERMed together (leaderd as a "
            "plain container), with a delete in flight")
        rc = live("pod-e").terminate_together()
        say(f"  pod-e exited with {rc}")
        settle("after the leave", 20)
        creator.stop.set()
        creator.join(5)
        stop_us = mono_us()
        say(f"creation stopped after {len(creator.objects)} objects; waiting for every "
            "expired one to be deleted")
        expired = [n for n, o in creator.objects.items() if o["expires_us"] <= stop_us]

        def all_gone():
            names = {e["name"] for e in api.configmap_log() if e["verb"] == "delete"}
            return all(n in names for n in expired)
        try:
            wait_until(all_gone, 20, interval=0.2, what="every expired object to go")
        except AssertionError as e:
            say(str(e))
        for p in pods:
            if p.alive():
                p.terminate()
        figures, left = judge(api, creator, pods, stop_us, events)
        say("judged from the API server's own log (ConfigMap writes and Lease writes, "
            "on its clock):")
        say(f"  objects created {figures['created']}, expired {figures['expired']}, "
            f"deleted {figures['deleted']}")
        say(f"  deleted exactly once: {figures['deleted_exactly_once']} of "
            f"{figures['expired']} expired; more than once: "
            f"{figures['deleted_more_than_once']}; expired but left: "
            f"{figures['expired_not_deleted']}; deleted before expiry: "
            f"{figures['deleted_before_expiry']}")
        say(f"  deletes by a replica that did not own the shard at that moment: "
            f"{figures['non_owner_deletes']}")
        say(f"  two apps working on one shard at once: {figures['two_apps_on_one_shard']}")
        say(f"  longest an expired object waited: {figures['longest_wait_s']:.2f} s")
        say(f"  deletes the gate refused (503): {figures['deletes_refused_by_gate']}; "
            f"give-backs cut short by POST /drained: {figures['drained_answered']}")
        say(f"  deletes the crashed replica had sent, applied after its SIGKILL: "
            f"{figures['deletes_landed_after_crash']}; sent before leaderd's SIGTERM and "
            f"applied after it, before its shard's release: "
            f"{figures['deletes_landed_after_sigterm']} (all judged like the others)")
        say(f"  judged events: {events}")
        if left:
            say(f"  left: {left[:10]}")
        return figures
    finally:
        if creator:
            creator.stop.set()
        for p in pods:
            if p.app and p.app.poll() is None:
                p.app.kill()
                p.app.wait(10)
            p.leaderd.stop(signal.SIGKILL)
        api.stop()
        if os.environ.get("LEADERD_DEMO_KEEP"):
            say(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--short", action="store_true", help="the integration test's scenario")
    p.add_argument("--named", action="store_true", help="named shards by annotation")
    p.add_argument("--without-gate", action="store_true",
                   help="run the former guide's loop without --api-proxy instead of "
                        "cleaner.py (with --named): shows what the gate prevents")
    p.add_argument("--events", default=os.path.join(REPO, "build", "demo-cleaner-events.jsonl"),
                   help="where to write the judged events (JSON lines)")
    args = p.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(args.events)), exist_ok=True)
    figures = run(args.short, args.named or args.without_gate, os.path.abspath(args.events),
                  gated=not args.without_gate)
    bad = [k for k in ZEROS if figures[k]]
    if bad or figures["deleted_exactly_once"] != figures["expired"]:
        say(("without the gate (what it prevents): " if args.without_gate else "FAILED: ")
            + ", ".join(f"{k} = {figures[k]}" for k in bad))
        return 1
    say("every expired object deleted exactly once, by the owner of its shard")
    return 0


if __name__ == "__main__":
    sys.exit(main())
