#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""cleaner.py: a sharded clean-up operator, in the shape of k8s-cleaner, next
to a leaderd sidecar run as a shard group (`--shards`) with the API write
gate (`--api-proxy`). Python standard library only.

It deletes the ConfigMaps of one namespace whose `cleaner.example/expires`
annotation (an RFC 3339 time) has passed, and only those whose shard this
replica's leaderd owns now:

- numbered shards (`leaderd --shards 6`): an object's shard is the one whose
  range holds the FNV-1a hash of its uid; leaderd answers it, with the term,
  at `GET /shard?key=<uid>`;
- named shards (`leaderd --shards eu,us,ap` and `--shard-annotation KEY`):
  the object names its shard in that annotation, as Sveltos shards clusters.

How it stays correct (docs/guides/sharding.md explains each point):

1. It follows leaderd's `GET /watch` (Server-Sent Events), so it learns in
   milliseconds that a shard is no longer its own, and wakes up at once.
2. Its unit of work is (shard, term): `term` is the fencing token. Work
   under a term ends as soon as /watch shows the shard gone or retaken
   under another term; the worker checks this between any two deletes.
3. When it stops working on a shard it answers `POST /shards/ID/drained
   ?term=T`: a give-back (rebalance, graceful exit) then releases the shard
   at once instead of waiting `--shard-drain`; `term` makes a late answer
   harmless (409) if a later give-back of the same shard has begun.
4. Every API call goes through the write gate. A delete carries
   `X-Leaderd-Shard: ID`; the gate lets it through only while this replica
   owns that shard, judged again just before it is sent upstream, and
   leaderd releases the shard only after the deletes already sent were
   answered. So even a cleaner that is paused or slow past the drain cannot
   delete next to the shard's next owner: it gets 503.
5. A delete carries the object's uid as a precondition: an object of the
   same name created meanwhile is never deleted by mistake.

