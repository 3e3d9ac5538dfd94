# SPDX-License-Identifier: Apache-2.0
"""Integration tests of --pod-label KEY: three replicas over HTTPS against the
bundled API server, each the identity of a Pod created there. The leader's
Pod says KEY: "true" and the others "false"; a new leader unlabels a killed or
partitioned leader's Pod before it labels its own; SIGTERM writes "false"
before the release; Pod API failures never touch the election and are
retried with backoff, not in a storm."""
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
KEY = "leaderd.example.com/leader"
NS = "default"
# A label write follows leadership within a couple of requests' time.
LABEL_BOUND = 3.0


class PodLabelBase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="leaderd-podlabel-")
        self.api = ApiServer(os.path.join(self.dir, "api"), CLIENTS)
        self.replicas = []
        try:
            self.api.start()
            for c in CLIENTS:
                self.api.control("POST", "pods", {"namespace": NS, "name": c,
                                                  "labels": {"app": "demo"}})
            for c in CLIENTS:
                r = Replica(self.api, c, self.dir, extra_args=["--pod-label", KEY])
                self.replicas.append(r.start())
        except BaseException:
            self.tearDown()
            raise
        self.watch = Watcher(self, self.replicas)

    def tearDown(self):
        stop_all(self, self.replicas)
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def labels(self):
        pods = self.api.control("GET", "pods")["pods"]
        return {p["metadata"]["name"]: p["metadata"].get("labels", {}).get(KEY)
                for p in pods.values()}

    def log(self):
        return [e for e in self.api.control("GET", "pods/log")["log"]
                if e["client"] != "_control"]

    def replica(self, client):
        return next(r for r in self.replicas if r.client == client)

    def settled(self, leader=None):
        """Waits until the leader's Pod alone says "true", and every live
        replica's /leader says what its Pod says. leader None: whoever leads
        at that moment (on a loaded machine leadership may move first).
        Returns the leader."""
        fixed = leader
        def ok():
            nonlocal leader
            if fixed is None:
                leading = [r.client for r in self.replicas if r.alive() and r.is_leader()]
                if len(leading) != 1:
                    return False
                leader = leading[0]
            lab = self.labels()
            if lab.get(leader) != "true":
                return False
            if any(lab.get(c) == "true" for c in CLIENTS if c != leader):
                return False
            for r in self.replicas:
                if r.alive():
                    _, doc = r.leader()
                    if not doc or doc.get("pod_label") != lab.get(r.client):
                        return False
            return True
        wait_until(ok, FAST["lease_duration"] + LABEL_BOUND,
                   what=f"{fixed or 'the leader'}'s label alone")
        return leader

    def first_write(self, entries, pod, value, client=None, after=0):
        for e in entries:
            if (e["seq"] > after and e["pod"] == pod and e["labels"].get(KEY) == value
                    and (client is None or e["client"] == client)):
                return e
        return None


