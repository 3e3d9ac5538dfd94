# SPDX-License-Identifier: Apache-2.0
"""Integration tests of the change notifications for apps, against the real
leaderd binaries and the bundled Lease API server: the /leader long-poll and
the /watch Server-Sent Events stream (with curl -N and with a Python
standard-library client), many subscribers coming and going with flat
memory, and held requests never delaying probes."""
import http.client
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import threading
import time
import unittest

from leaderd_testing.cluster import (EXIT_BOUND, FAST, KILL_BOUND, SCHED_SLACK, TERM_BOUND,
                                     FreshReplicas, OneLeader, open_fds, proc_status,
                                     server_connections, timed_get, wait_until)

CLIENTS = ["r1", "r2"]
RETRY = FAST["retry_period"]
# The server closes what a client closed as soon as it runs; on a loaded
# machine that may take a while, and the idle timeout (15 s) would close it
# anyway, so past that it is a leak.
CLOSED = 20
# A request held behind another (a probe waiting for a long-poll) would take
# the long-poll's wait; anything well below it was not held.
HELD_WAIT = 30
NOT_HELD = HELD_WAIT / 3


def sanitized(pid):
    """True for an AddressSanitizer build, whose RSS says nothing of leaks."""
    with open(f"/proc/{pid}/maps") as f:
        return "libasan" in f.read()


class SSEStream:
    """A /watch subscriber on the standard library: http.client decodes the
    chunked stream, lines are grouped into events at blank lines (the same
    loop as the recipe in docs/guides/asking-from-the-app.md)."""

    def __init__(self, port, last_id=None, timeout=10.0):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        headers = {"Accept": "text/event-stream"}
        if last_id is not None:
            headers["Last-Event-ID"] = str(last_id)
        self.conn.request("GET", "/watch", headers=headers)
        self.resp = self.conn.getresponse()

    def next_block(self):
        """The next event or comment as a dict ({"comment": ...} for a
        heartbeat); raises on timeout or end of stream."""
        block = {}
        while True:
            raw = self.resp.readline()
            if not raw:
                raise EOFError("stream ended")
            line = raw.decode().rstrip("\r\n")
            if line == "":
                if block:
                    return block
                continue
            if line.startswith(":"):
                block["comment"] = line[1:].strip()
                continue
            key, _, value = line.partition(":")
            block[key] = value[1:] if value.startswith(" ") else value

    def next_event(self):
        while True:
            block = self.next_block()
            if "comment" not in block:
                block["json"] = json.loads(block["data"])
                return block

    def close(self):
        self.conn.close()


