# SPDX-License-Identifier: Apache-2.0
"""Integration test of the clock across a suspend: a machine that sleeps
stops CLOCK_MONOTONIC but not CLOCK_BOOTTIME, so a leader whose deadlines ran
on the former would wake up trusting a renew deadline that passed while it
slept, and claim leadership beside the replica that took over meanwhile.

The suspend is simulated: the leader runs with suspend_shim.so preloaded,
is stopped (SIGSTOP) until a standby has taken over, and before it goes on
the shim is told to take the stopped time off its CLOCK_MONOTONIC readings,
as a resumed machine would show them. Its API server connection hangs from
the stop on (a partition), so it cannot learn of the new leader by a failed
renewal: only its clock can tell it.

The shim also stretches poll and epoll_wait timeouts by the stopped time,
as a real suspend does (the kernel counts them on CLOCK_MONOTONIC): a wait
that enforces a deadline must end on a CLOCK_BOOTTIME timer instead, or it
sleeps on after the resume past a deadline that passed in the sleep. The
exec child's supervisor shows it: resumed while leaderd is still held up,
it alone ends the child, at once."""
import os
import shutil
import signal
import struct
import sys
import tempfile
import time
import unittest

from leaderd_testing.apiserver import ApiServer
from leaderd_testing.cluster import BUILD, FAST, KILL_BOUND, SCHED_SLACK, Replica, stop_all, wait_until
from test_exec_child import alive, children_of

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
# Looked for beside the binaries under test, then in the default build.
SHIM_PLACES = [os.path.join(BUILD, "tests", "suspend_shim.so"),
               os.path.join(REPO, "build", "tests", "suspend_shim.so")]
# After the resume, the old leader is watched for this long: shorter than
# the renew deadline it would still trust on a clock that skipped the sleep.
WATCH_AFTER_RESUME = FAST["renew_deadline"] / 2
# The default --child-grace: half of lease-duration - renew-deadline.
GRACE = (FAST["lease_duration"] - FAST["renew_deadline"]) / 2
# Long enough for the child's deadline (at most renew-deadline after the
# stop) and its grace to pass while the leader is "suspended".
SUSPEND_WITH_CHILD = FAST["renew_deadline"] + GRACE + 1.0
# After the resume the supervisor ends the child at once: a scheduling
# delay, not the 2 to 3 s left of its wait when the machine went to sleep.
CHILD_GONE_AFTER_RESUME = 1.0
# The child: writes its pid to the file argv[1] (whole, by a rename) and
# runs until it is killed.
CHILD = r"""
import os, sys, time
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    time.sleep(0.05)
"""


def shim_path():
    for p in SHIM_PLACES:
        if os.path.exists(p):
            return os.path.abspath(p)
    raise AssertionError("suspend_shim.so not built: run `make integration`")


class Suspend(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="leaderd-suspend-")
        self.api = ApiServer(os.path.join(self.dir, "api"), ["sleeper", "awake"])
        self.suspend_file = os.path.join(self.dir, "suspended_ns")
        with open(self.suspend_file, "wb") as f:
            f.write(struct.pack("=q", 0))
        self.replicas = []
        try:
            self.api.start()
            env = {"LD_PRELOAD": shim_path(), "LEADERD_TEST_SUSPEND_FILE": self.suspend_file}
            self.sleeper = Replica(self.api, "sleeper", self.dir, env=env)
            self.replicas.append(self.sleeper)
            self.sleeper.start()
            wait_until(self.sleeper.is_leader, FAST["lease_duration"] + SCHED_SLACK + 2,
                       what="the first replica to lead")
            self.awake = Replica(self.api, "awake", self.dir)
            self.replicas.append(self.awake)
            self.awake.start()
        except BaseException:
            self.tearDown()
            raise

    def tearDown(self):
        for r in self.replicas:
            r.send(signal.SIGCONT)
        stop_all(self, self.replicas)
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def suspend_until_taken_over(self):
        """Stops the leader, cuts it off the API server, waits for the other
        replica to lead, then resumes it with the stopped time taken off its
        monotonic clock."""
        stopped_at = time.monotonic()
        self.sleeper.send(signal.SIGSTOP)
        self.api.set_faults("sleeper", partition="hang")
        wait_until(self.awake.is_leader, KILL_BOUND + SCHED_SLACK + 2,
                   what="the awake replica to take over")
        slept_ns = int((time.monotonic() - stopped_at) * 1e9)
        with open(self.suspend_file, "r+b") as f:
            f.write(struct.pack("=q", slept_ns))
        self.sleeper.send(signal.SIGCONT)

    def test_a_resumed_leader_does_not_trust_a_deadline_that_passed_in_its_sleep(self):
        self.suspend_until_taken_over()
        deadline = time.monotonic() + WATCH_AFTER_RESUME
        answers = 0
        while time.monotonic() < deadline:
            status, doc = self.sleeper.leader()
            if status is not None:
                answers += 1
                self.assertFalse(doc["is_leader"],
                                 "the resumed replica claims leadership while "
                                 f"{doc.get('leader')!r} leads: its deadlines skipped the sleep")
            time.sleep(0.02)
        self.assertGreater(answers, 0, "the resumed replica never answered /leader")
        self.assertTrue(self.awake.is_leader())


