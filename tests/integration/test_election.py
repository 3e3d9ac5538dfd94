# SPDX-License-Identifier: Apache-2.0
"""Integration tests of the real leaderd binary: three replicas over HTTPS
against the bundled Lease API server, with failover, handover, conflicts,
API errors and partitions."""
import json
import re
import signal
import time
import unittest

from leaderd_testing.cluster import (EXIT_BOUND, FAST, KILL_BOUND, SCHED_SLACK, TERM_BOUND,
                                     FreshReplicas, OneLeader, Replica, wait_until)

CLIENTS = ["r1", "r2", "r3"]
RETRY = FAST["retry_period"]


class ThreeReplicas(FreshReplicas, unittest.TestCase):
    """Each test gets a fresh API server and three fresh replicas."""

    clients = CLIENTS

    def replica(self, client):
        return next(r for r in self.replicas if r.client == client)

    def current_leader(self, timeout=KILL_BOUND + SCHED_SLACK + 2):
        return self.replica(self.watch.one_leader(timeout))

    def lease(self):
        return self.api.get_lease("default", "demo")[1]

    def test_exactly_one_leader_and_agreement(self):
        leader = self.current_leader()
        self.watch.for_duration(3)
        snap, leaders = self.watch.poll()
        self.assertEqual(leaders, [leader.client])
        terms = {doc["term"] for _, doc in snap.values()}
        holders = {doc["leader"] for _, doc in snap.values()}
        self.assertEqual(holders, {leader.identity})
        self.assertEqual(len(terms), 1)
        self.assertEqual(self.lease()["spec"]["holderIdentity"], leader.identity)
        for r in self.replicas:
            status, doc = r.leader()
            self.assertEqual(doc["lease"], "default/demo")
            self.assertEqual(doc["identity"], r.identity)
            self.assertEqual(status, 200 if r is leader else 503)

    def test_sigkill_failover_within_bound(self):
        old = self.current_leader()
        term = old.leader()[1]["term"]
        old.stop(signal.SIGKILL)
        killed_at = time.monotonic()

        def new_leader(snap, leaders):
            return leaders[0] if leaders and leaders[0] != old.client else None
        client = self.watch.until(new_leader, KILL_BOUND + SCHED_SLACK + 2, "a new leader")
        took = time.monotonic() - killed_at
        self.assertLessEqual(took, KILL_BOUND + SCHED_SLACK, f"failover took {took:.2f}s")
        status, doc = self.replica(client).leader()
        self.assertEqual(doc["term"], term + 1)
        self.assertEqual(self.lease()["spec"]["leaseTransitions"], term + 1)

    def test_sigterm_releases_and_hands_over(self):
        old = self.current_leader()
        term = old.leader()[1]["term"]
        old.send(signal.SIGTERM)
        sent_at = time.monotonic()
        self.assertEqual(old.wait_exit(EXIT_BOUND + 10), 0)
        exited = time.monotonic() - sent_at
        self.assertLess(exited, EXIT_BOUND + SCHED_SLACK,
                        f"leader took {exited:.2f}s to exit")

        def new_leader(snap, leaders):
            return leaders[0] if leaders and leaders[0] != old.client else None
        client = self.watch.until(new_leader, TERM_BOUND + SCHED_SLACK + 2, "a new leader")
        took = time.monotonic() - sent_at
        self.assertLessEqual(took, TERM_BOUND + SCHED_SLACK, f"handover took {took:.2f}s")
        log = self.api.write_log()
        release = [w for w in log if w["client"] == old.client and w["holderIdentity"] == ""]
        self.assertEqual(len(release), 1, "exactly one release write")
        self.assertEqual(release[0]["leaseTransitions"], term)
        self.assertEqual(self.replica(client).leader()[1]["term"], term + 1)

    def test_deleted_lease_is_recreated_with_a_higher_term(self):
        # `kubectl delete lease` to unstick an election must not send the
        # term (a fencing token) back to 0. The Watcher also checks every
        # replica's term never goes down.
        old = self.current_leader()
        old.send(signal.SIGTERM)  # one handover, so the term is not 0
        self.assertEqual(old.wait_exit(EXIT_BOUND + 10), 0)
        self.replicas.remove(old)
        leader = self.current_leader()
        term = leader.leader()[1]["term"]
        self.assertGreaterEqual(term, 1)
        status, _ = self.api.delete_lease("default", "demo", client="admin")
        self.assertEqual(status, 200)

        def leader_of_new_lease(snap, leaders):
            return leaders[0] if leaders and snap[leaders[0]][1]["term"] > term else None
        self.watch.until(leader_of_new_lease, KILL_BOUND + SCHED_SLACK + 2,
                         "a leader of the re-created Lease")
        spec = self.lease()["spec"]
        self.assertEqual(spec["leaseTransitions"], term + 1)
        creates = [w for w in self.api.write_log() if w["verb"] == "create"]
        self.assertEqual(creates[-1]["leaseTransitions"], term + 1)

    def test_partitioned_leader_steps_down_before_takeover(self):
        old = self.current_leader()
        self.api.set_faults(old.client, partition="hang")
        last_claim = time.monotonic()
        first_other = None
        deadline = time.monotonic() + KILL_BOUND + SCHED_SLACK + 5
        while time.monotonic() < deadline:
            snap, leaders = self.watch.poll()
            now = time.monotonic()
            if old.client in leaders:
                last_claim = now
            others = [c for c in leaders if c != old.client]
            if others and first_other is None:
                first_other = now
            if first_other and now - first_other > 1:
                break
            time.sleep(0.025)
        self.assertIsNotNone(first_other, "nobody took over from a partitioned leader")
        self.assertLess(last_claim, first_other)
        # The partitioned replica keeps answering its probes meanwhile.
        status, doc = old.leader()
        self.assertEqual(status, 503)
        self.assertFalse(doc["is_leader"])
        # Healed, it rejoins as a follower of the new leader.
        self.api.clear_faults(old.client)
        wait_until(lambda: old.leader()[1]["leader"] == self.lease()["spec"]["holderIdentity"]
                   and old.leader()[1]["leader"] != old.identity,
                   KILL_BOUND + SCHED_SLACK + 5, what="the healed replica to follow")
        self.watch.for_duration(2)

    def test_error_and_throttle_storms_are_survived(self):
        self.current_leader()
        for c in CLIENTS:
            self.api.set_faults(c, error_rate=0.5, error_code=500)
        self.watch.for_duration(6)
        for c in CLIENTS:
            self.api.set_faults(c, throttle={"rate": 0.7, "retry_after": 1})
        self.watch.for_duration(6)
        for c in CLIENTS:
            self.api.clear_faults(c)
        self.current_leader(KILL_BOUND + SCHED_SLACK + 3)
        for r in self.replicas:
            self.assertTrue(r.alive(), f"{r.client} died")
        stats = self.api.stats()
        self.assertTrue(any("429" in json.dumps(v) for v in stats.values()), stats)

    def test_restart_with_same_identity_waits_like_a_failover(self):
        """A restarted process is a new incarnation: its old self's record is
        someone else's, expired after a lease duration like any failover's,
        and whoever takes it over (the restarted replica or another) starts
        a new term (docs/design/election.md, "Incarnations")."""
        old = self.current_leader()
        term = old.leader()[1]["term"]
        acquire = self.lease()["spec"]["acquireTime"]
        old.stop(signal.SIGKILL)
        killed = time.monotonic()
        again = Replica(self.api, old.client, self.dir).start()
        self.replicas[self.replicas.index(old)] = again
        self.watch.replicas = self.replicas
        self.watch.last_term.pop(old.client, None)
        leader = self.current_leader(KILL_BOUND + SCHED_SLACK + 2)
        # Expiry counts from the dead leader's last renewal, up to a retry
        # period before the kill.
        self.assertGreaterEqual(time.monotonic() - killed, FAST["lease_duration"] - RETRY - 0.5)
        status, doc = leader.leader()
        self.assertEqual(doc["term"], term + 1)
        self.assertNotEqual(self.lease()["spec"]["acquireTime"], acquire)
        self.watch.for_duration(2)

    def test_term_never_decreases_across_handovers(self):
        seen = []
        for _ in range(3):
            leader = self.current_leader()
            seen.append(leader.leader()[1]["term"])
            leader.stop(signal.SIGTERM)
            self.replicas.remove(leader)
            restarted = Replica(self.api, leader.client, self.dir).start()
            self.replicas.append(restarted)
            self.watch.last_term.pop(leader.client, None)
        self.assertEqual(seen, sorted(seen))
        self.assertEqual(len(set(seen)), len(seen))


