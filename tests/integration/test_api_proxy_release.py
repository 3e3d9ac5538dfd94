"""A release waits for what another leader must not overlap. Through the API
write gate (--api-proxy): a write held in the API server when the leader
resigns (POST /resign) or gets SIGTERM commits before the next leader's
first claim, or not at all (the server's logs, on its one clock). With an
exec child that ignores SIGTERM for longer than the renew deadline
(child-grace past it): after POST /resign or a preferredHolder hand-over
no release is written at all, and the Lease expires by itself."""
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import unittest

import test_api_proxy as tap
import test_exec_child as ec
import test_resign as rs
from leaderd_testing.apiserver import ApiServer
from leaderd_testing.cluster import (FAST, KILL_BOUND, SCHED_SLACK, Replica, stop_all,
                                     wait_until)

# How long the API server holds the write: past the resignation, short of
# the test's patience.
HELD_MS = 4000


class WriteHeldAtTheRelease(tap.ApiProxyBase):
    def hold_a_write(self, lead):
        """Starts a write through lead's proxy that the server holds for
        HELD_MS; returns its thread."""
        self.api.set_faults(lead.client, latency_ms=HELD_MS, verbs=["patch"])
        result = {}

        def write():
            result["answer"] = self.patch_label(lead, "late", timeout=HELD_MS / 1000 + 5)

        t = threading.Thread(target=write)
        t.start()
        # The write is held upstream (the server logs it only at its end).
        time.sleep(1.0)
        return t

    def assert_no_write_after_the_claim(self, lead, standby, since):
        wait_until(standby.is_leader, KILL_BOUND + SCHED_SLACK, what="the next leader")
        claims = [e for e in self.api.write_log(since) if e["client"] == standby.client
                  and e["holderIdentity"] == standby.identity]
        self.assertTrue(claims)
        late = [w for w in self.pod_writes() if w["client"] == lead.client
                and w["clock_us"] >= claims[0]["clock_us"]]
        self.assertEqual(late, [], "the old leader's write committed after the next "
                         "leader's first claim %s" % claims[0])

    def test_resign_waits_for_the_write_in_flight(self):
        lead, standby = self.roles()
        since = self.api.write_log()[-1]["seq"]
        t = self.hold_a_write(lead)
        status, _, _ = rs.post(lead.port, "/resign")
        self.assertEqual(status, 200)
        t.join(HELD_MS / 1000 + 10)
        self.assertFalse(t.is_alive())
        self.assert_no_write_after_the_claim(lead, standby, since)
        released = [e for e in self.api.write_log(since)
                    if e["client"] == lead.client and e["holderIdentity"] == ""]
        self.assertTrue(released, "the write ended but no release was written")

    def test_sigterm_waits_for_the_write_in_flight(self):
        lead, standby = self.roles()
        since = self.api.write_log()[-1]["seq"]
        t = self.hold_a_write(lead)
        self.assertEqual(lead.stop(signal.SIGTERM), 0)
        t.join(HELD_MS / 1000 + 10)
        self.assertFalse(t.is_alive())
        self.assert_no_write_after_the_claim(lead, standby, since)


# lease-duration > 2 x renew-deadline, so that child-grace may outlast the
# renew deadline and still leave lease-duration / 10 before the earliest
# takeover, as --child-grace requires (8 - 3 - 4 = 1 s >= 0.8 s).
SLOW_CHILD = {"lease_duration": 8.0, "renew_deadline": 3.0, "retry_period": 1.0}
CHILD_GRACE = "4s"
CLIENTS = ["r1", "r2"]


class ChildOutlastingTheBound(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="leaderd-release-child-")
        self.journal = ec.Journal(os.path.join(self.dir, "journal"))
        self.api = ApiServer(os.path.join(self.dir, "api"), CLIENTS)
        self.replicas = []
        self.api.start()
        cmd = ["--child-grace", CHILD_GRACE, "--", sys.executable, "-c", ec.CHILD,
               self.journal.path, "stubborn"]
        for c in CLIENTS:
            r = Replica(self.api, c, self.dir, timings=SLOW_CHILD, extra_args=cmd)
            self.replicas.append(r)
            r.start()

    def tearDown(self):
        stop_all(self, self.replicas)
        for pid, *_ in self.journal.starts():
            try:
                os.killpg(pid, 9)
            except OSError:
                pass
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def leader(self):
        bound = SLOW_CHILD["lease_duration"] + 2 * SLOW_CHILD["retry_period"] + SCHED_SLACK
        pid, _, identity, _, _ = wait_until(lambda: self.journal.starts()[:1], bound + 5,
                                            what="the first child")[0]
        leader = next(r for r in self.replicas if r.identity == identity)
        wait_until(leader.is_leader, 5, what="the leader to report leading")
        return leader, pid

    def assert_no_release(self, leader, pid, since):
        # The supervisor kills the child child-grace after the stop; the
        # release was given up before (renew-deadline after the step-down).
        wait_until(lambda: not ec.alive(pid), 10 + SCHED_SLACK, what="the child to die")
        time.sleep(SLOW_CHILD["retry_period"])
        released = [e for e in self.api.write_log(since)
                    if e["client"] == leader.client and e["holderIdentity"] == ""]
        self.assertEqual(released, [], "a release was written while the child still ran")
        self.assertFalse(leader.is_leader())

    def test_resign_writes_no_release_while_the_child_outlasts_the_bound(self):
        leader, pid = self.leader()
        since = self.api.write_log()[-1]["seq"]
        status, _, _ = rs.post(leader.port, "/resign")
        self.assertEqual(status, 503)  # the release was given up
        self.assert_no_release(leader, pid, since)

    def test_a_hand_over_writes_no_release_while_the_child_outlasts_the_bound(self):
        leader, pid = self.leader()
        other = next(r for r in self.replicas if r is not leader)
        _, lease = self.api.get_lease("default", "demo")
        lease["spec"]["strategy"] = "OldestEmulationVersion"
        lease["spec"]["preferredHolder"] = other.identity
        lease["metadata"].pop("resourceVersion", None)
        since = self.api.write_log()[-1]["seq"]
        self.api.control("PUT", "raw/default/demo?stamp=1", raw=json.dumps(lease).encode())
        wait_until(lambda: not leader.is_leader(), 2 * SLOW_CHILD["retry_period"] + 2,
                   what="the leader to hand over")
        self.assert_no_release(leader, pid, since)


if __name__ == "__main__":
    unittest.main()
