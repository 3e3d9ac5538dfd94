"""Integration test of the clock across a suspend: a machine that sleeps
stops CLOCK_MONOTONIC but not CLOCK_BOOTTIME, so a leader whose deadlines ran
on the former would wake up trusting a renew deadline that passed while it
slept, and claim leadership beside the replica that took over meanwhile.

The suspend is simulated: the leader runs with suspend_shim.so preloaded,
is stopped (SIGSTOP) until a standby has taken over, and before it goes on
the shim is told to take the stopped time off its CLOCK_MONOTONIC readings,
as a resumed machine would show them. Its API server connection hangs from
the stop on (a partition), so it cannot learn of the new leader by a failed
renewal: only its clock can tell it."""
import os
import shutil
import signal
import struct
import tempfile
import time
import unittest

from leaderd_testing.apiserver import ApiServer
from leaderd_testing.cluster import BUILD, FAST, KILL_BOUND, SCHED_SLACK, Replica, stop_all, wait_until

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
# Looked for beside the binaries under test, then in the default build.
SHIM_PLACES = [os.path.join(BUILD, "tests", "suspend_shim.so"),
               os.path.join(REPO, "build", "tests", "suspend_shim.so")]
# After the resume, the old leader is watched for this long: shorter than
# the renew deadline it would still trust on a clock that skipped the sleep.
WATCH_AFTER_RESUME = FAST["renew_deadline"] / 2


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


if __name__ == "__main__":
    unittest.main()