class SuspendWithChild(unittest.TestCase):
    """A leader running an exec child on a machine that is suspended past
    the child's deadline."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="leaderd-suspend-child-")
        self.api = ApiServer(os.path.join(self.dir, "api"), ["sleeper"])
        self.suspend_file = os.path.join(self.dir, "suspended_ns")
        self.pid_file = os.path.join(self.dir, "child.pid")
        with open(self.suspend_file, "wb") as f:
            f.write(struct.pack("=q", 0))
        self.replicas, self.supervisors, self.stopped = [], [], []
        try:
            self.api.start()
            env = {"LD_PRELOAD": shim_path(), "LEADERD_TEST_SUSPEND_FILE": self.suspend_file}
            cmd = ["--", sys.executable, "-c", CHILD, self.pid_file]
            self.sleeper = Replica(self.api, "sleeper", self.dir, extra_args=cmd, env=env)
            self.replicas.append(self.sleeper)
            self.sleeper.start()
            self.supervisors = children_of(self.sleeper.proc.pid)
            wait_until(self.sleeper.is_leader, FAST["lease_duration"] + SCHED_SLACK + 2,
                       what="the replica to lead")
            wait_until(lambda: os.path.exists(self.pid_file), 5, what="the child to start")
            with open(self.pid_file) as f:
                self.child = int(f.read())
        except BaseException:
            self.tearDown()
            raise

    def tearDown(self):
        for pid in self.stopped:
            if alive(pid):
                os.kill(pid, signal.SIGCONT)
        stop_all(self, self.replicas)
        for pid in self.supervisors + [getattr(self, "child", 0)]:
            if pid and alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def stop(self, pid):
        self.stopped.append(pid)
        os.kill(pid, signal.SIGSTOP)

    def test_the_supervisor_ends_the_child_at_once_after_a_resume(self):
        self.assertEqual(len(self.supervisors), 1, "leaderd forks one supervisor")
        # The whole machine sleeps: the supervisor first, so that it cannot
        # act on a message leaderd sends as it is being stopped.
        stopped_at = time.monotonic()
        self.stop(self.supervisors[0])
        self.stop(self.sleeper.proc.pid)
        self.api.set_faults("sleeper", partition="hang")
        time.sleep(SUSPEND_WITH_CHILD)
        self.assertTrue(alive(self.child), "the child runs on while its supervisor sleeps")
        with open(self.suspend_file, "r+b") as f:
            f.write(struct.pack("=q", int((time.monotonic() - stopped_at) * 1e9)))
        # The supervisor resumes first; leaderd is still held up (it would
        # tell the supervisor to stop the child): the supervisor alone,
        # on its own clock, must see that the deadline passed.
        resumed_at = time.monotonic()
        os.kill(self.supervisors[0], signal.SIGCONT)
        wait_until(lambda: not alive(self.child), 10, interval=0.01,
                   what="the child to be ended")
        took = time.monotonic() - resumed_at
        self.assertLess(took, CHILD_GONE_AFTER_RESUME,
                        f"the child was ended {took:.2f} s after the resume: the "
                        "supervisor slept on past a deadline that passed in the sleep")


if __name__ == "__main__":
    unittest.main()
