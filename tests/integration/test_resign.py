# SPDX-License-Identifier: Apache-2.0
"""Integration tests of stepping down on request: POST /resign on three
replicas against the bundled Lease API server (HTTPS), the cooldown after
it, and the hand-over a Lease's spec.preferredHolder asks for."""
import http.client
import json
import os
import shutil
import signal
import tempfile
import time
import unittest

from leaderd_testing.apiserver import ApiServer
from leaderd_testing.cluster import (EXIT_BOUND, FAST, KILL_BOUND, SCHED_SLACK, TERM_BOUND,
                                     Replica, Watcher, stop_all, wait_until)

CLIENTS = ["r1", "r2", "r3"]
RETRY = FAST["retry_period"]
COOLDOWN = 8.0  # long enough to tell "waited" from "did not"
# A resignation answers once its release is written: one request, bounded
# by the request timeout (half the renew deadline) plus scheduling.
ANSWER_BOUND = FAST["renew_deadline"] + SCHED_SLACK


def post(port, path, timeout=ANSWER_BOUND + 5):
    """(status, headers, decoded JSON body) of POST path on 127.0.0.1:port."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body=b"", headers={"Content-Length": "0"})
        resp = conn.getresponse()
        body = resp.read()
        return resp.status, dict(resp.getheaders()), json.loads(body)
    finally:
        conn.close()


def request(port, method, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


class Resign(unittest.TestCase):
    """Each test gets a fresh API server and three fresh replicas that stay
    out for COOLDOWN after resigning."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="leaderd-resign-")
        self.api = ApiServer(os.path.join(self.dir, "api"), list(CLIENTS))
        self.replicas = []
        try:
            self.api.start()
            for c in CLIENTS:
                r = Replica(self.api, c, self.dir,
                            extra_args=["--resign-cooldown", f"{int(COOLDOWN)}s"])
                self.replicas.append(r)
                r.start()
        except BaseException:
            self.tearDown()
            raise
        self.watch = Watcher(self, self.replicas)

    def tearDown(self):
        stop_all(self, self.replicas)
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def replica(self, client):
        return next(r for r in self.replicas if r.client == client)

    def current_leader(self):
        return self.replica(self.watch.one_leader(KILL_BOUND + SCHED_SLACK + 2))

    def lease(self):
        return self.api.get_lease("default", "demo")[1]

    def new_leader_other_than(self, old, timeout):
        def other(snap, leaders):
            return leaders[0] if leaders and leaders[0] != old.client else None
        return self.replica(self.watch.until(other, timeout, "another leader"))

    def test_resign_hands_over_and_the_resigner_sits_out_the_cooldown(self):
        old = self.current_leader()
        term = old.leader()[1]["term"]
        since = self.api.write_log()[-1]["seq"]
        sent = time.monotonic()
        status, _, doc = post(old.port, "/resign")
        answered = time.monotonic() - sent
        self.assertEqual(status, 200, doc)
        self.assertLess(answered, ANSWER_BOUND, f"answer took {answered:.2f}s")
        self.assertIs(doc["is_leader"], False)
        self.assertEqual(doc["identity"], old.identity)
        self.assertEqual(doc["lease"], "default/demo")
        # The release is written by the time of the answer.
        release = [w for w in self.api.write_log(since)
                   if w["client"] == old.client and w["holderIdentity"] == ""]
        self.assertEqual(len(release), 1, "exactly one release write")
        self.assertEqual(release[0]["leaseTransitions"], term)
        self.assertFalse(old.is_leader())
        metrics = old.get("/metrics")[1].decode()
        self.assertIn('leaderd_resignations_total{reason="request"} 1', metrics)

        new = self.new_leader_other_than(old, TERM_BOUND + SCHED_SLACK + 2)
        took = time.monotonic() - sent
        self.assertLessEqual(took, TERM_BOUND + SCHED_SLACK, f"handover took {took:.2f}s")
        self.assertEqual(new.leader()[1]["term"], term + 1)

        # Both others leave, the standby first so that it cannot take the
        # new leader's release: the Lease stands free, yet the resigner
        # waits out its cooldown (counted from the release write), then
        # takes it.
        standby = next(r for r in self.replicas if r is not old and r is not new)
        for r in (standby, new):
            r.send(signal.SIGTERM)
            self.assertEqual(r.wait_exit(EXIT_BOUND + 10), 0)
        self.watch = Watcher(self, [old])
        wait_until(old.is_leader, COOLDOWN + TERM_BOUND + SCHED_SLACK + 2,
                   what="the resigner to lead after its cooldown")
        claims = [w for w in self.api.write_log(release[0]["seq"])
                  if w["client"] == old.client and w["holderIdentity"] == old.identity]
        self.assertTrue(claims)
        waited = (claims[0]["mono_ms"] - release[0]["mono_ms"]) / 1000.0
        # The claim was sent at least COOLDOWN after the release was sent;
        # the server saw the release a little after it was sent.
        self.assertGreaterEqual(waited, COOLDOWN - 0.5,
                                f"re-acquired {waited:.2f}s after the release")
        self.assertEqual(old.leader()[1]["term"], term + 2)

    def test_resign_on_a_standby_is_409_and_other_methods_405(self):
        leader = self.current_leader()
        standby = next(r for r in self.replicas if r is not leader)
        status, _, doc = post(standby.port, "/resign")
        self.assertEqual(status, 409)
        self.assertIn("not the leader", doc["error"])
        self.assertIn(leader.identity, doc["error"])
        self.assertTrue(leader.is_leader())
        status, headers, body = request(leader.port, "GET", "/resign")
        self.assertEqual(status, 405)
        self.assertEqual(headers.get("Allow"), "POST")
        self.assertIn("error", json.loads(body))
        # A second request right after a resignation finds a standby.
        self.assertEqual(post(leader.port, "/resign")[0], 200)
        self.assertEqual(post(leader.port, "/resign")[0], 409)

    def test_preferred_holder_makes_the_leader_hand_over(self):
        old = self.current_leader()
        preferred = next(r for r in self.replicas if r is not old)
        lease = self.lease()
        lease["spec"]["strategy"] = "OldestEmulationVersion"
        lease["spec"]["preferredHolder"] = preferred.identity
        lease["metadata"].pop("resourceVersion", None)
        since = self.api.write_log()[-1]["seq"]
        asked = time.monotonic()
        # As a coordinator would write it (the bundled server, like one
        # without the CLE gate, keeps the fields only on a stored object
        # that has them, so it is stored directly, with a resourceVersion).
        self.api.control("PUT", "raw/default/demo?stamp=1", raw=json.dumps(lease).encode())

        def released():
            return any(w["client"] == old.client and w["holderIdentity"] == ""
                       for w in self.api.write_log(since))
        wait_until(released, RETRY + 1 + SCHED_SLACK + 2, what="the leader's release")
        took = time.monotonic() - asked
        self.assertLessEqual(took, RETRY + 1 + SCHED_SLACK, f"release took {took:.2f}s")
        self.assertFalse(old.is_leader())
        self.assertIn('leaderd_resignations_total{reason="preferred_holder"} 1',
                      old.get("/metrics")[1].decode())
        # Someone else leads; a replica the field does not name steps down
        # too, so the preferred one ends up leading, and stays.
        wait_until(preferred.is_leader, 3 * (TERM_BOUND + RETRY + 1) + SCHED_SLACK,
                   what="the preferred holder to lead")
        self.watch.for_duration(2 * RETRY)
        self.assertEqual(self.watch.poll()[1], [preferred.client])
        spec = self.lease()["spec"]
        self.assertEqual(spec["holderIdentity"], preferred.identity)
        self.assertEqual(spec["strategy"], "OldestEmulationVersion")
        self.assertEqual(spec["preferredHolder"], preferred.identity)


if __name__ == "__main__":
    unittest.main()