class TestPodLabel(PodLabelBase):
    def test_label_follows_the_leader(self):
        self.watch.one_leader(KILL_BOUND + SCHED_SLACK)
        leader = self.settled()
        standbys = [c for c in CLIENTS if c != leader]
        # Every standby wrote "false" on its own Pod at start (its label may
        # have been left "true" by an earlier run in the same Pod).
        lab = self.labels()
        for c in standbys:
            self.assertEqual(lab[c], "false")
        self.assertEqual(self.replica(leader).leader()[1]["pod_label"], "true")
        # The other labels are untouched by the merge patch.
        pods = self.api.control("GET", "pods")["pods"]
        for p in pods.values():
            self.assertEqual(p["metadata"]["labels"]["app"], "demo")

    def test_sigterm_writes_false_before_the_release(self):
        self.watch.one_leader(KILL_BOUND + SCHED_SLACK)
        leader = self.settled()
        seq0 = max(e["seq"] for e in self.log())
        self.replica(leader).send(signal.SIGTERM)
        self.assertEqual(self.replica(leader).wait_exit(10), 0)
        new = self.watch.one_leader(TERM_BOUND + LABEL_BOUND + SCHED_SLACK)
        self.settled(new)
        entries = self.log()
        own_false = self.first_write(entries, leader, "false", client=leader, after=seq0)
        self.assertIsNotNone(own_false, f"{leader} never unlabelled itself: {entries}")
        releases = [w for w in self.api.write_log()
                    if w["client"] == leader and w["holderIdentity"] == ""]
        self.assertTrue(releases, "no release write")
        self.assertLessEqual(own_false["mono_ms"], releases[-1]["mono_ms"],
                             "the label said true after the release")

    def _takeover_unlabels_first(self, remove):
        self.watch.one_leader(KILL_BOUND + SCHED_SLACK)
        leader = self.settled()
        seq0 = max(e["seq"] for e in self.log())
        remove(leader)
        def other_leads(snap, leaders):
            return leaders[0] if len(leaders) == 1 and leaders[0] != leader else None
        new = self.watch.until(other_leads, KILL_BOUND + LABEL_BOUND + SCHED_SLACK,
                               "a new leader")
        wait_until(lambda: self.labels().get(new) == "true", LABEL_BOUND + 2,
                   what=f"{new}'s label")
        entries = self.log()
        unlabel = self.first_write(entries, leader, "false", client=new, after=seq0)
        label = self.first_write(entries, new, "true", client=new, after=seq0)
        self.assertIsNotNone(unlabel, f"{new} did not unlabel {leader}: {entries}")
        self.assertLess(unlabel["seq"], label["seq"], "labelled itself before the sweep")
        self.assertEqual(self.labels()[leader], "false")
        return leader, new

    def test_killed_leader_is_unlabelled_by_the_new_leader(self):
        self._takeover_unlabels_first(lambda c: self.replica(c).stop(signal.SIGKILL))

    def test_partitioned_leader_is_unlabelled_by_the_new_leader(self):
        old, new = self._takeover_unlabels_first(
            lambda c: self.api.set_faults(c, partition="hang"))
        self.api.clear_faults(old)
        # Back in touch, the deposed leader never labels itself "true" again.
        self.watch.for_duration(FAST["retry_period"] * 2)
        self.assertEqual(self.labels()[old], "false")
        self.assertEqual(self.labels()[new], "true")


class TestPodLabelFaults(PodLabelBase):
    def test_a_hung_label_write_holds_the_release_only_briefly(self):
        self.watch.one_leader(KILL_BOUND + SCHED_SLACK)
        leader = self.settled()
        self.api.set_faults(leader, partition="hang", verbs=["patch"])
        t0 = time.monotonic()
        self.replica(leader).send(signal.SIGTERM)
        # The release waits for "false" at most min(2 s, renew-deadline / 2),
        # then goes ahead: a standby takes over as after any release.
        hold = min(2.0, FAST["renew_deadline"] / 2)
        def other_leads(snap, leaders):
            return leaders[0] if len(leaders) == 1 and leaders[0] != leader else None
        new = self.watch.until(other_leads, hold + TERM_BOUND + SCHED_SLACK,
                               "a takeover after the bounded hold")
        took = time.monotonic() - t0
        self.assertEqual(self.replica(leader).wait_exit(10), 0)
        releases = [w for w in self.api.write_log()
                    if w["client"] == leader and w["holderIdentity"] == ""]
        self.assertTrue(releases, "the hold never ended in a release")
        self.assertGreaterEqual(took, hold * 0.9, "the release did not wait for the label")
        # The new leader's sweep sets the old "true" to "false".
        self.settled(new)

    def test_pod_api_errors_never_affect_the_election_and_are_bounded(self):
        self.watch.one_leader(KILL_BOUND + SCHED_SLACK)
        leader = self.settled()
        for c in CLIENTS:
            self.api.set_faults(c, error_rate=1.0, error_code=500, verbs=["patch", "list"])
        self.api.reset_stats()
        self.replica(leader).stop(signal.SIGKILL)
        window_start = time.monotonic()
        def other_leads(snap, leaders):
            return leaders[0] if len(leaders) == 1 and leaders[0] != leader else None
        new = self.watch.until(other_leads, KILL_BOUND + SCHED_SLACK, "a failover")
        self.watch.for_duration(6.0)
        window = time.monotonic() - window_start
        stats = self.api.stats()
        for c in CLIENTS:
            if c == leader:
                continue
            calls = sum(sum(stats.get(c, {}).get(v, {}).values()) for v in ("patch", "list"))
            # Backoff from 0.5 s doubling: a handful per replica, not a storm.
            self.assertLessEqual(calls, 4 + window / 0.5 / 2,
                                 f"{c} made {calls} pod calls in {window:.1f}s: {stats}")
            if c == new:
                self.assertGreater(calls, 1, f"the new leader never retried: {stats}")
        status, body = self.replica(new).get("/metrics")
        failures = [line for line in body.decode().splitlines()
                    if line.startswith("leaderd_pod_label_failures_total ")]
        self.assertTrue(failures and float(failures[0].split()[1]) > 0, failures)
        # The label converges once the API answers again.
        self.api.clear_faults()
        self.settled(new)