class Endpoints(OneLeader, unittest.TestCase):
    """The HTTP contract of one replica."""

    dir_prefix = "leaderd-it-"

    def test_leader_json(self):
        status, doc = self.r.leader()
        self.assertEqual(status, 200)
        for key in ("lease", "identity", "leader", "is_leader", "term", "renewed_at"):
            self.assertIn(key, doc)
        self.assertEqual(doc["leader"], "solo")
        self.assertRegex(doc["renewed_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")

    def test_probes_and_root(self):
        self.assertEqual(self.r.get("/healthz"), (200, b"ok"))
        self.assertEqual(self.r.get("/readyz")[0], 200)
        status, body = self.r.get("/")
        self.assertEqual((status, json.loads(body)), (200, {"name": "solo"}))

    def test_metrics(self):
        renewed = r'leaderd_api_requests_total\{verb="PUT",code="200"\} [1-9]'

        def after_a_renewal():
            status, body = self.r.get("/metrics")
            self.assertEqual(status, 200)
            text = body.decode()
            return text if re.search(renewed, text) else None
        text = wait_until(after_a_renewal, 3 * RETRY + SCHED_SLACK + 2,
                          what="a renewal in /metrics")
        for name in ("leader_election_master_status", "leaderd_leader_transitions_total",
                     "leaderd_api_requests_total", "leaderd_api_request_duration_seconds",
                     "leaderd_last_renew_timestamp_seconds", "leaderd_build_info"):
            self.assertIn(f"# TYPE {name} ", text)
        self.assertIn('leader_election_master_status{name="demo"} 1', text)

    def test_unknown_path_and_method(self):
        status, body = self.r.get("/nope")
        self.assertEqual(status, 404)
        self.assertIn("error", json.loads(body))
        import urllib.request
        req = urllib.request.Request(self.r.url + "/leader", method="POST", data=b"x")
        try:
            urllib.request.urlopen(req, timeout=2)
            self.fail("POST accepted")
        except urllib.error.HTTPError as e:
            self.assertEqual(e.code, 405)


if __name__ == "__main__":
    unittest.main(verbosity=2)
