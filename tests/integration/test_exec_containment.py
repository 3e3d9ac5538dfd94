"""Integration tests of the exec child's containment: three replicas over
HTTPS against the bundled Lease API server, each with a shell command that
starts grandchildren which leave its process group and session (setsid, and
a daemon's double fork). Every process of the leader's command is gone
before the next leader's command starts, after SIGTERM and after POST
/resign; when the supervisor itself is killed, leaderd kills them all and
writes no release, so the Lease keeps its holder until it expires."""
import os
import re
import shutil
import signal
import tempfile
import time
import unittest

import test_exec_child as ec
import test_resign as rs
from leaderd_testing.apiserver import ApiServer
from leaderd_testing.cluster import (EXIT_BOUND, KILL_BOUND, SCHED_SLACK, TERM_BOUND,
                                     Replica, stop_all, wait_until)

CLIENTS = ["r1", "r2", "r3"]

# The command, with the journal as $0. First it notes every process of the
# earlier commands that still runs ("alive PID NEWPID"): by then all of them
# must be gone. Then "start PID TERM IDENTITY", a grandchild in a session of
# its own and one through a double fork, each noting "gc PID IDENTITY".
COMMAND = r"""
J=$0
while read -r kind pid _; do
    case $kind in start|gc)
        if [ -r /proc/$pid/stat ] && read -r _ _ st _ < /proc/$pid/stat && [ "$st" != Z ]
        then echo "alive $pid $$" >> "$J"; fi;;
    esac
done < "$J"
echo "start $$ $LEADERD_TERM $LEADERD_IDENTITY" >> "$J"
setsid sh -c 'echo "gc $$ $LEADERD_IDENTITY" >> "$0"; exec sleep 1000' "$J" &
(setsid sh -c 'echo "gc $$ $LEADERD_IDENTITY" >> "$0"; exec sleep 1000' "$J" &)
while :; do sleep 0.05; done
"""


def ours(pid):
    """True while pid runs with a leaderd command's environment."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return ec.alive(pid) and b"LEADERD_IDENTITY=" in f.read()
    except OSError:
        return False


class ExecContainment(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="leaderd-contain-")
        self.journal = os.path.join(self.dir, "journal")
        open(self.journal, "w").close()
        self.api = ApiServer(os.path.join(self.dir, "api"), CLIENTS)
        self.replicas = []
        self.supervisors = []
        self.api.start()
        cmd = ["--", "/bin/sh", "-c", COMMAND, self.journal]
        for c in CLIENTS:
            r = Replica(self.api, c, self.dir, extra_args=cmd)
            self.replicas.append(r)
            r.start()
            self.supervisors += ec.children_of(r.proc.pid)

    def tearDown(self):
        stop_all(self, self.replicas)
        # With leaderd gone each supervisor ends its command, then itself;
        # what is left after that is killed by pid.
        deadline = time.monotonic() + 10
        while any(ec.alive(p) for p in self.supervisors) and time.monotonic() < deadline:
            time.sleep(0.025)
        for pid in self.supervisors:
            if ec.alive(pid):
                os.kill(pid, signal.SIGKILL)
        for pid in self.pids():
            if ours(pid):
                os.kill(pid, signal.SIGKILL)
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def lines(self):
        with open(self.journal) as f:
            return [line.split() for line in f.read().splitlines() if line.strip()]

    def pids(self, identity=None):
        """Every pid a command of identity (any, when None) noted."""
        return [int(e[1]) for e in self.lines()
                if e[0] == "start" and (identity is None or e[3] == identity)
                or e[0] == "gc" and (identity is None or e[2] == identity)]

    def starts(self):
        return [e for e in self.lines() if e[0] == "start"]

    def leader_with_command(self):
        """The replica whose command started first, once its grandchildren
        run; and the three pids of its command."""
        start = wait_until(lambda: self.starts()[:1], KILL_BOUND + SCHED_SLACK + 5,
                           what="the first command")[0]
        identity = start[3]
        leader = next(r for r in self.replicas if r.identity == identity)
        pids = wait_until(lambda: len(self.pids(identity)) == 3 and self.pids(identity), 5,
                          what="the grandchildren to start")
        for pid in pids:
            self.assertTrue(ec.alive(pid))
        wait_until(leader.is_leader, 5, what=f"{identity} to report leading")
        # One line at start says how the command is kept together.
        said = re.findall(r"containment: (?:cgroup v2 \(/\S+\)|process tree \(subreaper\))$",
                          leader.log(), re.M)
        self.assertEqual(len(said), 1, leader.log())
        return leader, pids

    def assert_next_command_saw_none(self, old_identity, timeout):
        start = wait_until(lambda: self.starts()[1:2], timeout,
                           what="the next leader's command")[0]
        self.assertNotEqual(start[3], old_identity)
        alive = [e for e in self.lines() if e[0] == "alive"]
        self.assertEqual(alive, [], "processes of the old command ran when the next started")

    def test_sigterm_ends_every_process_before_the_next_command(self):
        leader, pids = self.leader_with_command()
        leader.send(signal.SIGTERM)
        self.assertEqual(leader.wait_exit(EXIT_BOUND + 10), 128 + signal.SIGTERM)
        self.assertEqual([p for p in pids if ec.alive(p)], [])
        self.assert_next_command_saw_none(leader.identity, TERM_BOUND + SCHED_SLACK + 5)

    def test_resign_ends_every_process_before_the_next_command(self):
        leader, pids = self.leader_with_command()
        status, _, _ = rs.post(leader.port, "/resign")
        self.assertEqual(status, 200)
        self.assert_next_command_saw_none(leader.identity, TERM_BOUND + SCHED_SLACK + 5)
        self.assertEqual([p for p in pids if ec.alive(p)], [])
        self.assertTrue(leader.alive(), "leaderd keeps contending")

    def test_supervisor_killed_leaves_nothing_and_no_release(self):
        leader, pids = self.leader_with_command()
        sups = ec.children_of(leader.proc.pid)
        self.assertEqual(len(sups), 1)
        os.kill(sups[0], signal.SIGKILL)
        self.assertEqual(leader.wait_exit(EXIT_BOUND + 5), 1)
        # leaderd exits only once it killed them all.
        self.assertEqual([p for p in pids if ec.alive(p)], [])
        releases = [w for w in self.api.write_log()
                    if w["client"] == leader.client and w["holderIdentity"] == ""]
        self.assertEqual(releases, [], "a release was written")
        status, lease = self.api.get_lease("default", "demo")
        self.assertEqual(status, 200)
        self.assertEqual(lease["spec"]["holderIdentity"], leader.identity)
        self.assert_next_command_saw_none(leader.identity, KILL_BOUND + SCHED_SLACK + 5)


if __name__ == "__main__":
    unittest.main()
