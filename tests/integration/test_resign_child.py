# SPDX-License-Identifier: Apache-2.0
"""POST /resign on a leader that runs an exec child: the release would let
another replica take the Lease within milliseconds (its watch sees it free),
so it waits until the resigning replica's child is gone. The child here
ignores SIGTERM, so only the supervisor's SIGKILL (child-grace after the
stop) ends it, and the next child must start after that."""
import os
import shutil
import sys
import tempfile
import unittest

import test_exec_child as ec
import test_resign as rs
from leaderd_testing.apiserver import ApiServer
from leaderd_testing.cluster import (KILL_BOUND, SCHED_SLACK, TERM_BOUND, Replica, stop_all,
                                     wait_until)

CLIENTS = ["r1", "r2", "r3"]


class ResignWithChild(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="leaderd-review-")
        self.journal = ec.Journal(os.path.join(self.dir, "journal"))
        self.api = ApiServer(os.path.join(self.dir, "api"), CLIENTS)
        self.replicas = []
        self.api.start()
        # A child that takes its time to stop: it ignores SIGTERM, so only
        # the supervisor's SIGKILL (child-grace after the stop) ends it.
        cmd = ["--", sys.executable, "-c", ec.CHILD, self.journal.path, "stubborn"]
        for c in CLIENTS:
            r = Replica(self.api, c, self.dir, extra_args=cmd)
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

    def test_resigned_leaders_child_is_gone_before_the_next_starts(self):
        pid, _, identity, _, _ = wait_until(lambda: self.journal.starts()[:1],
                                            KILL_BOUND + SCHED_SLACK + 5,
                                            what="the first child")[0]
        leader = next(r for r in self.replicas if r.identity == identity)
        wait_until(leader.is_leader, 5, what="the leader to report leading")
        status, _, _ = rs.post(leader.port, "/resign")
        self.assertEqual(status, 200)
        new = wait_until(lambda: self.journal.starts()[1:2],
                         TERM_BOUND + SCHED_SLACK + 5, what="the next child")[0]
        self.assertNotEqual(new[2], identity)
        last = wait_until(lambda: not ec.alive(pid) and self.journal.last_seen(pid), 10,
                          what="the old child to die")
        self.assertLess(last, new[4],
                        f"the resigned leader's child {pid} still ran at {last}, "
                        f"after {new[0]} started at {new[4]}")