It prints one JSON line per event (start/stop of work on a shard, each
delete and its outcome) on stdout; `make demo-cleaner` checks them against
the API server's own log.
"""
import argparse
import datetime
import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

EXPIRES = "cleaner.example/expires"


def log(**fields):
    """One JSON line on stdout. mono_us is CLOCK_MONOTONIC in microseconds,
    the clock the bundled API server stamps its log with (clock_us)."""
    fields["mono_us"] = int(time.monotonic() * 1e6)
    fields["time"] = datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")
    print(json.dumps(fields, sort_keys=True), flush=True)


def expiry(obj):
    """The object's expiry as a POSIX time, or None when it has none (or an
    unreadable one: such an object is left alone)."""
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(EXPIRES)
    if not text:
        return None
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.timestamp()


class Ownership(threading.Thread):
    """Follows leaderd's GET /watch and keeps {shard: term} of the shards this
    replica owns now. While the stream is down, it owns nothing as far as the
    worker is concerned (the safe answer; the gate would refuse anyway)."""

    READ_TIMEOUT = 40  # more than two heartbeats: leaderd is gone or stuck

    def __init__(self, sidecar):
        super().__init__(daemon=True)
        self.sidecar = sidecar
        self.lock = threading.Lock()
        self.owned = {}
        self.changed = threading.Event()  # wakes the worker up

    def snapshot(self):
        with self.lock:
            return dict(self.owned)

    def _set(self, owned):
        with self.lock:
            if owned == self.owned:
                return
            self.owned = owned
        self.changed.set()

    def run(self):
        while True:
            try:
                req = urllib.request.Request(self.sidecar + "/watch",
                                             headers={"Accept": "text/event-stream"})
                with urllib.request.urlopen(req, timeout=self.READ_TIMEOUT) as stream:
                    event, data = None, []
                    for raw in stream:
                        line = raw.decode("utf-8").rstrip("\r\n")
                        if line.startswith(":"):
                            continue  # a heartbeat
                        if line:
                            field, _, value = line.partition(":")
                            value = value[1:] if value.startswith(" ") else value
                            if field == "event":
                                event = value
                            elif field == "data":
                                data.append(value)
                            continue
                        if event == "shards" and data:  # a blank line ends an event
                            doc = json.loads("\n".join(data))
                            self._set({s["shard"]: s["term"] for s in doc["shards"]
                                       if s.get("is_leader")})
                        event, data = None, []
            except (OSError, ValueError, KeyError) as e:
                log(event="watch-error", error=str(e))
            self._set({})
            time.sleep(0.5)


class Cleaner:
    def __init__(self, args):
        self.args = args
        self.own = Ownership(args.sidecar)
        self.working = {}  # shard -> the term we work on it under
        self.stopping = False
        self.collection = "%s/api/v1/namespaces/%s/configmaps" % (
            args.api, urllib.parse.quote(args.namespace))

    # ---- talking to leaderd and to the API (through the gate) ----

    def request(self, method, url, body=None, headers=None, timeout=10):
        """(status, decoded JSON body or None). Transport errors raise OSError."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                status, raw = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, None

    def drained(self, shard, term):
        """Tells leaderd we stopped working on shard under term. 200: it was
        being given back and is released now; 409: it was not being given back
        (lost otherwise, or a later give-back began: then this answer, for an
        older term, cuts nothing short)."""
        url = "%s/shards/%s/drained?term=%d" % (self.args.sidecar,
                                                urllib.parse.quote(shard), term)
        try:
            status, _ = self.request("POST", url, timeout=2)
        except OSError as e:
            status = str(e)
        log(event="drained", app=self.args.identity, shard=shard, term=term, answer=status)

    # ---- the work ----

    def stop_work(self, shard, why):
        term = self.working.pop(shard)
        log(event="stop", app=self.args.identity, shard=shard, term=term, why=why)
        self.drained(shard, term)

    def settle(self):
        """Between two deletes: stop work on every shard not owned any more
        under the term we work on it under, start work on newly owned ones."""
        owned = {} if self.stopping else self.own.snapshot()
        for shard, term in list(self.working.items()):
            if owned.get(shard) != term:
                self.stop_work(shard, "stopping" if self.stopping else "not owned")
        for shard, term in owned.items():
            if shard not in self.working:
                self.working[shard] = term
                log(event="start", app=self.args.identity, shard=shard, term=term)

    def shard_of(self, obj):
        """(shard, term leaderd reports for it now) of obj, or (None, None)."""
        meta = obj["metadata"]
        if self.args.shard_annotation:
            shard = (meta.get("annotations") or {}).get(self.args.shard_annotation)
            return shard, self.working.get(shard)
        url = "%s/shard?key=%s" % (self.args.sidecar, urllib.parse.quote(meta["uid"]))
        try:
            status, doc = self.request("GET", url, timeout=2)
        except OSError:
            return None, None
        if status == 200 and doc and doc.get("is_leader"):
            return doc["shard"], doc["term"]
        return None, None  # 503: another replica's shard

    def delete(self, obj, shard, term):
        meta = obj["metadata"]
        url = "%s/%s" % (self.collection, urllib.parse.quote(meta["name"]))
        try:
            status, body = self.request(
                "DELETE", url, {"preconditions": {"uid": meta["uid"]}},
                {"X-Leaderd-Shard": shard}, timeout=30)
        except OSError as e:
            status, body = str(e), None
        log(event="delete", app=self.args.identity, shard=shard, term=term,
            name=meta["name"], uid=meta["uid"], answer=status)
        if status == 503:
            # The gate refused: the shard is not ours (any more). Stop at once;
            # /watch says so too in a moment.
            self.stop_work(shard, "gate refused")

    def pass_once(self):
        self.settle()
        if not self.working:
            return
        try:
            status, body = self.request("GET", self.collection, timeout=30)
        except OSError as e:
            log(event="list-error", app=self.args.identity, error=str(e))
            return
        if status != 200 or not body:
            log(event="list-error", app=self.args.identity, answer=status)
            return
        now = time.time()
        for obj in body.get("items") or []:
            when = expiry(obj)
            if when is None or when > now:
                continue
            self.settle()  # never start a delete on a shard we no longer own
            if self.stopping:
                return
            shard, term = self.shard_of(obj)
            if shard is not None and term is not None and self.working.get(shard) == term:
                self.delete(obj, shard, term)

    def run(self):
        self.own.start()
        while not self.stopping:
            self.own.changed.clear()
            self.pass_once()
            # Sleep until the next pass, or until the owned shards change.
            self.own.changed.wait(self.args.interval)
        self.settle()  # stop work on everything, answering /drained
        log(event="exit", app=self.args.identity)


def main():
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sidecar", default=env("CLEANER_SIDECAR", "http://127.0.0.1:4040"),
                   help="leaderd's HTTP server")
    p.add_argument("--api", default=env("CLEANER_API", "http://127.0.0.1:8001"),
                   help="leaderd's --api-proxy (the write gate); no token needed")
    p.add_argument("--namespace", default=env("POD_NAMESPACE", "default"))
    p.add_argument("--identity", default=env("POD_NAME", os.uname().nodename),
                   help="only for the log lines")
    p.add_argument("--shard-annotation", default=env("CLEANER_SHARD_ANNOTATION", ""),
                   help="named shards: the annotation naming an object's shard; "
                        "unset: numbered shards by uid (GET /shard?key=UID)")
    p.add_argument("--interval", type=float, default=float(env("CLEANER_INTERVAL", "5")),
                   help="seconds between two lists of the ConfigMaps")
    args = p.parse_args()
    cleaner = Cleaner(args)

    def on_term(signo, frame):
        cleaner.stopping = True
        cleaner.own.changed.set()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    cleaner.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