if __name__ == "__main__":
    unittest.main()


class TestBundledPods(unittest.TestCase):
    """The bundled server's Pods behave as kube-apiserver's do for what
    --pod-label sends."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="leaderd-pods-")
        cls.api = ApiServer(os.path.join(cls.dir, "api"), ["c"])
        cls.api.start()
        for name, labels in (("a", {"app": "x", KEY: "true"}), ("b", {"app": "x"}),
                             ("c", {"app": "y", KEY: "false"})):
            cls.api.control("POST", "pods", {"namespace": NS, "name": name, "labels": labels})

    @classmethod
    def tearDownClass(cls):
        cls.api.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def names(self, selector):
        from urllib.parse import quote
        status, doc = self.api.json_request(
            "GET", f"/api/v1/namespaces/{NS}/pods?labelSelector={quote(selector)}")
        self.assertEqual(status, 200, doc)
        self.assertEqual(doc["kind"], "PodList")
        return sorted(p["metadata"]["name"] for p in doc["items"])

    def patch(self, name, body, ctype="application/merge-patch+json"):
        return self.api.json_request("PATCH", f"/api/v1/namespaces/{NS}/pods/{name}", body,
                                     content_type=ctype)

    def test_list_by_label_selector(self):
        self.assertEqual(self.names(f"{KEY}=true"), ["a"])
        self.assertEqual(self.names("app=x"), ["a", "b"])
        self.assertEqual(self.names(f"app in (x,y),!{KEY}"), ["b"])
        status, doc = self.api.json_request(
            "GET", f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3D%3D%3Dx")
        self.assertEqual(status, 400, doc)
        status, doc = self.api.json_request("GET", "/api/v1/namespaces/other/pods")
        self.assertEqual((status, doc["items"]), (200, []))

    def test_merge_and_strategic_patch_of_labels(self):
        status, pod = self.patch("b", {"metadata": {"labels": {KEY: "false"}}})
        self.assertEqual(status, 200, pod)
        self.assertEqual(pod["metadata"]["labels"], {"app": "x", KEY: "false"})
        rv = pod["metadata"]["resourceVersion"]
        status, pod = self.patch("b", {"metadata": {"labels": {KEY: None}}},
                                 "application/strategic-merge-patch+json")
        self.assertEqual(status, 200, pod)
        self.assertEqual(pod["metadata"]["labels"], {"app": "x"})
        self.assertGreater(int(pod["metadata"]["resourceVersion"]), int(rv))
        status, got = self.api.json_request("GET", f"/api/v1/namespaces/{NS}/pods/b")
        self.assertEqual(got, pod)

    def test_patch_errors(self):
        status, doc = self.patch("nope", {"metadata": {"labels": {"k": "v"}}})
        self.assertEqual(status, 404)
        self.assertEqual(doc["reason"], "NotFound")
        self.assertEqual(doc["message"], 'pods "nope" not found')
        status, doc = self.patch("a", {"metadata": {"labels": {"k": "bad value!"}}})
        self.assertEqual(status, 422, doc)
        self.assertEqual(doc["reason"], "Invalid")
        status, doc = self.patch("a", {"metadata": {"labels": {"k": "v"}}},
                                 "application/json")
        self.assertEqual(status, 415, doc)

