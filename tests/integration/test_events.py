# SPDX-License-Identifier: Apache-2.0
"""Integration tests of --events: three replicas over HTTPS against the
bundled API server. Every start and stop of leading is one
events.k8s.io/v1 Event about the Lease in client-go's wording; Event API
failures never touch the election, are retried a bounded number of times
with backoff, and are counted."""
import os
import shutil
import signal
import tempfile
import time
import unittest

from leaderd_testing.apiserver import ApiServer
from leaderd_testing.cluster import (FAST, KILL_BOUND, SCHED_SLACK, TERM_BOUND, Replica, Watcher,
                                     stop_all, wait_until)

CLIENTS = ["r1", "r2", "r3"]
NS = "default"
EVENT_BOUND = 3.0
# LD_HOOK_EVENTS_ATTEMPTS in cmd/leaderd/hooks/hook_events.h.
ATTEMPTS = 6


class EventsBase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="leaderd-events-")
        self.api = ApiServer(os.path.join(self.dir, "api"), CLIENTS)
        self.replicas = []
        try:
            self.api.start()
            for c in CLIENTS:
                r = Replica(self.api, c, self.dir, extra_args=["--events", "true"])
                self.replicas.append(r.start())
        except BaseException:
            self.tearDown()
            raise
        self.watch = Watcher(self, self.replicas)

    def tearDown(self):
        stop_all(self, self.replicas)
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def events(self):
        status, doc = self.api.json_request(
            "GET", f"/apis/events.k8s.io/v1/namespaces/{NS}/events")
        self.assertEqual(status, 200)
        return doc["items"]

    def of(self, identity, action):
        return [e for e in self.events()
                if e["reportingInstance"] == identity and e["action"] == action]

    def replica(self, client):
        return next(r for r in self.replicas if r.client == client)


class TestEvents(EventsBase):
    def test_one_event_per_transition_in_client_go_wording(self):
        leader = self.watch.one_leader(KILL_BOUND + SCHED_SLACK)
        wait_until(lambda: self.of(leader, "Acquire"), EVENT_BOUND, what="the Acquire Event")
        status, lease = self.api.get_lease(NS, "demo")
        ev = self.of(leader, "Acquire")[0]
        self.assertEqual(ev["type"], "Normal")
        self.assertEqual(ev["reason"], "LeaderElection")
        self.assertEqual(ev["note"], f"{leader} became leader")
        self.assertEqual(ev["reportingController"], "leaderd")
        self.assertEqual(ev["regarding"], {
            "kind": "Lease", "apiVersion": "coordination.k8s.io/v1", "namespace": NS,
            "name": "demo", "uid": lease["metadata"]["uid"]})
        self.assertTrue(ev["metadata"]["name"].startswith("demo."))

        self.replica(leader).send(signal.SIGTERM)
        self.assertEqual(self.replica(leader).wait_exit(10), 0)
        def other_leads(snap, leaders):
            return leaders[0] if len(leaders) == 1 and leaders[0] != leader else None
        new = self.watch.until(other_leads, TERM_BOUND + SCHED_SLACK, "a new leader")
        wait_until(lambda: self.of(new, "Acquire"), EVENT_BOUND, what="the new Acquire")
        release = self.of(leader, "Release")
        self.assertEqual(len(release), 1, release)
        self.assertEqual(release[0]["note"], f"{leader} stopped leading")
        # Quiet for a while: nothing more is recorded without a transition.
        self.watch.for_duration(2 * FAST["retry_period"])
        self.assertEqual(len(self.of(leader, "Acquire")), 1)
        self.assertEqual(len(self.of(new, "Acquire")), 1)
        standbys = [c for c in CLIENTS if c not in (leader, new)]
        for c in standbys:
            self.assertEqual(self.of(c, "Acquire") + self.of(c, "Release"), [])


class TestEventsFaults(EventsBase):
    def test_event_api_errors_never_affect_the_election_and_are_bounded(self):
        leader = self.watch.one_leader(KILL_BOUND + SCHED_SLACK)
        wait_until(lambda: self.of(leader, "Acquire"), EVENT_BOUND, what="the Acquire Event")
        # The Lease exists: "create" now only reaches the Event API.
        for c in CLIENTS:
            self.api.set_faults(c, error_rate=1.0, error_code=503, verbs=["create"])
        self.api.reset_stats()
        self.replica(leader).stop(signal.SIGKILL)
        def other_leads(snap, leaders):
            return leaders[0] if len(leaders) == 1 and leaders[0] != leader else None
        new = self.watch.until(other_leads, KILL_BOUND + SCHED_SLACK, "a failover")
        # Long enough for every retry of the one transition (0.5+1+2+4+8 s).
        wait_until(lambda: sum(self.api.stats().get(new, {}).get("create", {}).values())
                   >= ATTEMPTS, 20.0, what="the retries to run out")
        self.watch.for_duration(3.0)
        creates = sum(self.api.stats().get(new, {}).get("create", {}).values())
        self.assertEqual(creates, ATTEMPTS, "the retries are bounded per transition")
        status, body = self.replica(new).get("/metrics")
        line = [l for l in body.decode().splitlines()
                if l.startswith("leaderd_events_failures_total ")]
        self.assertEqual(float(line[0].split()[1]), ATTEMPTS)
        self.assertTrue(self.replica(new).is_leader())


class TestBundledEvents(unittest.TestCase):
    """The bundled server validates Events as kube-apiserver does."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="leaderd-evapi-")
        cls.api = ApiServer(os.path.join(cls.dir, "api"), ["c"])
        cls.api.start()

    @classmethod
    def tearDownClass(cls):
        cls.api.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def post(self, ev):
        return self.api.json_request("POST", f"/apis/events.k8s.io/v1/namespaces/{NS}/events",
                                     ev)

    def event(self, name, **over):
        ev = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
              "metadata": {"name": name, "namespace": NS},
              "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "leaderd",
              "reportingInstance": "pod-a", "action": "Acquire", "reason": "LeaderElection",
              "type": "Normal", "note": "pod-a became leader",
              "regarding": {"kind": "Lease", "namespace": NS, "name": "demo"}}
        ev.update(over)
        return {k: v for k, v in ev.items() if v is not None}

    def test_create_then_conflict(self):
        status, doc = self.post(self.event("demo.1"))
        self.assertEqual(status, 201, doc)
        self.assertTrue(doc["metadata"]["uid"])
        status, doc = self.post(self.event("demo.1"))
        self.assertEqual(status, 409, doc)
        self.assertEqual(doc["reason"], "AlreadyExists")

    def test_validation(self):
        for field in ("eventTime", "reportingController", "reportingInstance", "action",
                      "reason"):
            status, doc = self.post(self.event("demo.v-" + field.lower(), **{field: None}))
            self.assertEqual(status, 422, (field, doc))
            self.assertIn(f"{field}: Required value", doc["message"])
        status, doc = self.post(self.event("demo.t", type="Info"))
        self.assertEqual(status, 422, doc)
        self.assertIn('supported values: "Normal", "Warning"', doc["message"])
        status, doc = self.post(self.event("demo.long", note="x" * 1025))
        self.assertEqual(status, 422, doc)


if __name__ == "__main__":
    unittest.main()
