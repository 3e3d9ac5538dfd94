# SPDX-License-Identifier: Apache-2.0
"""A release waits for what another leader must not overlap.

Through the API write gate (--api-proxy), against an API server that, as
kube-apiserver does, commits a write it has admitted at the end of its hold
whether or not its client is still there ("commit": "admitted", the test
support's default): a write held 1.5 s, and a purposeful step-down 0.3 s
after it was sent (SIGTERM, POST /resign, a preferredHolder hand-over, and
SIGTERM after the app sent the write and hung up). The write commits before
the next leader's first write, the release follows it (the server's logs,
on its one clock), and the app that stayed gets the write's real answer. A
write held past the term's renew deadline is cut then, no release is
written, the Lease expires by itself and the next leader acquires only
lease-duration after the old leader's last write.

With an exec child that ignores SIGTERM for longer than the renew deadline
(child-grace past it): after POST /resign or a preferredHolder hand-over
no release is written at all, and the Lease expires by itself."""
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import unittest

import test_api_proxy as tap
import test_exec_child as ec
import test_resign as rs
from leaderd_testing.apiserver import ApiServer
from leaderd_testing.cluster import (EXIT_BOUND, FAST, SCHED_SLACK, Replica, stop_all,
                                     wait_until)

# How long the API server holds the write, and when the step-down comes
# after it was sent: the hold ends well within the term's renew deadline.
HELD_MS = 1500
STEP_DOWN_AFTER = 0.3


class WriteHeldAtTheRelease(tap.ApiProxyBase):
    def step_down_soon_after(self, w):
        """Sleeps until STEP_DOWN_AFTER past the write's sending: a point in
        the scenario, not a wait for an event (the write is already held)."""
        time.sleep(max(0.0, w.sent + STEP_DOWN_AFTER - time.monotonic()))

    def assert_write_then_release(self, lead, standby, since, value):
        """The held write commits before the next leader's first claim, and
        the old leader's release comes after the write's commit."""
        commit, claim = self.assert_commit_before_the_claim(
            lead, standby, since, value, HELD_MS / 1000 + 2 + SCHED_SLACK)
        released = self.lease_writes(since, lead.client, "")
        self.assertTrue(released, "the write ended but no release was written")
        self.assertGreater(released[0]["clock_us"], commit["clock_us"],
                           "the release went before the write committed")
        self.assertLess(released[0]["clock_us"], claim["clock_us"])

    def test_sigterm_waits_for_the_write_in_flight(self):
        lead, standby = self.roles()
        since = self.api.write_log()[-1]["seq"]
        w = self.hold_write(lead, "term", HELD_MS)
        self.step_down_soon_after(w)
        lead.send(signal.SIGTERM)
        self.assert_write_then_release(lead, standby, since, "term")
        w.join(10)
        self.assert_real_answer(w, "term")
        self.assertEqual(lead.wait_exit(EXIT_BOUND + SCHED_SLACK), 0)

    def test_resign_waits_for_the_write_in_flight(self):
        lead, standby = self.roles()
        since = self.api.write_log()[-1]["seq"]
        w = self.hold_write(lead, "resign", HELD_MS)
        self.step_down_soon_after(w)
        status, _, _ = rs.post(lead.port, "/resign")
        self.assertEqual(status, 200)
        self.assert_write_then_release(lead, standby, since, "resign")
        w.join(10)
        self.assert_real_answer(w, "resign")
        self.assertEqual(tap.metric(lead, "leaderd_proxy_writes_aborted_total"), 0)

    def test_a_hand_over_waits_for_the_write_in_flight(self):
        lead, standby = self.roles()
        since = self.api.write_log()[-1]["seq"]
        w = self.hold_write(lead, "hand-over", HELD_MS)
        self.step_down_soon_after(w)
        _, lease = self.api.get_lease("default", "demo")
        lease["spec"]["strategy"] = "OldestEmulationVersion"
        lease["spec"]["preferredHolder"] = standby.identity
        lease["metadata"].pop("resourceVersion", None)
        self.api.control("PUT", "raw/default/demo?stamp=1", raw=json.dumps(lease).encode())
        self.assert_write_then_release(lead, standby, since, "hand-over")
        w.join(10)
        self.assert_real_answer(w, "hand-over")

    def test_sigterm_after_the_app_hung_up_waits_for_the_write(self):
        """The app sends the write and hangs up; SIGTERM follows 0.3 s after
        the sending. The hang-up does not end a write already sent: the
        server commits it, and the release waits for it."""
        lead, standby = self.roles()
        since = self.api.write_log()[-1]["seq"]
        self.api.set_faults(lead.client, latency_ms=HELD_MS, verbs=["patch"])
        sent = time.monotonic()
        sock = tap.send_and_hang_up(self.port(lead), "abandoned")
        try:
            wait_until(lambda: self.api.held(lead.client, "patch") == 1, 5,
                       what="the write to be held in the API server")
        finally:
            sock.close()
        time.sleep(max(0.0, sent + STEP_DOWN_AFTER - time.monotonic()))
        lead.send(signal.SIGTERM)
        self.assert_write_then_release(lead, standby, since, "abandoned")
        self.assertEqual(lead.wait_exit(EXIT_BOUND + SCHED_SLACK), 0)

    def test_a_write_held_past_the_term_is_cut_and_nothing_released(self):
        """SIGTERM 0.3 s after a write the server holds past the term's renew
        deadline (and commits, as kube-apiserver would, before anyone may
        take the Lease over): the write is cut at that deadline, no release
        is written, and the next leader acquires only once the Lease
        expired, lease-duration after the old leader's last write."""
        lead, standby = self.roles()
        since = self.api.write_log()[-1]["seq"]
        renewal, w = self.hold_past_the_term(lead, "past")
        self.step_down_soon_after(w)
        lead.send(signal.SIGTERM)
        commit, claim = self.assert_commit_before_the_claim(
            lead, standby, since, "past", FAST["lease_duration"] + SCHED_SLACK)
        self.assertEqual(self.lease_writes(since, lead.client, ""), [],
                         "a release was written although a write was cut")
        self.assert_claim_after_expiry(lead, renewal, claim)
        w.join(10)
        self.assertIsNone(w.error, w.error)
        self.assert_refusal(*w.answer, cut=True)
        self.assertIsNotNone(lead.wait_exit(EXIT_BOUND + SCHED_SLACK))


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