class CurlWatch:
    """`curl -sN URL/watch` as a subprocess; stdout read line by line with a
    bounded wait. Stopped by PID."""

    def __init__(self, url):
        self.proc = subprocess.Popen(["curl", "-sN", "--noproxy", "*", url + "/watch"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.buf = b""

    def next_event(self, timeout):
        """The next event as a dict, or None on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            while b"\n\n" in self.buf:
                raw, self.buf = self.buf.split(b"\n\n", 1)
                fields = {}
                for line in raw.decode().split("\n"):
                    if line.startswith(":"):
                        continue
                    key, _, value = line.partition(": ")
                    fields[key] = value
                if "data" in fields:
                    fields["json"] = json.loads(fields["data"])
                    return fields
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    return None
                self.buf += chunk

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=10)
        self.proc.stdout.close()


class TwoReplicas(FreshReplicas, unittest.TestCase):
    """A leader and a standby; fresh for every test."""

    clients = CLIENTS
    dir_prefix = "leaderd-notify-"

    def setUp(self):
        super().setUp()
        client = self.watch.one_leader(KILL_BOUND + SCHED_SLACK + 2)
        self.leader = next(r for r in self.replicas if r.client == client)
        self.standby = next(r for r in self.replicas if r.client != client)
        # The standby has seen the leader once it names it.
        wait_until(lambda: self.standby.leader()[1]["leader"] == self.leader.identity,
                   2 * RETRY + SCHED_SLACK + 2, what="the standby to see the leader")

    def test_long_poll_returns_on_handover(self):
        status, doc = self.standby.leader()
        self.assertEqual(status, 503)
        seen = f"leader={doc['leader']}&term={doc['term']}&is_leader=false"
        port = self.standby.port

        # Nothing changes: the poll is held for its whole wait, then answers
        # the current state.
        status, body, took = timed_get(port, f"/leader?wait=700ms&{seen}")
        self.assertEqual(status, 503)
        self.assertGreaterEqual(took, 0.65)
        self.assertEqual(json.loads(body)["leader"], self.leader.identity)
        # Something differs already: at once, not after the wait.
        status, body, took = timed_get(port, f"/leader?wait={HELD_WAIT}s&leader=someone-else",
                                       HELD_WAIT + 10)
        self.assertEqual(status, 503)
        self.assertLess(took, NOT_HELD, "a poll that differed already was held")
        status, body, _ = timed_get(port, "/leader?wait=soon")
        self.assertEqual(status, 400)
        self.assertIn("error", json.loads(body))

        # An app's loop: long-poll with what it saw last, until it leads.
        answers = []

        def poll_loop():
            query = seen
            for _ in range(10):
                status, body, _ = timed_get(port, f"/leader?wait=30s&{query}", 40)
                doc = json.loads(body)
                answers.append((time.monotonic(), status, doc))
                if doc["is_leader"]:
                    return
                query = (f"leader={doc['leader']}&term={doc['term']}&is_leader="
                         f"{'true' if doc['is_leader'] else 'false'}")
        th = threading.Thread(target=poll_loop)
        th.start()
        th.join(0.5)
        self.assertTrue(th.is_alive() and not answers, f"the long-poll was not held: {answers}")
        self.leader.send(signal.SIGTERM)
        sent_at = time.monotonic()
        th.join(TERM_BOUND + SCHED_SLACK + 5)
        self.assertFalse(th.is_alive(), "the long-polls did not see the handover")
        steps = [(round((at - sent_at) * 1000), st, d["leader"], d["term"], d["is_leader"])
                 for at, st, d in answers]
        print(f"\n  long-poll answers after SIGTERM of the leader (ms, status, leader, term, "
              f"is_leader): {steps}")
        at, status, doc = answers[-1]
        self.assertEqual(status, 200)
        self.assertTrue(doc["is_leader"])
        self.assertEqual(doc["leader"], self.standby.identity)
        self.assertLessEqual(at - sent_at, TERM_BOUND + SCHED_SLACK)
        # Every answer reported a change: status and body agree.
        for _, st, d in answers:
            self.assertEqual(st, 200 if d["is_leader"] else 503)
        # The answer came with the change, not after it: /leader agrees.
        self.assertEqual(self.standby.leader()[0], 200)
        self.assertEqual(self.leader.wait_exit(EXIT_BOUND + 10), 0)

    @unittest.skipUnless(shutil.which("curl"), "curl is not installed")
    def test_curl_watch_sees_the_handover(self):
        on_standby = CurlWatch(self.standby.url)
        on_leader = CurlWatch(self.leader.url)
        try:
            first = on_standby.next_event(10)
            self.assertIsNotNone(first, "no first event from the standby")
            self.assertEqual(first["event"], "leader")
            self.assertEqual(first["json"]["leader"], self.leader.identity)
            self.assertFalse(first["json"]["is_leader"])
            lfirst = on_leader.next_event(10)
            self.assertTrue(lfirst["json"]["is_leader"])

            self.leader.send(signal.SIGTERM)
            sent_at = time.monotonic()
            events = [first]
            while not events[-1]["json"]["is_leader"]:
                ev = on_standby.next_event(TERM_BOUND + SCHED_SLACK + 5)
                self.assertIsNotNone(ev, f"no more events after {events}")
                events.append(ev)
            took = time.monotonic() - sent_at
            print(f"\n  standby's stream: {[(e['id'], e['json']['leader'], e['json']['term'], e['json']['is_leader']) for e in events]}, "
                  f"leadership event {took * 1000:.0f} ms after SIGTERM")
            ids = [int(e["id"]) for e in events]
            self.assertEqual(ids, list(range(ids[0], ids[0] + len(ids))))
            terms = [e["json"]["term"] for e in events]
            self.assertEqual(terms, sorted(terms))
            self.assertEqual(events[-1]["json"]["leader"], self.standby.identity)
            self.assertGreater(terms[-1], terms[0])
            self.assertLessEqual(took, TERM_BOUND + SCHED_SLACK)

            # The leader's own stream says it stepped down before it exited.
            seen = [lfirst]
            while True:
                ev = on_leader.next_event(EXIT_BOUND + 5)
                if ev is None:
                    break
                seen.append(ev)
            self.assertFalse(seen[-1]["json"]["is_leader"],
                             f"leader's stream: {[(e['id'], e['data']) for e in seen]}, "
                             f"then {on_leader.buf!r}")
            # ... and then ended cleanly (the last chunk, not a cut).
            self.assertEqual(on_leader.proc.wait(timeout=10), 0)
            self.assertEqual(self.leader.wait_exit(EXIT_BOUND + 10), 0)
        finally:
            on_standby.stop()
            on_leader.stop()

    def test_last_event_id_and_reconnect(self):
        s = SSEStream(self.standby.port)
        first = s.next_event()
        s.close()
        self.assertEqual(s.resp.getheader("Content-Type"), "text/event-stream")
        self.assertEqual(s.resp.getheader("Cache-Control"), "no-store")
        # Reconnecting with the current id: nothing is repeated; the next
        # event is the next change.
        again = SSEStream(self.standby.port, last_id=first["id"])
        stale = SSEStream(self.standby.port, last_id=int(first["id"]) - 1)
        self.assertEqual(stale.next_event()["id"], first["id"])
        self.leader.send(signal.SIGTERM)
        ev = again.next_event()
        self.assertEqual(int(ev["id"]), int(first["id"]) + 1)
        again.close()
        stale.close()


def current_query(replica):
    status, doc = replica.leader()
    flag = "true" if doc["is_leader"] else "false"
    return f"leader={doc['leader']}&term={doc['term']}&is_leader={flag}"


class OneReplica(OneLeader, unittest.TestCase):
    """Load on the notifications of one leading replica."""

    dir_prefix = "leaderd-notify-"

    def connections(self):
        return server_connections(self.r.proc.pid, self.r.port)

    def setUp(self):
        # What an earlier test's clients closed is closed by the server too.
        wait_until(lambda: self.connections() == 0, CLOSED,
                   what="the server's connections to close")

    def subscribe(self, n):
        streams = []
        try:
            for _ in range(n):
                streams.append(SSEStream(self.r.port))
            for s in streams:
                ev = s.next_event()
                self.assertEqual(ev["json"]["leader"], "solo")
        except BaseException:
            for s in streams:
                s.close()
            raise
        return streams

    def test_many_subscribers_come_and_go_memory_flat(self):
        pid = self.r.proc.pid
        n, rounds = 200, 6
        fds0 = open_fds(pid)
        # One round to reach the allocator's working size, then measure.
        for s in self.subscribe(n):
            s.close()
        wait_until(lambda: self.connections() == 0, CLOSED, what="connections to close")
        before = proc_status(pid, "RssAnon")
        peak = before
        for _ in range(rounds):
            streams = self.subscribe(n)
            peak = max(peak, proc_status(pid, "RssAnon"))
            self.assertGreaterEqual(self.connections(), n)
            for s in streams:
                s.close()
            wait_until(lambda: self.connections() == 0, CLOSED,
                       what="the server to close what the clients closed")
        after = proc_status(pid, "RssAnon")
        print(f"\n  leaderd RssAnon with {n} subscribers x {rounds} rounds: before {before} kB, "
              f"peak {peak} kB, after {after} kB; open fds {fds0} -> {open_fds(pid)}")
        self.assertTrue(self.r.alive())
        if sanitized(pid):
            print("  (AddressSanitizer build: its quarantine keeps freed memory, RSS not judged)")
            return
        self.assertLessEqual(after, before * 1.25 + 512,
                             f"RssAnon grew from {before} kB to {after} kB")

    def test_held_requests_do_not_delay_probes(self):
        streams = self.subscribe(100)
        polls = []
        try:
            query = current_query(self.r)
            for _ in range(100):
                c = http.client.HTTPConnection("127.0.0.1", self.r.port,
                                               timeout=HELD_WAIT + 10)
                c.request("GET", f"/leader?wait={HELD_WAIT}s&{query}")
                polls.append(c)
            # Probes are answered while the polls are held: none waits for
            # one of them (the latency figure is `make bench`'s).
            samples = {"/healthz": [], "/leader": []}
            for _ in range(7):
                for path in samples:
                    status, _, took = timed_get(self.r.port, path, HELD_WAIT + 10)
                    self.assertEqual(status, 200)
                    samples[path].append(took * 1000)
            medians = {p: round(statistics.median(v), 2) for p, v in samples.items()}
            print(f"\n  with 100 streams and 100 held polls: median ms {medians}")
            for path, v in samples.items():
                self.assertLess(max(v), NOT_HELD * 1000, f"{path} was held: {v} ms")
            # The polls are really held: none has an answer yet.
            for c in polls:
                c.sock.setblocking(False)
                try:
                    data = c.sock.recv(1)
                except BlockingIOError:
                    continue
                self.fail(f"a held poll was answered or closed: {data!r}")
        finally:
            for c in polls:
                c.close()
            for s in streams:
                s.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
